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


_IS_MEMREF: dict[type, bool] = {}


def _on_tensors(op: Operation) -> bool:
    """No memref operand: the op only computes values. (The memref test once per type
    class: a type class is an ABC, whose isinstance test of another class, a tensor
    type say, is a Python call; asked for every linalg op of every greedy run.)"""
    known = _IS_MEMREF
    for operand in op._operands:  # pyright: ignore[reportPrivateUsage]
        t = operand.type
        cls = type(t)
        found = known.get(cls)
        if found is None:
            found = known[cls] = isinstance(t, MemRefType)
        if found:
            return False
    return True



register_effect_free(
    LinalgStructuredOperation, BroadcastOp, ReduceOp, ours.MapOp, when=_on_tensors
)
