"""Sharding of tosa ops: the elementwise ops, tosa.negate and tosa.matmul.

Registered by op name: the tosa op classes are shardc overlays of xDSL's dialect, and a
name stays valid whichever class implements the op. Elementwise ops use identity maps of
operand 0's rank for every operand and result, as upstream (a broadcast dimension of size
one is mapped like any other). Elementwise ops and tosa.negate partition to the same op on
the local shards; tosa.matmul has no partitioning upstream, so it must be fully
replicated. A tosa.matmul operand whose batch dimension broadcasts (size 1 against a
larger result batch) is indexed by a constant in trunk: that dimension follows no loop
(it stays unsplit when the batch loop is split), and an annotation splitting it is an
error with trunk's message.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Attribute, Operation
from xdsl.ir.affine import AffineDimExpr, AffineMap

from shardc.interfaces.sharding import (
    ElementwiseShardingInterface,
    ReductionKind,
    ShardingInfo,
    ShardingInterface,
    ShardingOption,
    default_get_sharding_annotations,
    default_get_sharding_option,
    insert_operand_annotation,
    insert_result_annotation,
    remove_trailing_empty_sub_arrays,
    ranked_tensor_rank,
    register_sharding_interface,
)
from shardc.ir import diagnostics

ELEMENTWISE_OPS = (
    "clamp", "sigmoid", "tanh", "add", "arithmetic_right_shift", "bitwise_and",
    "bitwise_or", "bitwise_xor", "int_div", "logical_and", "logical_left_shift",
    "logical_right_shift", "logical_or", "logical_xor", "maximum", "minimum", "mul",
    "pow", "sub", "abs", "bitwise_not", "ceil", "clz", "exp", "floor", "log",
    "logical_not", "reciprocal", "rsqrt", "select", "equal", "greater", "greater_equal",
)  # fmt: skip


def _map(num_dims: int, dims: tuple[int, ...]) -> AffineMap:
    return AffineMap(num_dims, 0, tuple(AffineDimExpr(d) for d in dims))


def _batch(t: Attribute) -> int | None:
    return t.get_shape()[0] if isinstance(t, TensorType) and t.get_shape() else None  # pyright: ignore


def _broadcast_operands(op: Operation) -> list[int]:
    """The tosa.matmul operands (0, 1) whose batch of 1 broadcasts against the result's."""
    batch = _batch(op.results[0].type)
    if batch is None or batch <= 1:
        return []
    return [i for i in (0, 1) if _batch(op.operands[i].type) == 1]


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

    def get_sharding_option(
        self,
        op: Operation,
        operand_shardings: Sequence[ShardingInfo | None],
        result_shardings: Sequence[ShardingInfo | None],
    ) -> ShardingOption | None:
        """A broadcast batch is indexed by a constant in trunk, and splitting it is an
        error; trunk's message counts the dimension from one (`dimension 1`)."""
        for index in _broadcast_operands(op):
            sharding = operand_shardings[index] if index < len(operand_shardings) else None
            if sharding is not None and sharding.split_axes and sharding.split_axes[0]:
                raise diagnostics.op_error(
                    op,
                    f"cannot shard operand {index} dimension 1: its indexing expression is constant",
                )
        return default_get_sharding_option(self, op, operand_shardings, result_shardings)

    def get_sharding_annotations(
        self, op: Operation, option: ShardingOption
    ) -> list[ShardingInfo | None] | None:
        """A broadcast batch follows no loop: its operand keeps that dimension unsplit."""
        shardings = default_get_sharding_annotations(self, op, option)
        if shardings is None:
            return None
        for index in _broadcast_operands(op):
            sharding = shardings[index]
            if sharding is not None and sharding.split_axes and sharding.split_axes[0]:
                split = [[], *sharding.split_axes[1:]]
                remove_trailing_empty_sub_arrays(split)  # pyright: ignore[reportArgumentType]
                shardings[index] = ShardingInfo.get(sharding.grid, split)
        return shardings

    def add_sharding_annotations(self, op: Operation, option: ShardingOption) -> bool:
        shardings = self.get_sharding_annotations(op, option)
        if shardings is None:
            return False
        n = len(op.operands)
        for i, result in enumerate(op.results):
            sharding = shardings[n + i]
            assert sharding is not None
            insert_result_annotation(sharding, result)
        for i in range(n):
            insert_operand_annotation(shardings[i], op, i)
        return True


def register() -> None:
    elementwise = ElementwiseShardingInterface()
    for name in ELEMENTWISE_OPS:
        register_sharding_interface(f"tosa.{name}", elementwise)
    register_sharding_interface("tosa.negate", NegateSharding())
    register_sharding_interface("tosa.matmul", MatMulSharding())
