"""Helpers shared by the tensor and memref emitters: mixed static/dynamic index lists,
slices, scalar reads."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DYNAMIC_INDEX, DenseArrayBase, ShapedType
from xdsl.ir import Attribute, Operation, SSAValue

from shardc.runtime.codegen.builder import FunctionBuilder, compile_error
from shardc.runtime.execute.dtypes import elem_type, int_width, is_index


def mixed(g: FunctionBuilder, static: DenseArrayBase | Sequence[int], dynamic: Sequence[SSAValue]) -> list[str]:
    """Python expressions for a static list with DYNAMIC_INDEX holes filled by operands."""
    values = static.get_values() if isinstance(static, DenseArrayBase) else list(static)
    dyn = iter(g.vs(dynamic))
    return [next(dyn) if v == DYNAMIC_INDEX else str(v) for v in values]


def _add(a: str, b: str) -> str:
    if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
        return str(int(a) + int(b))
    if a == "0":
        return b
    if b == "0":
        return a
    return f"{a} + {b}"


def slice_exprs(offsets: list[str], sizes: list[str], strides: list[str], keep: list[bool]) -> str:
    """Index tuple text for a strided slice; dims with keep=False are indexed (dropped)."""
    parts: list[str] = []
    for o, s, st, k in zip(offsets, sizes, strides, keep):
        if not k:
            parts.append(o)
        elif st == "1":
            parts.append(f"{o}:{_add(o, s)}")
        elif s.isdigit() and st.isdigit():
            n = int(s)
            parts.append(f"{o}:{_add(o, str((n - 1) * int(st) + 1)) if n else o}:{st}")
        else:
            parts.append(f"{o}:{o} + ({s} - 1) * {st} + 1:{st}")
    return ", ".join(parts) + ("," if len(parts) == 1 else "")


def rank_reduction_keep(op: Operation, sizes: Sequence[int], result_shape: Sequence[int]) -> list[bool]:
    """Which source dims survive a rank-reducing slice (unit dims are dropped greedily)."""
    keep: list[bool] = []
    j = 0
    dropped = len(sizes) - len(result_shape)
    for s in sizes:
        if dropped > 0 and s == 1 and (j >= len(result_shape) or result_shape[j] != 1):
            keep.append(False)
            dropped -= 1
        else:
            keep.append(True)
            j += 1
    if j != len(result_shape):
        raise compile_error(op, "cannot infer which unit dimensions the rank-reducing slice drops")
    return keep


def scalar_read(expr: str, t: Attribute) -> str:
    """Wrap an array element read so it has the runtime scalar representation of `t`."""
    if is_index(t):
        return f"int({expr})"
    w = int_width(t)
    if w == 1:
        return f"bool({expr})"
    if w is not None:
        return f"int({expr})"
    return expr


def shape_of(t: Attribute) -> list[int]:
    assert isinstance(t, ShapedType)
    return list(t.get_shape())


def shape_tuple(g: FunctionBuilder, t: Attribute, dynamic: Sequence[SSAValue]) -> str:
    shape = shape_of(t)
    dyn = iter(g.vs(dynamic))
    parts = [next(dyn) if s == DYNAMIC_INDEX or s == -1 else str(s) for s in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def elem(t: Attribute) -> Attribute:
    return elem_type(t)
