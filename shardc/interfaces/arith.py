"""Sharding of arith.constant: a tensor constant takes the sharding of its result
annotation (propagation never invents one); a scalar constant stays replicated."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Operation
from xdsl.ir.affine import AffineMap

from shardc.interfaces.sharding import (
    ShardingInfo,
    ShardingInterface,
    ShardingOption,
    ranked_tensor_rank,
    register_sharding_interface,
)


class ConstantSharding(ShardingInterface):
    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        return [IteratorType.PARALLEL] * (ranked_tensor_rank(op.results[0].type) or 0)

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        rank = ranked_tensor_rank(op.results[0].type)
        return [] if rank is None else [AffineMap.identity(rank)]

    def get_sharding_option(
        self,
        op: Operation,
        operand_shardings: Sequence[ShardingInfo | None],
        result_shardings: Sequence[ShardingInfo | None],
    ) -> ShardingOption | None:
        (result,) = result_shardings
        if result is None:
            return None
        if ranked_tensor_rank(op.results[0].type) is not None:
            return ShardingOption([list(axes) for axes in result.split_axes], result.grid)
        return ShardingOption([], result.grid)


def register() -> None:
    register_sharding_interface(arith.ConstantOp, ConstantSharding())
