"""Lowering of the shard collectives to mpi ops on contiguous memrefs.

all_reduce, all_gather and reduce_scatter follow upstream's patterns. The mpi dialect
has no bcast/gather/scatter/reduce/alltoall, so those are built from what it has, with
their exact semantics: reduce is an allreduce, gather an allgather (results on non-root
processes are undefined, so computing them everywhere is valid). broadcast, scatter,
all_to_all and shift are point-to-point messages moving the bytes their MPI
counterparts move (upstream lowers none of them): the root sends to every process
(broadcast, scatter), a pairwise exchange (all_to_all), one send and one receive per
process (shift). Sends are mpi.isend, waited for after this process's receives, so
no order in which processes arrive can deadlock. send/recv are mpi.send/mpi.recv
within the group's communicator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod

from xdsl.dialects import arith, tensor
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.builtin import (
    DenseArrayBase,
    IndexType,
    IntegerType,
    MemRefType,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from shardc.dialects import memref, mpi, shard
from shardc.dialects.shard import ReductionKind
from shardc.ir.dense import splat_attr
from shardc.lowering.shard_to_mpi_builder import (
    Emitter,
    Idx,
    fail,
    grid_of,
    group_shape,
    group_size,
    is_contiguous,
    static_grid_shape,
)

SEND_RECV_TAG = 0
"""The MPI tag of lowered shard.send/shard.recv pairs."""
COLLECTIVE_TAG = 1
"""The MPI tag of the messages broadcast, scatter, all_to_all and shift are made of."""

_MPI_REDUCTION: dict[ReductionKind, mpi.ReductionOp] = {
    ReductionKind.SUM: mpi.ReductionOp.MPI_SUM,
    ReductionKind.AVERAGE: mpi.ReductionOp.MPI_SUM,  # then divided by the group size
    ReductionKind.PRODUCT: mpi.ReductionOp.MPI_PROD,
    ReductionKind.MIN: mpi.ReductionOp.MPI_MIN,
    ReductionKind.MAX: mpi.ReductionOp.MPI_MAX,
    ReductionKind.BITWISE_AND: mpi.ReductionOp.MPI_BAND,
    ReductionKind.BITWISE_OR: mpi.ReductionOp.MPI_BOR,
    ReductionKind.BITWISE_XOR: mpi.ReductionOp.MPI_BXOR,
}

_STATIC_CONTIGUOUS = "Expected static shaped memref in contiguous row-major layout."


# =========================================================================================
# Shared pieces
# =========================================================================================


class _Collective:
    """What every collective pattern starts from: emitter, grid shape, group axes."""

    def __init__(self, op: shard.CollectiveOp, rewriter: PatternRewriter):
        self.op = op
        self.e = Emitter(rewriter, op)
        self.grid = grid_of(op, op.grid)
        self.shape = static_grid_shape(op, self.grid)
        self.axes = list(op.grid_axes_tuple)
        self.size = group_size(self.shape, self.axes)

    def comm(self, axes: Sequence[int] | None = None) -> SSAValue:
        return self.e.communicator(self.grid, self.shape, self.axes if axes is None else axes)

    def my_index(self, axes: Sequence[int] | None = None) -> Idx:
        axes = self.axes if axes is None else axes
        return self.e.linear_index_in_group(self.grid, self.shape, axes)

    def static_type(self, value: SSAValue) -> tuple[tuple[int, ...], Attribute]:
        t = value.type
        if not isinstance(t, TensorType | MemRefType) or any(d < 0 for d in t.get_shape()):
            raise fail(self.op, _STATIC_CONTIGUOUS)
        return tuple(t.get_shape()), t.get_element_type()

    def finish(self, rewriter: PatternRewriter, buffer: SSAValue) -> None:
        """Replace the op by `buffer`, as a tensor when its result is one."""
        result = buffer
        if isinstance(self.op.results[0].type, TensorType) and isinstance(
            buffer.type, MemRefType
        ):
            result = self.e.to_tensor(buffer)
        elif isinstance(self.op.results[0].type, MemRefType) and isinstance(
            buffer.type, TensorType
        ):
            result = self.e.to_buffer(buffer, read_only=False)
        rewriter.replace(self.op, [], [result])

    def root_index(self, root: DenseArrayBase, dynamic: Sequence[SSAValue]) -> Idx:
        values = iter(dynamic)
        index = [next(values) if r < 0 else r for r in root.get_values()]
        return self.e.linearize_in_group(index, group_shape(self.shape, self.axes))


def _static_shape(value: SSAValue) -> tuple[int, ...] | None:
    """The shape of a tensor or memref value when every size is static."""
    t = value.type
    if not isinstance(t, TensorType | MemRefType) or any(d < 0 for d in t.get_shape()):
        return None
    return tuple(t.get_shape())


def _check_kind(op: Operation, kind: ReductionKind) -> mpi.ReductionOp:
    if kind not in _MPI_REDUCTION:
        raise fail(
            op,
            f"Reduction kind '{kind.value}' cannot be lowered to MPI: it has no MPI "
            "predefined operation.",
        )
    return _MPI_REDUCTION[kind]


def _divide(e: Emitter, buffer: SSAValue, by: int) -> SSAValue:
    """`buffer / by` element-wise, as a tensor (the average of a summed reduction)."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    elem = t.get_element_type()
    value = e.to_tensor(buffer)
    ttype = TensorType(elem, t.get_shape())
    if isinstance(elem, IntegerType | IndexType):
        splat = splat_attr(ttype, by)
        divisor = e.emit(arith.ConstantOp(splat)).results[0]
        return e.emit(arith.DivSIOp(value, divisor)).results[0]
    splat = splat_attr(ttype, float(by))
    divisor = e.emit(arith.ConstantOp(splat)).results[0]
    return e.emit(arith.DivfOp(value, divisor)).results[0]


def _reassociation(groups: Sequence[Sequence[int]]) -> Attribute:
    return memref.reassociation_attr(groups)


def _move_first_to(e: Emitter, value: SSAValue, axis: int) -> SSAValue:
    """Transpose a tensor `[n, d0, ..., dk]` to `[d0, .., d(axis-1), n, d(axis) ...]` and
    collapse `n` into the next dim: what follows an allgather along a non-leading axis."""
    t = value.type
    assert isinstance(t, TensorType)
    shape = list(t.get_shape())
    elem = t.get_element_type()
    perm = list(range(1, axis + 1)) + [0] + list(range(axis + 1, len(shape)))
    permuted = [shape[p] for p in perm]
    init = e.emit(tensor.EmptyOp([], TensorType(elem, permuted))).results[0]
    moved = e.emit(
        linalg.TransposeOp(value, init, DenseArrayBase.from_list(i64, perm))
    ).results[0]
    groups = [[i] for i in range(axis)] + [[axis, axis + 1]]
    groups += [[i] for i in range(axis + 2, len(permuted))]
    out_shape = permuted[:axis] + [permuted[axis] * permuted[axis + 1]] + permuted[axis + 2 :]
    collapse = tensor.CollapseShapeOp.create(
        operands=[moved],
        result_types=[TensorType(elem, out_shape)],
        properties={"reassociation": _reassociation(groups)},
    )
    return e.emit(collapse).results[0]


def _collapse_leading(e: Emitter, buffer: SSAValue) -> SSAValue:
    """memref `[n, d0, ...]` -> `[n * d0, ...]`."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    shape = list(t.get_shape())
    groups = [[0, 1]] + [[i] for i in range(2, len(shape))]
    op = memref.CollapseShapeOp.create(
        operands=[buffer],
        result_types=[MemRefType(t.get_element_type(), [shape[0] * shape[1], *shape[2:]])],
        properties={"reassociation": _reassociation(groups)},
    )
    return e.emit(op).results[0]


def _gathered_along(c: _Collective, gathered: SSAValue, axis: int) -> SSAValue:
    """Concatenate the gathered `[n, ...]` buffer along `axis` (memref or tensor)."""
    if axis == 0:
        return _collapse_leading(c.e, gathered)
    return _move_first_to(c.e, c.e.to_tensor(gathered), axis)


# =========================================================================================
# Patterns, one per op kind
# =========================================================================================


def lower_all_reduce(op: shard.AllReduceOp | shard.ReduceOp, rewriter: PatternRewriter) -> None:
    """Copy into a fresh buffer of the result type, then allreduce in place."""
    c = _Collective(op, rewriter)
    kind = ReductionKind(op.reduction.data)
    reduction = _check_kind(op, kind)
    source = c.e.as_memref(op.input)
    c.static_type(source)
    out_shape, out_elem = c.static_type(op.result)
    buffer = c.e.alloc(list(out_shape), out_elem)
    c.e.linalg_copy(source, buffer)
    comm = c.comm()
    c.e.emit(mpi.AllReduceOp(buffer, buffer, reduction, comm))
    if kind is ReductionKind.AVERAGE:
        c.finish(rewriter, _divide(c.e, buffer, c.size))
        return
    c.finish(rewriter, buffer)


def _axis_factor(
    op: Operation, piece: Sequence[int], whole: Sequence[int], axis: int, what: str, names: tuple[str, str]
) -> int:
    """How many `piece`s make `whole` along `axis` (a gather or scatter axis), the other
    dims being equal; `names` say which of input/result is the piece and the whole."""
    if any(i != o for d, (i, o) in enumerate(zip(piece, whole)) if d != axis):
        raise fail(op, f"Result and input shapes must match along non-{what} axes.")
    small, big = names
    if piece[axis] == 0:
        raise fail(op, f"{small.capitalize()} size along the {what} axis must be non-zero.")
    if whole[axis] % piece[axis]:
        raise fail(
            op,
            f"{big.capitalize()} size along the {what} axis must be an exact multiple of the {small} "
            f"size along the {what} axis.",
        )
    return whole[axis] // piece[axis]


def lower_all_gather(op: shard.AllGatherOp | shard.GatherOp, rewriter: PatternRewriter) -> None:
    """mpi.allgather stacks the buffers on a new leading axis; move it to the gather
    axis and merge. shard.gather computes the root's result on every process."""
    c = _Collective(op, rewriter)
    axis = op.gather_axis.value.data
    in_shape, out_shape = _static_shape(op.input), _static_shape(op.result)
    if in_shape is None or out_shape is None:
        raise fail(op, "Input/result must be statically shaped memrefs in contiguous row-major layout.")
    n = _axis_factor(op, in_shape, out_shape, axis, "gather", ("input", "result"))
    if n == 1:
        rewriter.replace(op, [], [op.input])
        return
    source = c.e.contiguous(op, op.input)
    comm = c.comm()
    _assert_comm_size(c.e, comm, n)
    gathered = c.e.alloc([n, *in_shape], c.static_type(source)[1])
    c.e.emit(mpi.AllGatherOp(source, gathered, comm))
    c.finish(rewriter, _gathered_along(c, gathered, axis))


def _assert_comm_size(e: Emitter, comm: SSAValue, n: int) -> None:
    from xdsl.dialects import cf  # here: a lowering without an all_gather never loads it

    size = e.emit(mpi.CommSizeOp(comm)).results[0]
    size = e.emit(arith.IndexCastOp(size, IndexType())).results[0]
    ok = e.emit(arith.CmpiOp(size, e.index(n), "eq")).results[0]
    e.emit(
        cf.AssertOp(
            ok,
            "Expected number of ranks in the communicator to match the output size along "
            "the gather axis divided by the input size along the gather axis.",
        )
    )


def lower_reduce_scatter(op: shard.ReduceScatterOp, rewriter: PatternRewriter) -> None:
    """mpi.reduce_scatter_block scatters along the leading axis: for another scatter
    axis, split it in (ranks, part) and bring the ranks axis to the front first."""
    c = _Collective(op, rewriter)
    axis = op.scatter_dim.value.data
    reduction = _check_kind(op, ReductionKind(op.reduction.data))
    out_shape = _static_shape(op.result)
    if out_shape is None:
        raise fail(op, "Result must be a statically shaped memref in contiguous row-major layout.")
    in_shape = _static_shape(op.input)
    if in_shape is None:
        raise fail(op, "Input must be a statically shaped memref in contiguous row-major layout.")
    elem = op.result.type.get_element_type()  # pyright: ignore[reportAttributeAccessIssue]
    n = _axis_factor(op, out_shape, in_shape, axis, "scatter", ("output", "input"))
    if n != c.size:
        raise fail(
            op,
            f"Expected the scatter factor ({n}) to match the number of devices along "
            f"grid_axes ({c.size}).",
        )
    comm = c.comm()
    if axis == 0:
        source = c.e.contiguous(op, op.input)
    else:
        source = _ranks_first(c.e, op.input, axis, n)
    output = c.e.alloc(list(out_shape), elem)
    c.e.emit(mpi.ReduceScatterBlockOp(source, output, reduction, comm))
    if axis != 0 and isinstance(op.result.type, MemRefType):
        c.e.dealloc(source)  # a tensor result leaves it to a later pass, as upstream does
    c.finish(rewriter, output)


def _ranks_first(e: Emitter, value: SSAValue, axis: int, n: int) -> SSAValue:
    """A fresh buffer `[n, d0, .., d(axis)/n, ...]` holding `value`, the ranks axis
    first: expand, transpose, and copy the transpose into a `memref.alloc`
    (`linalg.copy`), upstream's exact form. shardc's pipelines and the runtime drop
    that copy again (`shardc.passes.forward_send_copies`): MPI only reads its send
    buffer, so the transpose's own can be sent, a pass over each such ZeRO gradient
    saved."""
    if isinstance(value.type, MemRefType):
        value = e.to_tensor(value)
    t = value.type
    assert isinstance(t, TensorType)
    shape, elem = list(t.get_shape()), t.get_element_type()
    expanded = shape[:axis] + [n, shape[axis] // n] + shape[axis + 1 :]
    groups = [[i] for i in range(axis)] + [[axis, axis + 1]]
    groups += [[i + 1] for i in range(axis + 1, len(shape))]
    expand = tensor.ExpandShapeOp.create(
        operands=[value],
        result_types=[TensorType(elem, expanded)],
        properties={
            "reassociation": _reassociation(groups),
            "static_output_shape": DenseArrayBase.from_list(i64, expanded),
        },
    )
    value = e.emit(expand).results[0]
    perm = [axis] + [i for i in range(len(expanded)) if i != axis]
    permuted = [expanded[p] for p in perm]
    init = e.emit(tensor.EmptyOp([], TensorType(elem, permuted))).results[0]
    value = e.emit(linalg.TransposeOp(value, init, DenseArrayBase.from_list(i64, perm))).results[0]
    transposed = e.to_buffer(value)
    buffer = e.alloc(permuted, elem)
    e.linalg_copy(transposed, buffer)
    return buffer


def _leading_contiguous(t: Attribute, axis: int) -> bool:
    """Whether every part of a buffer along `axis` is contiguous: the buffer is, and the
    dims before `axis` are all of size 1."""
    return isinstance(t, MemRefType) and is_contiguous(t) and prod(t.get_shape()[:axis]) == 1


def _part(e: Emitter, buffer: SSAValue, shape: Sequence[int], axis: int, index: Idx,
          size: int) -> SSAValue:
    """The view of part `index` (`size` long along `axis`) of `buffer`."""
    offsets: list[Idx] = [0] * len(shape)
    offsets[axis] = e.mul(index, size)
    sizes = list(shape)
    sizes[axis] = size
    return e.subview(buffer, offsets, sizes)


def _slot(e: Emitter, buffer: SSAValue, shape: Sequence[int], index: Idx) -> SSAValue:
    """Entry `index` of a `[n, *shape]` buffer, as a contiguous `shape` view."""
    return e.subview(buffer, [index] + [0] * len(shape), [1, *shape], drop_leading=1)


def _isend(e: Emitter, buffer: SSAValue, peer: Idx, comm: SSAValue) -> SSAValue:
    tag = e.const(COLLECTIVE_TAG, i32)
    return e.emit(mpi.ISendOp(buffer, tag, e.i32(peer), comm)).results[-1]


def _recv(e: Emitter, buffer: SSAValue, peer: Idx, comm: SSAValue) -> None:
    tag = e.const(COLLECTIVE_TAG, i32)
    e.emit(mpi.RecvOp(buffer, tag, e.i32(peer), comm))


def _wait(e: Emitter, request: SSAValue) -> None:
    e.emit(mpi.WaitOp(request))


def _peer(e: Emitter, index: Idx, step: int, n: int) -> Idx:
    """`(index + step) mod n` for 0 <= step < n."""
    return e.remsi(e.add(index, step), n)


def lower_broadcast(op: shard.BroadcastOp, rewriter: PatternRewriter) -> None:
    """The root sends its buffer to every other process of the group (mpi.isend), which
    receives it (mpi.recv); the root's result is a copy of its input."""
    c = _Collective(op, rewriter)
    shape, elem = c.static_type(op.input)
    root = c.root_index(op.root, op.root_dynamic)
    mine = c.my_index()
    comm = c.comm()
    out = c.e.alloc(list(shape), elem)
    n = c.size

    def at_root(e: Emitter) -> None:
        source = e.contiguous(op, op.input)
        requests = [_isend(e, source, _peer(e, root, t, n), comm) for t in range(1, n)]
        e.copy(source, out)
        for request in requests:
            _wait(e, request)

    c.e.branch(c.e.cmp("eq", mine, root), at_root, lambda e: _recv(e, out, root, comm))
    c.finish(rewriter, out)


def lower_scatter(op: shard.ScatterOp, rewriter: PatternRewriter) -> None:
    """The root sends part k (along scatter_dim) of its buffer to process k of the
    group and keeps its own part; the others receive theirs."""
    c = _Collective(op, rewriter)
    axis = op.scatter_dim.value.data
    in_shape, elem = c.static_type(op.input)
    out_shape, _ = c.static_type(op.result)
    n = c.size
    if in_shape[axis] != out_shape[axis] * n:
        raise fail(op, "Input size along the scatter axis must be the result size times the group size.")
    root = c.root_index(op.root, op.root_dynamic)
    mine = c.my_index()
    comm = c.comm()
    out = c.e.alloc(list(out_shape), elem)
    size = out_shape[axis]

    def at_root(e: Emitter) -> None:
        source = e.as_memref(op.input)
        contiguous = _leading_contiguous(source.type, axis)
        requests: list[SSAValue] = []
        for t in range(1, n):
            dest = _peer(e, root, t, n)
            part = _part(e, source, in_shape, axis, dest, size)
            if not contiguous:
                staged = e.alloc(list(out_shape), elem)
                e.copy(part, staged)
                part = staged
            requests.append(_isend(e, part, dest, comm))
        e.copy(_part(e, source, in_shape, axis, root, size), out)
        for request in requests:
            _wait(e, request)

    c.e.branch(c.e.cmp("eq", mine, root), at_root, lambda e: _recv(e, out, root, comm))
    c.finish(rewriter, out)


def lower_all_to_all(op: shard.AllToAllOp, rewriter: PatternRewriter) -> None:
    """Pairwise exchange, the bytes of MPI_Alltoall: at step t (1 <= t < n) process i
    sends its part (i + t) mod n (along split_axis) there and receives part i of process
    (i - t) mod n, straight into that process's place along concat_axis of the result.
    All sends are posted first (mpi.isend), then the receives (mpi.recv), then the
    sends are waited for, so no schedule of the processes can deadlock. Parts that are
    not contiguous (dims of size > 1 before the axis) go through one staging buffer."""
    c = _Collective(op, rewriter)
    e = c.e
    split = op.split_axis.value.data
    concat = op.concat_axis.value.data
    in_shape, elem = c.static_type(op.input)
    out_shape, _ = c.static_type(op.result)
    n = c.size
    if in_shape[split] % n:
        raise fail(op, f"Input size along the split axis must be a multiple of the group size ({n}).")
    part = list(in_shape)
    part[split] //= n
    mine = c.my_index()
    comm = c.comm()
    source = e.as_memref(op.input)

    def own_part(k: Idx) -> SSAValue:
        return _part(e, source, in_shape, split, k, part[split])

    send_part = own_part
    if not _leading_contiguous(source.type, split):
        staged = e.alloc([n, *part], elem)
        for k in range(n):
            e.copy(own_part(k), _slot(e, staged, part, k))
        send_part = lambda k: _slot(e, staged, part, k)  # noqa: E731

    gathered = None
    if prod(out_shape[:concat]) == 1:  # each process's part is a contiguous run of the result
        output = e.alloc(list(out_shape), elem)
        recv_part = lambda k: _part(e, output, out_shape, concat, k, part[concat])  # noqa: E731
    else:
        gathered = e.alloc([n, *part], elem)
        recv_part = lambda k: _slot(e, gathered, part, k)  # noqa: E731

    requests: list[SSAValue] = []
    for t in range(1, n):
        dest = _peer(e, mine, t, n)
        requests.append(_isend(e, send_part(dest), dest, comm))
    e.copy(own_part(mine), recv_part(mine))
    for t in range(1, n):
        src = _peer(e, mine, n - t, n)
        _recv(e, recv_part(src), src, comm)
    for request in requests:
        _wait(e, request)
    c.finish(rewriter, output if gathered is None else _gathered_along(c, gathered, concat))


def lower_shift(op: shard.ShiftOp, rewriter: PatternRewriter) -> None:
    """Along shift_axis, process c sends its buffer to c + offset and receives that of
    c - offset (modulo the axis size with rotate): one mpi.isend and one mpi.recv per
    process. Without rotate, a process with no destination only receives, and one with
    no source keeps its own buffer (its result is undefined)."""
    c = _Collective(op, rewriter)
    axis = op.shift_axis.value.data
    offset = op.offset.value.data
    n = c.shape[axis]
    shape, elem = c.static_type(op.input)
    coord = c.e.process_multi_index(c.grid)[axis]
    comm = c.comm([axis])  # ranks in it are the coordinates along the axis
    source = c.e.contiguous(op, op.input)
    out = c.e.alloc(list(shape), elem)

    def exchange(e: Emitter, dest: Idx, src: Idx, has_src: bool | SSAValue) -> None:
        request = _isend(e, source, dest, comm)
        e.branch(has_src, lambda r: _recv(r, out, src, comm), lambda r: r.copy(source, out))
        _wait(e, request)

    if op.rotate is not None:
        if offset % n == 0:
            c.e.copy(source, out)
        else:
            dest = _peer(c.e, coord, offset % n, n)
            exchange(c.e, dest, _peer(c.e, coord, (-offset) % n, n), True)
    else:
        dest, src = c.e.add(coord, offset), c.e.sub(coord, offset)
        has_src = _in_range(c.e, src, n)
        c.e.branch(
            _in_range(c.e, dest, n),
            lambda e: exchange(e, dest, src, has_src),
            lambda e: e.branch(has_src, lambda r: _recv(r, out, src, comm), lambda r: r.copy(source, out)),
        )
    c.finish(rewriter, out)


def _in_range(e: Emitter, index: Idx, n: int) -> bool | SSAValue:
    """`0 <= index < n`."""
    return _and(e, e.cmp("sge", index, 0), e.cmp("slt", index, n))


def _and(e: Emitter, a: bool | SSAValue, b: bool | SSAValue) -> bool | SSAValue:
    if isinstance(a, bool):
        return b if a else False
    if isinstance(b, bool):
        return a if b else False
    return e.emit(arith.AndIOp(a, b)).results[0]


def lower_send(op: shard.SendOp, rewriter: PatternRewriter) -> None:
    """mpi.send to the destination's rank in the group; the result is the input."""
    c = _Collective(op, rewriter)
    dest = c.root_index(op.destination, op.destination_dynamic)
    buffer = c.e.contiguous(op, op.input)
    comm = c.comm()
    tag = c.e.const(SEND_RECV_TAG, i32)
    c.e.emit(mpi.SendOp(buffer, tag, c.e.i32(dest), comm))
    rewriter.replace(op, [], [op.input])


def lower_recv(op: shard.RecvOp, rewriter: PatternRewriter) -> None:
    """mpi.recv from the source's rank in the group into a fresh buffer."""
    c = _Collective(op, rewriter)
    if op.source is None:
        raise fail(
            op,
            "shard.recv without a source cannot be lowered: the mpi dialect has no "
            "MPI_ANY_SOURCE.",
        )
    source = c.root_index(op.source, op.source_dynamic)
    shape, elem = c.static_type(op.result)
    buffer = c.e.alloc(list(shape), elem)
    comm = c.comm()
    tag = c.e.const(SEND_RECV_TAG, i32)
    c.e.emit(mpi.RecvOp(buffer, tag, c.e.i32(source), comm))
    c.finish(rewriter, buffer)


COLLECTIVE_PATTERNS: dict[type[Operation], Callable[..., None]] = {
    shard.AllReduceOp: lower_all_reduce,
    shard.ReduceOp: lower_all_reduce,
    shard.AllGatherOp: lower_all_gather,
    shard.GatherOp: lower_all_gather,
    shard.ReduceScatterOp: lower_reduce_scatter,
    shard.BroadcastOp: lower_broadcast,
    shard.ScatterOp: lower_scatter,
    shard.AllToAllOp: lower_all_to_all,
    shard.ShiftOp: lower_shift,
    shard.SendOp: lower_send,
    shard.RecvOp: lower_recv,
}

