"""tosa: numpy broadcasting (TOSA requires equal ranks and broadcasts size-1 dims, a
subset of numpy's rule)."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import tosa
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Operation

from shardc.dialects import tosa as stosa
from shardc.runtime.execute import helpers
from shardc.runtime.codegen.codegen_safe import py_literal
from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, register, single_block
from shardc.runtime.execute.dtypes import np_dtype
from shardc.runtime.codegen.kernels._common import elem, shape_of
from shardc.runtime.codegen.kernels.arith import dt_expr
from shardc.runtime.execute.kernels.math_run import erf
from shardc.runtime.execute.kernels.tosa_run import cast, clamp, clz, matmul, mul_shift, negate, rescale, rsqrt, sigmoid


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


@register(tosa.MulOp)
def _mul(op: Operation, g: FunctionBuilder) -> None:
    a, b, shift = g.vs(op.operands)
    g.assign(op, f"{g.const(mul_shift, 'tosa_mul')}({a}, {b}, {shift}, {_rdt(g, op)})")


def _attr_value(attr: object) -> object:
    if isinstance(attr, IntegerAttr | FloatAttr):
        return attr.value.data
    raise TypeError(attr)


@register(tosa.ClampOp)
def _clamp_emit(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tosa.ClampOp)
    lo, hi = _attr_value(op.min_val), _attr_value(op.max_val)
    g.assign(op, f"{g.const(clamp, 'clamp')}({g.v(op.input)}, {py_literal(lo)}, {py_literal(hi)}, {not _ignores_nan(op)})")


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


@register(tosa.MatMulOp)
def _matmul_emit(op: Operation, g: FunctionBuilder) -> None:
    a, b, azp, bzp = g.vs(op.operands)
    g.assign(op, f"{g.const(matmul, 'tosa_matmul')}({a}, {b}, {azp}, {bzp}, {_rdt(g, op)})")


@register(tosa.ConcatOp)
def _concat(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tosa.ConcatOp)
    names = g.vs(op.tensors)
    g.assign(op, f"_np.concatenate(({', '.join(names)},), axis={op.axis.value.data})")


@register(tosa.RescaleOp)
def _rescale_emit(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tosa.RescaleOp)
    x, mult, shift, izp, ozp = g.vs(op.operands)
    double = "DOUBLE" in str(op.rounding_mode).upper()
    g.assign(
        op,
        f"{g.const(rescale, 'rescale')}({x}, {mult}, {shift}, {izp}, {ozp}, {_rdt(g, op)}, {double}, "
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
_UNARY_FN = {stosa.ErfOp: erf, stosa.SigmoidOp: sigmoid, stosa.RsqrtOp: rsqrt, stosa.ClzOp: clz}


@register(*_UNARY_EXPR)
def _unary_expr(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, _by_mro(_UNARY_EXPR, op).format(x=g.v(op.operands[0])))


@register(*_UNARY_FN)
def _unary_fn(op: Operation, g: FunctionBuilder) -> None:
    fn = _by_mro(_UNARY_FN, op)
    g.assign(op, f"{g.const(fn, fn.__name__.strip('_'))}({g.v(op.operands[0])})")


@register(stosa.NegateOp)
def _negate_emit(op: Operation, g: FunctionBuilder) -> None:
    x, izp, ozp = g.vs(op.operands)
    g.assign(op, f"{g.const(negate, 'tosa_negate')}({x}, {izp}, {ozp})")


@register(stosa.CastOp)
def _cast_emit(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, f"{g.const(cast, 'tosa_cast')}({g.v(op.operands[0])}, {_rdt(g, op)})")


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
