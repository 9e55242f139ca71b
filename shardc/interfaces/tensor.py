"""Sharding of tensor.empty and tensor.splat: creators, one parallel loop per result
dimension and identity maps (the dynamic sizes / splat value are mapped like the result,
as upstream).

Partitioned, a creator makes its local shard directly. When the local shape has a dynamic
dimension the global one lacks (uneven shards, a dynamic grid), the size comes from
`shard.shard_shape` for this process (upstream's way).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import tensor
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineMap

from shardc.dialects.shard import (
    DYNAMIC,
    ProcessMultiIndexOp,
    Sharding,
    ShardShapeOp,
)
from shardc.interfaces.sharding import (
    Partitioner,
    ShardingInterface,
    clone_op,
    identity_maps,
    local_type,
    ranked_tensor_rank,
    register_sharding_interface,
)


class CreatorOpSharding(ShardingInterface):
    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        rank = ranked_tensor_rank(op.results[0].type)
        return [IteratorType.PARALLEL] * (rank or 0)

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        rank = ranked_tensor_rank(op.results[0].type)
        if rank is None:
            return []
        return identity_maps(rank, len(op.operands) + len(op.results))

    def partition(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        operand_shardings: Sequence[Sharding | None],
        result_shardings: Sequence[Sharding | None],
        partitioner: Partitioner,
    ) -> None:
        (sharding,) = result_shardings
        old = op.results[0].type
        assert isinstance(old, TensorType)
        new = old
        if old.get_shape() and sharding is not None:
            grid = partitioner.grid(op, sharding.grid)
            new = local_type(old, grid, sharding, "result #0", op)
        assert isinstance(new, TensorType)
        old_shape, new_shape = old.get_shape(), new.get_shape()
        if DYNAMIC not in new_shape:
            partitioner.insert(clone_op(op, partitioner.mapping, [new]))
            return
        assert sharding is not None
        # Sizes of dimensions that only the sharding makes dynamic come from
        # shard.shard_shape; dynamic global sizes stay the op's own operands.
        sizes = list(operands[1:] if isinstance(op, tensor.SplatOp) else operands)
        shape_op: ShardShapeOp | None = None
        dynamic: list[SSAValue] = []
        for dim, (before, after) in enumerate(zip(old_shape, new_shape)):
            if before != DYNAMIC and after == DYNAMIC:
                if shape_op is None:
                    sharding_op = partitioner.insert(sharding.to_op())
                    device = partitioner.insert(
                        ProcessMultiIndexOp(partitioner.grid(op, sharding.grid))
                    )
                    dims = [DYNAMIC if d == DYNAMIC else d for d in old_shape]
                    mixed = iter(sizes)
                    shape_op = partitioner.insert(
                        ShardShapeOp(
                            [next(mixed) if d == DYNAMIC else d for d in dims],
                            sharding_op.result,
                            list(device.results),
                        )
                    )
                    for new_op in (sharding_op, device, shape_op):
                        new_op.location = op.location
                dynamic.append(shape_op.results[dim])
            elif before == DYNAMIC:
                dynamic.append(sizes[len([d for d in old_shape[:dim] if d == DYNAMIC])])
        if isinstance(op, tensor.SplatOp):
            created: Operation = tensor.SplatOp(operands[0], dynamic, new)
        else:
            created = tensor.EmptyOp(dynamic, new)
        created.location = op.location
        partitioner.insert(created)
        partitioner.mapping[op.results[0]] = created.results[0]


def register() -> None:
    creator = CreatorOpSharding()
    register_sharding_interface(tensor.EmptyOp, creator)
    register_sharding_interface(tensor.SplatOp, creator)
