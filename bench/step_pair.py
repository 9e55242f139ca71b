"""The GPT training step (bench/train_step.py's model and batch) of this tree against
another tree's (`--baseline DIR`, e.g. a copy of the previous commit), or of this tree
with some environment variables set against without them (`--env NAME=VALUE ...`, e.g.
an MPICH CVAR), in separate processes alternating A B A B ..., so a shared machine's
load hits both alike; prints each pair's ratio (baseline step / this tree's step), their
median and range.

    python bench/step_pair.py --baseline /tmp/base --ranks 2           # dp=2 (ZeRO)
    python bench/step_pair.py --baseline /tmp/base --ranks 2 --tp 2    # tp=2
    python bench/step_pair.py --baseline /tmp/base --ranks 1
    python bench/step_pair.py --env MPIR_CVAR_POLLS_BEFORE_YIELD=0      # "this": with it

Each process compiles (or loads from the compile cache) the step, runs one untimed
step, then `--steps` timed ones; its figure is the median over steps of the slowest
rank's step time. Byte-compile both trees first (`python -m compileall -q DIR/shardc`)
when PYTHONDONTWRITEBYTECODE is set, or the tree without .pyc files pays for parsing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(tp: int, steps: int) -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy as np

    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.data import batches
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    world, rank, barrier, comm = 1, 0, (lambda: None), None
    if os.environ.get("PMI_SIZE", "1") != "1" or os.environ.get("OMPI_COMM_WORLD_SIZE", "1") != "1":
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        world, rank, barrier = comm.Get_size(), comm.Get_rank(), comm.Barrier
    cfg = GPTConfig(n_layer=4, n_head=4, n_embd=256, block_size=128, vocab_size=512)
    prog = StepProgram.build(cfg, 8, make_grid(world, tp), ShardingPolicy(tp, zero=True, fsdp=False), GPT_PLAN)
    state = RankState(prog, rank, init_params(cfg, 0))
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 20000).astype(np.int32)
    it = batches(data, 8, cfg.block_size, 0)
    times = []
    for i in range(steps + 1):
        mb = [next(it)]
        barrier()
        t = time.perf_counter()
        state.train_step(mb, 1e-3)
        barrier()
        if i:
            times.append(time.perf_counter() - t)
    if comm is not None:
        every = comm.gather(times, root=0)
        if rank:
            return
        times = [max(col) for col in zip(*every)]
    print("STEP " + json.dumps({"median": statistics.median(times), "times": times}))


def run(tree: str, ranks: int, tp: int, steps: int, extra: dict[str, str | None] | None = None) -> float:
    """The step's median in `tree`, with `extra` set in the environment (None: unset)."""
    env = dict(os.environ, PYTHONPATH=tree, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    for name, value in (extra or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    script = os.path.abspath(__file__)
    cmd = [sys.executable, script, "--worker", "--tp", str(tp), "--steps", str(steps)]
    if ranks > 1:
        mpiexec = shutil.which("mpiexec")
        if mpiexec is None:
            raise SystemExit("step_pair: mpiexec is not on PATH")
        cmd = [mpiexec, "-n", str(ranks), *cmd]
    out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("STEP "):
            return json.loads(line[5:])["median"]
    raise SystemExit(f"step_pair: the run in {tree} printed no step time (exit {out.returncode}):\n{out.stderr[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", help="the other tree's root (a directory holding shardc/); default with --env: this tree")
    ap.add_argument("--env", nargs="+", default=[], metavar="NAME=VALUE", help="set in this tree's runs only (removed from the baseline's)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.tp, args.steps)
        return
    if any("=" not in e for e in args.env):
        raise SystemExit("step_pair: --env takes NAME=VALUE")
    extra: dict[str, str | None] = dict(e.split("=", 1) for e in args.env)
    if not args.baseline and extra:
        args.baseline = HERE
    if not args.baseline or not os.path.isdir(os.path.join(args.baseline, "shardc")):
        raise SystemExit("step_pair: --baseline must name a tree holding shardc/ (or give --env)")
    if args.ranks < 1 or args.pairs < 1 or args.steps < 1 or args.tp < 1 or args.ranks % args.tp:
        raise SystemExit("step_pair: --ranks, --tp, --pairs and --steps must be positive, tp dividing ranks")
    base = os.path.abspath(args.baseline)
    ratios = []
    for p in range(args.pairs):
        order = [(base, "base"), (HERE, "this")] if p % 2 == 0 else [(HERE, "this"), (base, "base")]
        got = {name: run(tree, args.ranks, args.tp, args.steps, extra if name == "this" else dict.fromkeys(extra)) for tree, name in order}
        ratios.append(got["base"] / got["this"])
        print(f"pair {p + 1}: base {got['base'] * 1e3:.1f} ms, this {got['this'] * 1e3:.1f} ms, ratio {ratios[-1]:.3f}", flush=True)
    print(f"ranks {args.ranks} tp {args.tp}: base/this median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} pairs)")


if __name__ == "__main__":
    main()
