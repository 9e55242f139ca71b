"""ShardingInterfaces of torch-mlir's TMTensor ops.

`tm_tensor.scatter`: the split follows the updates.

The loop nest is the update's: loop 0 runs over the updates (`n`), loops 1.. over the
update slice, aligned with the trailing dimensions of the original. Maps:

  updates   identity
  indices   (n, ...) -> (n, 0)          the index-depth dimension is never split
  original  per dimension: the slice loop it is aligned with, or the constant 0 where
  / result  `dimension_map` writes an index into it (where an update lands there depends
            on data, so such a dimension is never split)

Loop `n` is a reduction: updates from several ranks may meet at one position. With a
combiner that has a neutral element (`addf` for embedding gradients) splitting it is the
local scatter of the local updates into the original on the lead rank and into zeros
elsewhere, then `shard.all_reduce` over the split axes: the same partitioning linalg's
split reductions get (`interfaces.linalg`). An assignment body (`yield %update`, the
backward of cross-entropy's gather) has no neutral element, so `n` stays whole there.
A slice loop aligned with an indexed dimension is never split (the option drops it and
the operand is resharded at the boundary).

`tm_tensor.scan`: a loop per input dimension, the scan dimension a reduction; input and
output identity maps, the accumulator (and its result) the projection without the scan
dimension. Other dimensions split freely (each rank scans its own rows). A split scan
dimension, where the combiner has a neutral element (sum, product, max, min, bitwise),
is a prefix over shards: each rank scans its part (exclusive scans from the neutral
element), the per-shard totals (one slice per rank) are gathered over the split axes and
scanned exclusively (from the neutral element, or the initial accumulator for an
exclusive scan), and the entry at the rank's position is combined into every element
of its part. The data never moves; only the totals do. The accumulator result, if used,
is the last slice of the last rank, gathered the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, IndexType, IntegerAttr, ShapedType, SymbolRefAttr, TensorType
from xdsl.dialects.linalg.ops import YieldOp as LinalgYieldOp
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap

from shardc.dialects.linalg import GenericOp
from shardc.dialects.shard import AllGatherOp, GridShapeOp, ProcessMultiIndexOp, Sharding, ShardOp, grid_axes_attr
from shardc.dialects.tm_tensor import ScanOp, ScatterOp, YieldOp
from shardc.interfaces.linalg import SpelledOutSharding
from shardc.interfaces.linalg import neutral_element
from shardc.interfaces.sharding import (
    LoopShardingConflict,
    Partitioner,
    ShardingInfo,
    ShardingInterface,
    ShardingOption,
    default_get_sharding_option,
    grid_axis_assignment_for_loop_iterators,
    indexing_maps,
    loop_iterator_types,
    partition_trivially_shardable,
    register_sharding_interface,
)
from shardc.ir import diagnostics
from shardc.ir.linalg_build import fill_op, generic_op
from shardc.ir.op_build import tensor_empty
from shardc.ir.op_init import create_op
from shardc.ir.types import tensor_type


def _fixed_loops(op: ScatterOp) -> set[int]:
    """Slice loops aligned with a dimension that `dimension_map` indexes."""
    upd_t, orig_t = op.updates.type, op.original.type
    assert isinstance(upd_t, ShapedType) and isinstance(orig_t, ShapedType)
    slice_rank = len(upd_t.get_shape()) - 1
    offset = len(orig_t.get_shape()) - slice_rank
    return {1 + d - offset for d in op.dims if d >= offset}


class ScatterSharding(SpelledOutSharding):
    in_upstream = False  # tm_tensor is torch-mlir's

    def _loops_and_maps(self, op: Operation) -> tuple[list[IteratorType], list[AffineMap]]:
        assert isinstance(op, ScatterOp)
        upd_t, ind_t, orig_t = op.updates.type, op.indices.type, op.original.type
        assert isinstance(upd_t, ShapedType) and isinstance(ind_t, ShapedType) and isinstance(orig_t, ShapedType)
        loops = len(upd_t.get_shape())
        orig_rank = len(orig_t.get_shape())
        offset = orig_rank - (loops - 1)
        indexed = set(op.dims)
        zero = AffineConstantExpr(0)
        orig = tuple(
            AffineDimExpr(1 + d - offset) if d >= offset and d not in indexed else zero for d in range(orig_rank)
        )
        maps = [
            AffineMap.identity(loops),
            AffineMap(loops, 0, (AffineDimExpr(0), zero)),
            AffineMap(loops, 0, orig),
        ]
        return [IteratorType.REDUCTION, *([IteratorType.PARALLEL] * (loops - 1))], maps

    def get_sharding_option(
        self,
        op: Operation,
        operand_shardings: Sequence[ShardingInfo | None],
        result_shardings: Sequence[ShardingInfo | None],
    ) -> ShardingOption | None:
        option = super().get_sharding_option(op, operand_shardings, result_shardings)
        if option is None or option.empty:
            return option
        assert isinstance(op, ScatterOp)
        for loop in _fixed_loops(op):
            if loop < len(option.sharding_array):
                option.sharding_array[loop] = []
        if option.sharding_array and not super().allows_option(op, option):
            option.sharding_array[0] = []  # no neutral element: the updates stay whole
        return option

    def allows_option(self, op: Operation, option: ShardingOption) -> bool:
        assert isinstance(op, ScatterOp)
        if any(loop < len(option.sharding_array) and option.sharding_array[loop] for loop in _fixed_loops(op)):
            return False
        return super().allows_option(op, option)


# -- scan -------------------------------------------------------------------------------


def _scan_rank(op: ScanOp) -> int:
    t = op.input.type
    assert isinstance(t, ShapedType)
    return len(t.get_shape())


def splittable_combiner(op: ScanOp) -> Operation | None:
    """The combiner a split scan dimension needs (one with a neutral element), or None."""
    combiner = op.combiner()
    if combiner is None or neutral_element(combiner) is None or not op.results_:
        return None
    return combiner


class ScanSharding(ShardingInterface):
    in_upstream = False  # tm_tensor is torch-mlir's

    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        assert isinstance(op, ScanOp)
        loops = [IteratorType.PARALLEL] * _scan_rank(op)
        loops[op.dim] = IteratorType.REDUCTION
        return loops

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        assert isinstance(op, ScanOp)
        rank = _scan_rank(op)
        full = AffineMap.identity(rank)
        acc = AffineMap(rank, 0, tuple(AffineDimExpr(d) for d in range(rank) if d != op.dim))
        return [full, full, acc, *([full, acc][: len(op.results)])]

    def get_sharding_option(
        self,
        op: Operation,
        operand_shardings: Sequence[ShardingInfo | None],
        result_shardings: Sequence[ShardingInfo | None],
    ) -> ShardingOption | None:
        """Upstream's option; a scan dimension this op cannot split stays whole."""
        option = default_get_sharding_option(self, op, operand_shardings, result_shardings)
        if option is None or option.empty or self.allows_option(op, option):
            return option
        assert isinstance(op, ScanOp)
        option.sharding_array[op.dim] = []
        return option

    def allows_option(self, op: Operation, option: ShardingOption) -> bool:
        assert isinstance(op, ScanOp)
        split = op.dim < len(option.sharding_array) and bool(option.sharding_array[op.dim])
        return not split or splittable_combiner(op) is not None

    def partition(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        operand_shardings: Sequence[Sharding | None],
        result_shardings: Sequence[Sharding | None],
        partitioner: Partitioner,
    ) -> None:
        assert isinstance(op, ScanOp)
        maps = indexing_maps(self, op)[: len(op.operands)]
        try:
            assignment = grid_axis_assignment_for_loop_iterators(operand_shardings, loop_iterator_types(self, op), maps)
        except LoopShardingConflict as e:
            raise diagnostics.error(op, str(e)) from None
        axes = assignment[op.dim]
        if not axes:
            partition_trivially_shardable(op, operands, operand_shardings, result_shardings, partitioner)
            return
        combiner = splittable_combiner(op)
        if combiner is None:
            raise diagnostics.op_error(
                op, "cannot partition a scan along a split dimension: its region is not one combiner with a neutral element"
            )
        x_type = operands[0].type
        if not isinstance(x_type, TensorType) or x_type.get_shape()[op.dim] < 1:
            raise diagnostics.op_error(
                op, "cannot partition a scan along a split dimension of dynamic size (its shards' last slices are taken statically)"
            )
        grid = next(s.grid for s in operand_shardings if s is not None)
        _SplitScan(op, combiner, grid, list(axes), partitioner).emit(list(operands), result_shardings)


def _read(value: SSAValue) -> bool:
    """Whether anything but sharding annotations (of annotations) reads `value`."""
    return any(not isinstance(u.operation, ShardOp) or _read(u.operation.results[0]) for u in value.uses)


class _SplitScan:
    """The IR of a scan along a split dimension (see the module docstring)."""

    def __init__(self, op: ScanOp, combiner: Operation, grid: str, axes: list[int], partitioner: Partitioner):
        self.op, self.combiner, self.grid, self.axes, self.p = op, combiner, grid, axes, partitioner
        self.dim = op.dim
        self.element = op.input.type.get_element_type()  # pyright: ignore[reportAttributeAccessIssue]

    def add(self, new: Operation) -> Operation:
        new.location = self.op.location
        return self.p.insert(new)

    def emit(self, operands: list[SSAValue], result_shardings: Sequence[Sharding | None]) -> None:
        op, dim = self.op, self.dim
        x, out, acc = operands
        x_type = x.type
        assert isinstance(x_type, TensorType) and isinstance(acc.type, TensorType)
        shape = list(x_type.get_shape())
        neutral = self.filled(acc.type)
        # each rank's part: inclusive as it is, exclusive from the neutral element
        local = self.scan(x, out, acc if op.is_inclusive else neutral, op.is_inclusive)
        last_out = self.slice_at(local, shape[dim] - 1, keep_dim=True)
        total = last_out if op.is_inclusive else self.combine(last_out, self.slice_at(x, shape[dim] - 1, keep_dim=True))
        totals = self.gather(total)
        # the shards' totals before each rank, from the neutral element or the initial
        # accumulator of an exclusive scan
        before = self.scan(totals, self.empty(totals.type), neutral if op.is_inclusive else acc, False)
        offset = self.slice_at(before, self.group_index(), keep_dim=False)
        result = self.combine(offset, local, broadcast=True)
        self.p.mapping[op.results[0]] = result
        if _read(op.results[1]):
            ends = self.gather(self.slice_at(result, shape[dim] - 1, keep_dim=True))
            groups = ends.type.get_shape()[dim]  # pyright: ignore[reportAttributeAccessIssue]
            self.p.mapping[op.results[1]] = self.slice_at(ends, groups - 1, keep_dim=False)
        else:
            self.p.mapping[op.results[1]] = acc  # unused: never read

    # -- builders -------------------------------------------------------------------
    def empty(self, type_: Attribute) -> SSAValue:
        assert isinstance(type_, TensorType)
        return self.add(tensor_empty([], type_)).results[0]

    def filled(self, type_: Attribute) -> SSAValue:
        value = neutral_element(self.combiner)
        assert value is not None
        constant = self.add(arith.ConstantOp(value))
        return self.add(fill_op([constant.results[0]], [self.empty(type_)], [type_])).results[0]

    def scan(self, x: SSAValue, out: SSAValue, acc: SSAValue, inclusive: bool) -> SSAValue:
        new = ScanOp(x, out, acc, self.dim, inclusive, self.op.region.clone())
        new.attributes.update(self.op.attributes)
        return self.add(new).results[0]

    def slice_at(self, value: SSAValue, index: int | SSAValue, keep_dim: bool) -> SSAValue:
        """The slice at `index` of the scan dimension, with or without that dimension."""
        t = value.type
        assert isinstance(t, TensorType)
        shape = list(t.get_shape())
        offsets: list[int | SSAValue] = [0] * len(shape)
        offsets[self.dim] = index
        sizes = [*shape[: self.dim], 1, *shape[self.dim + 1 :]]
        kept = sizes if keep_dim else [*shape[: self.dim], *shape[self.dim + 1 :]]
        new = tensor.ExtractSliceOp(value, offsets, sizes, [1] * len(shape), tensor_type(self.element, kept))
        return self.add(new).results[0]

    def gather(self, value: SSAValue) -> SSAValue:
        """`value` (one slice) of every rank of the split axes, in their order."""
        t = value.type
        assert isinstance(t, TensorType)
        grid = self.p.grid(self.op, self.grid)
        shape = list(t.get_shape())
        count = 1
        for axis in self.axes:
            count *= grid.shape_tuple[axis]
        shape[self.dim] *= count
        new = AllGatherOp.create(
            operands=[value],
            result_types=[tensor_type(self.element, shape)],
            properties={
                "grid": SymbolRefAttr(self.grid),
                "grid_axes": grid_axes_attr(self.axes),
                "gather_axis": IntegerAttr(self.dim, IndexType()),
            },
        )
        return self.add(new).results[0]

    def group_index(self) -> SSAValue:
        """This rank's position among the split axes' ranks (row-major), as all_gather
        orders them."""
        index = self.add(ProcessMultiIndexOp(self.grid, self.axes)).results
        if len(self.axes) == 1:
            return index[0]
        sizes = self.add(GridShapeOp(self.grid, self.axes)).results
        linear = index[0]
        for i, size in zip(index[1:], sizes[1:]):
            linear = self.add(arith.MuliOp(linear, size)).results[0]
            linear = self.add(arith.AddiOp(linear, i)).results[0]
        return linear

    def combine(self, prev: SSAValue, cur: SSAValue, broadcast: bool = False) -> SSAValue:
        """The region applied elementwise to (prev, cur), a linalg.generic; `broadcast`:
        `prev` lacks the scan dimension and is repeated along it."""
        out_type = cur.type
        assert isinstance(out_type, TensorType)
        rank = len(out_type.get_shape())
        full = AffineMap.identity(rank)
        prev_map = AffineMap(rank, 0, tuple(AffineDimExpr(d) for d in range(rank) if d != self.dim)) if broadcast else full
        block = Block(arg_types=[self.element] * 3)
        old = self.op.region.block
        mapping: dict[SSAValue, SSAValue] = {old.args[0]: block.args[0], old.args[1]: block.args[1]}
        term = old.last_op
        assert isinstance(term, YieldOp)
        for inner in old.ops:
            if inner is term:
                break
            block.add_op(inner.clone(value_mapper=mapping))
        block.add_op(create_op(LinalgYieldOp, operands=(mapping.get(term.operands[0], term.operands[0]),)))
        new = generic_op(
            GenericOp,
            [prev, cur],
            [self.empty(out_type)],
            Region(block),
            ArrayAttr([AffineMapAttr(prev_map), AffineMapAttr(full), AffineMapAttr(full)]),
            ArrayAttr([IteratorTypeAttr(IteratorType.PARALLEL)] * rank),
            [out_type],
        )
        return self.add(new).results[0]


def register() -> None:
    register_sharding_interface(ScatterOp, ScatterSharding())
    register_sharding_interface(ScanOp, ScanSharding())
