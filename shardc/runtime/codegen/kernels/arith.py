"""arith: scalars (Python ints wrapped at their width, bools, numpy float scalars) and
arrays (tensors, or scalars vectorized inside linalg bodies)."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import BFloat16Type, DenseIntOrFPElementsAttr, DenseResourceAttr, FloatAttr, IntegerAttr, ShapedType
from xdsl.ir import Operation

from shardc.runtime.execute import helpers
from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, register
from shardc.runtime.execute.dtypes import elem_type, int_width, is_index, is_shaped, np_dtype, scalar_ctor
from shardc.runtime.execute.kernels.bf16_cast import cast_float
from shardc.runtime.execute.kernels.bf16_run import is_bfloat16, widened_binary


def by_mro(table: dict, op: Operation):  # type: ignore[type-arg]
    for cls in type(op).__mro__:
        if cls in table:
            return table[cls]
    raise KeyError(type(op))


def dt_expr(g: FunctionBuilder, dt: np.dtype) -> str:
    return g.const(np.dtype(dt), f"dt_{np.dtype(dt).name}")


def width_of(op: Operation, k: int = 0) -> int:
    """Bit width of operand k's (element) type; index is 64."""
    w = int_width(op.operands[k].type)
    if w is None:
        raise compile_error(op, "expected an integer or index operand")
    return w


def wrap_expr(expr: str, w: int, index: bool = False) -> str:
    if index:
        return expr  # index scalars are Python ints (64-bit overflow not modelled)
    half = 1 << (w - 1)
    return f"((({expr}) + {half}) & {(1 << w) - 1}) - {half}"


# --- constants ---------------------------------------------------------------------------


@register(arith.ConstantOp)
def _constant(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, arith.ConstantOp)
    value = op.value
    t = op.result.type
    if isinstance(value, DenseIntOrFPElementsAttr):
        assert isinstance(t, ShapedType)
        dt = np_dtype(elem_type(t))
        array = helpers.dense_to_array(value, tuple(t.get_shape()), dt)
        g.bind(op.result, g.const(array, "cst"))
        return
    if isinstance(value, DenseResourceAttr):
        assert isinstance(t, ShapedType)
        from shardc.ir.resources import ResourceError, resource_array

        try:
            array = resource_array(value, t)
        except ResourceError as e:
            raise compile_error(op, str(e)) from None
        dt = np_dtype(elem_type(t))
        if array.dtype != dt:  # unsigned blobs of signless types, bf16 widened
            array = array.astype(dt) if array.dtype.kind == "f" or dt.kind == "f" else array.view(dt)
            array.flags.writeable = False
        g.bind(op.result, g.const(array, "cst"))
        return
    if is_shaped(t):
        raise compile_error(op, f"constant attribute {value} is not supported")
    if isinstance(value, IntegerAttr):
        v = value.value.data
        w = int_width(t)
        if w == 1:
            g.bind(op.result, "True" if v & 1 else "False")
        else:
            v = helpers.wrap(v, w or 64) if not is_index(t) else v
            g.bind(op.result, f"({v})")
        return
    if isinstance(value, FloatAttr):
        g.bind(op.result, g.const(np_dtype(t).type(value.value.data), "cf"))
        return
    raise compile_error(op, f"constant attribute {value} is not supported")


# --- integer binary ops ----------------------------------------------------------------

_INLINE_INT = {arith.AddiOp: "+", arith.SubiOp: "-", arith.MuliOp: "*"}
_BITWISE = {arith.AndIOp: "&", arith.OrIOp: "|", arith.XOrIOp: "^"}
_BOOL_BIN = {arith.AddiOp: "^", arith.SubiOp: "^", arith.MuliOp: "&"}

_SCALAR_HELPERS = {
    arith.DivSIOp: helpers.divsi,
    arith.RemSIOp: helpers.remsi,
    arith.FloorDivSIOp: helpers.floordivsi,
    arith.CeilDivSIOp: helpers.ceildivsi,
    arith.DivUIOp: helpers.divui,
    arith.RemUIOp: helpers.remui,
    arith.CeilDivUIOp: helpers.ceildivui,
    arith.ShLIOp: helpers.shli,
    arith.ShRSIOp: helpers.shrsi,
    arith.ShRUIOp: helpers.shrui,
    arith.MinUIOp: helpers.minui,
    arith.MaxUIOp: helpers.maxui,
}
_ARRAY_HELPERS = {
    arith.DivSIOp: helpers.divsi_a,
    arith.RemSIOp: helpers.remsi_a,
    arith.FloorDivSIOp: helpers.floordivsi_a,
    arith.CeilDivSIOp: helpers.ceildivsi_a,
    arith.DivUIOp: helpers.divui_a,
    arith.RemUIOp: helpers.remui_a,
    arith.CeilDivUIOp: helpers.ceildivui_a,
    arith.ShLIOp: helpers.shli_a,
    arith.ShRSIOp: helpers.shrsi_a,
    arith.ShRUIOp: helpers.shrui_a,
    arith.MinUIOp: helpers.minui_a,
    arith.MaxUIOp: helpers.maxui_a,
}


@register(*_INLINE_INT, *_BITWISE)
def _int_inline(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    w = width_of(op)
    cls = type(op)
    if w == 1:
        sym = _BITWISE.get(cls) or _BOOL_BIN[cls]  # type: ignore[call-overload]
        g.assign(op, f"{a} {sym} {b}")
        return
    if cls in _BITWISE:
        g.assign(op, f"{a} {_BITWISE[cls]} {b}")  # type: ignore[index]
        return
    sym = _INLINE_INT[cls]  # type: ignore[index]
    if g.arr_op(op):
        g.assign(op, f"{a} {sym} {b}")
    else:
        g.assign(op, wrap_expr(f"{a} {sym} {b}", w, is_index(op.operands[0].type)))


@register(*_SCALAR_HELPERS)
def _int_helper(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    w = width_of(op)
    cls = type(op)
    if w == 1:
        if cls is arith.MinUIOp:
            g.assign(op, f"{a} & {b}")
            return
        if cls is arith.MaxUIOp:
            g.assign(op, f"{a} | {b}")
            return
        raise compile_error(op, "operation on i1 is not supported by the runtime")
    if g.arr_op(op):
        dt = np_dtype(elem_type(op.operands[0].type))
        fn = g.const(_ARRAY_HELPERS[cls], cls.__name__ + "_a")  # type: ignore[index]
        g.assign(op, f"{fn}({a}, {b}, {dt_expr(g, dt)})")
    else:
        fn = g.const(_SCALAR_HELPERS[cls], cls.__name__)  # type: ignore[index]
        g.assign(op, f"{fn}({a}, {b}, {w})")


@register(arith.MaxSIOp, arith.MinSIOp)
def _minmax_si(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    is_max = isinstance(op, arith.MaxSIOp)
    if width_of(op) == 1:  # signed i1: true is -1
        g.assign(op, f"{a} & {b}" if is_max else f"{a} | {b}")
    elif g.arr_op(op):
        g.assign(op, f"_np.{'maximum' if is_max else 'minimum'}({a}, {b})")
    else:
        g.assign(op, f"{'max' if is_max else 'min'}({a}, {b})")


@register(arith.MulSIExtendedOp, arith.MulUIExtendedOp)
def _mul_extended(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    w = width_of(op)
    unsigned = isinstance(op, arith.MulUIExtendedOp)
    lo, hi = g.res(op, 0), g.res(op, 1)
    if g.arr_op(op):
        dt = np_dtype(elem_type(op.operands[0].type))
        g.emit(f"{lo}, {hi} = {g.const(helpers.mul_extended_a, 'mulext_a')}({a}, {b}, {dt_expr(g, dt)}, {unsigned})")
    else:
        g.emit(f"{lo}, {hi} = {g.const(helpers.mul_extended, 'mulext')}({a}, {b}, {w}, {unsigned})")


@register(arith.AddUIExtendedOp)
def _addui_extended(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    s, c = g.res(op, 0), g.res(op, 1)
    if g.arr_op(op):
        dt = np_dtype(elem_type(op.operands[0].type))
        g.emit(f"{s}, {c} = {g.const(helpers.addui_extended_a, 'addext_a')}({a}, {b}, {dt_expr(g, dt)})")
    else:
        g.emit(f"{s}, {c} = {g.const(helpers.addui_extended, 'addext')}({a}, {b}, {width_of(op)})")


# --- float binary ops --------------------------------------------------------------------

_FLOAT_INLINE = {arith.AddfOp: "+", arith.SubfOp: "-", arith.MulfOp: "*", arith.DivfOp: "/"}
_FLOAT_UFUNC = {
    arith.MaximumfOp: "maximum",
    arith.MinimumfOp: "minimum",
    arith.MaxnumfOp: "fmax",
    arith.MinnumfOp: "fmin",
}


@register(*_FLOAT_INLINE)
def _float_inline(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    g.assign(op, f"{a} {by_mro(_FLOAT_INLINE, op)} {b}")  # type: ignore[index]


@register(*_FLOAT_UFUNC)
def _float_ufunc(op: Operation, g: FunctionBuilder) -> None:
    a, b = g.vs(op.operands)
    name = by_mro(_FLOAT_UFUNC, op)
    if g.arr_op(op) and isinstance(elem_type(op.results[0].type), BFloat16Type):
        g.assign(op, f"{g.const(widened_binary, 'bf16_binary')}(_np.{name}, {a}, {b})")  # float32 loops (bf16_run.py)
        return
    g.assign(op, f"_np.{name}({a}, {b})")  # type: ignore[index]


@register(arith.NegfOp)
def _negf(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, f"-{g.v(op.operands[0])}")


# --- comparisons and select ------------------------------------------------------------

_CMPI_SIGNED = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">="}
_CMPI_UNSIGNED = {6: "<", 7: "<=", 8: ">", 9: ">="}
# On i1 the signed order is reversed (true is -1): slt == ugt, etc.
_I1_SIGNED_AS_UNSIGNED = {2: ">", 3: ">=", 4: "<", 5: "<="}


@register(arith.CmpiOp)
def _cmpi(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, arith.CmpiOp)
    pred = op.predicate.value.data
    a, b = g.vs(op.operands)
    w = width_of(op)
    arr = g.arr_op(op)
    if w == 1:
        sym = _CMPI_UNSIGNED.get(pred) or _I1_SIGNED_AS_UNSIGNED.get(pred) or _CMPI_SIGNED[pred]
        g.assign(op, f"{a} {sym} {b}")
        return
    if pred in _CMPI_SIGNED:
        g.assign(op, f"{a} {_CMPI_SIGNED[pred]} {b}")
        return
    sym = _CMPI_UNSIGNED[pred]
    if arr:
        dt = dt_expr(g, np_dtype(elem_type(op.operands[0].type)))
        uv = g.const(helpers.uview, "uview")
        g.assign(op, f"{uv}({a}, {dt}) {sym} {uv}({b}, {dt})")
    else:
        m = (1 << w) - 1
        g.assign(op, f"({a} & {m}) {sym} ({b} & {m})")


def _cmpf_expr(pred: int, a: str, b: str, arr: bool) -> str:
    neg, conj, disj = ("~", "&", "|") if arr else ("not ", "and", "or")
    table = {
        1: f"{a} == {b}",
        2: f"{a} > {b}",
        3: f"{a} >= {b}",
        4: f"{a} < {b}",
        5: f"{a} <= {b}",
        6: f"({a} < {b}) {disj} ({a} > {b})",
        7: f"({a} == {a}) {conj} ({b} == {b})",
        8: f"{neg}(({a} < {b}) {disj} ({a} > {b}))",
        9: f"{neg}({a} <= {b})",
        10: f"{neg}({a} < {b})",
        11: f"{neg}({a} >= {b})",
        12: f"{neg}({a} > {b})",
        13: f"{a} != {b}",
        14: f"({a} != {a}) {disj} ({b} != {b})",
    }
    return table[pred]


def _compared_narrow(op: Operation) -> dict[Operation, object] | None:
    """For an `extf` whose every use is a `cmpf` against a scalar constant that the
    narrower type holds exactly (torch-mlir's `extf` to f64 then `cmpf oeq` with -inf, on
    the attention scores): each such constant in the source type. Widening is exact and
    keeps the order, so the comparisons give the same answers on the source array
    without a float64 copy of it."""
    if not isinstance(op, arith.ExtFOp):
        return None
    src = np_dtype(elem_type(op.operands[0].type))
    out: dict[Operation, object] = {}
    for use in op.results[0].uses:
        cmp = use.operation
        if not isinstance(cmp, arith.CmpfOp):
            return None
        other = cmp.operands[1 - use.index]
        cst = other.owner
        if other is op.results[0] or not isinstance(cst, arith.ConstantOp) or not isinstance(cst.value, FloatAttr):
            return None
        v = float(cst.value.value.data)
        narrow = src.type(v)
        if not (float(narrow) == v or (v != v and narrow != narrow)):  # compared as Python floats: exactly
            return None
        out[cmp] = narrow
    return out or None


@register(arith.CmpfOp)
def _cmpf(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, arith.CmpfOp)
    pred = op.predicate.value.data
    a, b = g.vs(op.operands)
    for k, v in enumerate(op.operands):  # the other side of an elided extf, narrowed
        ext = v.owner
        if isinstance(ext, arith.ExtFOp) and g.is_arr(v):
            narrow = _compared_narrow(ext)
            if narrow is not None and op in narrow:
                if k == 0:
                    b = g.const(narrow[op], "cf")
                else:
                    a = g.const(narrow[op], "cf")
    arr = g.arr_op(op)
    if pred in (0, 15):
        val = "True" if pred == 15 else "False"
        if arr:
            g.assign(op, f"_np.full(_np.broadcast_shapes(_np.shape({a}), _np.shape({b})), {val})")
        else:
            g.assign(op, val)
        return
    expr = _cmpf_expr(pred, a, b, arr)
    g.assign(op, f"_np.asarray({expr})" if arr else f"bool({expr})")


@register(arith.SelectOp)
def _select(op: Operation, g: FunctionBuilder) -> None:
    c, a, b = g.vs(op.operands)
    if g.is_arr(op.operands[0]):
        g.assign(op, f"_np.where({c}, {a}, {b})")
    else:
        g.assign(op, f"{a} if {c} else {b}")


# --- casts ---------------------------------------------------------------------------------


def _src_dst(op: Operation) -> tuple[np.dtype, np.dtype]:
    return np_dtype(elem_type(op.operands[0].type)), np_dtype(elem_type(op.results[0].type))


@register(arith.IndexCastOp)
def _index_cast(op: Operation, g: FunctionBuilder) -> None:
    x = g.v(op.operands[0])
    src, dst = _src_dst(op)
    if g.arr_op(op):
        fn = g.const(helpers.extsi_a if dst.itemsize >= src.itemsize else helpers.trunci_a, "icast")
        g.assign(op, f"{fn}({x}, {dt_expr(g, src)}, {dt_expr(g, dst)})")
        return
    w_dst = int_width(op.results[0].type)
    if is_index(op.results[0].type):
        g.assign(op, f"-int({x})" if src == np.bool_ else x)
    elif w_dst == 1:
        g.assign(op, f"bool({x} & 1)")
    else:
        g.assign(op, wrap_expr(x, w_dst or 64))


def _int_cast(op: Operation, g: FunctionBuilder, kind: str) -> None:
    x = g.v(op.operands[0])
    src, dst = _src_dst(op)
    w_src = int_width(op.operands[0].type) or 64
    w_dst = int_width(op.results[0].type) or 64
    if g.arr_op(op):
        fn = {"extsi": helpers.extsi_a, "extui": helpers.extui_a, "trunci": helpers.trunci_a}[kind]
        g.assign(op, f"{g.const(fn, kind + '_a')}({x}, {dt_expr(g, src)}, {dt_expr(g, dst)})")
        return
    if kind == "extsi":
        g.assign(op, f"-int({x})" if w_src == 1 else x)
    elif kind == "extui":
        g.assign(op, f"int({x})" if w_src == 1 else f"{x} & {(1 << w_src) - 1}" if w_dst > w_src else x)
    elif w_dst == 1:
        g.assign(op, f"bool({x} & 1)")
    else:
        g.assign(op, wrap_expr(x, w_dst))


@register(arith.ExtSIOp)
def _extsi(op: Operation, g: FunctionBuilder) -> None:
    _int_cast(op, g, "extsi")


@register(arith.ExtUIOp)
def _extui(op: Operation, g: FunctionBuilder) -> None:
    _int_cast(op, g, "extui")


@register(arith.TruncIOp)
def _trunci(op: Operation, g: FunctionBuilder) -> None:
    _int_cast(op, g, "trunci")


@register(arith.SIToFPOp, arith.UIToFPOp)
def _itofp(op: Operation, g: FunctionBuilder) -> None:
    x = g.v(op.operands[0])
    src, dst = _src_dst(op)
    unsigned = isinstance(op, arith.UIToFPOp)
    if g.arr_op(op):
        fn = helpers.uitofp_a if unsigned else helpers.sitofp_a
        g.assign(op, f"{g.const(fn, 'itofp')}({x}, {dt_expr(g, src)}, {dt_expr(g, dst)})")
        return
    ctor = scalar_ctor(op.results[0].type)
    w = int_width(op.operands[0].type) or 64
    if w == 1:
        g.assign(op, f"{ctor}({'' if unsigned else '-'}int({x}))")
    elif unsigned:
        g.assign(op, f"{ctor}({x} & {(1 << w) - 1})")
    else:
        g.assign(op, f"{ctor}({x})")


@register(arith.FPToSIOp, arith.FPToUIOp)
def _fptoi(op: Operation, g: FunctionBuilder) -> None:
    x = g.v(op.operands[0])
    _, dst = _src_dst(op)
    unsigned = isinstance(op, arith.FPToUIOp)
    if g.arr_op(op):
        g.assign(op, f"{g.const(helpers.fptoi_a, 'fptoi_a')}({x}, {dt_expr(g, dst)}, {unsigned})")
        return
    w = int_width(op.results[0].type) or 64
    if w == 1:
        g.assign(op, f"bool({g.const(helpers.fptosi, 'fptosi')}({x}, 2) & 1)")
    else:
        fn = helpers.fptoui if unsigned else helpers.fptosi
        g.assign(op, f"{g.const(fn, 'fptoi')}({x}, {w})")


@register(arith.ExtFOp, arith.TruncFOp)
def _fcast(op: Operation, g: FunctionBuilder) -> None:
    x = g.v(op.operands[0])
    src, dst = _src_dst(op)
    if g.arr_op(op) and _compared_narrow(op) is not None:
        g.bind(op.results[0], x, like=op.operands[0])  # the comparisons read the source
        return
    if g.arr_op(op):
        if is_bfloat16(src) or is_bfloat16(dst):  # float32 <-> bf16 as bit operations
            g.assign(op, f"{g.const(cast_float, 'cast_float')}({x}, {dt_expr(g, dst)})")
        else:
            g.assign(op, f"_np.asarray({x}).astype({dt_expr(g, dst)})")
    else:
        g.assign(op, f"{scalar_ctor(op.results[0].type)}({x})")


@register(arith.BitcastOp)
def _bitcast(op: Operation, g: FunctionBuilder) -> None:
    x = g.v(op.operands[0])
    src, dst = _src_dst(op)
    if g.arr_op(op):
        g.assign(op, f"{g.const(helpers.arr, 'asarr')}({x}, {dt_expr(g, src)}).view({dt_expr(g, dst)})")
        return
    raw = f"{g.const(helpers.bitcast_scalar, 'bitcast')}({x}, {dt_expr(g, src)}, {dt_expr(g, dst)})"
    ctor = scalar_ctor(op.results[0].type)
    g.assign(op, f"{ctor}({raw})")
