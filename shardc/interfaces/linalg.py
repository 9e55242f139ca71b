"""Sharding of linalg structured ops (generic and named), from their loop nest.

As upstream, every structured op gets the same model: iterator types and indexing maps
come from the op; the result maps are those of the destination-passing-style inits; only
ops whose result maps are projected permutations can be sharded. The reduction kind of
the reduction loops comes from the combiner in the body (`arith.addf` -> sum, ...).
linalg.reduce and linalg.broadcast are not structured ops in xDSL, so their loop nests
are spelled out here.
"""

from __future__ import annotations

from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.linalg.ops import BroadcastOp, ReduceOp
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Block, BlockArgument, Operation
from xdsl.ir.affine import AffineDimExpr, AffineMap

from shardc.interfaces.sharding import (
    ReductionKind,
    ShardingInterface,
    ranked_tensor_rank,
    register_sharding_interface,
)

_COMBINER_KINDS: dict[str, ReductionKind] = {
    "arith.addf": ReductionKind.SUM,
    "arith.mulf": ReductionKind.PRODUCT,
    "arith.maximumf": ReductionKind.MAX,
    "arith.minimumf": ReductionKind.MIN,
    "arith.addi": ReductionKind.SUM,
    "arith.ori": ReductionKind.BITWISE_OR,
    "arith.xori": ReductionKind.BITWISE_XOR,
    "arith.andi": ReductionKind.BITWISE_AND,
    "arith.maxui": ReductionKind.MAX,
    "arith.minui": ReductionKind.MIN,
    "arith.maxsi": ReductionKind.MAX,
    "arith.minsi": ReductionKind.MIN,
    "arith.muli": ReductionKind.PRODUCT,
}


def _body(op: Operation) -> Block | None:
    if not op.regions or not op.regions[0].blocks:
        return None
    return op.regions[0].blocks.first


def combiner_op(op: Operation, output: int = 0) -> Operation | None:
    """The single op that combines output block argument `output` with the yielded value
    (MLIR's `matchReduction`), or None."""
    body = _body(op)
    num_inits = len(_inits(op))
    if body is None or body.last_op is None or num_inits <= output:
        return None
    arg: BlockArgument = body.args[len(body.args) - num_inits + output]
    yielded = body.last_op.operands
    if output >= len(yielded):
        return None
    combiner = yielded[output].owner
    if not isinstance(combiner, Operation) or combiner.parent_block() is not body:
        return None
    if len(combiner.operands) != 2 or arg not in combiner.operands:
        return None
    if not arg.has_one_use():
        return None
    return combiner


def reduction_kind(op: Operation) -> ReductionKind:
    combiner = combiner_op(op)
    if combiner is None:
        return ReductionKind.GENERIC
    return _COMBINER_KINDS.get(combiner.name, ReductionKind.GENERIC)


def _inits(op: Operation):
    if isinstance(op, LinalgStructuredOperation):
        return op.outputs
    return (op.operands[-1],)


def _projection(num_dims: int, dims: list[int]) -> AffineMap:
    return AffineMap(num_dims, 0, tuple(AffineDimExpr(d) for d in dims))


class StructuredOpSharding(ShardingInterface):
    """Every linalg structured op: loops and maps from the op itself."""

    def _loops_and_maps(self, op: Operation) -> tuple[list[IteratorType], list[AffineMap]]:
        assert isinstance(op, LinalgStructuredOperation)
        maps = [m.data for m in op.get_indexing_maps()]
        loops = [t.data for t in op.get_iterator_types()]
        return loops, maps

    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        return self._loops_and_maps(op)[0]

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        _, maps = self._loops_and_maps(op)
        inits = _inits(op)
        first_init = len(op.operands) - len(inits)
        # Results are indexed as the destination-passing-style inits they update.
        return [*maps, *(maps[first_init + i] for i in range(len(op.results)))]

    def get_reduction_loop_iterator_kinds(self, op: Operation) -> list[ReductionKind]:
        count = sum(t == IteratorType.REDUCTION for t in self.get_loop_iterator_types(op))
        return [reduction_kind(op)] * count


class ReduceOpSharding(StructuredOpSharding):
    """linalg.reduce: a loop per input dimension, `dimensions` reduced."""

    def _loops_and_maps(self, op: Operation) -> tuple[list[IteratorType], list[AffineMap]]:
        assert isinstance(op, ReduceOp)
        rank = ranked_tensor_rank(op.input.type)
        if rank is None:
            shape = getattr(op.input.type, "get_shape", lambda: ())()
            rank = len(shape)
        reduced = set(op.dimensions.get_values())
        loops = [
            IteratorType.REDUCTION if d in reduced else IteratorType.PARALLEL
            for d in range(rank)
        ]
        kept = [d for d in range(rank) if d not in reduced]
        return loops, [AffineMap.identity(rank), _projection(rank, kept)]


class BroadcastOpSharding(StructuredOpSharding):
    """linalg.broadcast: a parallel loop per init dimension, `dimensions` added."""

    def _loops_and_maps(self, op: Operation) -> tuple[list[IteratorType], list[AffineMap]]:
        assert isinstance(op, BroadcastOp)
        shape = getattr(op.init.type, "get_shape", lambda: ())()
        rank = len(shape)
        added = set(op.dimensions.get_values())
        kept = [d for d in range(rank) if d not in added]
        return [IteratorType.PARALLEL] * rank, [_projection(rank, kept), AffineMap.identity(rank)]


def register() -> None:
    register_sharding_interface(LinalgStructuredOperation, StructuredOpSharding())
    register_sharding_interface(ReduceOp, ReduceOpSharding())
    register_sharding_interface(BroadcastOp, BroadcastOpSharding())
