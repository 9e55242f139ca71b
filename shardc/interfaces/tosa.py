"""Sharding of tosa ops: the elementwise ops, tosa.negate and tosa.matmul.

Registered by op name: the tosa op classes are shardc overlays of xDSL's dialect, and a
name stays valid whichever class implements the op. Elementwise ops use identity maps of
operand 0's rank for every operand and result, as upstream (a broadcast dimension of size
one is mapped like any other). Elementwise ops and tosa.negate partition to the same op on
the local shards; tosa.matmul has no partitioning upstream, so it must be fully
replicated.
"""

from __future__ import annotations

from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Operation
from xdsl.ir.affine import AffineDimExpr, AffineMap

from shardc.interfaces.sharding import (
    ElementwiseShardingInterface,
    ReductionKind,
    ShardingInterface,
    ranked_tensor_rank,
    register_sharding_interface,
)

ELEMENTWISE_OPS = (
    "clamp", "sigmoid", "tanh", "add", "arithmetic_right_shift", "bitwise_and",
    "bitwise_or", "bitwise_xor", "int_div", "logical_and", "logical_left_shift",
    "logical_right_shift", "logical_or", "logical_xor", "maximum", "minimum", "mul",
    "pow", "sub", "abs", "bitwise_not", "ceil", "clz", "exp", "floor", "log",
    "logical_not", "reciprocal", "rsqrt", "select", "equal", "greater", "greater_equal",
)  # fmt: skip


def _map(num_dims: int, dims: tuple[int, ...]) -> AffineMap:
    return AffineMap(num_dims, 0, tuple(AffineDimExpr(d) for d in dims))


class NegateSharding(ElementwiseShardingInterface):
    """tosa.negate: elementwise on input1; the zero-point tensors map to no loop."""

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        rank = ranked_tensor_rank(op.operands[0].type)
        if rank is None:
            return []
        none = AffineMap(0, 0, ())
        return [AffineMap.identity(rank), none, none, AffineMap.identity(rank)]


class MatMulSharding(ShardingInterface):
    """tosa.matmul `[N,H,C] x [N,C,W] -> [N,H,W]`: loops (n, h, w, c), c a sum reduction;
    the zero points map to no loop."""

    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        rank = ranked_tensor_rank(op.results[0].type)
        if rank is None:
            return []
        return [IteratorType.PARALLEL] * rank + [IteratorType.REDUCTION]

    def get_reduction_loop_iterator_kinds(self, op: Operation) -> list[ReductionKind]:
        return [ReductionKind.SUM]

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        if ranked_tensor_rank(op.results[0].type) is None:
            return []
        none = AffineMap(4, 0, ())
        return [_map(4, (0, 1, 3)), _map(4, (0, 3, 2)), none, none, _map(4, (0, 1, 2))]


def register() -> None:
    elementwise = ElementwiseShardingInterface()
    for name in ELEMENTWISE_OPS:
        register_sharding_interface(f"tosa.{name}", elementwise)
    register_sharding_interface("tosa.negate", NegateSharding())
    register_sharding_interface("tosa.matmul", MatMulSharding())
