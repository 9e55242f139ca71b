"""math: numpy ufuncs, on numpy scalars and arrays alike (they keep the float width)."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import math
from xdsl.ir import Operation

from shardc.runtime.execute import helpers
from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, register
from shardc.runtime.execute.dtypes import elem_type, int_width, np_dtype
from shardc.runtime.codegen.kernels.arith import by_mro, dt_expr


from shardc.runtime.execute.kernels.math_run import (  # noqa: F401  (the run-time functions, re-exported)
    bit_count,
    erf,
    fpowi,
    ipowi,
    rsqrt,
)


_UNARY = {
    math.AbsFOp: "_np.abs",
    math.AcosOp: "_np.arccos",
    math.AcoshOp: "_np.arccosh",
    math.AsinOp: "_np.arcsin",
    math.AsinhOp: "_np.arcsinh",
    math.AtanOp: "_np.arctan",
    math.AtanhOp: "_np.arctanh",
    math.CbrtOp: "_np.cbrt",
    math.CeilOp: "_np.ceil",
    math.CosOp: "_np.cos",
    math.CoshOp: "_np.cosh",
    math.Exp2Op: "_np.exp2",
    math.ExpM1Op: "_np.expm1",
    math.ExpOp: "_np.exp",
    math.FloorOp: "_np.floor",
    math.Log10Op: "_np.log10",
    math.Log1pOp: "_np.log1p",
    math.Log2Op: "_np.log2",
    math.LogOp: "_np.log",
    math.RoundEvenOp: "_np.rint",
    math.SinOp: "_np.sin",
    math.SinhOp: "_np.sinh",
    math.SqrtOp: "_np.sqrt",
    math.TanOp: "_np.tan",
    math.TanhOp: "_np.tanh",
    math.TruncOp: "_np.trunc",
}
_BINARY = {math.Atan2Op: "_np.arctan2", math.CopySignOp: "_np.copysign", math.PowFOp: "_np.power"}


@register(*_UNARY)
def _unary(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, f"{by_mro(_UNARY, op)}({g.v(op.operands[0])})")  # type: ignore[index]


@register(*_BINARY)
def _binary(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    g.assign(op, f"{by_mro(_BINARY, op)}({a}, {b})")  # type: ignore[index]


@register(math.RoundOp)
def _round(op: Operation, g: FunctionBuilder) -> None:
    # Round half away from zero (numpy's round is half-to-even).
    x = g.v(op.operands[0])
    g.assign(op, f"_np.copysign(_np.floor(_np.abs({x}) + 0.5), {x}).astype(_np.asarray({x}).dtype)[()]" if not g.arr_op(op) else f"_np.copysign(_np.floor(_np.abs({x}) + 0.5), {x}).astype({x}.dtype)")


@register(math.RsqrtOp)
def _rsqrt_emit(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, f"{g.const(rsqrt, 'rsqrt')}({g.v(op.operands[0])})")


@register(math.ErfOp)
def _erf_emit(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, f"{g.const(erf, 'erf')}({g.v(op.operands[0])})")


@register(math.FmaOp)
def _fma(op: Operation, g: FunctionBuilder) -> None:
    a, b, c = g.vs(op.operands)
    g.assign(op, f"{a} * {b} + {c}")


@register(math.AbsIOp)
def _absi(op: Operation, g: FunctionBuilder) -> None:
    x = g.v(op.operands[0])
    w = int_width(op.operands[0].type) or 64
    if g.arr_op(op):
        g.assign(op, f"_np.abs({x})")
    else:
        g.assign(op, f"{g.const(helpers.wrap, 'wrap')}(abs({x}), {w})")


@register(math.IPowIOp)
def _ipowi_emit(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    dt = np_dtype(elem_type(op.operands[0].type))
    g.assign(op, f"{g.const(ipowi, 'ipowi')}({a}, {b}, {dt_expr(g, dt)})")


@register(math.FPowIOp)
def _fpowi_emit(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    g.assign(op, f"{g.const(fpowi, 'fpowi')}({a}, {b})")


@register(math.CtPopOp, math.CountLeadingZerosOp, math.CountTrailingZerosOp)
def _bitcount(op: Operation, g: FunctionBuilder) -> None:
    kind = {math.CtPopOp: "ctpop", math.CountLeadingZerosOp: "ctlz", math.CountTrailingZerosOp: "cttz"}[type(op)]  # type: ignore[index]
    dt = np_dtype(elem_type(op.operands[0].type))
    if dt == np.bool_:
        raise compile_error(op, "bit counting on i1 is not supported")
    g.assign(op, f"{g.const(bit_count, kind)}({g.v(op.operands[0])}, {dt_expr(g, dt)}, {kind!r})")
