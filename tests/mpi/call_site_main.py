"""A few GPT training steps with the run-time path's per-layout decisions kept (the
default) and made afresh at every call (the tables' sizes 0), from the same initial
state, every product through MKL and every elementwise op through the fused kernels
however small: the losses and parameters must be bitwise equal. Runs on 1 rank in
process or under `mpiexec -n 2` (dp=2 and tp=2): `python call_site_main.py [STEPS]`."""

from __future__ import annotations

import sys

import numpy as np

from shardc.runtime.execute import horizontal_run
from shardc.runtime.execute import structured_run as sr
from shardc.runtime.execute.kernels import blas, fused_run
from shardc.training.axis import GPT_PLAN, ShardingPolicy
from shardc.training.gpt import GPTConfig, init_params
from shardc.training.mesh import make_grid
from shardc.training.spmd import RankState, StepProgram

CFG = GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=32)


def steps(prog: StepProgram, rank: int, n: int, batch: int, cached: bool) -> tuple[list[float], list[np.ndarray]]:
    limits = (4096, 4096, 64) if cached else (0, 0, 0)
    blas.MAX_RECIPES, sr.MAX_CACHED_LAYOUTS, sr.MAX_CACHED_SHAPES = limits
    if not cached:
        blas._RECIPES.clear()  # pyright: ignore[reportPrivateUsage]
        sr._SUM_PLANS.clear()  # pyright: ignore[reportPrivateUsage]
    state = RankState(prog, rank, init_params(CFG, 0))
    rng = np.random.default_rng(1)
    losses = []
    for _ in range(n):
        x = rng.integers(0, CFG.vocab_size, (batch, CFG.block_size)).astype(np.int32)
        y = rng.integers(0, CFG.vocab_size, (batch, CFG.block_size)).astype(np.int32)
        losses.append(state.train_step([(x, y)], 1e-2))
    return losses, [np.array(p) for p in state.params]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    blas.MIN_FLOPS = blas.MIN_MATRIX_FLOPS = 0
    fused_run.MIN_ELEMENTS = 0
    horizontal_run.MIN_GROUP_ELEMENTS = 0
    try:
        from mpi4py import MPI

        world, rank = MPI.COMM_WORLD.Get_size(), MPI.COMM_WORLD.Get_rank()
    except ImportError:
        world, rank = 1, 0
    for tp in sorted({1, world}):
        prog = StepProgram.build(CFG, 2 * world, make_grid(world, tp), ShardingPolicy(tp, zero=True, fsdp=False), GPT_PLAN)
        lc, pc = steps(prog, rank, n, 2 * world, cached=True)
        lf, pf = steps(prog, rank, n, 2 * world, cached=False)
        same = [a.hex() for a in lc] == [a.hex() for a in lf] and all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(pc, pf))
        print(f"rank {rank} tp {tp}: {'OK' if same else 'DIFFER'} losses {[a.hex() for a in lc]} fresh {[a.hex() for a in lf]}", flush=True)
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
