"""Kernels of shardc's tosa overlay ops against numpy formulas."""

import math

import numpy as np
import pytest


def _unary(name, t="f32"):
    return f"""
func.func @f(%x: tensor<2x3x{t}>) -> tensor<2x3x{t}> {{
  %0 = tosa.{name} %x : (tensor<2x3x{t}>) -> tensor<2x3x{t}>
  return %0 : tensor<2x3x{t}>
}}"""


X = np.array([[-1.5, 0.0, 0.5], [2.0, -3.25, 1.0]], np.float32)


@pytest.mark.parametrize(
    "name,ref",
    [
        ("abs", np.abs),
        ("exp", np.exp),
        ("tanh", np.tanh),
        ("ceil", np.ceil),
        ("floor", np.floor),
        ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
        ("erf", np.vectorize(math.erf)),
    ],
)
def test_float_unary(run, name, ref):
    got = run(_unary(name), "f", X)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref(X.astype(np.float64)), rtol=1e-6, atol=1e-7)


def test_log_rsqrt(run):
    x = np.abs(X) + 1
    np.testing.assert_allclose(run(_unary("log"), "f", x), np.log(x), rtol=1e-6)
    np.testing.assert_allclose(run(_unary("rsqrt"), "f", x), 1 / np.sqrt(x), rtol=1e-6)


def test_int_unary(run):
    x = np.array([[0, 1, -1], [255, 1 << 20, 7]], np.int32)
    np.testing.assert_array_equal(run(_unary("bitwise_not", "i32"), "f", x), ~x)
    np.testing.assert_array_equal(run(_unary("clz", "i32"), "f", x), [[32, 31, 0], [24, 11, 29]])
    b = np.array([[True, False, True], [False, False, True]])
    np.testing.assert_array_equal(run(_unary("logical_not", "i1"), "f", b), ~b)


NEG = """
func.func @f(%x: tensor<3xi8>) -> tensor<3xi8> {
  %izp = "tosa.const"() <{values = dense<ZI> : tensor<1xi8>}> : () -> tensor<1xi8>
  %ozp = "tosa.const"() <{values = dense<ZO> : tensor<1xi8>}> : () -> tensor<1xi8>
  %0 = tosa.negate %x, %izp, %ozp : (tensor<3xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<3xi8>
  return %0 : tensor<3xi8>
}"""


def test_negate_zero_points(run):
    x = np.array([-128, 5, 100], np.int8)
    np.testing.assert_array_equal(run(NEG.replace("ZI", "0").replace("ZO", "0"), "f", x), [127, -5, -100])
    np.testing.assert_array_equal(run(NEG.replace("ZI", "3").replace("ZO", "-2"), "f", x), [127, -4, -99])


def test_negate_float(run):
    text = """
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %0 = tosa.negate %x, %z, %z : (tensor<3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}"""
    np.testing.assert_array_equal(run(text, "f", [1.0, -2.0, 0.0]), [-1.0, 2.0, -0.0])


def _binary(name, t="f32", r=None):
    r = r or t
    return f"""
func.func @f(%a: tensor<2x3x{t}>, %b: tensor<1x3x{t}>) -> tensor<2x3x{r}> {{
  %0 = tosa.{name} %a, %b : (tensor<2x3x{t}>, tensor<1x3x{t}>) -> tensor<2x3x{r}>
  return %0 : tensor<2x3x{r}>
}}"""


B = np.array([[0.5, np.nan, -1.0]], np.float32)


@pytest.mark.parametrize(
    "name,ref,r",
    [
        ("maximum", np.maximum, None),
        ("minimum", np.minimum, None),
        ("equal", np.equal, "i1"),
        ("greater", np.greater, "i1"),
        ("greater_equal", np.greater_equal, "i1"),
    ],
)
def test_float_binary(run, name, ref, r):
    np.testing.assert_array_equal(run(_binary(name, r=r), "f", X, B), ref(X, B))


def test_maximum_nan_ignore(run):
    text = _binary("maximum").replace(": (tensor<2x3xf32>, tensor<1x3xf32>)", '{nan_mode = "IGNORE"} : (tensor<2x3xf32>, tensor<1x3xf32>)')
    np.testing.assert_array_equal(run(text, "f", X, B), np.fmax(X, B))


def test_pow(run):
    a, b = np.abs(X) + 1, np.array([[2.0, 0.5, -1.0]], np.float32)
    np.testing.assert_allclose(run(_binary("pow"), "f", a, b), np.power(a, b), rtol=1e-6)


def test_int_binary(run):
    a = np.array([[7, -7, 100], [-1, 8, 3]], np.int32)
    b = np.array([[2, 2, 3]], np.int32)
    np.testing.assert_array_equal(run(_binary("intdiv", "i32"), "f", a, b), [[3, -3, 33], [0, 4, 1]])
    np.testing.assert_array_equal(run(_binary("bitwise_and", "i32"), "f", a, b), a & b)
    np.testing.assert_array_equal(run(_binary("bitwise_or", "i32"), "f", a, b), a | b)
    np.testing.assert_array_equal(run(_binary("bitwise_xor", "i32"), "f", a, b), a ^ b)
    np.testing.assert_array_equal(run(_binary("logical_left_shift", "i32"), "f", a, b), a << b)
    want = (a.view(np.uint32) >> b.view(np.uint32)).view(np.int32)
    np.testing.assert_array_equal(run(_binary("logical_right_shift", "i32"), "f", a, b), want)


def test_logical_binary(run):
    a = np.array([[True, False, True], [False, True, False]])
    b = np.array([[True, True, False]])
    for name, ref in (("logical_and", np.logical_and), ("logical_or", np.logical_or), ("logical_xor", np.logical_xor)):
        np.testing.assert_array_equal(run(_binary(name, "i1"), "f", a, b), ref(a, b))


def test_select(run):
    text = """
func.func @f(%c: tensor<2x3xi1>, %a: tensor<2x3xf32>, %b: tensor<1x3xf32>) -> tensor<2x3xf32> {
  %0 = tosa.select %c, %a, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}"""
    c = X > 0
    np.testing.assert_array_equal(run(text, "f", c, X, B), np.where(c, X, B))


@pytest.mark.parametrize(
    "src,dst,x,want",
    [
        ("f32", "i8", [1.5, 2.5, -300.0, 200.0], [2, 2, -128, 127]),
        ("i32", "i8", [257, -129, 3, 0], [1, 127, 3, 0]),
        ("i32", "f32", [1, -2, 3, 0], [1.0, -2.0, 3.0, 0.0]),
        ("f32", "i1", [0.0, 1.0, -2.0, 0.0], [False, True, True, False]),
    ],
)
def test_cast(run, src, dst, x, want):
    text = f"""
func.func @f(%x: tensor<4x{src}>) -> tensor<4x{dst}> {{
  %0 = tosa.cast %x : (tensor<4x{src}>) -> tensor<4x{dst}>
  return %0 : tensor<4x{dst}>
}}"""
    got = run(text, "f", x)
    if (src, dst) == ("i32", "i8"):
        want = np.array(x, np.int32).astype(np.int8)  # wraps
    np.testing.assert_array_equal(got, want)


def test_reshape_transpose(run):
    text = """
func.func @f(%x: tensor<6xf32>) -> tensor<3x2xf32> {
  %s = tosa.const_shape {values = dense<[2, -1]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %r = tosa.reshape %x, %s : (tensor<6xf32>, !tosa.shape<2>) -> tensor<2x3xf32>
  %t = tosa.transpose %r {perms = array<i32: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %t : tensor<3x2xf32>
}"""
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(run(text, "f", x), x.reshape(2, 3).T)
