"""Control flow, calls, tensor/memref/bufferization/affine/tosa ops, compile errors."""

import numpy as np
import pytest

from shardc.runtime import CompileError, RuntimeExecutionError, compile_text


def test_scf_for_iter_args_if_and_calls():
    src = """func.func private @ext(i32) -> i32
func.func @sq(%x: i64) -> i64 {
  %r = arith.muli %x, %x : i64
  return %r : i64
}
func.func @f(%n: index) -> (i64, i64) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %s:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %z, %b = %one) -> (i64, i64) {
    %ii = arith.index_cast %i : index to i64
    %q = func.call @sq(%ii) : (i64) -> i64
    %na = arith.addi %a, %q : i64
    scf.yield %b, %na : i64, i64
  }
  %c = arith.cmpi sgt, %s#0, %s#1 : i64
  %r = scf.if %c -> (i64) {
    scf.yield %s#0 : i64
  } else {
    %m = arith.subi %z, %s#1 : i64
    scf.yield %m : i64
  }
  return %r, %s#1 : i64, i64
}
func.func @g(%x: i32) -> i32 {
  %r = func.call @ext(%x) : (i32) -> i32
  return %r : i32
}"""
    cm = compile_text(src)
    # reference: the yield swaps the carried pair
    a, b = 0, 1
    for i in range(5):
        a, b = b, a + i * i
    exp_r = a if a > b else -b
    assert cm.call("f", 5) == (exp_r, b)
    with pytest.raises(RuntimeExecutionError, match="external function @ext"):
        cm.call("g", 1)


def test_scf_while():
    src = """func.func @f(%x: i32) -> (i32, i32) {
  %c1 = arith.constant 1 : i32
  %c100 = arith.constant 100 : i32
  %r:2 = scf.while (%a = %x, %n = %c1) : (i32, i32) -> (i32, i32) {
    %c = arith.cmpi slt, %a, %c100 : i32
    scf.condition(%c) %a, %n : i32, i32
  } do {
  ^bb0(%a2: i32, %n2: i32):
    %d = arith.muli %a2, %a2 : i32
    %m = arith.addi %n2, %c1 : i32
    scf.yield %d, %m : i32, i32
  }
  return %r#0, %r#1 : i32, i32
}"""
    assert compile_text(src).call("f", 3) == (6561, 4)


def test_unsupported_op_error_names_op_and_function():
    src = """func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %o: tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> {
  %r = "test.unknown"(%x) : (tensor<1x3x8x8xf32>) -> tensor<1x4x6x6xf32>
  return %r : tensor<1x4x6x6xf32>
}"""
    from xdsl.parser import Parser

    from shardc.context import make_context
    from shardc.runtime import compile_module

    module = Parser(make_context(allow_unregistered=True), src).parse_module()
    with pytest.raises(CompileError, match=r"'test.unknown' in function @f: operation is not supported"):
        compile_module(module)
    halves = """#in = affine_map<(d0) -> (d0 floordiv 2)>
#id = affine_map<(d0) -> (d0)>
func.func @f(%x: tensor<4xf32>, %o: tensor<8xf32>) -> tensor<8xf32> {
  %r = linalg.generic {indexing_maps = [#in, #id], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%o : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}"""
    with pytest.raises(CompileError, match=r"'linalg.generic' in function @f: .*not supported by the runtime"):
        compile_text(halves)


def test_python_source_is_kept():
    cm = compile_text("func.func @f(%a: i64) -> i64 {\n  %r = arith.addi %a, %a : i64\n  return %r : i64\n}")
    assert "def fn__f(" in cm.source and "return" in cm.source
    assert cm["f"](3) == 6  # the raw callable is usable directly


def test_tensor_slices_and_reshapes(rng):
    X = rng.standard_normal((6, 8)).astype(np.float32)
    src = """func.func @f(%x: tensor<6x8xf32>, %o: index) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<6x8xf32>, f32, tensor<6x8xf32>, tensor<48xf32>, tensor<2x3x8xf32>, tensor<6x10xf32>, tensor<8x8xf32>, index) {
  %a = tensor.extract_slice %x[1, %o] [2, 3] [2, 2] : tensor<6x8xf32> to tensor<2x3xf32>
  %b = tensor.extract_slice %x[4, 1] [1, 3] [1, 1] : tensor<6x8xf32> to tensor<3xf32>
  %c = tensor.insert_slice %a into %x[0, 0] [2, 3] [3, 1] : tensor<2x3xf32> into tensor<6x8xf32>
  %c2 = arith.constant 2 : index
  %e = tensor.extract %x[%c2, %o] : tensor<6x8xf32>
  %z = arith.constant 0.0 : f32
  %i = tensor.insert %z into %x[%c2, %o] : tensor<6x8xf32>
  %col = tensor.collapse_shape %x [[0, 1]] : tensor<6x8xf32> into tensor<48xf32>
  %ex = tensor.expand_shape %x [[0, 1], [2]] output_shape [2, 3, 8] : tensor<6x8xf32> into tensor<2x3x8xf32>
  %p = tensor.pad %x low[0, 1] high[0, 1] {
  ^bb0(%i0: index, %i1: index):
    tensor.yield %z : f32
  } : tensor<6x8xf32> to tensor<6x10xf32>
  %s = tensor.extract_slice %x[0, 0] [2, 8] [1, 1] : tensor<6x8xf32> to tensor<2x8xf32>
  %cat = tensor.concat dim(0) %x, %s : (tensor<6x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  %c1 = arith.constant 1 : index
  %d = tensor.dim %cat, %c1 : tensor<8x8xf32>
  return %a, %b, %c, %e, %i, %col, %ex, %p, %cat, %d : tensor<2x3xf32>, tensor<3xf32>, tensor<6x8xf32>, f32, tensor<6x8xf32>, tensor<48xf32>, tensor<2x3x8xf32>, tensor<6x10xf32>, tensor<8x8xf32>, index
}"""
    X0 = X.copy()
    a, b, c, e, i, col, ex, p, cat, d = compile_text(src).call("f", X, 1)
    np.testing.assert_array_equal(a, X[1:4:2, 1:6:2])
    np.testing.assert_array_equal(b, X[4, 1:4])
    exp_c = X.copy()
    exp_c[0:4:3, 0:3] = a
    np.testing.assert_array_equal(c, exp_c)
    assert e == X[2, 1] and isinstance(e, np.float32)
    exp_i = X.copy()
    exp_i[2, 1] = 0
    np.testing.assert_array_equal(i, exp_i)
    np.testing.assert_array_equal(col, X.reshape(48))
    np.testing.assert_array_equal(ex, X.reshape(2, 3, 8))
    np.testing.assert_array_equal(p, np.pad(X, ((0, 0), (1, 1))))
    np.testing.assert_array_equal(cat, np.concatenate([X, X[:2]]))
    assert d == 8
    np.testing.assert_array_equal(X, X0)  # inputs untouched


def test_tensor_splat_from_elements_empty_dynamic():
    src = """func.func @f(%v: i32, %n: index) -> (tensor<2x2xi32>, tensor<3xi32>, tensor<?x2xf64>) {
  %s = tensor.splat %v : tensor<2x2xi32>
  %c = arith.constant 5 : i32
  %f = tensor.from_elements %v, %c, %v : tensor<3xi32>
  %e = tensor.empty(%n) : tensor<?x2xf64>
  return %s, %f, %e : tensor<2x2xi32>, tensor<3xi32>, tensor<?x2xf64>
}"""
    s, f, e = compile_text(src).call("f", 7, 4)
    assert s.tolist() == [[7, 7], [7, 7]] and f.tolist() == [7, 5, 7] and e.shape == (4, 2)


def test_memref_subview_aliasing_and_bufferization():
    src = """func.func @f(%t: tensor<4x4xf32>) -> (tensor<4x4xf32>, f32) {
  %m = bufferization.to_buffer %t : tensor<4x4xf32> to memref<4x4xf32>
  %sv = memref.subview %m[1, 1] [2, 2] [1, 2] : memref<4x4xf32> to memref<2x2xf32, strided<[4, 2], offset: 5>>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = arith.constant 9.0 : f32
  memref.store %v, %sv[%c1, %c1] : memref<2x2xf32, strided<[4, 2], offset: 5>>
  %row = memref.subview %m[3, 0] [1, 4] [1, 1] : memref<4x4xf32> to memref<4xf32, strided<[1], offset: 12>>
  %a = memref.alloc() : memref<4xf32>
  %w = arith.constant 2.0 : f32
  linalg.fill ins(%w : f32) outs(%a : memref<4xf32>)
  memref.copy %a, %row : memref<4xf32> to memref<4xf32, strided<[1], offset: 12>>
  %l = memref.load %m[%c1, %c1] : memref<4x4xf32>
  memref.dealloc %a : memref<4xf32>
  %r = bufferization.to_tensor %m restrict : memref<4x4xf32> to tensor<4x4xf32>
  return %r, %l : tensor<4x4xf32>, f32
}"""
    T = np.arange(16, dtype=np.float32).reshape(4, 4)
    T0 = T.copy()
    r, l = compile_text(src).call("f", T)
    exp = T0.copy()
    exp[2, 3] = 9.0  # subview (1,1)+(1,1)*(1,2)
    exp[3, :] = 2.0
    np.testing.assert_array_equal(r, exp)
    assert l == T0[1, 1]
    np.testing.assert_array_equal(T, T0)  # to_buffer copied: the tensor is untouched


def test_memref_collapse_expand_alias():
    src = """func.func @f(%m: memref<2x3xi64>) {
  %c = memref.collapse_shape %m [[0, 1]] : memref<2x3xi64> into memref<6xi64>
  %c4 = arith.constant 4 : index
  %v = arith.constant 42 : i64
  memref.store %v, %c[%c4] : memref<6xi64>
  %e = memref.expand_shape %c [[0, 1]] output_shape [3, 2] : memref<6xi64> into memref<3x2xi64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %w = arith.constant -1 : i64
  memref.store %w, %e[%c0, %c1] : memref<3x2xi64>
  return
}"""
    M = np.zeros((2, 3), np.int64)
    compile_text(src).call("f", M)
    assert M.tolist() == [[0, -1, 0], [0, 42, 0]]


def test_affine_ops():
    src = """func.func @f(%a: index, %b: index) -> (index, index, index) {
  %0 = affine.apply affine_map<(d0)[s0] -> (d0 floordiv 4 + s0 mod 3 - d0 ceildiv 2)>(%a)[%b]
  %1 = affine.min affine_map<(d0, d1) -> (d0, d1 * 2, 17)>(%a, %b)
  %c0 = arith.constant 0 : index
  %s = affine.for %i = 0 to 10 step 3 iter_args(%acc = %c0) -> (index) {
    %n = arith.addi %acc, %i : index
    affine.yield %n : index
  }
  return %0, %1, %s : index, index, index
}"""
    a, b = -7, 11
    assert compile_text(src).call("f", a, b) == (a // 4 + b % 3 - (-((-a) // 2)), min(a, 2 * b, 17), 0 + 3 + 6 + 9)


def test_tosa_ops(rng):
    A = rng.standard_normal((2, 3, 4)).astype(np.float32)
    B = rng.standard_normal((2, 4, 5)).astype(np.float32)
    b = rng.standard_normal((1, 1, 4)).astype(np.float32)
    src = """func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>, %bias: tensor<1x1x4xf32>) -> (tensor<2x3x5xf32>, tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<2x3x4xf32>, tensor<2x3x1xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %m = tosa.matmul %a, %b, %zp, %zp : (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x3x5xf32>
  %s = tosa.add %a, %bias : (tensor<2x3x4xf32>, tensor<1x1x4xf32>) -> tensor<2x3x4xf32>
  %r = tosa.reduce_sum %a {axis = 1 : i32} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  %c = tosa.clamp %a {min_val = -0.5 : f32, max_val = 0.5 : f32} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %x = tosa.reduce_max %a {axis = 2 : i32} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  return %m, %s, %r, %c, %x : tensor<2x3x5xf32>, tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<2x3x4xf32>, tensor<2x3x1xf32>
}"""
    m, s, r, c, x = compile_text(src).call("f", A, B, b)
    np.testing.assert_allclose(m, A @ B, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(s, A + b)
    np.testing.assert_allclose(r, A.sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(c, np.clip(A, -0.5, 0.5))
    np.testing.assert_array_equal(x, A.max(2, keepdims=True))


def test_tosa_mul_shift():
    src = """func.func @f(%a: tensor<3xi32>, %b: tensor<3xi32>) -> tensor<3xi32> {
  %s = "tosa.const"() <{values = dense<2> : tensor<1xi8>}> : () -> tensor<1xi8>
  %m = tosa.mul %a, %b, %s : (tensor<3xi32>, tensor<3xi32>, tensor<1xi8>) -> tensor<3xi32>
  return %m : tensor<3xi32>
}"""
    a = np.array([5, -5, 7], np.int32)
    b = np.array([3, 3, 1], np.int32)
    got = compile_text(src).call("f", a, b)
    assert got.tolist() == [(int(x) * int(y) + 2) >> 2 for x, y in zip(a, b)]


def test_bf16_is_rejected_clearly():
    from shardc.runtime.execute.dtypes import UnsupportedTypeError

    src = """func.func @f(%a: tensor<2xbf16>) -> tensor<2xbf16> {
  %r = arith.addf %a, %a : tensor<2xbf16>
  return %r : tensor<2xbf16>
}"""
    with pytest.raises(UnsupportedTypeError, match="bf16"):
        compile_text(src).call("f", [1.0, 2.0])
