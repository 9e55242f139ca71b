"""kernels/bf16_gemm.py: bf16 operands, float32 accumulation. The result matches a float32
matmul of the same (already rounded) inputs to float32 rounding: within k * eps32 *
(|A| @ |B|) of the exact float64 product, on MKL where the CPU has bf16 units and on the
widened float32 fallback."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from shardc.runtime.execute.kernels import aligned, bf16_cast, bf16_gemm, bf16_run, onednn_matmul

BF = ml_dtypes.bfloat16
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(params=["auto", "onednn", "mkl", "numpy"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SHARDC_BF16_GEMM", request.param)
    name = bf16_gemm.backend()
    if request.param == "mkl" and name != "mkl":
        pytest.skip("MKL's cblas_gemm_bf16bf16f32 is not loadable here (the [fast] extra's mkl wheel)")
    if request.param == "onednn" and name != "onednn":
        pytest.skip("oneDNN is not loadable here (the onednn-cpu-gomp wheel, or SHARDC_ONEDNN)")
    return name


def _pair(rng: np.random.Generator, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((m, k)).astype(BF), rng.standard_normal((k, n)).astype(BF)


def _check(r: np.ndarray, a: np.ndarray, b: np.ndarray, extra: np.ndarray | float = 0.0) -> None:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = a64 @ b64 + extra
    bound = a.shape[-1] * EPS32 * (np.abs(a64) @ np.abs(b64)) + EPS32 * np.abs(exact)
    assert r.dtype == np.float32
    assert np.all(np.abs(r - exact) <= bound)


def test_auto_uses_a_bf16_gemm_exactly_where_the_cpu_has_bf16_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDC_BF16_GEMM", "auto")
    if not bf16_run.bf16_units():
        assert bf16_gemm.backend() == "numpy"
        assert "no bf16 units" in bf16_gemm.describe()
    else:
        assert bf16_gemm.backend() in ("onednn", "mkl", "numpy")  # numpy only without the mkl and onednn wheels
        if onednn_matmul.available():
            assert bf16_gemm.backend() == "onednn"
            assert "oneDNN" in bf16_gemm.describe()
    monkeypatch.setenv("SHARDC_BF16_GEMM", "numpy")
    assert bf16_gemm.backend() == "numpy"
    monkeypatch.setenv("SHARDC_BF16_GEMM", "bogus")
    assert bf16_gemm.choice() == "auto"


@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 7, 3), (64, 128, 96), (257, 300, 129)])
def test_matches_float32_matmul_of_the_rounded_inputs(backend: str, shape: tuple[int, int, int]) -> None:
    a, b = _pair(np.random.default_rng(sum(shape)), *shape)
    r = bf16_gemm.matmul(a, b)
    _check(r, a, b)
    np.testing.assert_allclose(r, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-5 * shape[1])


def test_transposed_and_strided_views(backend: str) -> None:
    rng = np.random.default_rng(7)
    a, b = _pair(rng, 48, 40, 56)
    at = np.ascontiguousarray(a.T).T  # column-major: BLAS's trans flag
    bt = np.ascontiguousarray(b.T).T
    wide = np.zeros((48, 100), BF)
    wide[:, 10:50] = a  # a row stride past the width: the leading dimension
    every_other = np.repeat(b, 2, axis=1)[:, ::2]  # neither axis unit stride: copied
    for x, y in ((at, b), (a, bt), (at, bt), (wide[:, 10:50], b), (a, every_other)):
        _check(bf16_gemm.matmul(x, y), a, b)


def test_alpha_beta_and_outputs(backend: str) -> None:
    rng = np.random.default_rng(8)
    a, b = _pair(rng, 32, 64, 24)
    c = rng.standard_normal((32, 24)).astype(np.float32)
    out = c.copy()
    assert bf16_gemm.matmul(a, b, out, alpha=0.5, beta=2.0) is out
    _check(out, a, b, 2.0 * c.astype(np.float64) - 0.5 * (a.astype(np.float64) @ b.astype(np.float64)))  # 0.5 a@b + 2c
    # a bf16 out: the float32 result rounded once
    out16 = np.empty((32, 24), BF)
    bf16_gemm.matmul(a, b, out16)
    np.testing.assert_array_equal(out16.view(np.uint16), bf16_gemm.matmul(a, b).astype(BF).view(np.uint16))
    # a strided float32 out (a column block of a wider array)
    big = np.full((32, 40), 7.0, np.float32)
    bf16_gemm.matmul(a, b, big[:, 8:32])
    np.testing.assert_array_equal(big[:, 8:32], bf16_gemm.matmul(a, b))
    assert np.all(big[:, :8] == 7.0) and np.all(big[:, 32:] == 7.0)


def test_batched_and_broadcast(backend: str) -> None:
    rng = np.random.default_rng(9)
    a = rng.standard_normal((2, 3, 16, 24)).astype(BF)
    b = rng.standard_normal((24, 8)).astype(BF)
    r = bf16_gemm.matmul(a, b[None, None])
    assert r.shape == (2, 3, 16, 8)
    for i in range(2):
        for j in range(3):
            _check(r[i, j], a[i, j], b)


def test_empty_contraction_and_bad_operands(backend: str) -> None:
    a, b = np.zeros((3, 0), BF), np.zeros((0, 4), BF)
    np.testing.assert_array_equal(bf16_gemm.matmul(a, b), np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError, match="operands must be bf16"):
        bf16_gemm.matmul(np.zeros((2, 2), np.float32), np.zeros((2, 2), BF))
    with pytest.raises(ValueError, match="do not multiply"):
        bf16_gemm.matmul(np.zeros((2, 3), BF), np.zeros((2, 2), BF))


@pytest.mark.parametrize("pack_min", [0, 1 << 62])
def test_packed_b_path_matches(backend: str, pack_min: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """MKL's pack-then-compute path (every product past PACK_MIN_FLOPS; here all of them,
    then none) gives the same sums, B plain, transposed or strided, alpha and beta too."""
    monkeypatch.setattr(bf16_gemm, "PACK_MIN_FLOPS", pack_min)
    rng = np.random.default_rng(11)
    a, b = _pair(rng, 96, 200, 72)
    bt = np.ascontiguousarray(b.T).T
    for y in (b, bt, np.repeat(b, 2, axis=1)[:, ::2]):
        _check(bf16_gemm.matmul(a, y), a, b)
    c = rng.standard_normal((96, 72)).astype(np.float32)
    out = c.copy()
    bf16_gemm.matmul(a, bt, out, alpha=2.0, beta=-1.0)
    _check(out, a, b, a.astype(np.float64) @ b.astype(np.float64) - c.astype(np.float64))


def test_large_product_uses_the_default_threshold(backend: str) -> None:
    a, b = _pair(np.random.default_rng(12), 256, 256, 512)  # 2^25 multiply-adds: packed on MKL
    assert 256 * 256 * 512 >= bf16_gemm.PACK_MIN_FLOPS
    _check(bf16_gemm.matmul(a, b), a, b)


def test_an_unknown_choice_says_so_once_and_runs_auto(monkeypatch, capsys):
    monkeypatch.setenv("SHARDC_BF16_GEMM", "amx-please")
    assert bf16_gemm.choice() == "auto"
    assert bf16_gemm.choice() == "auto"
    err = capsys.readouterr().err
    assert err.count("SHARDC_BF16_GEMM='amx-please' is not one of") == 1, err
    assert "using auto" in err


@pytest.mark.parametrize("shape", [(3,), (5, 7), (2, 3, 17), (0, 4)])
@pytest.mark.parametrize("dtype", [np.float32, BF])
def test_aligned_empty_starts_on_the_boundary(shape: tuple[int, ...], dtype: object) -> None:
    for _ in range(8):  # numpy's own allocations land on 16-byte boundaries: some need a skip
        x = bf16_gemm.aligned_empty(shape, dtype)
        assert x.shape == shape and x.dtype == np.dtype(dtype) and x.flags.c_contiguous and x.flags.writeable
        assert x.size == 0 or x.ctypes.data % aligned.ALIGNMENT == 0  # an empty one has no data


@pytest.mark.parametrize("shape", [(64, 128, 96), (2, 33, 40, 17)])
def test_fresh_results_are_aligned(backend: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((*shape[:-3], shape[-3], shape[-2])).astype(BF) if len(shape) == 4 else rng.standard_normal(shape[:2]).astype(BF)
    b = rng.standard_normal((*shape[:-3], shape[-2], shape[-1])).astype(BF) if len(shape) == 4 else rng.standard_normal(shape[1:]).astype(BF)
    r = bf16_gemm.matmul(a, b)
    if backend != "numpy":  # the widened float32 product is numpy's own array
        assert r.ctypes.data % aligned.ALIGNMENT == 0
    _check(r, a, b)
