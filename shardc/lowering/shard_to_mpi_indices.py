"""Lowering of the process-index ops, shard_shape and update_halo.

Process indices come from `mpi.comm_rank` of MPI_COMM_WORLD, delinearized over the grid
shape (under a DLTI rank, `canonicalize` folds it, as in trunk). Neighbours along split axes
and halo exchanges follow upstream; neighbours handle a tensor dimension split over
several grid axes (upstream: one axis only) by stepping in the group's linear order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, TensorType, i32
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from shardc.dialects import mpi, shard
from shardc.lowering.shard_to_mpi_builder import (
    Emitter,
    Idx,
    constant_of,
    fail,
    grid_of,
    mixed,
    static_grid_shape,
)

HALO_TAG = 91
"""The MPI tag of halo messages (upstream's choice)."""


def _replace(rewriter: PatternRewriter, op: Operation, e: Emitter, values: Sequence[Idx]) -> None:
    rewriter.replace(op, [], [e.index(v) for v in values])


def lower_process_linear_index(op: shard.ProcessLinearIndexOp, rewriter: PatternRewriter) -> None:
    """`mpi.comm_rank` of MPI_COMM_WORLD, as trunk lowers it even under a DLTI rank:
    `canonicalize` folds the rank (mpi.comm_rank's pattern) and what depends on it, so
    the constants of a `shard_shape` reading the process index come out in the order
    trunk's canonicalizer gives them."""
    e = Emitter(rewriter, op)
    e.rank = None
    _replace(rewriter, op, e, [e.world_rank()])


def lower_process_multi_index(op: shard.ProcessMultiIndexOp, rewriter: PatternRewriter) -> None:
    """The rank delinearized over the grid shape, restricted to `axes` (all if empty)."""
    e = Emitter(rewriter, op)
    grid = grid_of(op, op.grid)
    multi = e.process_multi_index(grid)
    axes = op.axes.get_values() or tuple(range(grid.rank))
    _replace(rewriter, op, e, [multi[a] for a in axes])


def neighbors(
    e: Emitter, shape: Sequence[int], device: Sequence[Idx], axes: Sequence[int]
) -> tuple[Idx, Idx]:
    """World ranks of the previous and next process along `axes` (-1 at the borders):
    the position in the group of `axes` steps by one, other coordinates stay."""
    group = [shape[a] for a in axes]
    if len(axes) == 1:
        position: Idx = device[axes[0]]
    else:
        position = e.linearize_in_group([device[a] for a in axes], group)
    last = 1
    for s in group:
        last *= s
    last -= 1

    def rank_at(inner: Emitter, moved: Idx) -> Idx:
        index = list(device)
        if len(axes) == 1:
            index[axes[0]] = moved
        else:
            for a, coord in zip(axes, inner.delinearize(moved, group)):
                index[a] = coord
        return inner.linearize(index, shape)

    down = e.if_index(
        e.cmp("sle", position, 0), -1, lambda inner: rank_at(inner, inner.sub(position, 1))
    )
    up = e.if_index(
        e.cmp("sge", position, last), -1, lambda inner: rank_at(inner, inner.add(position, 1))
    )
    return down, up


def lower_neighbors(op: shard.NeighborsLinearIndicesOp, rewriter: PatternRewriter) -> None:
    e = Emitter(rewriter, op)
    grid = grid_of(op, op.grid)
    shape = static_grid_shape(op, grid)
    axes = op.split_axes.get_values()
    if not axes:
        raise fail(op, "Expected at least one split axis.")
    _replace(rewriter, op, e, list(neighbors(e, shape, list(op.device), axes)))


def lower_shard_shape(op: shard.ShardShapeOp, rewriter: PatternRewriter) -> None:
    """The local shape on `device`: from sharded_dims_offsets when given, otherwise an
    even split with the remainder on the trailing shards (upstream's rule), plus the
    halos of each split dimension. Upstream's lowering leaves halos out, but its own
    shard shapes (ShardOps.cpp `shardShape`, used by shard-partition) and the shard
    runtime count them: the local buffers a partitioned program holds include halos."""
    sharding = op.sharding.owner
    if not isinstance(sharding, shard.ShardingOp):
        raise fail(
            op,
            "Expected ShardingOp as defining op for sharding but found "
            + (sharding.name if isinstance(sharding, Operation) else "a block argument"),
        )
    e = Emitter(rewriter, op)
    grid = grid_of(sharding, sharding.grid)
    shape = static_grid_shape(op, grid)
    dims = mixed(op.dims, op.dims_dynamic)
    device = mixed(op.device, op.device_dynamic)
    split_axes = sharding.split_axes.as_tuple()
    offsets = mixed(sharding.static_sharded_dims_offsets, sharding.dynamic_sharded_dims_offsets)
    if offsets:
        local = _sizes_from_offsets(e, dims, device, split_axes, shape, offsets)
    else:
        local = _even_sizes(e, dims, device, split_axes, shape)
    halos = [_as_index(e, h) for h in mixed(sharding.static_halo_sizes, sharding.dynamic_halo_sizes)]
    if halos:
        split = 0
        for i in range(len(dims)):
            if i < len(split_axes) and split_axes[i]:
                local[i] = e.add(local[i], e.add(halos[2 * split], halos[2 * split + 1]))
                split += 1
    _replace(rewriter, op, e, local)


def _even_sizes(
    e: Emitter, dims: Sequence[Idx], device: Sequence[Idx], split_axes: Sequence[Sequence[int]], shape: Sequence[int]
) -> list[Idx]:
    """Each split dimension's size over its shards, the remainder on the trailing ones.
    The dims, then 0 and 1, are made values first, as trunk's ConvertShardShapeOp makes
    them (what `canonicalize` then folds comes out in trunk's order)."""
    shape_values = [e.index(d) for d in dims]
    e.index(0)
    e.index(1)
    local: list[Idx] = []
    for i, dim in enumerate(shape_values):
        axes = split_axes[i] if i < len(split_axes) else ()
        if not axes:
            local.append(dim)
            continue
        shards = 1
        for a in axes:
            shards *= shape[a]
        index = e.linearize_in_group([device[a] for a in axes], [shape[a] for a in axes])
        base = e.divsi(dim, shards)
        threshold = e.sub(shards, e.remsi(dim, shards))
        extra = e.select(e.cmp("sge", index, threshold), 1, 0)
        local.append(e.add(base, extra))
    return local


def _sizes_from_offsets(
    e: Emitter,
    dims: Sequence[Idx],
    device: Sequence[Idx],
    split_axes: Sequence[Sequence[int]],
    shape: Sequence[int],
    offsets: Sequence[Idx],
) -> list[Idx]:
    """`offsets[pos + i + 1] - offsets[pos + i]` for shard `i` of each split dimension,
    built as trunk's ConvertShardShapeOp builds it (the dims and device as values, one
    `tensor.from_elements` table of the offsets, then per dimension `arith.addi`,
    `tensor.extract`, `arith.addi`, `tensor.extract`, `arith.subi`), so that what
    `canonicalize` folds out of it under a DLTI rank is ordered as in trunk. Trunk reads
    one grid axis per dimension; several axes index the group's linear order."""
    shape_values = [e.index(d) for d in dims]
    device_values = [e.index(d) for d in device]
    elements = [e.index(_as_index(e, o)) for o in offsets]
    table = e.emit(
        tensor.FromElementsOp.create(
            operands=elements, result_types=[TensorType(IndexType(), [len(elements)])]
        )
    ).results[0]
    e.index(0)
    one = e.index(1)
    local: list[Idx] = []
    pos = 0
    for i, dim in enumerate(shape_values):
        axes = split_axes[i] if i < len(split_axes) else ()
        if not axes:
            local.append(dim)
            continue
        start = e.emit(arith.ConstantOp(IntegerAttr(pos, IndexType()))).results[0]
        shards = 1
        for a in axes:
            shards *= shape[a]
        if len(axes) == 1:
            index: Idx = device_values[axes[0]]
        else:
            index = e.linearize_in_group([device_values[a] for a in axes], [shape[a] for a in axes])
        at = e.emit(arith.AddiOp(start, e.index(index))).results[0]
        first = e.emit(tensor.ExtractOp(table, [at], IndexType())).results[0]
        after = e.emit(arith.AddiOp(at, one)).results[0]
        last = e.emit(tensor.ExtractOp(table, [after], IndexType())).results[0]
        local.append(e.emit(arith.SubiOp(last, first)).results[0])
        pos += shards + 1
    return local


def _as_index(e: Emitter, value: Idx) -> Idx:
    """Offsets are i64 values; shapes are index."""
    if isinstance(value, int) or isinstance(value.type, IndexType):
        return value
    known = constant_of(value)
    if known is not None:
        return known
    return e.emit(arith.IndexCastOp(value, IndexType())).results[0]


def lower_update_halo(op: shard.UpdateHaloOp, rewriter: PatternRewriter) -> None:
    """Exchange halos dimension by dimension, last split dimension first; each exchange
    covers the halos of the dimensions after it, so corners are filled too. Each side
    goes through a contiguous temporary: copy out, send, receive, copy in."""
    e = Emitter(rewriter, op)
    halos = [_as_index(e, h) for h in mixed(op.static_halo_sizes, op.halo_sizes)]
    if not halos:
        rewriter.replace(op, [], [op.destination])
        return
    grid = grid_of(op, op.grid)
    shape_g = static_grid_shape(op, grid)
    array = op.destination
    if isinstance(array.type, TensorType):
        array = e.to_buffer(array, read_only=False)
    t = array.type
    assert isinstance(t, MemRefType)
    shape = list(t.get_shape())
    if any(d < 0 for d in shape):
        raise fail(op, "Expected static shaped memref in contiguous row-major layout.")
    elem = t.get_element_type()
    split_axes = op.split_axes.as_tuple()
    split_dims = [d for d, axes in enumerate(split_axes) if axes]
    if 2 * len(split_dims) != len(halos):
        raise fail(op, "Expected two halo sizes per split dimension.")
    offsets: list[Idx] = [0] * len(shape)
    sizes: list[Idx] = list(shape)
    for k, d in enumerate(split_dims):
        offsets[d] = halos[2 * k]
        sizes[d] = e.sub(shape[d], e.add(halos[2 * k], halos[2 * k + 1]))
    tag = e.const(HALO_TAG, i32)
    device = e.process_multi_index(grid)
    for k in range(len(split_dims) - 1, -1, -1):
        d = split_dims[k]
        down, up = neighbors(e, shape_g, device, split_axes[d])
        ranks = (e.i32(down), e.i32(up))
        lo, hi = halos[2 * k], halos[2 * k + 1]
        recv_up = e.sub(shape[d], hi)
        send_up = e.sub(recv_up, lo)
        world = e.world()
        for upper in (False, True):
            size = hi if upper else lo
            exchange = _HaloSide(e, array, elem, offsets, sizes, d, size, world, tag)
            to, source = (ranks[0], ranks[1]) if upper else (ranks[1], ranks[0])
            send_at: Idx = lo if upper else send_up
            recv_at: Idx = recv_up if upper else 0
            e.when(e.cmp("sgt", size, 0), lambda inner: exchange.run(inner, to, source, send_at, recv_at))
        sizes[d] = shape[d]
        offsets[d] = 0
    result: SSAValue = array
    if isinstance(op.result.type, TensorType):
        result = e.to_tensor(array, writable=True)
    rewriter.replace(op, [], [result])


class _HaloSide:
    """One halo (lower or upper) of one dimension: the region shape and the exchange."""

    def __init__(self, e: Emitter, array: SSAValue, elem, offsets: list[Idx],  # type: ignore[no-untyped-def]
                 sizes: list[Idx], dim: int, size: Idx, world: SSAValue, tag: SSAValue):
        self.array, self.elem, self.dim, self.world, self.tag = array, elem, dim, world, tag
        self.offsets = list(offsets)
        self.sizes = list(sizes)
        self.sizes[dim] = size

    def run(self, e: Emitter, to: SSAValue, source: SSAValue, send_at: Idx, recv_at: Idx) -> None:
        if any(constant_of(s) is None for s in self.sizes):
            raise fail(self.array.owner if isinstance(self.array.owner, Operation) else None,  # type: ignore[arg-type]
                       "Expected static halo sizes.")
        sizes = [constant_of(s) for s in self.sizes]
        zero = e.const(0, i32)
        has_source = _nonnegative(e, source, zero)
        has_target = _nonnegative(e, to, zero)
        buffer = e.alloc(sizes, self.elem)  # type: ignore[arg-type]

        def send(inner: Emitter) -> None:
            view = inner.subview(self.array, self._at(send_at), sizes)  # type: ignore[arg-type]
            inner.copy(view, buffer)
            inner.emit(mpi.SendOp(buffer, self.tag, to, self.world))

        def recv(inner: Emitter) -> None:
            inner.emit(mpi.RecvOp(buffer, self.tag, source, self.world))
            view = inner.subview(self.array, self._at(recv_at), sizes)  # type: ignore[arg-type]
            inner.copy(buffer, view)

        e.when(has_target, send)
        e.when(has_source, recv)
        e.dealloc(buffer)

    def _at(self, offset: Idx) -> list[Idx]:
        at = list(self.offsets)
        at[self.dim] = offset
        return at


def _nonnegative(e: Emitter, rank: SSAValue, zero: SSAValue) -> bool | SSAValue:
    known = constant_of(rank)
    if known is not None:
        return known >= 0
    return e.emit(arith.CmpiOp(rank, zero, "sge")).results[0]


INDEX_PATTERNS: dict[type[Operation], Callable[..., None]] = {
    shard.ProcessLinearIndexOp: lower_process_linear_index,
    shard.ProcessMultiIndexOp: lower_process_multi_index,
    shard.NeighborsLinearIndicesOp: lower_neighbors,
    shard.ShardShapeOp: lower_shard_shape,
    shard.UpdateHaloOp: lower_update_halo,
}
