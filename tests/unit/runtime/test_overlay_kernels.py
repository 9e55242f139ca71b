"""Kernels of the overlay ops from shardc.dialects.{linalg,tensor,scf,memref}: linalg.map
and batch_matmul, tensor.rank and generate, scf.forall and parallel, memref.global."""

from pathlib import Path

import numpy as np

from shardc.runtime import compile_text

PROG = (Path(__file__).parent / "overlay_ops.mlir").read_text()


def test_overlay_ops(rng):
    a = rng.standard_normal(4).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    A = rng.standard_normal((2, 3, 4)).astype(np.float32)
    B = rng.standard_normal((2, 4, 5)).astype(np.float32)
    m, bm, r, g, fa, s, gm = compile_text(PROG).call("f", a, b, A, B, 3)
    np.testing.assert_array_equal(m, a * b)
    np.testing.assert_allclose(bm, A @ B, rtol=1e-5)
    assert r == 3
    np.testing.assert_array_equal(g, np.arange(9).reshape(3, 3))
    np.testing.assert_array_equal(fa, np.concatenate([a, a]))
    assert s == 10
    np.testing.assert_array_equal(gm, [1, 2, 3])


def test_generate_with_a_gather_body_falls_back_to_a_loop():
    text = """
func.func @f(%t: tensor<5xf32>) -> tensor<5xf32> {
  %g = tensor.generate {
  ^bb0(%i: index):
    %c4 = arith.constant 4 : index
    %j = arith.subi %c4, %i : index
    %v = tensor.extract %t[%j] : tensor<5xf32>
    tensor.yield %v : f32
  } : tensor<5xf32>
  return %g : tensor<5xf32>
}"""
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(compile_text(text).call("f", x), x[::-1])


def test_parallel_without_reductions_and_2d_forall():
    text = """
func.func @f(%m: memref<2x3xindex>, %t: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c2, %c3) step (%c1, %c1) {
    %v = arith.muli %i, %j : index
    memref.store %v, %m[%i, %j] : memref<2x3xindex>
    scf.reduce
  }
  %out = tensor.empty() : tensor<4x6xf32>
  %r = scf.forall (%i, %j) in (2, 2) shared_outs(%o = %out) -> (tensor<4x6xf32>) {
    %oi = arith.muli %i, %c2 : index
    %oj = arith.muli %j, %c3 : index
    %s = tensor.extract_slice %t[%oi, %oj] [2, 3] [1, 1] : tensor<4x6xf32> to tensor<2x3xf32>
    %n = arith.negf %s : tensor<2x3xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %n into %o[%oi, %oj] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<4x6xf32>
    }
  }
  return %r : tensor<4x6xf32>
}"""
    m = np.zeros((2, 3), np.int64)
    t = np.arange(24, dtype=np.float32).reshape(4, 6)
    out = compile_text(text).call("f", m, t)
    np.testing.assert_array_equal(m, np.outer(np.arange(2), np.arange(3)))
    np.testing.assert_array_equal(out, -t)
