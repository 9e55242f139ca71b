"""Sharding of tensor.empty and tensor.splat: creators, one parallel loop per result
dimension and identity maps (the dynamic sizes / splat value are mapped like the result,
as upstream)."""

from __future__ import annotations

from xdsl.dialects import tensor
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Operation
from xdsl.ir.affine import AffineMap

from shardc.interfaces.sharding import (
    ShardingInterface,
    identity_maps,
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


def register() -> None:
    creator = CreatorOpSharding()
    register_sharding_interface(tensor.EmptyOp, creator)
    register_sharding_interface(tensor.SplatOp, creator)
