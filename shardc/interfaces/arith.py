"""Sharding of arith.constant: a tensor constant takes the sharding of its result
annotation (upstream's traversals never invent one); a scalar constant stays replicated.
The completion after the traversals may split only a splat (anything else would need
slicing the data per process): other tensor constants stay replicated there.

Partitioned, a splat tensor constant becomes the splat of its local shard type; a scalar
is cloned. Upstream gives up on other tensor constants (dense, `dense_resource`); we
clone them, and when split, slice each process's shard out of the whole value (the
resharding from replicated, `shard.all_slice`: no communication).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineMap

from shardc.dialects.shard import Sharding
from shardc.interfaces.sharding import (
    Partitioner,
    ShardingInfo,
    ShardingInterface,
    ShardingOption,
    clone_op,
    local_type,
    ranked_tensor_rank,
    register_sharding_interface,
)
from shardc.ir import diagnostics
from shardc.ir import dense


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

    def allows_option(self, op: Operation, option: ShardingOption) -> bool:
        value = op.properties.get("value") or op.attributes.get("value")
        splat = isinstance(value, DenseIntOrFPElementsAttr) and dense.is_splat(value)
        return splat or not any(option.sharding_array)

    def partition(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        operand_shardings: Sequence[Sharding | None],
        result_shardings: Sequence[Sharding | None],
        partitioner: Partitioner,
    ) -> None:
        assert isinstance(op, arith.ConstantOp)
        value = op.value
        (sharding,) = result_shardings
        if not isinstance(op.result.type, TensorType) or (
            sharding is None and not isinstance(value, DenseIntOrFPElementsAttr)
        ):
            partitioner.insert(clone_op(op, partitioner.mapping))
            return
        if sharding is None:
            raise diagnostics.op_error(
                op,
                "cannot partition a tensor constant whose result is not used by exactly "
                "one shard.shard",
            )
        if not isinstance(value, DenseIntOrFPElementsAttr) or not dense.is_splat(value):
            whole = partitioner.insert(clone_op(op, partitioner.mapping))
            if sharding.is_fully_replicated:
                return
            grid = partitioner.grid(op, sharding.grid)
            local = partitioner.reshard(
                op, Sharding(sharding.grid), sharding, op.result.type, grid.shape_tuple, whole.results[0], "a tensor constant"
            )
            partitioner.mapping[op.result] = local
            return
        grid = partitioner.grid(op, sharding.grid)
        new_type = local_type(op.result.type, grid, sharding, "result #0", op)
        assert isinstance(new_type, TensorType)
        splat = dense.splat_attr(new_type, next(iter(value.iter_values())))
        new = arith.ConstantOp(splat, new_type)
        new.location = op.location
        partitioner.insert(new)
        partitioner.mapping[op.result] = new.result


def register() -> None:
    register_sharding_interface(arith.ConstantOp, ConstantSharding())
