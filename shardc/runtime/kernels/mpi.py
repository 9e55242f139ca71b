"""mpi: MLIR's mpi dialect on the current comm's MPI backend (`Comm.mpi_backend()`):
mpi4py under mpiexec, an MPI-like world over simulated ranks otherwise, so lowered
programs run in one process too.

`!mpi.comm` values are backend handles, `!mpi.request` backend requests, `!mpi.retval`
the MPI return code (MPI_SUCCESS, 0: a failing call raises instead of returning a code).
`mpi.init`/`mpi.finalize` are no-ops: mpi4py initialises MPI on import and finalizes it
at exit, and a program may run more than once in one process.
"""

from __future__ import annotations

import atexit
from typing import Any

from xdsl.dialects import cf
from xdsl.ir import Operation

from shardc.dialects import mpi
from shardc.runtime.comm import current_comm
from shardc.runtime.compile import FunctionBuilder, RuntimeExecutionError, compile_error, register


def backend() -> Any:
    return current_comm().mpi_backend()


def _retval(op: Operation, g: FunctionBuilder, expr: str = "0") -> None:
    rv = getattr(op, "retval", None)
    if rv is not None:
        g.bind(rv, expr)


def _b(g: FunctionBuilder) -> str:
    return f"{g.const(backend, 'mpi_backend')}()"


def _call(op: Operation, g: FunctionBuilder, method: str, args: list[str]) -> None:
    """`backend.method(args)` whose return code is the op's retval (when it has one)."""
    call = f"{_b(g)}.{method}({', '.join(args)})"
    rv = getattr(op, "retval", None)
    if rv is None:
        g.emit(call)
    else:
        g.emit(f"{g.define(rv)} = {call}")


@register(mpi.InitOp, mpi.FinalizeOp)
def _init(op: Operation, g: FunctionBuilder) -> None:
    _retval(op, g)


@register(mpi.CommWorldOp)
def _comm_world(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, f"{_b(g)}.comm_world()")


@register(mpi.CommRankOp, mpi.CommSizeOp)
def _comm_query(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, mpi.CommRankOp | mpi.CommSizeOp)
    method = "comm_rank" if isinstance(op, mpi.CommRankOp) else "comm_size"
    value = op.rank if isinstance(op, mpi.CommRankOp) else op.size
    g.emit(f"{g.define(value)} = {_b(g)}.{method}({g.v(op.comm)})")
    _retval(op, g)


@register(mpi.CommSplitOp)
def _comm_split(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, mpi.CommSplitOp)
    site = g.const(object(), "split_site")  # the cache key of this op (MPI backend)
    g.emit(f"{g.define(op.newcomm)} = {_b(g)}.comm_split({g.v(op.comm)}, {g.v(op.color)}, {g.v(op.key)}, {site})")
    _retval(op, g)


class BufferedSends:
    """`mpi.send` with buffered-send semantics on MPI (MPI_Bsend-like): the buffer is
    copied and sent with Isend, so the call returns at once whatever the message size.

    Lowered halo exchanges (upstream's order) send to both neighbours before either
    receives; with MPI_Send that deadlocks as soon as messages are too big for MPI's
    eager protocol. Pending sends progress while this process blocks in later MPI calls
    and are pruned after every receive and barrier; `flush` waits for all of them."""

    def __init__(self) -> None:
        self.pending: list[tuple[Any, Any]] = []

    def send(self, comm: Any, buf: Any, dest: int, tag: int) -> int:
        import numpy as np

        self.prune()
        data = np.array(buf, order="C", copy=True)
        self.pending.append((comm.Isend(data, dest=dest, tag=tag), data))
        return 0

    def prune(self) -> None:
        self.pending = [(r, d) for r, d in self.pending if not r.Test()]

    def flush(self) -> None:
        for request, _ in self.pending:
            request.Wait()
        self.pending = []


_buffered: dict[int, tuple[Any, BufferedSends]] = {}


@atexit.register
def _flush_all() -> None:
    """Complete every buffered send before MPI is finalized (mpi4py finalizes after the
    interpreter's exit handlers), so that no request outlives MPI."""
    for _, sends in _buffered.values():
        sends.flush()


def buffered_sends(b: Any) -> BufferedSends:
    """The buffered sends of an MPI backend (one per backend object)."""
    entry = _buffered.get(id(b))
    if entry is None or entry[0] is not b:
        entry = (b, BufferedSends())
        _buffered[id(b)] = entry
    return entry[1]


def send(comm: Any, buf: Any, dest: int, tag: int) -> int:
    b = backend()
    if type(b).__name__ == "MPIP2P":
        return buffered_sends(b).send(comm, buf, dest, tag)
    return b.send(comm, buf, dest, tag)  # simulated sends are buffered already


def recv(comm: Any, buf: Any, source: int, tag: int) -> int:
    b = backend()
    code = b.recv(comm, buf, source, tag)
    if type(b).__name__ == "MPIP2P":
        buffered_sends(b).prune()
    return code


def barrier(comm: Any) -> int:
    b = backend()
    if type(b).__name__ == "MPIP2P":
        buffered_sends(b).flush()
    return b.barrier(comm)


@register(mpi.SendOp, mpi.RecvOp)
def _p2p(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, mpi.SendOp | mpi.RecvOp)
    peer = op.dest if isinstance(op, mpi.SendOp) else op.source
    fn = g.const(send if isinstance(op, mpi.SendOp) else recv, "mpi_send" if isinstance(op, mpi.SendOp) else "mpi_recv")
    call = f"{fn}({g.v(op.comm)}, {g.v(op.ref)}, {g.v(peer)}, {g.v(op.tag)})"
    rv = getattr(op, "retval", None)
    g.emit(call if rv is None else f"{g.define(rv)} = {call}")


@register(mpi.ISendOp, mpi.IRecvOp)
def _ip2p(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, mpi.ISendOp | mpi.IRecvOp)
    peer = op.dest if isinstance(op, mpi.ISendOp) else op.source
    method = "isend" if isinstance(op, mpi.ISendOp) else "irecv"
    g.emit(f"{g.define(op.req)} = {_b(g)}.{method}({g.v(op.comm)}, {g.v(op.ref)}, {g.v(peer)}, {g.v(op.tag)})")
    _retval(op, g)


@register(mpi.WaitOp)
def _wait(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, mpi.WaitOp)
    _call(op, g, "wait", [g.v(op.req)])


@register(mpi.BarrierOp)
def _barrier(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, mpi.BarrierOp)
    call = f"{g.const(barrier, 'mpi_barrier')}({g.v(op.comm)})"
    rv = getattr(op, "retval", None)
    g.emit(call if rv is None else f"{g.define(rv)} = {call}")


def _reduction(op: Operation) -> str:
    kind = mpi._reduction_op_of(op.op)  # type: ignore[attr-defined]  # pyright: ignore[reportPrivateUsage]
    if kind is None or kind.name in ("MPI_OP_NULL", "MPI_MINLOC", "MPI_MAXLOC", "MPI_REPLACE"):
        raise compile_error(op, f"reduction {kind.name if kind else op.op} is not supported by the runtime")  # type: ignore[attr-defined]
    return kind.name


def reduce_scatter_block(comm: Any, send: Any, recv: Any, op: str) -> int:
    """MPI_Reduce_scatter_block straight into a contiguous receive buffer (the backend's
    own call goes through a temporary, a copy of the result too many)."""
    import numpy as np

    b = backend()
    if type(b).__name__ == "MPIP2P" and recv.flags.c_contiguous and not np.shares_memory(send, recv):
        comm.Reduce_scatter_block(np.ascontiguousarray(send), recv, op=b._op(op))
        return 0
    return b.reduce_scatter_block(comm, send, recv, op)


@register(mpi.AllReduceOp, mpi.ReduceScatterBlockOp)
def _reduce(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, mpi.AllReduceOp | mpi.ReduceScatterBlockOp)
    args = [g.v(op.comm), g.v(op.sendbuf), g.v(op.recvbuf), repr(_reduction(op))]
    if isinstance(op, mpi.AllReduceOp):
        _call(op, g, "allreduce", args)
        return
    call = f"{g.const(reduce_scatter_block, 'mpi_reduce_scatter_block')}({', '.join(args)})"
    rv = getattr(op, "retval", None)
    g.emit(call if rv is None else f"{g.define(rv)} = {call}")


@register(mpi.AllGatherOp)
def _allgather(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, mpi.AllGatherOp)
    _call(op, g, "allgather", [g.v(op.comm), g.v(op.sendbuf), g.v(op.recvbuf)])


@register(mpi.ErrorClassOp)
def _error_class(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, mpi.ErrorClassOp)
    g.bind(op.errclass, g.v(op.val))  # the runtime's codes are error classes already


@register(mpi.RetvalCheckOp)
def _retval_check(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, mpi.RetvalCheckOp)
    code = op.errclass.data.code
    g.assign(op, f"({g.v(op.val)} == {code})")


def _assert_failed(message: str) -> None:
    raise RuntimeExecutionError(f"runtime: assertion failed: {message}")


@register(cf.AssertOp)
def _cf_assert(op: Operation, g: FunctionBuilder) -> None:
    """`cf.assert`, which convert-shard-to-mpi emits around communicator sizes (here
    until the runtime has a cf kernel module)."""
    assert isinstance(op, cf.AssertOp)
    fail = g.const(_assert_failed, "assert_failed")
    g.emit(f"if not {g.v(op.arg)}: {fail}({op.msg.data!r})")
