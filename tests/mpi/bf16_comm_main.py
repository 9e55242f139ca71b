"""bf16 collectives on any Comm: every collective's result against what all ranks' inputs
say it must be, bit for bit (inputs are multiples of 1/8 below 64: exact in bf16, their
sums exact in float32 in any order). Run under `mpiexec -n N python bf16_comm_main.py`
(MPIComm) or called with a SimulatedComm (tests/unit/runtime/test_bf16_comm.py)."""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

BF = ml_dtypes.bfloat16


def rank_input(r: int) -> np.ndarray:
    return (np.random.default_rng(100 + r).integers(-64, 64, size=(4, 6)) / 8).astype(BF)


def check(comm, rank: int, size: int) -> list[str]:
    """The failures (empty when every collective is right) of `comm` on a 1-D grid."""
    grid, axes = (size,), (0,)
    xs = [rank_input(r) for r in range(size)]
    x = xs[rank]
    exact_sum = np.sum([p.astype(np.float64) for p in xs], axis=0)
    bad: list[str] = []

    def same(what: str, got: np.ndarray, want: np.ndarray) -> None:
        got = np.asarray(got)
        want = np.asarray(want).astype(BF)
        if got.dtype != np.dtype(BF) or got.shape != want.shape or not np.array_equal(got.view(np.uint16), want.view(np.uint16)):
            bad.append(f"{what}: got {got.dtype} {got.shape} {got.astype(np.float32).ravel()[:6]}, want {want.astype(np.float32).ravel()[:6]}")

    same("all_reduce sum", comm.all_reduce(x, grid, axes, "sum"), exact_sum)
    same("all_reduce max", comm.all_reduce(x, grid, axes, "max"), np.max([p.astype(np.float32) for p in xs], axis=0))
    same("all_reduce average", comm.all_reduce(x, grid, axes, "average"), (exact_sum / size).astype(np.float32))
    same("iall_reduce sum", comm.iall_reduce(x, grid, axes, "sum").wait(), exact_sum)
    same("all_gather 0", comm.all_gather(x, grid, axes, 0), np.concatenate(xs, 0))
    same("all_gather 1", comm.all_gather(x, grid, axes, 1), np.concatenate(xs, 1))
    same("iall_gather 0", comm.iall_gather(x, grid, axes, 0).wait(), np.concatenate(xs, 0))
    rows = 4 // size if 4 % size == 0 else None
    if rows:
        same("reduce_scatter", comm.reduce_scatter(x, grid, axes, 0, "sum"), exact_sum[rank * rows : (rank + 1) * rows])
        same("all_to_all", comm.all_to_all(x, grid, axes, 0, 1), np.concatenate([p[rank * rows : (rank + 1) * rows] for p in xs], 1))
        same("scatter", comm.scatter(xs[0] if rank == 0 else x, grid, axes, 0, 0), xs[0][rank * rows : (rank + 1) * rows])
    same("broadcast", comm.broadcast(x, grid, axes, 0), xs[0])
    if rank == 0:
        same("gather", comm.gather(x, grid, axes, 1, 0), np.concatenate(xs, 1))
        same("reduce", comm.reduce(x, grid, axes, 0, "sum"), exact_sum)
    else:
        comm.gather(x, grid, axes, 1, 0)
        comm.reduce(x, grid, axes, 0, "sum")
    same("shift", comm.shift(x, grid, axes, 0, 1, True), xs[(rank - 1) % size])
    # rounded once: 256 + 1 + 1 is 258 in bf16 (8 bits), where bf16 steps would give 256
    if size >= 3:
        y = np.full(3, 256.0 if rank == 0 else (1.0 if rank < 3 else 0.0), np.float32).astype(BF)
        same("all_reduce rounds once", comm.all_reduce(y, grid, axes, "sum"), np.full(3, 258.0, np.float32))
    return bad


def main() -> int:
    from shardc.runtime.execute.comm import MPIComm

    comm = MPIComm()
    bad = check(comm, comm.rank, comm.size)
    for line in bad:
        print(f"rank {comm.rank}: FAIL {line}", flush=True)
    print(f"rank {comm.rank}: {'OK' if not bad else 'FAILED'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
