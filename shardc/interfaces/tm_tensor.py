"""ShardingInterface of `tm_tensor.scatter`: the split follows the updates.

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
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ShapedType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Operation
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap

from shardc.dialects.tm_tensor import ScatterOp
from shardc.interfaces.linalg import _SpelledOutSharding  # pyright: ignore[reportPrivateUsage]
from shardc.interfaces.sharding import ShardingInfo, ShardingOption, register_sharding_interface


def _fixed_loops(op: ScatterOp) -> set[int]:
    """Slice loops aligned with a dimension that `dimension_map` indexes."""
    upd_t, orig_t = op.updates.type, op.original.type
    assert isinstance(upd_t, ShapedType) and isinstance(orig_t, ShapedType)
    slice_rank = len(upd_t.get_shape()) - 1
    offset = len(orig_t.get_shape()) - slice_rank
    return {1 + d - offset for d in op.dims if d >= offset}


class ScatterSharding(_SpelledOutSharding):
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


def register() -> None:
    register_sharding_interface(ScatterOp, ScatterSharding())
