"""Run under mpiexec by test_bf16_sums_mpi.py: every bf16 sum of the runtime (the mpi
dialect's calls on MPIP2P, blocking and nonblocking, the two-rank exchange of strided
blocks, MPIComm's shard collectives) sends only 16-bit patterns, and gives the float32
sum of the contributions in rank order rounded to bf16 once, bit for bit. The inputs
are normal samples, so a sum that went through bf16 twice would differ."""

from __future__ import annotations

import sys

import numpy as np


class Recorder:
    """A communicator that passes every call to `comm` and records the element size of
    each array handed to MPI, and the bytes of each `[buffer, count, datatype]` spec."""

    def __init__(self, comm):
        self.comm, self.itemsizes, self.typed_bytes, self.calls = comm, [], [], []

    def __getattr__(self, name):
        target = getattr(self.comm, name)
        if not name[:1].isupper() or name.startswith("Get_"):
            return target

        def call(*args, **kwargs):
            self.calls.append(name)
            for a in [*args, *kwargs.values()]:
                if isinstance(a, np.ndarray):
                    self.itemsizes.append(a.itemsize)
                elif isinstance(a, list) and len(a) == 3:  # [buffer, count, datatype]: a strided block
                    self.typed_bytes.append(a[1] * a[2].Get_size())
            return target(*args, **kwargs)

        return call


def rank_order_sum(parts: list[np.ndarray], bf) -> np.ndarray:
    total = parts[0].astype(np.float32)
    for p in parts[1:]:
        total = total + p.astype(np.float32)
    return total.astype(bf)


def main() -> int:
    import ml_dtypes
    from mpi4py import MPI

    from shardc.runtime.execute import bf16_sums
    from shardc.runtime.execute.comm import MPIP2P, MPIComm
    from shardc.runtime.execute.kernels import mpi_run

    bf = np.dtype(ml_dtypes.bfloat16)
    world = MPI.COMM_WORLD
    n, rank = world.Get_size(), world.Get_rank()

    def sample(seed: int, shape: tuple[int, ...]) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal(shape).astype(np.float32).astype(bf)

    bad: list[str] = []

    def same(what: str, got: np.ndarray, want: np.ndarray, rec: Recorder | None = None) -> None:
        if got.dtype != bf or got.shape != want.shape or not (got.view(np.uint16) == want.view(np.uint16)).all():
            bad.append(f"{what}: not the float32 sum in rank order rounded once")
        if rec is not None and (not rec.itemsizes + rec.typed_bytes or any(s != 2 for s in rec.itemsizes)):
            bad.append(f"{what}: MPI was handed buffers of {sorted(set(rec.itemsizes))}-byte elements ({rec.calls})")

    # all-reduce of 7x5 (35 elements: padded to a multiple of the group size)
    parts = [sample(10 + k, (7, 5)) for k in range(n)]
    total = rank_order_sum(parts, bf)
    rec = Recorder(world)
    out = np.empty((7, 5), bf)
    MPIP2P.allreduce(rec, parts[rank].copy(), out, "MPI_SUM")
    same("allreduce", out, total, rec)
    inplace = parts[rank].copy()
    MPIP2P.allreduce(world, inplace, inplace, "MPI_SUM")
    same("allreduce in place", inplace, total)
    rec = Recorder(world)
    out = np.empty((7, 5), bf)
    MPIP2P.iallreduce(rec, parts[rank].copy(), out, "MPI_SUM").wait()
    same("iallreduce", out, total, rec)

    # reduce-scatter of n blocks of 3x5
    parts = [sample(20 + k, (3 * n, 5)) for k in range(n)]
    mine = rank_order_sum(parts, bf)[3 * rank : 3 * rank + 3]
    for name, run in [
        ("reduce_scatter_block", lambda c, s, r: MPIP2P.reduce_scatter_block(c, s, r, "MPI_SUM")),
        ("ireduce_scatter_block", lambda c, s, r: MPIP2P.ireduce_scatter_block(c, s, r, "MPI_SUM").wait()),
        ("mpi_run.reduce_scatter_block", lambda c, s, r: mpi_run.reduce_scatter_block(c, s, r, "MPI_SUM")),
    ]:
        rec = Recorder(world)
        out = np.empty((3, 5), bf)
        run(rec, parts[rank], out)
        same(name, out, mine, rec)

    # column blocks of a 6x(4n) gradient, the strided send ZeRO's column split makes
    parts = [sample(30 + k, (6, 4 * n)) for k in range(n)]
    cols = rank_order_sum(parts, bf)[:, 4 * rank : 4 * rank + 4]
    rec = Recorder(world)
    out = np.empty((6, 4), bf)
    mpi_run.reduce_scatter_block(rec, parts[rank].reshape(6, n, 4).transpose(1, 0, 2), out, "MPI_SUM")
    same("strided column blocks", out, cols, rec)
    if any(b != 6 * 4 * 2 for b in rec.typed_bytes):
        bad.append(f"strided column blocks: sent {rec.typed_bytes} bytes through a datatype, not one bf16 block (48)")
    if n == 2 and rec.calls != ["Sendrecv"]:
        bad.append(f"two ranks' strided blocks: expected one Sendrecv, got {rec.calls}")

    # MPIComm: the shard collectives, each through bf16_sums (its sub-communicators are
    # its own, so the calls are counted there rather than on a Recorder)
    routed: list[str] = []
    for name in ("allreduce", "start_allreduce", "reduce_scatter", "start_reduce_scatter"):
        setattr(bf16_sums, name, lambda *a, _f=getattr(bf16_sums, name), _n=name: (routed.append(_n), _f(*a))[1])
    comm = MPIComm()
    parts = [sample(40 + k, (2 * n, 3)) for k in range(n)]
    total = rank_order_sum(parts, bf)
    same("MPIComm.all_reduce", comm.all_reduce(parts[rank], (n,), (0,), "sum"), total)
    same("MPIComm.iall_reduce", comm.iall_reduce(parts[rank], (n,), (0,), "sum").wait(), total)
    same("MPIComm.reduce_scatter", comm.reduce_scatter(parts[rank], (n,), (0,), 0, "sum"), total[2 * rank : 2 * rank + 2])
    same("MPIComm.ireduce_scatter", comm.ireduce_scatter(parts[rank], (n,), (0,), 0, "sum").wait(), total[2 * rank : 2 * rank + 2])
    if set(routed) != {"allreduce", "start_allreduce", "reduce_scatter", "start_reduce_scatter"}:  # the blocking ones start, then wait
        bad.append(f"MPIComm's bf16 sums did not all go through bf16_sums: {routed}")

    for line in bad:
        print(f"rank {rank}: FAIL {line}", flush=True)
    print(f"rank {rank}: {'OK' if not bad else 'FAILED'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
