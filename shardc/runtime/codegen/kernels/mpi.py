"""mpi: MLIR's mpi dialect on the current comm's MPI backend (`Comm.mpi_backend()`):
mpi4py under mpiexec, an MPI-like world over simulated ranks otherwise, so lowered
programs run in one process too.

`!mpi.comm` values are backend handles, `!mpi.request` backend requests, `!mpi.retval`
the MPI return code (MPI_SUCCESS, 0: a failing call raises instead of returning a code).
`mpi.init`/`mpi.finalize` are no-ops: mpi4py initialises MPI on import and finalizes it
at exit, and a program may run more than once in one process.

`mpi.allreduce`, `mpi.reduce_scatter_block` and `mpi.allgather` in a function's top-level
block may also be split into a start and a wait (`shardc.runtime.codegen.overlap`): by the
overlap schedule, whose start functions below run the nonblocking call when
`SHARDC_OVERLAP` says so, the blocking one otherwise; and, small ones in a block emitted
as written, held until their wait (`hold_or_run`).
"""

from __future__ import annotations

from xdsl.ir import Operation

from shardc.dialects import mpi
from shardc.runtime.codegen import overlap
from shardc.runtime.codegen.codegen_safe import py_literal
from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, register
from shardc.runtime.execute.kernels.mpi_run import backend, hold_or_run, reduce_scatter_block, start_allgather, start_allreduce, start_reduce_scatter_block  # noqa: F401  (the run time, re-exported)


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


@register(mpi.SendOp, mpi.RecvOp)
def _p2p(op: Operation, g: FunctionBuilder) -> None:
    """Blocking send/receive; the MPI backend buffers sends (MPIP2P.send), so upstream's
    send-before-receive exchanges cannot deadlock whatever the message size."""
    assert isinstance(op, mpi.SendOp | mpi.RecvOp)
    peer = op.dest if isinstance(op, mpi.SendOp) else op.source
    method = "send" if isinstance(op, mpi.SendOp) else "recv"
    _call(op, g, method, [g.v(op.comm), g.v(op.ref), g.v(peer), g.v(op.tag)])


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
    _call(op, g, "barrier", [g.v(op.comm)])


def _reduction(op: Operation) -> str:
    kind = mpi._reduction_op_of(op.op)  # type: ignore[attr-defined]  # pyright: ignore[reportPrivateUsage]
    if kind is None or kind.name in ("MPI_OP_NULL", "MPI_MINLOC", "MPI_MAXLOC", "MPI_REPLACE"):
        raise compile_error(op, f"reduction {kind.name if kind else op.op} is not supported by the runtime")  # type: ignore[attr-defined]
    return kind.name


@register(mpi.AllReduceOp, mpi.ReduceScatterBlockOp)
def _reduce(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, mpi.AllReduceOp | mpi.ReduceScatterBlockOp)
    args = [g.v(op.comm), g.v(op.sendbuf), g.v(op.recvbuf), py_literal(_reduction(op))]
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


# ---------------------------------------------------------------------------------------
# Nonblocking starts (the overlap schedule)
# ---------------------------------------------------------------------------------------


def _emit_start(op: Operation, g: FunctionBuilder, fn: object, args: list[str]):
    req = g.fresh("req")
    g.emit(f"{req} = {g.const(fn, getattr(fn, '__name__', 'mpi_start'))}({', '.join(args)})")
    _retval(op, g)  # a failure raises (at the start or the wait) instead of a code

    def emit_wait(g: FunctionBuilder) -> None:
        g.emit(f"{g.const(overlap.wait, 'overlap_wait')}({req})")

    return emit_wait


@overlap.register_start(mpi.AllReduceOp, mpi.ReduceScatterBlockOp)
def _start_reduce(op: Operation, g: FunctionBuilder):
    assert isinstance(op, mpi.AllReduceOp | mpi.ReduceScatterBlockOp)
    fn = start_allreduce if isinstance(op, mpi.AllReduceOp) else start_reduce_scatter_block
    return _emit_start(op, g, fn, [g.v(op.comm), g.v(op.sendbuf), g.v(op.recvbuf), py_literal(_reduction(op))])


@overlap.register_start(mpi.AllGatherOp, hoist=False)
def _start_allgather(op: Operation, g: FunctionBuilder):
    assert isinstance(op, mpi.AllGatherOp)
    return _emit_start(op, g, start_allgather, [g.v(op.comm), g.v(op.sendbuf), g.v(op.recvbuf)])


_HELD_KIND = {mpi.AllReduceOp: "allreduce", mpi.ReduceScatterBlockOp: "reduce_scatter_block", mpi.AllGatherOp: "allgather"}


@overlap.register_held(*_HELD_KIND, send=lambda op: op.sendbuf)  # type: ignore[attr-defined]
def _held_start(op: Operation, g: FunctionBuilder):
    assert isinstance(op, mpi.AllReduceOp | mpi.ReduceScatterBlockOp | mpi.AllGatherOp)
    args = [py_literal(_HELD_KIND[type(op)]), g.v(op.comm), g.v(op.sendbuf), g.v(op.recvbuf)]
    if not isinstance(op, mpi.AllGatherOp):
        args.append(py_literal(_reduction(op)))
    return _emit_start(op, g, hold_or_run, args)
