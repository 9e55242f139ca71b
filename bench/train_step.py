"""Tokens/s of one training step (microbatch + AdamW update) of a GPT with n_layer=4,
n_embd=256, n_head=4, block_size=128, vocab 512, global batch 8: the step compiled
through the shard pipeline, on 1 rank and on 2 MPI ranks (dp=2; tp=2), against the time
the step's FLOPs would take at numpy's matmul peak measured in the same run (one BLAS
thread per rank). Also the compile time of the step through the pipeline.

    python bench/train_step.py                 # single rank here, 2 ranks via mpiexec -n 2
    python bench/train_step.py --quick         # a smaller model, for a smoke run

FLOPs are counted on the step's IR: every linalg.generic contributes its iteration
space times the float ops of its body (a contraction: multiply and add); a factor that
is a constant with one non-zero entry (the one-hot picks of q, k and v out of the fused
projection) is an index, not work, and counts as none. Fraction of peak = FLOPs /
(ranks x peak) / step time, the median over the timed steps, each against the matmul
rate measured right before it (the machine may be shared: both then see the same
load); target >= 0.6.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

from shardc.training.gpt import GPTConfig, init_params

FULL = GPTConfig(n_layer=4, n_head=4, n_embd=256, block_size=128, vocab_size=512)
QUICK = GPTConfig(n_layer=2, n_head=4, n_embd=64, block_size=32, vocab_size=64)
BATCH = 8


_A = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
_B = _A.T.copy()


def matmul_peak(seconds: float = 1.0) -> float:
    """FLOP/s of a float32 1024^3 matmul (best of a short run)."""
    best = math.inf
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        _A @ _B
        best = min(best, time.perf_counter() - t0)
    return 2 * 1024**3 / best


def matmul_rate(n: int = 5) -> float:
    """FLOP/s of a float32 1024^3 matmul now: the median of `n` (under the same load as
    the step timed right after it; the machine may be shared)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        _A @ _B
        times.append(time.perf_counter() - t0)
    return 2 * 1024**3 / statistics.median(times)


def step_flops(cfg: GPTConfig, batch: int) -> int:
    """FLOPs of @train_step + @adamw_step of the unsharded IR. A factor that is a constant
    with one non-zero entry neither multiplies nor widens the iteration space: the
    runtime reads it as an index."""
    from xdsl.dialects.arith import ConstantOp
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
    from xdsl.dialects.linalg.ops import GenericOp

    from shardc.training.step import build_step_module

    module = build_step_module(cfg, batch, with_loss=False)
    total = 0
    for op in module.walk():
        if not isinstance(op, GenericOp):
            continue
        extents: dict[int, int] = {}
        selected: set[int] = set()
        selectors = 0
        for operand, amap in zip(op.operands, op.indexing_maps.data):
            shape = operand.type.get_shape() if hasattr(operand.type, "get_shape") else ()
            for expr, n in zip(amap.data.results, shape):
                extents[expr.position] = n  # type: ignore[attr-defined]
            cst = operand.owner
            if isinstance(cst, ConstantOp) and isinstance(cst.value, DenseIntOrFPElementsAttr):
                if sum(1 for v in cst.value.get_values() if v != 0) == 1:
                    selected |= {e.position for e in amap.data.results}  # type: ignore[attr-defined]
                    selectors += 1
        space = math.prod(n for d, n in extents.items() if d not in selected)
        body = sum(1 for b in op.body.block.ops if b.name.startswith(("arith.", "math.")) and b.name not in ("arith.constant", "arith.cmpi", "arith.select", "arith.sitofp") and "f" in b.name.split(".")[1])
        total += space * max(body - selectors, 1)
    return total


def time_steps(cfg: GPTConfig, world: int, tp: int, rank: int, repeats: int) -> dict:
    """Compile the step for the grid, then time steps on this rank (under MPI when world > 1)."""
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.data import batches
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    grid = make_grid(world, tp)
    t0 = time.perf_counter()
    prog = StepProgram.build(cfg, BATCH, grid, ShardingPolicy(tp, zero=True, fsdp=False), GPT_PLAN)
    compile_s = time.perf_counter() - t0
    state = RankState(prog, rank, init_params(cfg, 0))
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 20000).astype(np.int32)
    it = batches(data, BATCH, cfg.block_size, 0)
    barrier = _barrier(world)
    times, rates = [], []
    for i in range(repeats + 1):
        mb = [next(it)]
        barrier()
        rate = matmul_rate()  # the peak under the load of this moment
        barrier()
        t = time.perf_counter()
        state.train_step(mb, 1e-3)
        barrier()
        if i:  # the first step warms caches
            times.append(time.perf_counter() - t)
            rates.append(rate)
    return {
        "compile_s": compile_s,
        "step_s": statistics.median(times),
        "times": times,
        "rates": rates,
        "stages": {s.name: s.seconds for s in prog.stages},
    }


def fraction_of_peak(flops: float, ranks: int, per_rank: list[dict]) -> float:
    """Median over steps of FLOPs / (ranks x peak) / step time, the peak measured just
    before each step (the slowest rank's step, the lowest rank's peak)."""
    steps = [max(r["times"][i] for r in per_rank) for i in range(len(per_rank[0]["times"]))]
    rates = [min(r["rates"][i] for r in per_rank) for i in range(len(steps))]
    return statistics.median(flops / (ranks * p) / t for p, t in zip(rates, steps))


def _barrier(world: int):
    if world == 1:
        return lambda: None
    from mpi4py import MPI

    return MPI.COMM_WORLD.Barrier


def worker(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from shardc.runtime.comm import MPIComm, use_comm
    from shardc.training.train import set_blas_threads

    set_blas_threads(1)
    comm = MPI.COMM_WORLD
    cfg = QUICK if args.quick else FULL
    with use_comm(MPIComm(comm)):
        res = time_steps(cfg, comm.Get_size(), args.tp, comm.Get_rank(), args.repeats)
    out = comm.gather(res, root=0)
    if comm.Get_rank() == 0:
        print("RESULT " + json.dumps(out))


def launch(n: int, tp: int, quick: bool, repeats: int) -> list[dict]:
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise SystemExit("mpiexec is not on PATH")
    cmd = [mpiexec, "-n", str(n), sys.executable, os.path.abspath(__file__), "--worker", "--tp", str(tp), "--repeats", str(repeats)]
    if quick:
        cmd.append("--quick")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")  # ranks share the machine
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode or line is None:
        raise SystemExit(f"mpiexec run failed:\n{p.stdout}\n{p.stderr}")
    return json.loads(line[len("RESULT ") :])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=10, help="timed steps per configuration (the median counts)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tp", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    from shardc.training.train import set_blas_threads

    set_blas_threads(1)
    cfg = QUICK if args.quick else FULL
    tokens = BATCH * cfg.block_size
    flops = step_flops(cfg, BATCH)
    peak = matmul_peak()
    single = time_steps(cfg, 1, 1, 0, args.repeats)
    print(f"model: {cfg}, batch {BATCH} ({tokens} tokens per step)")
    print(
        f"step FLOPs {flops / 1e9:.2f} GFLOP; numpy matmul peak {peak / 1e9:.1f} GFLOP/s per rank (1 BLAS thread)"
    )
    stages = ", ".join(f"{k.split('{')[0]} {v:.2f}s" for k, v in single["stages"].items() if k != "input")
    print(f"compile of the step through the pipeline: {single['compile_s']:.1f} s ({stages}, then Python codegen)")

    def report(label: str, per_rank: list[dict]) -> None:
        step_s = max(r["step_s"] for r in per_rank)
        frac = fraction_of_peak(flops, len(per_rank), per_rank)
        peak_now = statistics.median(min(r["rates"][i] for r in per_rank) for i in range(len(per_rank[0]["rates"])))
        print(
            f"{label:<22} {tokens / step_s:>9,.0f} tokens/s  step {step_s * 1e3:8.1f} ms  speedup {single['step_s'] / step_s:4.2f}x"
            f"  fraction of peak {frac:5.1%} (peak then {peak_now / 1e9:.0f} GFLOP/s per rank)"
        )

    report("1 rank", [single])
    for label, tp in (("2 ranks dp=2", 1), ("2 ranks tp=2", 2)):
        report(label, launch(2, tp, args.quick, args.repeats))


if __name__ == "__main__":
    main()
