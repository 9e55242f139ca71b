"""The run time of the mpi kernels (`kernels/mpi.py` emits them): the current comm's
MPI backend, the direct reduce-scatter, the nonblocking starts of the overlap
schedule, the held starts of small collectives. No xDSL here, so a compile-cache hit
loads none; mpi.py re-exports every name."""

from __future__ import annotations

from typing import Any

from shardc.runtime.execute import overlap_run
from shardc.runtime.execute.comm import Pending, current_comm, hold
from shardc.runtime.execute.comm_pair import receives_in_place, reduce_scatter_pair
from shardc.runtime.execute.kernels.bf16_run import is_bfloat16


def backend() -> Any:
    return current_comm().mpi_backend()


def reduce_scatter_block(comm: Any, send: Any, recv: Any, op: str) -> int:
    """MPI_Reduce_scatter_block straight into a contiguous receive buffer (the backend's
    own call goes through a temporary, a copy of the result too many). bf16 (MPI has no
    bf16 type) goes to the two-rank exchange or the backend, both `bf16_sums`."""
    import numpy as np

    b = backend()
    if type(b).__name__ == "MPIP2P":
        if reduce_scatter_pair(comm, send, recv, op):  # 2 ranks: one exchange, no copy
            return 0
        if receives_in_place(send, recv) and not is_bfloat16(recv.dtype):
            comm.Reduce_scatter_block(np.ascontiguousarray(send), recv, op=b._op(op))
            return 0
    return b.reduce_scatter_block(comm, send, recv, op)


def start_allreduce(comm: Any, send: Any, recv: Any, op: str) -> Pending:
    b = backend()
    if (held := hold("allreduce", b, comm, send, recv, op)) is not None:  # small: bucketed
        return held
    if not overlap_run.enabled():
        b.allreduce(comm, send, recv, op)
        return Pending.completed(0)
    return overlap_run.launch(b.iallreduce(comm, send, recv, op))


def start_reduce_scatter_block(comm: Any, send: Any, recv: Any, op: str) -> Pending:
    if (held := hold("reduce_scatter_block", backend(), comm, send, recv, op)) is not None:
        return held
    if not overlap_run.enabled():
        reduce_scatter_block(comm, send, recv, op)
        return Pending.completed(0)
    return overlap_run.launch(backend().ireduce_scatter_block(comm, send, recv, op))


def start_allgather(comm: Any, send: Any, recv: Any) -> Pending:
    b = backend()
    if (held := hold("allgather", b, comm, send, recv)) is not None:
        return held
    if not overlap_run.enabled():
        b.allgather(comm, send, recv)
        return Pending.completed(0)
    return overlap_run.launch(b.iallgather(comm, send, recv))


def hold_or_run(kind: str, comm: Any, send: Any, recv: Any, op: str | None = None) -> Pending:
    """A small collective (`kind`: allreduce, reduce_scatter_block, allgather) of a block
    emitted as written: held, to run with every other held one at the first wait of any
    (`comm.hold`), or run now when it is larger than `SHARDC_BUCKET_BYTES` (0: none held)."""
    b = backend()
    if (held := hold(kind, b, comm, send, recv, op)) is not None:
        return held
    if kind == "allgather":
        b.allgather(comm, send, recv)
    elif kind == "allreduce":
        b.allreduce(comm, send, recv, op)
    else:
        reduce_scatter_block(comm, send, recv, op)
    return Pending.completed(0)
