"""The two-rank reduce-scatter (`comm_pair.reduce_scatter_pair`) against
MPI_Reduce_scatter_block on a contiguous copy of the same send, bit for bit, over the
layouts a step hands it (stacked blocks, blocks concatenated along the first axis,
column blocks of a wider array, a transposed 3-D view, reversed strides, a receive
buffer inside the send, a strided receive buffer), float32/float64/int32; and the
runtime's direct path (`mpi_run.reduce_scatter_block`) on column blocks with no copy
of the send (np.ascontiguousarray is not called), as it made one before.

Run as `mpiexec -n N python pair_main.py`: on 2 ranks every case must take the
exchange; on another count none may (they are left to MPI). Each rank prints
`rank R: OK` or its failures.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from shardc.runtime.execute.comm_pair import reduce_scatter_pair


def cases(rank: int) -> list[tuple[str, Callable[[], tuple[np.ndarray, np.ndarray]]]]:
    """(name, make) where make() gives (send, recv) afresh; values differ per rank and
    have full float mantissas (sums that round)."""
    rng = np.random.default_rng(10 + rank)

    def f32(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    wide, cube, flat = f32(5, 6), f32(3, 4, 2, 2), f32(2, 7, 4)
    f64, i32 = rng.standard_normal((2, 3, 5)), rng.integers(-1000, 1000, (6, 4)).astype(np.int32)
    rev = f32(2, 4, 6)
    inplace = f32(4, 3)
    return [
        ("stacked contiguous", lambda: (flat.copy(), np.empty((7, 4), np.float32))),
        ("column blocks", lambda: (wide.reshape(5, 2, 3).transpose(1, 0, 2), np.empty((5, 3), np.float32))),
        ("transposed 3-D", lambda: (cube.transpose(2, 1, 0, 3), np.empty((4, 3, 2), np.float32))),
        ("first-axis halves float64", lambda: (f64.reshape(6, 5)[:, :], np.empty((3, 5)))),
        ("int32 column blocks", lambda: (i32.reshape(6, 2, 2).transpose(1, 0, 2), np.empty((6, 2), np.int32))),
        ("reversed strides", lambda: (rev[:, :, ::-1], np.empty((4, 6), np.float32))),
        ("receive inside the send", lambda: (lambda s: (s, s[1 - rank]))(inplace.reshape(2, 2, 3).copy())),
        ("strided receive", lambda: (flat.copy(), np.empty((7, 8), np.float32)[:, ::2])),
    ]


def reference(comm, send: np.ndarray, recv_shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    out = np.empty(recv_shape, dtype)
    comm.Reduce_scatter_block(np.ascontiguousarray(send), out)
    return out


def check(comm) -> list[str]:
    rank, size = comm.Get_rank(), comm.Get_size()
    bad: list[str] = []
    for name, make in cases(rank):
        send, recv = make()
        if size != 2:
            if reduce_scatter_pair(comm, send, recv, "MPI_SUM"):
                bad.append(f"{name}: taken on {size} ranks")
            continue
        want = reference(comm, send.copy(), recv.shape, recv.dtype)  # before the receive may overwrite the send
        if not reduce_scatter_pair(comm, send, recv, "MPI_SUM"):
            bad.append(f"{name}: not taken")
            continue
        if not np.array_equal(np.ascontiguousarray(recv).view(np.uint8), want.view(np.uint8)):
            bad.append(f"{name}: differs from MPI_Reduce_scatter_block by {np.max(np.abs(recv - want))}")
    send, recv = cases(rank)[0][1]()
    if reduce_scatter_pair(comm, send, recv, "MPI_MAX"):
        bad.append("MPI_MAX taken")
    if reduce_scatter_pair(comm, send.astype(np.float16), np.zeros(recv.shape, np.float16), "MPI_SUM"):
        bad.append("float16 taken")
    if size == 2:
        bad += direct_path_copies(comm)
    return bad


def direct_path_copies(comm) -> list[str]:
    """The runtime's mpi.reduce_scatter_block on column blocks: MPI's answer, and no
    np.ascontiguousarray of the send on the way."""
    from shardc.runtime.execute.comm import MPIComm, use_comm
    from shardc.runtime.execute.kernels import mpi_run

    rank = comm.Get_rank()
    wide = np.random.default_rng(20 + rank).standard_normal((64, 96)).astype(np.float32)
    send = wide.reshape(64, 2, 48).transpose(1, 0, 2)
    want = reference(comm, send, (64, 48), np.float32)
    recv = np.empty((64, 48), np.float32)
    calls = []
    real = np.ascontiguousarray

    def counting(a, *args, **kwargs):
        calls.append(np.shape(a))
        return real(a, *args, **kwargs)

    np.ascontiguousarray = counting
    try:
        with use_comm(MPIComm(comm)):
            mpi_run.reduce_scatter_block(comm, send, recv, "MPI_SUM")
    finally:
        np.ascontiguousarray = real
    bad = []
    if calls:
        bad.append(f"direct path copied: np.ascontiguousarray on {calls}")
    if not np.array_equal(recv, want):
        bad.append("direct path differs from MPI_Reduce_scatter_block")
    return bad


def main() -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    bad = check(comm)
    print(f"rank {comm.Get_rank()}: " + ("OK" if not bad else "FAIL " + "; ".join(bad)), flush=True)


if __name__ == "__main__":
    main()
