"""The run-time path's per-layout decisions (`blas._Recipe`, `structured_run.sum_axes`'s
plans, `MatmulPlan.shapes`, `CompiledModule.call`'s argument fast path): a call site that
sees a new shape, dtype or layout (strided, transposed, broadcast operands) decides
afresh, the thresholds and switches read at every call still count, and results are
bitwise those of deciding at every call (the caches emptied before each)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from shardc.runtime import compile_text
from shardc.runtime.execute import structured_run as sr
from shardc.runtime.execute.compiled import RuntimeExecutionError
from shardc.runtime.execute.kernels import blas


RNG = np.random.default_rng(11)


@pytest.fixture
def every_size(blas_library):
    return blas_library


def no_caches(monkeypatch) -> None:
    """Every call decides afresh (the tables emptied before each insertion)."""
    monkeypatch.setattr(blas, "MAX_RECIPES", 0)
    monkeypatch.setattr(sr, "MAX_CACHED_LAYOUTS", 0)
    monkeypatch.setattr(sr, "MAX_CACHED_SHAPES", 0)


def rand(*shape, dt=np.float32):
    return RNG.standard_normal(shape).astype(dt)


def layouts(a: np.ndarray):
    """`a` as C-ordered, transposed-in-memory (same values), and a strided slice's copy."""
    yield a
    yield np.asfortranarray(a) if a.ndim == 2 else np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
    big = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)
    big[..., ::2] = a
    yield big[..., ::2]  # unit stride lost: numpy's path


def test_one_call_site_sees_every_layout_in_turn(every_size):
    """The same shapes with other strides (a stale recipe would pass the wrong trans flag
    or leading dimension), then other shapes and dtypes, then the first again."""
    cases = []
    for dt in (np.float32, np.float64):
        a, b = rand(6, 5, dt=dt), rand(5, 7, dt=dt)
        cases += [(x, y) for x, y in itertools.product(layouts(a), layouts(b))]
        a3, b3 = rand(3, 6, 5, dt=dt), rand(3, 5, 7, dt=dt)
        cases += [(x, y) for x, y in itertools.product(layouts(a3), layouts(b3))]
        cases.append((a3, np.broadcast_to(b, (3, 5, 7))))  # a weight broadcast over the batch
        cases.append((rand(2, 6, 3, 5, dt=dt).transpose(0, 2, 1, 3), rand(2, 3, 5, 7, dt=dt)))  # heads interleaved
    for x, y in cases + cases[::-1]:
        want = np.matmul(x.astype(np.float64), y.astype(np.float64))
        for out in (np.empty(want.shape, x.dtype), np.empty(want.shape[::-1], x.dtype).T if want.ndim == 2 else np.empty(want.shape, x.dtype)):
            got = blas.matmul(x, y, out)
            assert got is out
            tol = 2e-5 if x.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_beta_and_alpha_are_per_call_not_per_layout(every_size):
    a, b = rand(2, 8, 4), rand(2, 4, 8)
    heads = rand(2, 8, 3, 4).transpose(0, 2, 1, 3)  # pointer-array batch path
    hb = rand(2, 3, 4, 8)
    for x, y in ((a, b), (heads, hb)):
        prod = np.matmul(x.astype(np.float64), y.astype(np.float64))
        acc0 = rand(*prod.shape)
        for alpha, beta in ((1.0, 0.0), (0.5, 1.0), (2.0, 0.0), (1.0, 1.0), (0.25, 1.0)):
            acc = acc0.copy()
            blas.matmul(x, y, acc, beta=beta, alpha=alpha)
            np.testing.assert_allclose(acc, alpha * prod + beta * acc0, rtol=3e-5, atol=3e-5)


def test_thresholds_and_switch_are_read_at_every_call(monkeypatch, every_size):
    a, b = rand(8, 8), rand(8, 8)
    out = np.empty((8, 8), np.float32)
    before = blas.calls()
    blas.matmul(a, b, out)
    assert blas.calls() == before + 1  # the recipe is made: the BLAS ran it
    monkeypatch.setattr(blas, "MIN_FLOPS", 1 << 40)
    blas.matmul(a, b, out)
    assert blas.calls() == before + 1  # same layout, now below the threshold: numpy
    monkeypatch.setattr(blas, "MIN_FLOPS", 0)
    monkeypatch.setenv("SHARDC_BLAS", "numpy")
    blas.matmul(a, b, out)
    assert blas.calls() == before + 1
    monkeypatch.setenv("SHARDC_BLAS", every_size)
    blas.matmul(a, b, out)
    assert blas.calls() == before + 2
    np.testing.assert_allclose(out, a @ b, rtol=2e-5, atol=2e-5)


def test_overlap_is_checked_per_call_not_per_layout(every_size):
    """Two calls of one layout, the second with `out` aliasing an input: numpy's path."""
    a = rand(6, 6)
    b = rand(6, 6)
    want = a.astype(np.float64) @ b.astype(np.float64)
    blas.matmul(a.copy(), b, np.empty((6, 6), np.float32))
    x = a.copy()
    before = blas.calls()
    blas.matmul(x, b, x)  # out is the first operand
    assert blas.calls() == before
    np.testing.assert_allclose(x, want, rtol=2e-5, atol=2e-5)


def test_data_pointers_read_from_the_array_struct_match_ctypes():
    base = np.arange(4 * 6 * 5, dtype=np.float64).reshape(4, 6, 5)
    views = [base, base[1:], base[:, 2:, 1:], base.transpose(2, 0, 1)[3:], base[::-1], base[..., ::-2], np.broadcast_to(base[0, 0], (7, 5))]
    for v in views:
        assert blas._address(v) == v.ctypes.data  # pyright: ignore[reportPrivateUsage]


def test_sum_axes_decides_per_layout():
    """Same shape, other strides and axes: each equal to numpy's reduce (bitwise the
    fresh decision), on the BLAS-ones path and the reduce path alike."""
    x = rand(4, 5, 6)
    variants = [x, np.ascontiguousarray(x.transpose(2, 1, 0)).transpose(2, 1, 0), x[:, ::-1], np.broadcast_to(x[:1], (4, 5, 6))]
    for _ in range(2):
        for v in variants:
            for axes in ((0,), (2,), (0, 1), (1, 2), (1,), (0, 2)):
                for keep in (False, True):
                    got = sr.sum_axes(v, axes, np.dtype(np.float32), keep)
                    np.testing.assert_allclose(got, v.sum(axis=axes, keepdims=keep, dtype=np.float64), rtol=1e-5, atol=1e-5)


def test_sum_axes_cached_equals_fresh_bitwise(monkeypatch):
    x = rand(3, 4, 8)
    cases = [(v, ax) for v in (x, x.transpose(2, 0, 1), x[:, 1:]) for ax in ((0,), (2,), (0, 1), (1, 2))]
    cached = [sr.sum_axes(v, ax, np.dtype(np.float32)) for v, ax in cases]
    cached_again = [sr.sum_axes(v, ax, np.dtype(np.float32)) for v, ax in cases]
    monkeypatch.setattr(sr, "MAX_CACHED_LAYOUTS", 0)
    fresh = [sr.sum_axes(v, ax, np.dtype(np.float32)) for v, ax in cases]
    for c, c2, f in zip(cached, cached_again, fresh):
        assert c.shape == f.shape and c.strides == f.strides and np.array_equal(c, f) and np.array_equal(c2, f)


def test_contract2_at_new_loop_sizes():
    """One plan (maps), loop sizes changing between calls: the shapes are per sizes."""
    sa, sb, so = (0, 1, 3), (0, 3, 2), (0, 1, 2)  # b m k, b k n -> b m n
    for b_, m, k, n in ((2, 3, 4, 5), (1, 7, 2, 3), (2, 3, 4, 5), (4, 1, 1, 6)):
        a, b = rand(b_, m, k), rand(b_, k, n)
        r, _ = sr.contract2(a, sa, b, sb, so, (b_, m, n, k), np.dtype(np.float32))
        np.testing.assert_allclose(r, np.matmul(a, b), rtol=2e-5, atol=2e-5)
    plan = sr.matmul_plan(sa, sb, so)
    assert plan.shapes((2, 3, 5, 4)) is plan.shapes([2, 3, 5, 4])  # kept, whatever the sequence type


MATMUL = """
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%i : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""


@pytest.mark.slow
def test_a_compiled_call_site_sees_new_shapes_and_layouts(every_size):
    """One linalg.matmul of a dynamic-shaped function called with other shapes and with
    transposed / strided operands in turn (every call through the same spec)."""
    fn = compile_text(MATMUL)
    cases = []
    for m, k, n in ((6, 5, 7), (3, 9, 2), (6, 5, 7)):
        a, b = rand(m, k), rand(k, n)
        cases += [(a, b), (np.asfortranarray(a), b), (a, np.asfortranarray(b)), (rand(k, m).T, rand(n, k).T)]
        big = rand(m, 2 * k)
        cases.append((big[:, ::2], b))
    for a, b in cases:
        got = fn.call("f", a, b)
        np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-5, atol=2e-5)


STATIC = """
func.func @g(%a: tensor<2x3xf32>, %s: f32) -> tensor<2x3xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %s : f32
    linalg.yield %y : f32
  } -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}
"""


def test_call_converts_whatever_the_fast_path_does_not_take():
    cm = compile_text(STATIC)
    a32 = rand(2, 3)
    np.testing.assert_array_equal(cm.call("g", a32, 2.0), a32 * np.float32(2))  # as is
    a64 = a32.astype(np.float64)
    np.testing.assert_array_equal(cm.call("g", a64, 2.0), a32 * np.float32(2))  # converted to f32
    np.testing.assert_array_equal(cm.call("g", a32.tolist(), 2.0), a32 * np.float32(2))  # a list
    np.testing.assert_array_equal(cm.call("g", np.asfortranarray(a32), 2.0), a32 * np.float32(2))  # another layout
    with pytest.raises(RuntimeExecutionError, match=r"argument #0: expected shape \(2, 3\)"):
        cm.call("g", rand(3, 2), 2.0)
    with pytest.raises(RuntimeExecutionError, match=r"argument #0: expected shape \(2, 3\)"):
        cm.call("g", rand(2, 3, 1), 2.0)
