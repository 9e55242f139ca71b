"""Linalg ops on tensors have no memory effects in MLIR (their MemoryEffectsOpInterface
reports reads and writes of memref operands only), so CSE merges identical ones and dead
ones go; xDSL's classes declare no effects at all, which makes them look side-effecting."""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.linalg.ops import BroadcastOp, ReduceOp
from xdsl.ir import Operation

from shardc.dialects import linalg as ours
from shardc.passes.fold_registry import register_effect_free


def _on_tensors(op: Operation) -> bool:
    """No memref operand: the op only computes values."""
    return not any(isinstance(operand.type, MemRefType) for operand in op.operands)


register_effect_free(
    LinalgStructuredOperation, BroadcastOp, ReduceOp, ours.MapOp, when=_on_tensors
)
