"""MLIR's TOSA folders (TosaCanonicalizations.cpp) that matter for our pipeline:
`tosa.const` is a constant without effects (so identical ones merge and unused ones go),
`tosa.add`/`tosa.sub` of a zero splat fold to the other operand."""

from __future__ import annotations

from xdsl.dialects import tosa as xtosa
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
from xdsl.ir import Attribute, Operation, SSAValue

from shardc.ir import dense
from shardc.passes.fold_registry import (
    FoldResult,
    register_constant,
    register_effect_free,
    register_folder,
    register_materializer,
)
from shardc.passes.folding import constant_value


def _const_value(op: Operation) -> Attribute | None:
    assert isinstance(op, xtosa.ConstOp)
    return op.values


def _is_zero_splat(value: SSAValue) -> bool:
    attr = constant_value(value)
    if not isinstance(attr, DenseIntOrFPElementsAttr):
        return False
    if len(attr.data.data) == 0 or not dense.is_splat(attr):
        return False
    first = next(iter(attr.iter_values()))
    return first == 0 and not (isinstance(first, float) and str(first).startswith("-"))


def _same_type(op: Operation, value: SSAValue) -> bool:
    return value.type == op.results[0].type


@register_folder(xtosa.AddOp)
def fold_add(op: Operation) -> FoldResult:
    lhs, rhs = op.operands
    if _is_zero_splat(rhs) and _same_type(op, lhs):
        return [lhs]
    if _is_zero_splat(lhs) and _same_type(op, rhs):
        return [rhs]
    return None


@register_folder(xtosa.SubOp)
def fold_sub(op: Operation) -> FoldResult:
    lhs, rhs = op.operands
    if _is_zero_splat(rhs) and _same_type(op, lhs):
        return [lhs]
    return None


def _materialize(value: Attribute, type: Attribute) -> Operation | None:
    if isinstance(value, DenseIntOrFPElementsAttr) and value.get_type() == type:
        return xtosa.ConstOp(value)
    return None


register_constant(xtosa.ConstOp, _const_value)
register_effect_free(xtosa.ConstOp, xtosa.AddOp, xtosa.SubOp)
register_materializer("tosa", _materialize)
