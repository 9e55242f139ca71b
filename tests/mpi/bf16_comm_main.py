"""bf16 collectives on any Comm: every collective's result against what all ranks' inputs
say it must be, bit for bit (inputs are multiples of 1/8 below 64: exact in bf16, their
sums exact in float32 in any order). Run under `mpiexec -n N python bf16_comm_main.py`
(MPIComm) or called with a SimulatedComm (tests/unit/runtime/test_bf16_comm.py).

`mpiexec -n N python bf16_comm_main.py LOWERED.mlir` also runs the mpi dialect on bf16
buffers: LOWERED.mlir is `shardc-opt --convert-shard-to-mpi` of `shard_program(N)` (N
divides 4) (an
mpi.allreduce, mpi.reduce_scatter_block, mpi.allgather, isend/recv per op) plus the
hand-written mpi.send/irecv of `P2P`, run by the runtime on MPIP2P; and MPIP2P's
nonblocking and held (bucketed) reductions called directly. Their inputs
(`lowered_input`) are bf16 values k * 2^e, |k| < 128, |e| <= 6, whose sums over four
ranks are exact in float32 in any order but not in bf16 steps: a float32 reduction
rounded once gives one answer, bit for bit (`check_lowered` says it differs from
rounding after each step where the inputs can tell)."""

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


SHAPE = (4, 8)
_T = "4x8xbf16"


def shard_program(n: int) -> str:
    """Every shard collective that lowers to an mpi call, on bf16 memrefs and tensors of a
    1-D grid of `n` (n divides 4)."""
    return f"""module {{
  shard.grid @grid(shape = {n})
  func.func @f(%a: memref<{_T}>, %t: tensor<{_T}>) -> (memref<{_T}>, tensor<{_T}>, tensor<{4 // n}x8xbf16>, memref<4x{8 // n}xbf16>, tensor<{4 * n}x8xbf16>, tensor<{_T}>) {{
    %0 = shard.all_reduce %a on @grid grid_axes = [0] : memref<{_T}> -> memref<{_T}>
    %1 = shard.all_reduce %t on @grid grid_axes = [0] reduction = max : tensor<{_T}> -> tensor<{_T}>
    %2 = shard.reduce_scatter %t on @grid grid_axes = [0] scatter_axis = 0 : tensor<{_T}> -> tensor<{4 // n}x8xbf16>
    %3 = shard.reduce_scatter %a on @grid grid_axes = [0] scatter_axis = 1 : memref<{_T}> -> memref<4x{8 // n}xbf16>
    %4 = shard.all_gather %t on @grid grid_axes = [0] gather_axis = 0 : tensor<{_T}> -> tensor<{4 * n}x8xbf16>
    %5 = shard.shift %t on @grid grid_axes = [0] shift_axis = 0 offset = 1 rotate : tensor<{_T}> -> tensor<{_T}>
    return %0, %1, %2, %3, %4, %5 : memref<{_T}>, tensor<{_T}>, tensor<{4 // n}x8xbf16>, memref<4x{8 // n}xbf16>, tensor<{4 * n}x8xbf16>, tensor<{_T}>
  }}
}}
"""


P2P = f"""module {{
  func.func @p2p(%buf: memref<{_T}>, %got: memref<{_T}>, %back: memref<{_T}>) -> (memref<{_T}>, memref<{_T}>) {{
    %tag = arith.constant 5 : i32
    %one = arith.constant 1 : i32
    %world = mpi.comm_world : !mpi.comm
    %rank = mpi.comm_rank(%world) : i32
    %size = mpi.comm_size(%world) : i32
    %up = arith.addi %rank, %one : i32
    %next = arith.remsi %up, %size : i32
    %wrap = arith.addi %rank, %size : i32
    %down = arith.subi %wrap, %one : i32
    %prev = arith.remsi %down, %size : i32
    mpi.send(%buf, %tag, %next, %world) : memref<{_T}>, i32, i32
    %r = mpi.irecv(%got, %tag, %prev, %world) : memref<{_T}>, i32, i32 -> !mpi.request
    mpi.wait(%r) : !mpi.request
    %s = mpi.isend(%buf, %one, %prev, %world) : memref<{_T}>, i32, i32 -> !mpi.request
    mpi.recv(%back, %one, %next, %world) : memref<{_T}>, i32, i32
    mpi.wait(%s) : !mpi.request
    return %got, %back : memref<{_T}>, memref<{_T}>
  }}
}}
"""


def lowered_input(r: int) -> np.ndarray:
    rng = np.random.default_rng(200 + r)
    return (rng.integers(-127, 128, size=SHAPE) * np.exp2(rng.integers(-6, 7, size=SHAPE))).astype(BF)


def rounded_once(parts: list[np.ndarray], kind: str = "sum") -> np.ndarray:
    wide = [p.astype(np.float64) for p in parts]
    return (np.sum(wide, axis=0) if kind == "sum" else np.max(wide, axis=0)).astype(np.float32).astype(BF)


def _same(bad: list[str], what: str, got: object, want: np.ndarray) -> None:
    got = np.asarray(got)
    if got.dtype != np.dtype(BF) or got.shape != want.shape or not np.array_equal(got.view(np.uint16), want.view(np.uint16)):
        bad.append(f"{what}: got {got.dtype} {got.shape} {np.asarray(got, np.float32).ravel()[:6]}, want {want.astype(np.float32).ravel()[:6]}")


def check_lowered(program, p2p, rank: int, size: int) -> list[str]:
    """The failures of the compiled lowered `program` (of `shard_program(size)`) and `p2p`
    on this rank, under the current comm's mpi backend."""
    a_all = [lowered_input(r) for r in range(size)]
    t_all = [lowered_input(50 + r) for r in range(size)]
    a, t = a_all[rank], t_all[rank]
    bad: list[str] = []
    total, t_total = rounded_once(a_all), rounded_once(t_all)
    if size >= 3:  # the inputs tell a float32 reduction from one rounded after each step
        step = a_all[0]
        for p in a_all[1:]:
            step = (step + p).astype(BF)
        if np.array_equal(step.view(np.uint16), total.view(np.uint16)):
            bad.append("the inputs cannot tell rounding once from rounding each step")
    got = program.call("f", a.copy(), t.copy())
    rows = 4 // size
    _same(bad, "mpi.allreduce sum (memref)", got[0], total)
    _same(bad, "mpi.allreduce max (tensor)", got[1], rounded_once(t_all, "max"))
    _same(bad, "mpi.reduce_scatter_block axis 0", got[2], t_total[rank * rows : (rank + 1) * rows])
    cols = 8 // size
    _same(bad, "mpi.reduce_scatter_block axis 1", got[3], total[:, rank * cols : (rank + 1) * cols])
    _same(bad, "mpi.allgather", got[4], np.concatenate(t_all, 0))
    _same(bad, "mpi.isend/recv (shift)", got[5], t_all[(rank - 1) % size])
    got = p2p.call("p2p", a.copy(), np.zeros(SHAPE, BF), np.zeros(SHAPE, BF))
    _same(bad, "mpi.send/irecv", got[0], a_all[(rank - 1) % size])
    _same(bad, "mpi.isend/recv", got[1], a_all[(rank + 1) % size])
    bad += check_backend(a_all, rank, size)
    return bad


def check_backend(a_all: list[np.ndarray], rank: int, size: int) -> list[str]:
    """The mpi backend's own bf16 reductions: blocking in place, nonblocking, held."""
    from shardc.runtime.execute.comm import CommError, current_comm, hold

    b = current_comm().mpi_backend()
    world = b.comm_world()
    a, total = a_all[rank], rounded_once(a_all)
    bad: list[str] = []
    buf = a.copy()
    b.allreduce(world, buf, buf, "MPI_SUM")
    _same(bad, "allreduce in place", buf, total)
    out = np.empty(SHAPE, BF)
    b.iallreduce(world, a, out, "MPI_SUM").wait()
    _same(bad, "iallreduce", out, total)
    rows = 4 // size
    blocks = np.empty((rows, 8), BF)
    b.ireduce_scatter_block(world, a, blocks, "MPI_SUM").wait()
    _same(bad, "ireduce_scatter_block", blocks, total[rank * rows : (rank + 1) * rows])
    one, two = np.empty(SHAPE, BF), np.empty(SHAPE, BF)
    first = hold("allreduce", b, world, a, one, "MPI_SUM")
    second = hold("allreduce", b, world, a_all[(rank + 1) % size], two, "MPI_SUM")
    if first is None or second is None:
        bad.append("small bf16 allreduces were not held")
    else:
        first.wait()
        second.wait()
        _same(bad, "held allreduce (one bucket)", one, total)
        _same(bad, "held allreduce, second of the bucket", two, total)
    try:  # refused on every rank before MPI is called: no rank waits
        b.allreduce(world, a, one, "MPI_BXOR")
        bad.append("MPI_BXOR on bf16 was not refused")
    except CommError as e:
        if "needs an integer element type" not in str(e):
            bad.append(f"MPI_BXOR on bf16: {e}")
    return bad


def compile_text(text: str, name: str):
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.runtime import compile_module

    return compile_module(LocatingParser(make_context(), text, name).parse_module(), name)


def main() -> int:
    from shardc.runtime.execute.comm import MPIComm, use_comm

    comm = MPIComm()
    bad = check(comm, comm.rank, comm.size)
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as f:
            program = compile_text(f.read(), sys.argv[1])
        with use_comm(comm):
            bad += check_lowered(program, compile_text(P2P, "p2p.mlir"), comm.rank, comm.size)
    for line in bad:
        print(f"rank {comm.rank}: FAIL {line}", flush=True)
    print(f"rank {comm.rank}: {'OK' if not bad else 'FAILED'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
