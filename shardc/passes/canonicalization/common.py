"""Integer helpers shared by the folders: MLIR's APInt arithmetic on Python ints."""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.pattern_rewriter import PatternRewriter

from shardc.passes.folding import constant_value

INDEX_WIDTH = 64
"""MLIR folds `index` arithmetic at 64 bits (IndexType::kInternalStorageBitWidth)."""


def width(t: Attribute) -> int | None:
    """The bit width of a scalar integer or index type, None for anything else."""
    if isinstance(t, IndexType):
        return INDEX_WIDTH
    if isinstance(t, IntegerType):
        return t.width.data
    return None


def signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if bits and v >> (bits - 1) else v


def unsigned(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


def int_attr(v: int, t: Attribute) -> IntegerAttr:
    """`v` wrapped to `t`'s width, printed the way MLIR prints it (i1 as 0/1 -> true/false,
    others signed)."""
    bits = width(t)
    assert bits is not None
    v = v & 1 if bits == 1 else signed(v, bits)
    return IntegerAttr(v, t)  # pyright: ignore[reportArgumentType]


def constant_int(value: SSAValue) -> int | None:
    """The scalar integer a ConstantLike op gives `value` (MLIR's `m_ConstantInt`)."""
    attr = constant_value(value)
    if isinstance(attr, IntegerAttr) and width(attr.type) is not None:
        return attr.value.data
    return None


def insert_constant(rewriter: PatternRewriter, anchor: Operation, attr: IntegerAttr) -> SSAValue:
    """An `arith.constant` of `attr` right before `anchor` (what DRR's `Arith_ConstantOp`
    result pattern builds)."""
    from xdsl.dialects import arith

    op = arith.ConstantOp(attr, attr.type)
    rewriter.insert(op, InsertPoint.before(anchor))
    return op.result
