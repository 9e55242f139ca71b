"""tosa: numpy broadcasting (TOSA requires equal ranks and broadcasts size-1 dims, a
subset of numpy's rule)."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import tosa
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Operation

from shardc.dialects import tosa as stosa
from shardc.runtime import helpers
from shardc.runtime.codegen_safe import py_literal
from shardc.runtime.compile import FunctionBuilder, compile_error, register, single_block
from shardc.runtime.dtypes import np_dtype
from shardc.runtime.kernels._common import elem, shape_of
from shardc.runtime.kernels.arith import dt_expr
from shardc.runtime.kernels.math import _erf  # pyright: ignore[reportPrivateUsage]


def _by_mro(table: dict, op: Operation):  # type: ignore[type-arg]
    """Table lookup along the op's class hierarchy (shardc's tosa overlay subclasses xDSL's)."""
    for cls in type(op).__mro__:
        if cls in table:
            return table[cls]
    raise KeyError(type(op))


def _rdt(g: FunctionBuilder, op: Operation) -> str:
    return dt_expr(g, np_dtype(elem(op.results[0].type)))


def _ignores_nan(op: Operation) -> bool:
    """Whether the op's `nan_mode` is IGNORE (NaN operands lose to numbers)."""
    return "IGNORE" in str(op.properties.get("nan_mode", "")).upper()


def _first(x: object) -> np.generic:
    """The one element of a zero point or shift tensor."""
    return np.asarray(x).reshape(-1)[0]


@register(tosa.ConstOp)
def _const(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tosa.ConstOp)
    t = op.output.type
    arr = helpers.dense_to_array(op.values, tuple(shape_of(t)), np_dtype(elem(t)))
    g.bind(op.output, g.const(arr, "tcst"))


@register(tosa.AddOp, tosa.SubOp)
def _addsub(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    sym = "+" if isinstance(op, tosa.AddOp) else "-"
    if np_dtype(elem(op.results[0].type)) == np.bool_:
        raise compile_error(op, "tosa add/sub on i1 is not supported")
    g.assign(op, f"_np.asarray({a} {sym} {b})")


def _mul_shift(a: np.ndarray, b: np.ndarray, shift: np.ndarray, dt: np.dtype) -> np.ndarray:
    s = int(_first(shift)) if np.size(shift) else 0
    if dt.kind == "f" or s == 0:
        return np.asarray(a * b).astype(dt, copy=False)
    wide = a.astype(np.int64) * b.astype(np.int64)
    wide = (wide + (1 << (s - 1))) >> s
    return wide.astype(dt)


@register(tosa.MulOp)
def _mul(op: Operation, g: FunctionBuilder) -> None:
    a, b, shift = g.vs(op.operands)
    g.assign(op, f"{g.const(_mul_shift, 'tosa_mul')}({a}, {b}, {shift}, {_rdt(g, op)})")


def _attr_value(attr: object) -> object:
    if isinstance(attr, IntegerAttr | FloatAttr):
        return attr.value.data
    raise TypeError(attr)


def _clamp(x: np.ndarray, lo: object, hi: object, propagate: bool) -> np.ndarray:
    r = np.minimum(np.maximum(x, x.dtype.type(lo)), x.dtype.type(hi))
    if not propagate and x.dtype.kind == "f":
        r = np.where(np.isnan(x), x.dtype.type(lo), r)
    return r


@register(tosa.ClampOp)
def _clamp_emit(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tosa.ClampOp)
    lo, hi = _attr_value(op.min_val), _attr_value(op.max_val)
    g.assign(op, f"{g.const(_clamp, 'clamp')}({g.v(op.input)}, {py_literal(lo)}, {py_literal(hi)}, {not _ignores_nan(op)})")


_REDUCE = {
    tosa.ReduceSumOp: "_np.add.reduce",
    tosa.ReduceProductOp: "_np.multiply.reduce",
    tosa.ReduceMaxOp: "_np.maximum.reduce",
    tosa.ReduceMinOp: "_np.minimum.reduce",
    tosa.ReduceAllOp: "_np.logical_and.reduce",
    tosa.ReduceAnyOp: "_np.logical_or.reduce",
}


@register(*_REDUCE)
def _reduce(op: Operation, g: FunctionBuilder) -> None:
    axis = op.axis.value.data  # type: ignore[attr-defined]
    fn = _by_mro(_REDUCE, op)
    if _ignores_nan(op):
        fn = {"_np.maximum.reduce": "_np.fmax.reduce", "_np.minimum.reduce": "_np.fmin.reduce"}.get(fn, fn)
    g.assign(op, f"{fn}({g.v(op.operands[0])}, axis={axis}, keepdims=True).astype({_rdt(g, op)}, copy=False)")


def _matmul(a: np.ndarray, b: np.ndarray, azp: np.ndarray, bzp: np.ndarray, dt: np.dtype) -> np.ndarray:
    if dt.kind in "iu":
        a = a.astype(dt) - _first(azp).astype(dt)
        b = b.astype(dt) - _first(bzp).astype(dt)
    return np.matmul(a, b).astype(dt, copy=False)


@register(tosa.MatMulOp)
def _matmul_emit(op: Operation, g: FunctionBuilder) -> None:
    a, b, azp, bzp = g.vs(op.operands)
    g.assign(op, f"{g.const(_matmul, 'tosa_matmul')}({a}, {b}, {azp}, {bzp}, {_rdt(g, op)})")


@register(tosa.ConcatOp)
def _concat(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tosa.ConcatOp)
    names = g.vs(op.tensors)
    g.assign(op, f"_np.concatenate(({', '.join(names)},), axis={op.axis.value.data})")


def _rescale(x, mult, shift, izp, ozp, dt, double_round, in_unsigned, out_unsigned):  # type: ignore[no-untyped-def]
    v = (helpers.uview(x, x.dtype) if in_unsigned else x).astype(np.int64) - int(_first(izp))
    m = np.asarray(mult).astype(np.int64)
    s = np.asarray(shift).astype(np.int64)
    rnd = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    if double_round:
        rnd = rnd + np.where(s > 31, np.where(v >= 0, 1 << 30, -(1 << 30)), 0)
    r = (v * m + rnd) >> s
    r = r + int(_first(ozp))
    target = helpers.UNSIGNED[dt] if out_unsigned else dt
    info = np.iinfo(target)
    r = np.clip(r, info.min, info.max).astype(target)
    return r.view(dt) if out_unsigned else r


@register(tosa.RescaleOp)
def _rescale_emit(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tosa.RescaleOp)
    x, mult, shift, izp, ozp = g.vs(op.operands)
    double = "DOUBLE" in str(op.rounding_mode).upper()
    g.assign(
        op,
        f"{g.const(_rescale, 'rescale')}({x}, {mult}, {shift}, {izp}, {ozp}, {_rdt(g, op)}, {double}, "
        f"{op.input_unsigned.value.data != 0}, {op.output_unsigned.value.data != 0})",
    )


@register(tosa.IfOp)
def _if(op: Operation, g: FunctionBuilder) -> None:
    cond = g.v(op.operands[0])
    outs = [g.res(op, i) for i in range(len(op.results))]
    g.emit(f"if {cond}.reshape(-1)[0]:")
    for k, region in enumerate(op.regions):
        if k == 1:
            g.emit("else:")
        with g.indented():
            block = single_block(region)
            for a, v in zip(block.args, op.operands[1:]):
                g.bind(a, g.v(v))
            term = g.emit_block_body(block)
            vals = g.vs(term.operands)
            if outs:
                g.emit(f"{', '.join(outs)} = {', '.join(vals)}")


# ---------------------------------------------------------------------------------------
# shardc's tosa overlay (`shardc.dialects.tosa`): the ops xDSL lacks
# ---------------------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-x))).astype(x.dtype, copy=False)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return (1 / np.sqrt(x)).astype(x.dtype, copy=False)


def _clz(x: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    u = helpers.uview(x, x.dtype).astype(np.uint64)
    n = np.zeros(x.shape, dtype=np.int64)
    for b in range(bits):  # vectorised over the array, one pass per bit
        n += (u >> np.uint64(b)) != 0
    return (bits - n).astype(x.dtype)


_UNARY_EXPR = {
    tosa.ReciprocalOp: "_np.reciprocal({x})",
    tosa.SinOp: "_np.sin({x})",
    tosa.CosOp: "_np.cos({x})",
    stosa.AbsOp: "_np.abs({x})",
    stosa.BitwiseNotOp: "_np.invert({x})",
    stosa.CeilOp: "_np.ceil({x})",
    stosa.ExpOp: "_np.exp({x})",
    stosa.FloorOp: "_np.floor({x})",
    stosa.LogOp: "_np.log({x})",
    stosa.TanhOp: "_np.tanh({x})",
    stosa.LogicalNotOp: "_np.logical_not({x})",
}
_UNARY_FN = {stosa.ErfOp: _erf, stosa.SigmoidOp: _sigmoid, stosa.RsqrtOp: _rsqrt, stosa.ClzOp: _clz}


@register(*_UNARY_EXPR)
def _unary_expr(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, _by_mro(_UNARY_EXPR, op).format(x=g.v(op.operands[0])))


@register(*_UNARY_FN)
def _unary_fn(op: Operation, g: FunctionBuilder) -> None:
    fn = _by_mro(_UNARY_FN, op)
    g.assign(op, f"{g.const(fn, fn.__name__.strip('_'))}({g.v(op.operands[0])})")


def _negate(x: np.ndarray, izp: np.ndarray, ozp: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        return -x
    i, o = int(_first(izp)), int(_first(ozp))
    info = np.iinfo(x.dtype)
    return np.clip(-(x.astype(np.int64) - i) + o, info.min, info.max).astype(x.dtype)


@register(stosa.NegateOp)
def _negate_emit(op: Operation, g: FunctionBuilder) -> None:
    x, izp, ozp = g.vs(op.operands)
    g.assign(op, f"{g.const(_negate, 'tosa_negate')}({x}, {izp}, {ozp})")


def _cast(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """TOSA's cast: float to int rounds half to even and saturates; int to int wraps;
    to bool is `!= 0`."""
    if dt == np.bool_:
        return x != 0
    if x.dtype.kind == "f" and dt.kind in "iu":
        info = np.iinfo(dt)
        r = np.clip(np.rint(x.astype(np.float64)), info.min, info.max)
        return np.where(np.isnan(r), 0, r).astype(dt)
    return x.astype(dt)


@register(stosa.CastOp)
def _cast_emit(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, f"{g.const(_cast, 'tosa_cast')}({g.v(op.operands[0])}, {_rdt(g, op)})")


_BINARY_EXPR = {
    stosa.PowOp: "_np.power({a}, {b})",
    stosa.BitwiseAndOp: "_np.bitwise_and({a}, {b})",
    stosa.BitwiseOrOp: "_np.bitwise_or({a}, {b})",
    stosa.BitwiseXorOp: "_np.bitwise_xor({a}, {b})",
    stosa.LogicalAndOp: "_np.logical_and({a}, {b})",
    stosa.LogicalOrOp: "_np.logical_or({a}, {b})",
    stosa.LogicalXorOp: "_np.logical_xor({a}, {b})",
    stosa.EqualOp: "_np.equal({a}, {b})",
    stosa.GreaterOp: "_np.greater({a}, {b})",
    stosa.GreaterEqualOp: "_np.greater_equal({a}, {b})",
}
_BINARY_HELPER = {
    stosa.IntDivOp: helpers.divsi_a,
    stosa.LogicalLeftShiftOp: helpers.shli_a,
    stosa.LogicalRightShiftOp: helpers.shrui_a,
}


@register(*_BINARY_EXPR)
def _binary_expr(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    g.assign(op, "_np.asarray(" + _by_mro(_BINARY_EXPR, op).format(a=a, b=b) + ")")


@register(*_BINARY_HELPER)
def _binary_helper(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    fn = _by_mro(_BINARY_HELPER, op)
    g.assign(op, f"{g.const(fn, fn.__name__)}({a}, {b}, {_rdt(g, op)})")


@register(stosa.MaximumOp, stosa.MinimumOp)
def _minmax(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    ignore = _ignores_nan(op)
    fn = ("fmax" if ignore else "maximum") if isinstance(op, stosa.MaximumOp) else ("fmin" if ignore else "minimum")
    g.assign(op, f"_np.{fn}({a}, {b})")


@register(stosa.SelectOp)
def _select(op: Operation, g: FunctionBuilder) -> None:
    c, a, b = g.vs(op.operands)
    g.assign(op, f"_np.where({c}, {a}, {b}).astype({_rdt(g, op)}, copy=False)")


@register(stosa.ConstShapeOp)
def _const_shape(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, stosa.ConstShapeOp)
    g.bind(op.output, py_literal(tuple(op.get_shape())))


@register(stosa.ReshapeOp)
def _reshape(op: Operation, g: FunctionBuilder) -> None:
    x, shape = g.vs(op.operands)
    g.assign(op, f"_np.reshape({x}, {shape})")


@register(stosa.TransposeOp)
def _transpose(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, stosa.TransposeOp)
    g.assign(op, f"_np.transpose({g.v(op.input1)}, {py_literal(tuple(op.perms.get_values()))})")
