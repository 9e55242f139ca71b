"""A numpy ufunc stage of a fused kernel over an argument passed unbroadcast (the log of
a per-row sum in attention's recomputed probabilities) runs over that argument alone:
its temporary keeps the extent-1 loops and the nests read it at index 0 there, instead
of a log per element into a full-size temporary. Results equal the numpy path and the
full-size evaluation, NaN and -inf included; a temporary that is itself a result is
still full size."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.codegen.kernels import fused
from shardc.runtime.execute.kernels import fused_run
from shardc.runtime.execute.structured_run import StructuredSpec

pytestmark = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")

B, T = 128, 512  # 64K elements: above fused.MIN_ELEMENTS


def program(yield_log: bool = False) -> str:
    """@f(%s: BxT, %mask: T, %m: B, %z: B) = exp(s + mask - (m + log z)) [, log z broadcast]."""
    t = f"tensor<{B}x{T}xf32>"
    outs = f"{t}, {t}" if yield_log else t
    inits = f"%e, %e2 : {t}, {t}" if yield_log else f"%e : {t}"
    extra_bb = ", %o2: f32" if yield_log else ""
    extra_map = ", affine_map<(i, j) -> (i, j)>" if yield_log else ""
    yields = "%p, %l : f32, f32" if yield_log else "%p : f32"
    return f"""
func.func @f(%s: {t}, %mask: tensor<{T}xf32>, %m: tensor<{B}xf32>, %z: tensor<{B}xf32>) -> ({outs}) {{
  %e = tensor.empty() : {t}
  %e2 = tensor.empty() : {t}
  %r{":2" if yield_log else ""} = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>{extra_map}], iterator_types = ["parallel", "parallel"]}}
      ins(%s, %mask, %m, %z : {t}, tensor<{T}xf32>, tensor<{B}xf32>, tensor<{B}xf32>) outs({inits}) {{
  ^bb0(%a: f32, %k: f32, %mm: f32, %zz: f32, %o: f32{extra_bb}):
    %l = math.log %zz : f32
    %lse = arith.addf %mm, %l : f32
    %x = arith.addf %a, %k : f32
    %d = arith.subf %x, %lse : f32
    %p = math.exp %d : f32
    linalg.yield {yields}
  }} -> ({outs})
  return %r{"#0, %r#1" if yield_log else ""} : {outs}
}}
"""


def inputs(seed: int):
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((B, T)).astype(np.float32) * 3
    mask = np.where(np.arange(T) % 3 == 0, -np.inf, 0).astype(np.float32)
    m = rng.standard_normal(B).astype(np.float32)
    z = rng.uniform(0.5, 40, B).astype(np.float32)
    z[1], z[2], m[3] = 0.0, np.nan, -np.inf  # log 0 = -inf, NaN rows, an all -inf shift
    return s, mask, m, z


def _spec(cm) -> StructuredSpec:
    (spec,) = [v for v in cm.functions["f"].__globals__.values() if isinstance(v, StructuredSpec) and v.kind == "elementwise"]
    return spec


def test_per_row_log_runs_once_per_row_and_equals_numpy(monkeypatch):
    cm = compile_text(program())
    spec = _spec(cm)
    assert spec.fused is not None and [st.ufunc is not None for st in spec.fused.stages] == [True, False]
    seen: list[tuple[int, ...]] = []
    log = spec.fused.stages[0].ufunc

    def spy(x, out):
        seen.append(out.shape)
        return log(x, out=out)

    monkeypatch.setattr(spec.fused.stages[0], "ufunc", spy)
    args = inputs(1)
    monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    with np.errstate(all="ignore"):
        ref = np.asarray(cm.call("f", *args))
        monkeypatch.setenv("SHARDC_KERNELS", "auto")
        got = np.asarray(cm.call("f", *args))
    assert seen == [(B, 1)]  # one log per row, not per element
    nest = spec.fused.stages[1]
    (pattern,) = nest.variants
    assert (-1 - nest.reads[0], 1) in pattern  # the temporary read at column 0
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=0, equal_nan=True)
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(got == 0, ref == 0)


def test_a_temporary_that_is_a_result_stays_full_size(monkeypatch):
    cm = compile_text(program(yield_log=True))
    args = inputs(2)
    monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    with np.errstate(all="ignore"):
        ref = [np.asarray(r) for r in cm.call("f", *args)]
        monkeypatch.setenv("SHARDC_KERNELS", "auto")
        got = [np.asarray(r) for r in cm.call("f", *args)]
    for g, r in zip(got, ref):
        assert g.shape == (B, T)
        np.testing.assert_allclose(g, r, rtol=2e-6, atol=0, equal_nan=True)


def test_one_kernel_called_with_patterns_in_turn_gives_each_its_own_plan(monkeypatch):
    """A call's plan (small temporaries, compiled variants) is kept per broadcast pattern:
    the same kernel fed per-row, full-size and per-column operands in turn, twice over,
    gives the numpy result every time (a plan reused across patterns would index a full
    array at column 0, or a per-row one past its end)."""
    cm = compile_text(program())
    kernel = _spec(cm).fused
    assert kernel is not None
    s, mask, m, z = inputs(3)
    z = np.abs(z) + 0.5  # finite logs: this test is about the plan, not NaN handling
    m = np.nan_to_num(m, neginf=-1.0)
    init = np.empty((B, T), np.float32)
    full = lambda v: np.ascontiguousarray(np.broadcast_to(v, (B, T)))  # noqa: E731
    cases = [
        (s, mask[None, :], m[:, None], z[:, None], init),
        (s, full(mask[None, :]), full(m[:, None]), full(z[:, None]), init),
        (s, mask[None, :], full(m[:, None]), z[:, None], init),
    ]
    want = np.exp(s + mask[None, :] - (m[:, None] + np.log(z[:, None])))
    for args in cases + cases:
        (got,) = kernel(list(args), (B, T))
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30)
    assert len(kernel._plans) == 3  # pyright: ignore[reportPrivateUsage]
