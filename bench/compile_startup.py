"""Start-up of a training job: the GPT step (n_layer 12, n_embd 768, 12 heads, block 32,
vocab 64, per-device batch 8, ZeRO) under `mpiexec -n 2`, from the launch to the first
step, with an empty compile cache (cold) and again with the entry the cold run left
(warm). Targets: cold <= 5 s, warm <= 1 s to the first step.

    python bench/compile_startup.py            # cold, then warm, in a fresh cache directory
    python bench/compile_startup.py --quick    # n_layer 2, n_embd 64: a smoke run

Each run is a fresh `mpiexec -n 2` job; rank 0 reports seconds since the launch (the
parent's clock, passed in the environment) at: the imports done, the step compiled
(rank 0 compiled or loaded it, rank 1 took it over MPI: one compile per job), the
state allocated, and the first step done. "to first step" is the launch to the
moment the first step starts (compiled and state ready); the step itself is reported
beside it. The machine may be shared: the figures are as measured, under that load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def _child(n_layer: int, n_embd: int, n_head: int) -> None:
    t0 = float(os.environ["BENCH_T0"])
    marks: dict[str, float] = {}
    import numpy as np
    from mpi4py import MPI

    from shardc.runtime.comm import MPIComm, use_comm
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
    state = RankState(program, rank, init_params(cfg.model, cfg.seed, np.float32))
    rng = np.random.default_rng(0)
    micro = program.batch
    batch = (rng.integers(0, 64, (micro, 32)).astype(np.int32), rng.integers(0, 64, (micro, 32)).astype(np.int32))
    world.Barrier()
    marks["first_step_start"] = time.time() - t0
    with use_comm(MPIComm(world)):
        loss = state.train_step([batch], 1e-3)
    world.Barrier()
    marks["first_step_done"] = time.time() - t0
    if rank == 0:
        print(json.dumps({"marks": marks, "source": program.cached, "compile_seconds": program.compile_seconds, "loss": loss}), flush=True)


def _job(args: argparse.Namespace, cache_dir: str) -> dict:
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        sys.exit("compile_startup.py: mpiexec is not on PATH")
    env = {k: v for k, v in os.environ.items() if k != "SHARDC_CACHE"}
    env.update(SHARDC_CACHE_DIR=cache_dir, BENCH_T0=repr(time.time()))
    cmd = [mpiexec, "-n", "2", sys.executable, os.path.abspath(__file__), "--child", "--n-layer", str(args.n_layer), "--n-embd", str(args.n_embd), "--n-head", str(args.n_head)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        sys.exit(f"compile_startup.py: the job failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--n-head", type=int, default=12)
    args = ap.parse_args()
    if args.quick:
        args.n_layer, args.n_embd, args.n_head = 2, 64, 4
    if args.child:
        _child(args.n_layer, args.n_embd, args.n_head)
        return
    print(f"GPT step n_layer {args.n_layer}, n_embd {args.n_embd}, {args.n_head} heads, block 32, vocab 64, batch 8 per rank; mpiexec -n 2")
    with tempfile.TemporaryDirectory(prefix="shardc-bench-cache-") as d:
        cold = _job(args, d)
        warm = _job(args, d)
    print(f"{'run':<6} {'from':<10} {'imports':>8} {'compiled':>9} {'to first step':>14} {'first step':>11}")
    for name, r in (("cold", cold), ("warm", warm)):
        m = r["marks"]
        print(f"{name:<6} {r['source']:<10} {m['imports']:>7.2f}s {m['compiled']:>8.2f}s {m['first_step_start']:>13.2f}s {m['first_step_done'] - m['first_step_start']:>10.2f}s")
    ratio = cold["marks"]["first_step_start"] / warm["marks"]["first_step_start"]
    print(f"warm start {ratio:.1f}x faster than cold (targets: cold <= 5 s, warm <= 1 s to the first step)")
    if cold["loss"] != warm["loss"]:
        sys.exit(f"compile_startup.py: the warm run's first loss {warm['loss']} differs from the cold run's {cold['loss']}")


if __name__ == "__main__":
    main()
