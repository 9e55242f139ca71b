"""arith/math on scalars and tensors against Python big-int / numpy references."""

import math

import numpy as np
import pytest

from shardc.runtime import compile_text

INT_TYPES = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64}


def wrap(v, w):
    h = 1 << (w - 1)
    return ((v + h) & ((1 << w) - 1)) - h


def u(v, w):
    return v & ((1 << w) - 1)


def tdiv(a, b):
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


REF = {
    "addi": lambda a, b, w: wrap(a + b, w),
    "subi": lambda a, b, w: wrap(a - b, w),
    "muli": lambda a, b, w: wrap(a * b, w),
    "divsi": lambda a, b, w: wrap(tdiv(a, b), w),
    "remsi": lambda a, b, w: wrap(a - b * tdiv(a, b), w),
    "floordivsi": lambda a, b, w: wrap(a // b, w),
    "ceildivsi": lambda a, b, w: wrap(-((-a) // b), w),
    "divui": lambda a, b, w: wrap(u(a, w) // u(b, w), w),
    "remui": lambda a, b, w: wrap(u(a, w) % u(b, w), w),
    "ceildivui": lambda a, b, w: wrap(-((-u(a, w)) // u(b, w)), w),
    "maxsi": lambda a, b, w: max(a, b),
    "minsi": lambda a, b, w: min(a, b),
    "maxui": lambda a, b, w: a if u(a, w) >= u(b, w) else b,
    "minui": lambda a, b, w: a if u(a, w) <= u(b, w) else b,
    "andi": lambda a, b, w: wrap(a & b, w),
    "ori": lambda a, b, w: wrap(a | b, w),
    "xori": lambda a, b, w: wrap(a ^ b, w),
    "shli": lambda a, b, w: wrap(a << u(b, w), w) if u(b, w) < w else 0,
    "shrsi": lambda a, b, w: a >> u(b, w) if u(b, w) < w else 0,
    "shrui": lambda a, b, w: wrap(u(a, w) >> u(b, w), w) if u(b, w) < w else 0,
}
DIVS = {"divsi", "remsi", "floordivsi", "ceildivsi", "divui", "remui", "ceildivui"}


def _values(w, rng, n):
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    edge = [lo, hi, -1, 0, 1, 2, -2, 7, -7]
    return edge + [int(x) for x in rng.integers(lo, hi, size=n, endpoint=True)]


@pytest.mark.parametrize("ty", list(INT_TYPES))
@pytest.mark.parametrize("opname", list(REF))
def test_int_binary_scalar_and_tensor(opname, ty, rng):
    w = int(ty[1:])
    a_vals = _values(w, rng, 12)
    b_vals = list(reversed(_values(w, rng, 12)))
    if opname.startswith("sh"):
        b_vals = [b % (w + 3) for b in b_vals]
    pairs = [(a, b) for a, b in zip(a_vals, b_vals) if not (opname in DIVS and b == 0)]
    pairs = [(a, b) for a, b in pairs if not (opname in ("divsi", "ceildivsi", "floordivsi") and a == -(1 << (w - 1)) and b == -1)]
    n = len(pairs)
    src = f"""
    func.func @s(%a: {ty}, %b: {ty}) -> {ty} {{
      %r = arith.{opname} %a, %b : {ty}
      return %r : {ty}
    }}
    func.func @t(%a: tensor<{n}x{ty}>, %b: tensor<{n}x{ty}>) -> tensor<{n}x{ty}> {{
      %r = arith.{opname} %a, %b : tensor<{n}x{ty}>
      return %r : tensor<{n}x{ty}>
    }}"""
    cm = compile_text(src)
    expected = [REF[opname](a, b, w) for a, b in pairs]
    got_s = [cm.call("s", a, b) for a, b in pairs]
    assert got_s == expected
    A = np.array([a for a, _ in pairs], INT_TYPES[ty])
    B = np.array([b for _, b in pairs], INT_TYPES[ty])
    A0, B0 = A.copy(), B.copy()
    got_t = cm.call("t", A, B)
    assert got_t.dtype == INT_TYPES[ty]
    assert got_t.tolist() == expected
    assert (A == A0).all() and (B == B0).all()  # inputs never mutated


CMPI = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]


def _cmpi_ref(p, a, b, w):
    if p[0] == "u":
        a, b = u(a, w), u(b, w)
    return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[p[-2:] if p not in ("eq", "ne") else p]


@pytest.mark.parametrize("pred", CMPI)
@pytest.mark.parametrize("ty", ["i8", "i32", "i64", "index"])
def test_cmpi(pred, ty, rng):
    # Tensor compares use the generic form: xDSL's custom cmpi/cmpf syntax infers an i1
    # result even for tensor operands.
    w = 64 if ty == "index" else int(ty[1:])
    vals = _values(w, rng, 6)
    pairs = [(a, b) for a in vals[:8] for b in vals[:8]]
    src = f"""func.func @s(%a: {ty}, %b: {ty}) -> i1 {{
      %r = arith.cmpi {pred}, %a, %b : {ty}
      return %r : i1
    }}
    func.func @t(%a: tensor<{len(pairs)}x{ty}>, %b: tensor<{len(pairs)}x{ty}>) -> tensor<{len(pairs)}xi1> {{
      %r = "arith.cmpi"(%a, %b) <{{predicate = {CMPI.index(pred)} : i64}}> : (tensor<{len(pairs)}x{ty}>, tensor<{len(pairs)}x{ty}>) -> tensor<{len(pairs)}xi1>
      return %r : tensor<{len(pairs)}xi1>
    }}"""
    cm = compile_text(src)
    exp = [_cmpi_ref(pred, a, b, w) for a, b in pairs]
    assert [cm.call("s", a, b) for a, b in pairs] == exp
    dt = np.int64 if ty == "index" else INT_TYPES[ty]
    got = cm.call("t", np.array([a for a, _ in pairs], dt), np.array([b for _, b in pairs], dt))
    assert got.dtype == np.bool_ and got.tolist() == exp


def test_i1_ops():
    src = """func.func @f(%a: i1, %b: i1) -> (i1, i1, i1, i1, i1, i32, i32) {
      %0 = arith.addi %a, %b : i1
      %1 = arith.muli %a, %b : i1
      %2 = arith.cmpi slt, %a, %b : i1
      %3 = arith.maxsi %a, %b : i1
      %4 = arith.cmpi ult, %a, %b : i1
      %5 = arith.extsi %a : i1 to i32
      %6 = arith.extui %a : i1 to i32
      return %0, %1, %2, %3, %4, %5, %6 : i1, i1, i1, i1, i1, i32, i32
    }"""
    cm = compile_text(src)
    # i1 true is -1 when signed: slt(true, false) holds, maxsi(true, false) is false.
    assert cm.call("f", True, False) == (True, False, True, False, False, -1, 1)
    assert cm.call("f", True, True) == (False, True, False, True, False, -1, 1)


CMPF = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true"]


@pytest.mark.parametrize("pred", CMPF)
def test_cmpf_with_nan(pred):
    vals = [1.0, 2.0, float("nan"), -0.0, 0.0, float("inf")]
    pairs = [(a, b) for a in vals for b in vals]

    def ref(a, b):
        unord = math.isnan(a) or math.isnan(b)
        base = {"eq": a == b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b, "ne": a != b and not unord}
        if pred == "false":
            return False
        if pred == "true":
            return True
        if pred == "ord":
            return not unord
        if pred == "uno":
            return unord
        key = pred[1:]
        if pred[0] == "o":
            return (not unord) and (base[key] if key != "ne" else a != b)
        return unord or (base[key] if key != "ne" else a != b)

    n = len(pairs)
    src = f"""func.func @s(%a: f32, %b: f32) -> i1 {{
      %r = arith.cmpf {pred}, %a, %b : f32
      return %r : i1
    }}
    func.func @t(%a: tensor<{n}xf64>, %b: tensor<{n}xf64>) -> tensor<{n}xi1> {{
      %r = "arith.cmpf"(%a, %b) <{{predicate = {CMPF.index(pred)} : i64}}> : (tensor<{n}xf64>, tensor<{n}xf64>) -> tensor<{n}xi1>
      return %r : tensor<{n}xi1>
    }}"""
    cm = compile_text(src)
    exp = [ref(a, b) for a, b in pairs]
    assert [bool(cm.call("s", a, b)) for a, b in pairs] == exp
    got = cm.call("t", np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]))
    assert got.tolist() == exp


@pytest.mark.parametrize("ty,dt", [("f32", np.float32), ("f64", np.float64), ("f16", np.float16)])
def test_float_ops(ty, dt, rng):
    a = rng.standard_normal((3, 4)).astype(dt)
    b = rng.standard_normal((3, 4)).astype(dt)
    a[0, 0] = np.nan
    T = f"tensor<3x4x{ty}>"
    src = f"""func.func @f(%a: {T}, %b: {T}) -> ({T}, {T}, {T}, {T}, {T}, {T}, {T}, {T}, {T}) {{
      %0 = arith.addf %a, %b : {T}
      %1 = arith.subf %a, %b : {T}
      %2 = arith.mulf %a, %b : {T}
      %3 = arith.divf %a, %b : {T}
      %4 = arith.maximumf %a, %b : {T}
      %5 = arith.minnumf %a, %b : {T}
      %6 = arith.negf %a : {T}
      %7 = math.exp %a : {T}
      %8 = math.tanh %b : {T}
      return %0, %1, %2, %3, %4, %5, %6, %7, %8 : {T}, {T}, {T}, {T}, {T}, {T}, {T}, {T}, {T}
    }}"""
    got = compile_text(src).call("f", a, b)
    exp = [a + b, a - b, a * b, a / b, np.maximum(a, b), np.fmin(a, b), -a, np.exp(a), np.tanh(b)]
    for g, e in zip(got, exp):
        assert g.dtype == dt
        np.testing.assert_array_equal(g, e)


def test_scalar_float_rounding_and_division_by_zero():
    src = """func.func @f(%a: f32, %b: f32) -> (f32, f32) {
      %0 = arith.addf %a, %b : f32
      %1 = arith.divf %a, %b : f32
      return %0, %1 : f32, f32
    }"""
    s, d = compile_text(src).call("f", 1.0, 1e-8)
    assert s == np.float32(1.0) and isinstance(s, np.float32)
    _, d = compile_text(src).call("f", 1.0, 0.0)
    assert np.isinf(d)


def test_casts():
    src = """func.func @f(%i: i32, %x: f32, %n: index) -> (index, i8, i64, i64, f64, f32, i32, i32, f64, f16, i32, i16, f32) {
      %0 = arith.index_cast %i : i32 to index
      %1 = arith.index_cast %n : index to i8
      %2 = arith.extsi %i : i32 to i64
      %3 = arith.extui %i : i32 to i64
      %4 = arith.sitofp %i : i32 to f64
      %5 = arith.uitofp %i : i32 to f32
      %6 = arith.fptosi %x : f32 to i32
      %7 = arith.bitcast %x : f32 to i32
      %8 = arith.extf %x : f32 to f64
      %9 = arith.truncf %x : f32 to f16
      %10 = arith.fptoui %x : f32 to i32
      %11 = arith.trunci %i : i32 to i16
      %12 = arith.bitcast %7 : i32 to f32
      return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12 : index, i8, i64, i64, f64, f32, i32, i32, f64, f16, i32, i16, f32
    }"""
    r = compile_text(src).call("f", -5, -2.75, 300)
    assert r[0] == -5 and r[1] == 44 and r[2] == -5 and r[3] == 2**32 - 5
    assert r[4] == -5.0 and r[5] == np.float32(2**32 - 5) and r[6] == -2
    assert r[7] == int(np.array(-2.75, np.float32).view(np.int32))
    assert r[8] == -2.75 and r[9] == np.float16(-2.75) and r[11] == -5 and r[12] == np.float32(-2.75)
    # Array casts (xDSL's casts take scalars only) are tested in linalg bodies: test_linalg.py.


def test_select_and_constants():
    src = """func.func @f(%c: i1, %m: tensor<3xi1>) -> (i32, tensor<3xf32>, tensor<2x2xi64>) {
      %a = arith.constant 7 : i32
      %b = arith.constant -3 : i32
      %s = arith.select %c, %a, %b : i32
      %x = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
      %y = arith.constant dense<-1.5> : tensor<3xf32>
      %t = "arith.select"(%m, %x, %y) : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      %k = arith.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
      return %s, %t, %k : i32, tensor<3xf32>, tensor<2x2xi64>
    }"""
    s, t, k = compile_text(src).call("f", False, np.array([True, False, True]))
    assert s == -3
    assert t.tolist() == [1.0, -1.5, 3.0] and t.dtype == np.float32
    assert k.tolist() == [[1, 2], [3, 4]]


def test_extended_mul_and_add():
    src = """func.func @f(%a: i32, %b: i32) -> (i32, i32, i32, i32, i32, i1) {
      %l, %h = arith.mulsi_extended %a, %b : i32
      %ul, %uh = arith.mului_extended %a, %b : i32
      %s, %o = arith.addui_extended %a, %b : i32, i1
      return %l, %h, %ul, %uh, %s, %o : i32, i32, i32, i32, i32, i1
    }"""
    a, b = -7, 2**30 + 5
    r = compile_text(src).call("f", a, b)
    p = a * b
    up = (a & 0xFFFFFFFF) * b
    assert r[:4] == (wrap(p, 32), wrap(p >> 32, 32), wrap(up, 32), wrap(up >> 32, 32))
    assert r[4] == wrap(a + b, 32) and r[5] is True
