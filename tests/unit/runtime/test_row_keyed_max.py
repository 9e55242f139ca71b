"""float32 row max/min in row kernels (`kernels/rows.py`'s `_keyed`): computed in the
pass that produces the row, as integer max/min of order-preserving keys (vectorized),
not by the scalar `rmax`/`rmin` helpers. The results equal arith.maximumf/minimumf's:
NaN of either sign wins, -0 < +0, infinities, subnormals, a NaN or finite init, any row
length; float64 keeps the helpers."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.execute.kernels import fused_run
from shardc.runtime.execute.kernels import rows_run

pytestmark = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")

_INIT = {"f32": {"ninf": "0xFF800000", "pinf": "0x7F800000", "nan": "0x7FC00000", "one": "1.0"}, "f64": {"ninf": "0xFFF0000000000000", "pinf": "0x7FF0000000000000"}}


def chain(r: int, n: int, comb: str, init: str, e: str = "f32") -> str:
    """@f(x: r x n) -> (x - m, m), m the row `comb` (maximumf / minimumf) of 2x from `init`."""
    t, v = f"tensor<{r}x{n}x{e}>", f"tensor<{r}x{e}>"
    ij, i = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>"
    return f"""
func.func @f(%x: {t}) -> ({t}, {v}) {{
  %init = arith.constant {_INIT[e][init]} : {e}
  %e0 = tensor.empty() : {t}
  %a = linalg.generic {{indexing_maps = [{ij}, {ij}], iterator_types = ["parallel", "parallel"]}} ins(%x : {t}) outs(%e0 : {t}) {{
  ^bb0(%p: {e}, %o: {e}):
    %y = arith.addf %p, %p : {e}
    linalg.yield %y : {e}
  }} -> {t}
  %r0 = tensor.empty() : {v}
  %mi = linalg.fill ins(%init : {e}) outs(%r0 : {v}) -> {v}
  %m = linalg.generic {{indexing_maps = [{ij}, {i}], iterator_types = ["parallel", "reduction"]}} ins(%a : {t}) outs(%mi : {v}) {{
  ^bb0(%p: {e}, %o: {e}):
    %y = arith.{comb} %o, %p : {e}
    linalg.yield %y : {e}
  }} -> {v}
  %d = linalg.generic {{indexing_maps = [{ij}, {i}, {ij}], iterator_types = ["parallel", "parallel"]}} ins(%a, %m : {t}, {v}) outs(%e0 : {t}) {{
  ^bb0(%p: {e}, %q: {e}, %o: {e}):
    %y = arith.subf %p, %q : {e}
    linalg.yield %y : {e}
  }} -> {t}
  return %d, %m : {t}, {v}
}}
"""


def rows(n: int, dtype=np.float32) -> np.ndarray:
    """Rows that probe every case of the key order (each row's special values placed
    at the last column, the first and the middle, so every position of the loop sees them)."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((16, n)) * 100).astype(dtype)
    neg_nan = np.array([0xFFC00000], np.uint32).view(np.float32)[0] if dtype == np.float32 else -np.float64("nan")
    x[0] = -np.inf
    x[1] = np.inf
    x[2, n - 1] = np.nan
    x[3, n // 2] = neg_nan  # the sign bit set: x86's default NaN
    x[4] = -0.0
    x[4, n // 2] = 0.0
    x[5] = 0.0
    x[5, 0] = -0.0
    x[6] = 1e-45  # subnormals
    x[6, n - 1] = -1e-45
    x[7] = -(np.abs(x[7]) + 1)  # all negative
    x[8, 0] = np.inf
    x[8, n - 1] = -np.inf
    x[9] = np.abs(x[9]) + 1  # all positive
    x[10] = -3.0e38
    return x


def expected(x: np.ndarray, comb: str, init: float) -> np.ndarray:
    """maximumf / minimumf over 2x and the init: NaN if any is NaN, -0 < +0."""
    with np.errstate(all="ignore"):
        a = np.concatenate([np.full((x.shape[0], 1), init, x.dtype), 2 * x], axis=1)
    with np.errstate(all="ignore"):
        out = a.max(axis=1) if comb == "maximumf" else a.min(axis=1)
    zero = out == 0
    if comb == "maximumf":
        out[zero] = np.where(((a[zero] == 0) & ~np.signbit(a[zero])).any(axis=1), 0.0, -0.0)
    else:
        out[zero] = np.where(((a[zero] == 0) & np.signbit(a[zero])).any(axis=1), -0.0, 0.0)
    return out


def kernel_of(cm) -> rows_run.RowKernel:
    (k,) = [v for v in cm.functions["f"].__globals__.values() if isinstance(v, rows_run.RowKernel)]
    return k


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 7, 128, 601])
@pytest.mark.parametrize("comb, init, value", [("maximumf", "ninf", -np.inf), ("minimumf", "pinf", np.inf), ("maximumf", "one", 1.0), ("minimumf", "one", 1.0)])
def test_equals_maximumf_minimumf(n, comb, init, value, monkeypatch):
    cm = compile_text(chain(16, n, comb, init))
    k = kernel_of(cm)
    assert "rmax(" not in k.source and "rmin(" not in k.source and ".view(np.int32)" in k.source
    monkeypatch.setattr(rows_run, "MIN_ELEMENTS", 0)
    monkeypatch.setenv("SHARDC_KERNELS", "auto")
    x = rows(n)
    before = rows_run.CALLS[0]
    with np.errstate(all="ignore"):
        d, m = (np.asarray(v) for v in cm.call("f", x))
    assert rows_run.CALLS[0] - before == 1
    want = expected(x, comb, np.float32(value))
    assert m.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(m), np.isnan(want))
    np.testing.assert_array_equal(m, want)
    np.testing.assert_array_equal(np.signbit(m[~np.isnan(m)]), np.signbit(want[~np.isnan(want)]))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(d, 2 * x - m[:, None])


def run(cm, x, monkeypatch):
    monkeypatch.setattr(rows_run, "MIN_ELEMENTS", 0)
    monkeypatch.setenv("SHARDC_KERNELS", "auto")
    before = rows_run.CALLS[0]
    with np.errstate(all="ignore"):
        got = [np.asarray(v) for v in cm.call("f", x)]
    assert rows_run.CALLS[0] - before == 1
    return got


def test_nan_init_wins(monkeypatch):
    cm = compile_text(chain(16, 64, "maximumf", "nan"))
    x = rows(64)
    x[2, 63] = 0.0  # no NaN in the rows: only the init's
    x[3, 32] = 0.0
    d, m = run(cm, x, monkeypatch)
    assert np.isnan(m).all() and np.isnan(d).all()


def test_equals_the_numpy_path(monkeypatch):
    """The same chain on the numpy path (no row kernel) gives the same maxima, finite rows."""
    text = chain(16, 300, "maximumf", "ninf")
    x = rows(300)[7:]  # the finite, nonzero rows
    monkeypatch.setattr(rows_run, "MIN_ELEMENTS", 0)
    monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    ref = [np.asarray(v) for v in compile_text(text).call("f", np.ascontiguousarray(np.resize(x, (16, 300))))]
    monkeypatch.setenv("SHARDC_KERNELS", "auto")
    got = [np.asarray(v) for v in compile_text(text).call("f", np.ascontiguousarray(np.resize(x, (16, 300))))]
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


def test_float64_keeps_the_helper(monkeypatch):
    cm = compile_text(chain(16, 64, "maximumf", "ninf", "f64"))
    k = kernel_of(cm)
    assert "rmax(" in k.source and ".view(" not in k.source
    x = rows(64, np.float64)
    _, m = run(cm, x, monkeypatch)
    a = np.concatenate([np.full((16, 1), -np.inf), 2 * x], axis=1)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.isnan(m), np.isnan(a).any(axis=1))
        fin = ~np.isnan(m)
        np.testing.assert_array_equal(m[fin], a.max(axis=1)[fin])
