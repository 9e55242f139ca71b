"""Matrix products through MKL or numpy's OpenBLAS called directly
(`shardc.runtime.execute.kernels.blas`): equal to numpy's matmul within rounding on every layout
the runtime hands them, numpy's path when switched off or absent, and a GPT step through
each library equal to the numpy-BLAS step."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from shardc.runtime.execute.kernels import blas

needs_mkl = pytest.mark.skipif(
    blas._loaded("mkl") is None,  # pyright: ignore[reportPrivateUsage]
    reason="libmkl_rt not found (PyPI's mkl wheel, the [fast] extra): products run numpy's matmul",
)

RNG = np.random.default_rng(7)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


@pytest.fixture
def every_size(blas_library):
    """Send every product through each BLAS in turn, however small."""
    return blas_library


def rand(*shape, dt=np.float32):
    return RNG.standard_normal(shape).astype(dt)


def _small_batch(a, out) -> bool:
    """A batch of matrices OpenBLAS's batch calls must not get (`blas.OPENBLAS_SMALL`)."""
    m, k = a.shape[-2:]
    n = out.shape[-1]
    lib = blas._active()  # pyright: ignore[reportPrivateUsage]
    return lib is not None and out.size > m * n and m * n * k <= lib.batch_min


def check(a, b, out=None, *, mkl=True, beta=0.0):
    """blas.matmul(a, b, out) equals numpy's float64 product; `mkl`: the chosen BLAS ran it."""
    dt = a.dtype.type
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    if out is None:
        out = np.empty(ref.shape, a.dtype)
    if beta:
        ref = ref + beta * out.astype(np.float64)
    before = blas.calls()
    got = blas.matmul(a, b, out, beta=beta)
    assert got is out
    assert blas.calls() == before + (1 if mkl and not _small_batch(a, out) else 0)
    np.testing.assert_allclose(out, ref, **TOL[dt])
    return out


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_2d_every_transpose_combination(dt, every_size):
    a, b = rand(37, 53, dt=dt), rand(53, 29, dt=dt)
    for x in (a, np.asfortranarray(a)):
        for y in (b, np.asfortranarray(b)):
            check(x, y)
    check(rand(53, 37, dt=dt).T, rand(29, 53, dt=dt).T)  # transposed views, no copies


def test_row_strides_wider_than_the_matrix_and_out_views(every_size):
    big_a, big_b = rand(40, 100), rand(90, 70)
    a, b = big_a[3:35, 10:60], big_b[:50, 5:45]  # leading dimensions 100 and 70
    check(a, b)
    holder = np.zeros((50, 80), np.float32)
    out = holder[4:36, 20:60]
    check(a, b, out)
    assert not holder[:4].any() and not holder[:, :20].any()  # nothing outside the view
    check(a, b, np.empty((40, 32), np.float32).T)  # a column-major result: b^T a^T
    check(big_a[3:35, 10:60].T.copy().T, b)


def test_non_unit_inner_strides_fall_back_to_numpy(every_size):
    a = rand(30, 80)[:, ::2]  # no unit stride on either axis
    check(a, rand(40, 20), mkl=False)
    check(rand(20, 40), rand(40, 60), np.empty((20, 120), np.float32)[:, ::2], mkl=False)
    check(rand(20, 40)[::-1], rand(40, 30), mkl=False)  # negative row stride


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_batched_contiguous_strided_and_transposed(dt, every_size):
    check(rand(6, 17, 23, dt=dt), rand(6, 23, 19, dt=dt))
    check(rand(6, 23, 17, dt=dt).swapaxes(1, 2), rand(6, 19, 23, dt=dt).swapaxes(1, 2))
    check(rand(2, 3, 17, 23, dt=dt), rand(2, 3, 23, 19, dt=dt))  # batch axes fold into one


def test_batches_that_fold_into_no_stride(every_size):
    """Per-head views of a fused q/k/v array, (b, t, 3, h, d) read as (b, h, t, d): the
    batch axes (b, h) have no common stride, so MKL gets pointer arrays."""
    qkv = rand(4, 16, 3, 5, 8)
    q = qkv[:, :, 0].transpose(0, 2, 1, 3)  # (b, h, t, d)
    k = qkv[:, :, 1].transpose(0, 2, 3, 1)  # (b, h, d, t)
    att = check(q, k)
    v = qkv[:, :, 2].transpose(0, 2, 1, 3)
    out = np.empty((4, 16, 5, 8), np.float32).transpose(0, 2, 1, 3)  # written in (b, t, h, d)
    check(att, v, out)
    assert out.base is not None and out.base.flags.c_contiguous


def test_broadcast_batches(every_size):
    check(rand(5, 12, 9), rand(9, 7))  # a weight shared by the batch
    check(rand(12, 9), rand(5, 9, 7))
    check(rand(5, 1, 12, 9), rand(3, 9, 7))  # (5, 1) x (3,) -> (5, 3)
    check(rand(5, 12, 9), np.broadcast_to(rand(1, 9, 7), (5, 9, 7)))  # stride-0 batch axis
    check(rand(1, 12, 9), rand(1, 9, 7))  # size-1 batch: one gemm


def test_accumulate_with_beta(every_size):
    out = rand(20, 30)
    check(rand(20, 40), rand(40, 30), out, beta=1.0)
    out = rand(3, 20, 30, dt=np.float64)
    check(rand(3, 20, 40, dt=np.float64), rand(3, 40, 30, dt=np.float64), out, beta=0.5)


def test_empty_and_degenerate_sizes(every_size):
    check(rand(0, 5), rand(5, 7), mkl=False)
    check(rand(5, 7), rand(7, 0), mkl=False)
    check(rand(3, 0, 5), rand(3, 5, 4), mkl=False)
    check(rand(0, 4, 5), rand(0, 5, 6), mkl=False)
    out = np.full((4, 6), 7.0, np.float32)
    check(rand(4, 0), rand(0, 6), out, mkl=False)  # k = 0: zeros, as numpy writes
    assert not out.any()
    check(rand(1, 9), rand(9, 1))
    check(rand(1, 1), rand(1, 1))
    check(rand(9, 1), rand(1, 8))  # rank-1 outer product
    check(rand(4, 1, 9), rand(4, 9, 1))  # batched dot products


def test_other_dtypes_aliasing_and_bad_shapes_take_numpy(every_size):
    ia, ib = RNG.integers(-5, 5, (8, 9)), RNG.integers(-5, 5, (9, 4))
    out = np.empty((8, 4), ia.dtype)
    before = blas.calls()
    np.testing.assert_array_equal(blas.matmul(ia, ib, out), ia @ ib)
    c = (rand(8, 9) + 1j * rand(8, 9)).astype(np.complex64)
    np.testing.assert_allclose(blas.matmul(c, c.T.copy(), np.empty((8, 8), np.complex64)), c @ c.T, rtol=1e-5, atol=1e-5)
    a64, b32 = rand(8, 9, dt=np.float64), rand(9, 4)
    np.testing.assert_allclose(blas.matmul(a64, b32, np.empty((8, 4), np.float32)), a64 @ b32, rtol=1e-5, atol=1e-5)
    sq = rand(16, 16)
    ref = sq @ sq
    np.testing.assert_allclose(blas.matmul(sq, sq, sq), ref, rtol=1e-5, atol=1e-5)  # out is an input
    assert blas.calls() == before
    with pytest.raises(ValueError):
        blas.matmul(rand(3, 4), rand(5, 6), np.empty((3, 6), np.float32))


def test_switched_off_or_absent_is_numpys_matmul(monkeypatch):
    monkeypatch.setattr(blas, "MIN_FLOPS", 0)
    monkeypatch.setattr(blas, "MIN_MATRIX_FLOPS", 0)
    a, b = rand(30, 40), rand(40, 20)
    ref = np.matmul(a, b)
    monkeypatch.setenv("SHARDC_BLAS", "numpy")
    before = blas.calls()
    np.testing.assert_array_equal(blas.matmul(a, b, np.empty((30, 20), np.float32)), ref)
    assert blas.calls() == before and not blas.enabled()
    assert blas.active_path().startswith("numpy")
    monkeypatch.setenv("SHARDC_BLAS", "auto")
    # as if neither library loaded (no mkl wheel, a numpy without OpenBLAS's CBLAS)
    monkeypatch.setattr(blas, "_LOADED", {"mkl": None, "openblas": None})
    monkeypatch.setattr(blas, "_ACTIVE", {})
    monkeypatch.setattr(blas, "_AGREED", [])
    np.testing.assert_array_equal(blas.matmul(a, b, np.empty((30, 20), np.float32)), ref)
    assert blas.calls() == before and not blas.enabled()
    assert blas.active_path().startswith("numpy")


def test_small_products_stay_on_numpy(monkeypatch):
    monkeypatch.setenv("SHARDC_BLAS", "auto")
    before = blas.calls()
    a, b = rand(64, 64), rand(64, 64)
    np.testing.assert_array_equal(blas.matmul(a, b, np.empty((64, 64), np.float32)), a @ b)
    a3, b3 = rand(32, 64, 64), rand(32, 64, 64)  # 8M multiply-adds, in 0.26M matrices
    np.testing.assert_array_equal(blas.matmul(a3, b3, np.empty((32, 64, 64), np.float32)), a3 @ b3)
    assert blas.calls() == before


def _child(code: str, **env: str) -> tuple[dict, str]:
    """Run `code` in a fresh interpreter (MKL loads once per process): its JSON, its stderr."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("SHARDC_BLAS", "SHARDC_MKL"))}
    e.update(env)
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


THREADS = """
import json, os, numpy as np
from shardc.runtime.execute.kernels import blas
before = len(os.listdir("/proc/self/task"))
a = np.ones((512, 512), np.float32)
c = blas.matmul(a, a, np.empty_like(a))
print(json.dumps({"path": blas.active_path(), "calls": blas.calls(), "ok": bool((c == 512).all()),
                  "new_threads": len(os.listdir("/proc/self/task")) - before,
                  "openmp": "libiomp5" in open("/proc/self/maps").read()}))
"""


@needs_mkl
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc to count threads")
def test_one_thread_per_rank_unless_asked():
    got, _ = _child(THREADS, SHARDC_BLAS="mkl")
    assert got["ok"] and got["calls"] == 1 and "1 thread" in got["path"] and got["path"].startswith("MKL")
    assert got["new_threads"] == 0 and not got["openmp"]  # the sequential layer: no OpenMP runtime
    got, _ = _child(THREADS, SHARDC_BLAS="mkl", SHARDC_BLAS_THREADS="2")
    assert got["ok"] and "2 threads" in got["path"] and got["openmp"]


def test_library_path_from_the_environment():
    """`SHARDC_MKL` names the library; one that does not load leaves numpy's path, with
    one warning line (no traceback)."""
    code = (
        "import json; from shardc.runtime.execute.kernels import blas;"
        "print(json.dumps({'path': blas.library_path(), 'on': blas.enabled(), 'what': blas.active_path()}))"
    )
    got, err = _child(code, SHARDC_MKL="/nonexistent/libmkl_rt.so", SHARDC_BLAS="mkl")
    assert got == {"path": "/nonexistent/libmkl_rt.so", "on": False, "what": "numpy (its own BLAS)"}
    assert err.startswith("shardc: warning: SHARDC_MKL=/nonexistent/libmkl_rt.so: not a usable MKL") and err.count("\n") == 1


@needs_mkl
def test_bad_thread_count_warns_and_uses_one():
    got, err = _child("import json; from shardc.runtime.execute.kernels import blas; print(json.dumps({'what': blas.active_path()}))", SHARDC_BLAS_THREADS="lots", SHARDC_BLAS="mkl")
    assert "1 thread" in got["what"]
    assert err == "shardc: warning: SHARDC_BLAS_THREADS='lots' is not a positive integer; BLAS runs on 1 thread\n"


def test_contract2_routes_through_blas_and_batched_dots_are_exact(every_size):
    from shardc.runtime.execute.structured_run import contract2

    f32 = np.dtype(np.float32)
    # A projection y[b,t,o] = x[b,t,c] w[o,c] (the weight read transposed), and its
    # weight gradient dw[o,c] = sum_bt g[b,t,o] x[b,t,c].
    x, w, g = rand(4, 8, 16), rand(24, 16), rand(4, 8, 24)
    before = blas.calls()
    y, _ = contract2(x, (0, 1, 3), w, (2, 3), (0, 1, 2), [4, 8, 24, 16], f32)
    dw, _ = contract2(g, (2, 3, 0), x, (2, 3, 1), (0, 1), [24, 16, 4, 8], f32)
    assert blas.calls() == before + 2
    np.testing.assert_allclose(y, np.einsum("btc,oc->bto", x, w), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, np.einsum("bto,btc->oc", g, x), rtol=1e-5, atol=1e-5)
    # Batched dot products over the unit-stride axis (vecdot) and over outer axes (einsum).
    a, b = rand(4, 8, 16), rand(4, 8, 16)
    r, fresh = contract2(a, (0, 1, 2), b, (0, 1, 2), (0, 1), [4, 8, 16], f32)
    assert fresh and r.shape == (4, 8)
    np.testing.assert_allclose(r, np.einsum("btc,btc->bt", a, b), rtol=1e-5, atol=1e-5)
    r, _ = contract2(a, (1, 2, 0), b, (1, 2, 0), (0,), [16, 4, 8], f32)
    np.testing.assert_allclose(r, np.einsum("btc,btc->c", a, b), rtol=1e-5, atol=1e-5)
    r, _ = contract2(a[0, 0], (0,), b[0, 0], (0,), (), [16], f32)  # one dot product: a 0-d array
    assert isinstance(r, np.ndarray) and r.shape == ()
    np.testing.assert_allclose(r, a[0, 0] @ b[0, 0], rtol=1e-5)


@pytest.mark.slow
def test_gpt_step_with_each_blas_equals_the_numpy_blas_step(every_size, monkeypatch):
    """A training step with every contraction through each library (fused numba kernels
    in the same process where installed): loss and updated parameters equal numpy's
    within float32 rounding."""
    from shardc.runtime.codegen.kernels import fused
    from shardc.runtime.execute.structured_run import StructuredSpec
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    cfg = GPTConfig(n_layer=1, n_head=2, n_embd=64, block_size=64, vocab_size=64)
    prog = StepProgram.build(cfg, 8, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN)
    tok = np.random.default_rng(0).integers(0, 64, (8, 64)).astype(np.int32)
    mb = [(tok, np.roll(tok, -1, axis=1))]
    results = {}
    for mode in ("numpy", every_size):
        monkeypatch.setenv("SHARDC_BLAS", mode)
        st = RankState(prog, 0, init_params(cfg, 0))
        before = blas.calls()
        losses = [st.train_step(mb, 1e-3) for _ in range(2)]
        results[mode] = (losses, [np.asarray(p).copy() for p in st.params], blas.calls() - before)
    assert results["numpy"][2] == 0
    assert results[every_size][2] >= 20, f"the step's contractions did not reach {every_size}"
    np.testing.assert_allclose(results[every_size][0], results["numpy"][0], rtol=1e-5)
    for a, b in zip(results[every_size][1], results["numpy"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    if fused.enabled():  # numba's kernels compiled and ran beside MKL in this process
        ran = [
            v for v in prog.compiled.functions["train_step"].__globals__.values()
            if isinstance(v, StructuredSpec) and v.fused is not None and any(x.fn for x in v.fused.stages)
        ]
        assert ran, "no fused kernel ran in the step"


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_batches_of_big_matrices_through_each_library(dt, every_size):
    """The batch entry points themselves, at sizes OpenBLAS's take too (above
    `OPENBLAS_SMALL` multiply-adds a matrix): strided, transposed, pointer arrays over
    per-head views, a broadcast weight, alpha and beta."""
    check(rand(3, 101, 100, dt=dt), rand(3, 100, 100, dt=dt))
    check(rand(4, 64, 128, dt=dt).swapaxes(1, 2), rand(4, 64, 128, dt=dt))
    qkv = rand(2, 128, 3, 2, 64, dt=dt)
    q = qkv[:, :, 0].transpose(0, 2, 1, 3)
    k = qkv[:, :, 1].transpose(0, 2, 3, 1)
    att = check(q, k)
    out = np.empty((2, 128, 2, 64), dt).transpose(0, 2, 1, 3)
    check(att / 64, qkv[:, :, 2].transpose(0, 2, 1, 3), out)  # scaled: sums of 128 terms
    check(rand(3, 128, 96, dt=dt), np.broadcast_to(rand(96, 112, dt=dt), (3, 96, 112)))
    check(rand(3, 128, 96, dt=dt), rand(3, 96, 112, dt=dt), rand(3, 128, 112, dt=dt), beta=1.0)
    a, b = rand(3, 101, 100, dt=dt), rand(3, 100, 100, dt=dt)
    got = blas.matmul(a, b, np.empty((3, 101, 100), dt), alpha=0.25)
    np.testing.assert_allclose(got, 0.25 * np.matmul(a.astype(np.float64), b.astype(np.float64)), **TOL[dt])


def test_openblas_small_batches_run_numpy(monkeypatch):
    """OpenBLAS's batch calls crash on matrices of at most 100^3 multiply-adds (0.3.31):
    those take numpy's matmul even with the speed thresholds at zero; one more row and
    the batch call runs."""
    if blas._loaded("openblas") is None:  # pyright: ignore[reportPrivateUsage]
        pytest.skip("numpy's OpenBLAS is not loadable here")
    monkeypatch.setattr(blas, "MIN_FLOPS", 0)
    monkeypatch.setattr(blas, "MIN_MATRIX_FLOPS", 0)
    monkeypatch.setenv("SHARDC_BLAS", "openblas")
    for rows, calls in ((100, 0), (101, 1)):
        a, b = rand(3, rows, 100), rand(3, 100, 100)
        before = blas.calls()
        out = blas.matmul(a, b, np.empty((3, rows, 100), np.float32))
        assert blas.calls() == before + calls
        np.testing.assert_allclose(out, np.matmul(a.astype(np.float64), b.astype(np.float64)), **TOL[np.float32])
