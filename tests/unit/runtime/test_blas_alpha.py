"""A contraction's scalar constant factor runs as BLAS's alpha (`kernels/blas.py`,
`structured.contract2`): no pass over the result or over an operand. Results equal the
product scaled afterwards (bitwise for a power-of-two factor, within float32 rounding
otherwise) on every path a product takes: one gemm, the strided batch, the
pointer-array batch (per-head views of a fused qkv array), a weight broadcast over the
batch, beta = 1 into an accumulator, numpy's matmul below MKL's thresholds or with
MKL off, and the batched-dot (vecdot / einsum) paths (the GPT step's use of it:
tests/unit/training/test_attention_passes.py)."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.execute.kernels import blas

RNG = np.random.default_rng(5)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture(params=["mkl", "openblas", "numpy"])
def mode(request, monkeypatch):
    """Every product through MKL or OpenBLAS however small (where they load), or numpy's matmul."""
    if request.param != "numpy":
        monkeypatch.setattr(blas, "MIN_FLOPS", 0)
        monkeypatch.setattr(blas, "MIN_MATRIX_FLOPS", 0)
    monkeypatch.setenv("SHARDC_BLAS", request.param)
    return request.param


def _operands(kind):
    """(a, b, out) views for one of the layouts `blas.matmul` dispatches on."""
    if kind == "gemm":
        return rand(37, 19), rand(19, 23), np.empty((37, 23), np.float32)
    if kind == "transposed":
        return rand(19, 37).T, rand(23, 19).T, np.empty((37, 23), np.float32)
    # Batches of matrices above OpenBLAS's small-matrix bound (`blas.OPENBLAS_SMALL`),
    # scaled down so that float32 sums of 100 terms stay within the tolerance.
    if kind == "strided_batch":
        return rand(3, 101, 100) / 8, rand(3, 100, 100) / 8, np.empty((3, 101, 100), np.float32)
    if kind == "pointer_batch":  # q and k^T per (batch, head) out of one [b, t, 3, h, d] array
        qkv = rand(2, 128, 3, 2, 64) / 8
        return qkv[:, :, 0].transpose(0, 2, 1, 3), qkv[:, :, 1].transpose(0, 2, 3, 1), np.empty((2, 2, 128, 128), np.float32)
    if kind == "broadcast_weight":
        return rand(4, 101, 100) / 8, np.broadcast_to(rand(100, 100) / 8, (4, 100, 100)), np.empty((4, 101, 100), np.float32)
    if kind == "column_major_out":
        return rand(12, 5), rand(5, 9), np.empty((9, 12), np.float32).T
    raise AssertionError(kind)


KINDS = ["gemm", "transposed", "strided_batch", "pointer_batch", "broadcast_weight", "column_major_out"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("alpha", [0.125, -0.3])
def test_matmul_alpha(kind, alpha, mode):
    a, b, out = _operands(kind)
    before = blas.calls()
    got = blas.matmul(a, b, out, alpha=alpha)
    assert got is out
    want = np.matmul(a.astype(np.float64), b.astype(np.float64)) * alpha
    np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-5)
    if mode != "numpy" and blas.enabled():
        assert blas.calls() > before
    if alpha == 0.125:  # a power of two: exactly the unscaled product, scaled
        plain = blas.matmul(a, b, np.empty_like(out), alpha=1.0)
        assert np.array_equal(out, plain * np.float32(alpha))


@pytest.mark.parametrize("kind", ["gemm", "pointer_batch", "strided_batch"])
def test_matmul_alpha_accumulates_with_beta(kind, mode):
    a, b, out = _operands(kind)
    acc = rand(*out.shape)
    out[...] = acc
    blas.matmul(a, b, out, beta=1.0, alpha=0.25)
    np.testing.assert_allclose(out, acc + 0.25 * np.matmul(a.astype(np.float64), b.astype(np.float64)), rtol=2e-5, atol=2e-5)


def test_matmul_alpha_on_the_numpy_fallback():
    """Dtypes MKL does not take (an int product) still get alpha, beta."""
    a, b = RNG.integers(-3, 4, (5, 4)), RNG.integers(-3, 4, (4, 6))
    out = np.ones((5, 6))
    blas.matmul(a.astype(np.float64), b.astype(np.float64), out, beta=2.0, alpha=0.5)
    np.testing.assert_array_equal(out, 2.0 + 0.5 * (a @ b))


def scaled_contraction(sa, sb, sc, ma, mb, mc, iters, c, init=None):
    """@f(%a, %b[, %init]) = init (or zeros) + sum(a * b * c) with c an f32 constant in the body."""
    ta, tb, tc = (f"tensor<{'x'.join(map(str, s))}xf32>" for s in (sa, sb, sc))
    its = ", ".join(f'"{t}"' for t in iters)
    args = f"%a: {ta}, %b: {tb}" + (f", %i: {tc}" if init else "")
    start = "%i" if init else "%z"
    return f"""
func.func @f({args}) -> {tc} {{
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : {tc}
  %z = linalg.fill ins(%zero : f32) outs(%e : {tc}) -> {tc}
  %c = linalg.generic {{indexing_maps = [affine_map<{ma}>, affine_map<{mb}>, affine_map<{mc}>], iterator_types = [{its}]}}
      ins(%a, %b : {ta}, {tb}) outs({start} : {tc}) {{
  ^bb0(%p: f32, %q: f32, %o: f32):
    %k = arith.constant {c:e} : f32
    %m = arith.mulf %p, %q : f32
    %mk = arith.mulf %m, %k : f32
    %s = arith.addf %o, %mk : f32
    linalg.yield %s : f32
  }} -> {tc}
  return %c : {tc}
}}
"""


CASES = {
    "scores": ((2, 9, 4, 8), (2, 9, 4, 8), (2, 4, 9, 9), "(d0, d1, d2, d3, d4) -> (d0, d2, d1, d4)", "(d0, d1, d2, d3, d4) -> (d0, d3, d1, d4)",
               "(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)", ["parallel"] * 4 + ["reduction"], lambda a, b: np.einsum("bthd,buhd->bhtu", a, b)),
    "matmul": ((7, 5), (5, 3), (7, 3), "(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)",
               ["parallel", "parallel", "reduction"], lambda a, b: a @ b),
    "dot_over_last_axis": ((4, 6, 9), (4, 6, 9), (4, 6), "(d0, d1, d2) -> (d0, d1, d2)", "(d0, d1, d2) -> (d0, d1, d2)",
                           "(d0, d1, d2) -> (d0, d1)", ["parallel", "parallel", "reduction"], lambda a, b: np.einsum("btc,btc->bt", a, b)),
    "dot_over_outer_axes": ((4, 6, 9), (4, 6, 9), (9,), "(d0, d1, d2) -> (d1, d2, d0)", "(d0, d1, d2) -> (d1, d2, d0)",
                            "(d0, d1, d2) -> (d0)", ["parallel", "reduction", "reduction"], lambda a, b: np.einsum("btc,btc->c", a, b)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("c", [0.125, 0.7])
@pytest.mark.parametrize("with_init", [False, True])
def test_constant_factor_in_a_contraction(case, c, with_init, mode):
    sa, sb, sc, ma, mb, mc, iters, ref = CASES[case]
    cm = compile_text(scaled_contraction(sa, sb, sc, ma, mb, mc, iters, c, init=with_init))
    a, b = rand(*sa), rand(*sb)
    init = rand(*sc)
    got = cm.call("f", a, b, init) if with_init else cm.call("f", a, b)
    want = ref(a.astype(np.float64), b.astype(np.float64)) * np.float64(np.float32(c)) + (init if with_init else 0)
    np.testing.assert_allclose(got, want, rtol=3e-5, atol=3e-5)
