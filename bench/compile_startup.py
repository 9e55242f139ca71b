"""Start-up of a training job: the GPT step (n_layer 12, n_embd 768, 12 heads, block 32,
vocab 64, per-device batch 8, ZeRO) under `mpiexec -n 2`, from the launch to the first
step, with an empty compile cache (cold) and again with the entry the cold run left
(warm). Targets: cold <= 5 s, warm <= 1 s to the first step.

    python bench/compile_startup.py            # cold, then warm, in a fresh cache directory
    python bench/compile_startup.py --quick    # n_layer 2, n_embd 64: a smoke run
    python bench/compile_startup.py --cache-dir D --runs warm --repeat 3   # warm only, D kept
    python bench/compile_startup.py --baseline /tmp/before   # each run paired with the code at /tmp/before
    python bench/compile_startup.py --runs cold,recompile --repeat 2   # cold twice, then with numba's kernels kept

`--baseline DIR` takes a tree holding an older `shardc` (say `git archive HEAD | tar -x
-C DIR`): every run is made twice, the baseline's job then this tree's, each with a cache
directory of its own, so both meet the same load (the machine may be shared).
`--repeat N` makes every kind of run N times. A `recompile` run empties the cache but
for numba's kernels (`kernels/`): a changed program compiled afresh, whose unchanged
kernels numba loads from its disk cache (a cold run compiles them all).

Each run is a fresh `mpiexec -n 2` job; rank 0 reports seconds since the launch (the
parent's clock, passed in the environment) at: the imports done, the step compiled
(rank 0 compiled or loaded it, rank 1 took it over MPI: one compile per job), the
state made (`init_params` + `RankState`: each rank makes only its pieces), the first
step started and done, and a second step done (the first step's extra over the second
is its first calls: numba's import and CPU target, about 0.5 s, then its kernels loaded
from its cache, a few ms each, or compiled cold, 0.1-0.5 s each; and the first writes
into freshly allocated buffers). "to first step" is the launch to the moment the first
step starts (compiled and state ready); "first step done" is the launch to its end. A breakdown per run follows: where the step came from, and (cold) the
pipeline's passes against the rest of the compile (building the step module, code
generation). The machine may be shared: the figures are as measured, under that load.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def _child(n_layer: int, n_embd: int, n_head: int, compile_only: bool = False) -> None:
    t0 = float(os.environ["BENCH_T0"])
    marks: dict[str, float] = {}
    import numpy as np
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, use_comm
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.spmd import RankState
    from shardc.training.train import set_blas_threads
    from shardc.training.trainer import TrainingConfig, compile_program, ranks_per_host

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    set_blas_threads(1)
    marks["imports"] = time.time() - t0
    cfg = TrainingConfig(GPTConfig(n_layer, n_head, n_embd, 32, 64), per_device_batch=8, steps=1)
    grid = cfg.grid(world.Get_size(), ranks_per_host(world))
    program = compile_program(cfg, grid, world=world)
    marks["compiled"] = time.time() - t0
    if compile_only:
        if rank == 0:
            print(json.dumps({"marks": marks, "source": program.cached, "compile_seconds": program.compile_seconds}), flush=True)
        return
    comm = MPIComm(world)
    shares = "comm" in inspect.signature(RankState).parameters  # a baseline tree may predate it
    state = RankState(program, rank, init_params(cfg.model, cfg.seed, np.float32), **({"comm": comm} if shares else {}))
    marks["state"] = time.time() - t0
    rng = np.random.default_rng(0)
    micro = program.batch
    batch = (rng.integers(0, 64, (micro, 32)).astype(np.int32), rng.integers(0, 64, (micro, 32)).astype(np.int32))
    world.Barrier()
    marks["first_step_start"] = time.time() - t0
    xdsl_ir = "xdsl.ir" in sys.modules  # a hit loads no xDSL IR (issue #16)
    with use_comm(comm):
        loss = state.train_step([batch], 1e-3)
    world.Barrier()
    marks["first_step_done"] = time.time() - t0
    try:  # the run time alone: fused.py (the emitters) would import xDSL here
        from shardc.runtime.execute.kernels import fused_run as fused
    except ImportError:  # a baseline tree may predate it
        from shardc.runtime.codegen.kernels import fused

    stats = getattr(fused, "kernel_stats", None)  # a baseline tree may predate it
    kernels = stats() if stats is not None else {"sources": len(fused._COMPILED)}  # pyright: ignore[reportPrivateUsage]
    with use_comm(comm):
        state.train_step([batch], 1e-3)
    world.Barrier()
    marks["second_step_done"] = time.time() - t0
    if rank == 0:
        info = {"marks": marks, "source": program.cached, "compile_seconds": program.compile_seconds, "loss": loss}
        info["passes"] = sum(st.seconds for st in program.stages)
        entry = getattr(program.compiled, "entry", None)  # compiled in parts: each part's passes
        info["part_passes"] = entry.meta.get("part_passes") if entry is not None else None
        info["kernels"] = kernels
        info["xdsl_ir"] = xdsl_ir
        print(json.dumps(info), flush=True)


def _job(args: argparse.Namespace, cache_dir: str, code: str | None = None) -> dict:
    """One `mpiexec -n 2` job over `cache_dir`; `code`: a tree whose `shardc` it imports."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        sys.exit("compile_startup.py: mpiexec is not on PATH")
    env = {k: v for k, v in os.environ.items() if k != "SHARDC_CACHE"}
    env.update(SHARDC_CACHE_DIR=cache_dir, BENCH_T0=repr(time.time()))
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([code, *filter(None, [env.get("PYTHONPATH")])])
    cmd = [mpiexec, "-n", "2", sys.executable, os.path.abspath(__file__), "--child", "--n-layer", str(args.n_layer), "--n-embd", str(args.n_embd), "--n-head", str(args.n_head)]
    cmd += ["--compile-only"] if args.compile_only else []
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        sys.exit(f"compile_startup.py: the job failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _empty_but_kernels(d: str) -> None:
    """Remove the compile cache's entries under `d`, keeping numba's `kernels/`."""
    if os.path.isdir(d):
        for name in os.listdir(d):
            if name != "kernels":
                path = os.path.join(d, name)
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)


def _compile_pairs(args: argparse.Namespace) -> None:
    """`--compile-only`: launch to the step compiled, cold, `--repeat` times (alternating
    with `--baseline`: its run first in each pair), with the median ratio and range."""
    import statistics

    if args.baseline is not None and not os.path.isdir(os.path.join(args.baseline, "shardc")):
        sys.exit(f"compile_startup.py: --baseline {args.baseline}: no shardc package there")
    ratios: list[float] = []
    with tempfile.TemporaryDirectory(prefix="shardc-bench-cache-") as d:
        for k in range(args.repeat):
            got: dict[str, float] = {}
            for label, code in ([("before", args.baseline)] if args.baseline else []) + [("after", None)]:
                cache = os.path.join(d, f"{label}{k}")
                r = _job(args, cache, code)
                if r["source"] != "compiled":
                    sys.exit(f"compile_startup.py: a cold run found {r['source']!r}")
                got[label] = r["marks"]["compiled"]
                shutil.rmtree(cache, ignore_errors=True)
            line = f"pair {k}: this tree {got['after']:.2f}s to the step compiled"
            if "before" in got:
                ratios.append(got["after"] / got["before"])
                line += f", baseline {got['before']:.2f}s: {ratios[-1]:.3f}x"
            print(line, flush=True)
    if ratios:
        print(f"launch to compiled, this tree / baseline: median {statistics.median(ratios):.3f}x, range {min(ratios):.3f}-{max(ratios):.3f}x over {len(ratios)} pairs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cache-dir", help="the compile cache to use and keep (default: a fresh temporary one)")
    ap.add_argument("--runs", default="cold,warm", help="cold,warm (default), recompile (the cache emptied but for numba's kernels), or warm alone (with --cache-dir holding the entry)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each kind (the figures of each are printed)")
    ap.add_argument("--baseline", metavar="DIR", help="a tree holding an older shardc: each run paired with it")
    ap.add_argument("--compile-only", action="store_true", help="cold compiles alone (no state, no step), --repeat pairs with --baseline, alternating; prints the ratios")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--n-head", type=int, default=12)
    args = ap.parse_args()
    if args.quick:
        args.n_layer, args.n_embd, args.n_head = 2, 64, 4
    if args.child:
        _child(args.n_layer, args.n_embd, args.n_head, args.compile_only)
        return
    if args.compile_only:
        _compile_pairs(args)
        return
    print(f"GPT step n_layer {args.n_layer}, n_embd {args.n_embd}, {args.n_head} heads, block 32, vocab 64, batch 8 per rank; mpiexec -n 2")
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if not set(runs) <= {"cold", "recompile", "warm"} or not runs:
        sys.exit("compile_startup.py: --runs takes cold, recompile and warm, comma-separated")
    if "cold" not in runs and args.cache_dir is None:
        sys.exit("compile_startup.py: a warm or recompile run without a cold one needs --cache-dir (holding what a cold run left)")
    if args.baseline is not None and not os.path.isdir(os.path.join(args.baseline, "shardc")):
        sys.exit(f"compile_startup.py: --baseline {args.baseline}: no shardc package there")
    codes = [("before", args.baseline), ("after", None)] if args.baseline is not None else [("", None)]
    results: list[tuple[str, str, dict]] = []
    with contextlib.ExitStack() as stack:
        d = args.cache_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="shardc-bench-cache-"))
        dirs = {label: os.path.join(d, label) if label else d for label, _ in codes}
        if "cold" in runs:
            for _ in range(args.repeat):
                for label, code in codes:
                    shutil.rmtree(dirs[label], ignore_errors=True)  # a cold run starts from an empty cache
                    results.append(("cold", label, _job(args, dirs[label], code)))
        if "recompile" in runs:
            for _ in range(args.repeat):
                for label, code in codes:
                    _empty_but_kernels(dirs[label])
                    results.append(("recomp", label, _job(args, dirs[label], code)))
        if "warm" in runs:
            for _ in range(args.repeat):
                results += [("warm", label, _job(args, dirs[label], code)) for label, code in codes]
    print(f"{'run':<6} {'code':<7} {'from':<10} {'imports':>8} {'compiled':>9} {'state':>7} {'to first step':>14} {'first step':>11} {'second':>7} {'first step done':>16}")
    for name, label, r in results:
        m = r["marks"]
        print(
            f"{name:<6} {label:<7} {r['source']:<10} {m['imports']:>7.2f}s {m['compiled']:>8.2f}s {m['state'] - m['compiled']:>6.2f}s {m['first_step_start']:>13.2f}s "
            f"{m['first_step_done'] - m['first_step_start']:>10.2f}s {m['second_step_done'] - m['first_step_done']:>6.2f}s {m['first_step_done']:>15.2f}s"
        )
    for name, label, r in results:
        m = r["marks"]
        loaded = m["compiled"] - m["imports"]
        tag = f"{name} {label}".strip()
        if r["source"] == "compiled" and r.get("part_passes"):
            parts = " + ".join(f"{s:.2f}s" for s in r["part_passes"])
            print(f"{tag}: compile {r['compile_seconds']:.2f}s in {len(r['part_passes'])} parts on the ranks at once: passes {parts} (rank 0's part first), then code generation and joining")
        elif r["source"] == "compiled":
            print(f"{tag}: compile {r['compile_seconds']:.2f}s = passes {r['passes']:.2f}s + building the module and code generation {r['compile_seconds'] - r['passes']:.2f}s")
        else:
            xdsl = {True: "xDSL's IR imported", False: "no xDSL IR imported"}.get(r.get("xdsl_ir"), "")  # type: ignore[arg-type]
            print(f"{tag}: step loaded ({r['source']}) in {loaded:.2f}s{'; ' + xdsl if xdsl else ''} by the first step")
        first_calls = (m["first_step_done"] - m["first_step_start"]) - (m["second_step_done"] - m["first_step_done"])
        k = r["kernels"]
        if isinstance(k, dict) and "called" in k:
            what = f"numba: {k['called']} of {k['sources']} kernels called, {k['signatures']} signatures, {k['loaded']} loaded from its cache, {k['compiled']} compiled, helpers compiled {k['helpers_compiled']}"
        else:
            what = f"{k['sources'] if isinstance(k, dict) else k} numba kernels made"
        print(f"{tag}: the first step's first calls {first_calls:.2f}s ({what}; numba imported)")
    for label, _ in codes:
        cold = min((r for n, lb, r in results if n == "cold" and lb == label), key=lambda r: r["marks"]["first_step_start"], default=None)
        warm = [r for n, lb, r in results if n == "warm" and lb == label]
        if cold is not None and warm:
            best = min(r["marks"]["first_step_start"] for r in warm)
            print(f"{label + ': ' if label else ''}warm start {cold['marks']['first_step_start'] / best:.1f}x faster than cold (targets: cold <= 5 s, warm <= 1 s to the first step)")
    for label, _ in codes:  # a cache hit must give the cold run's numbers exactly
        losses = {r["loss"] for _, lb, r in results if lb == label}
        if len(losses) > 1:
            sys.exit(f"compile_startup.py: {label or 'the'} runs' first losses differ: {sorted(losses)}")
    both = sorted({r["loss"] for _, _, r in results})
    if len(both) > 1 and (both[-1] - both[0]) > 1e-5 * abs(both[0]):  # another tree: float32 rounding apart at most
        sys.exit(f"compile_startup.py: the baseline's first loss and this tree's differ beyond float32 rounding: {both}")


if __name__ == "__main__":
    main()
