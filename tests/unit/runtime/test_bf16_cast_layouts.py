"""kernels/bf16_cast.py's rounding of float32 views that are not contiguous: a transpose
(rounded in memory order, its layout kept), a strided slice (q, k or v of a fused
projection: rows read in place), and layouts neither covers (a copy first). Every
result has ml_dtypes' bits, NaN, infinities and ties included."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from shardc.runtime.execute.kernels import aligned, bf16_cast

BF = ml_dtypes.bfloat16


def _values(rng: np.random.Generator, *shape: int) -> np.ndarray:
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    flat = x.reshape(-1)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.00390625, 1.01171875, 3.4e38, -1e-40], np.float32)
    flat[: specials.size] = specials  # 1 + 2^-8 and 1 + 3*2^-8: ties to even, down and up
    return x


def _same_bits(r: np.ndarray, x: np.ndarray) -> None:
    want = x.astype(BF)
    assert r.dtype == want.dtype and r.shape == x.shape
    assert np.array_equal(np.ascontiguousarray(r).view(np.uint16), np.ascontiguousarray(want).view(np.uint16))


@pytest.mark.parametrize("shape", [(96, 130), (64, 64)])
def test_transpose_keeps_its_layout(shape: tuple[int, int]) -> None:
    x = _values(np.random.default_rng(0), *shape).T
    r = bf16_cast.round_to_bfloat16(x)
    _same_bits(r, x)
    assert r.flags.f_contiguous and not r.flags.c_contiguous


def test_permuted_axes() -> None:
    base = _values(np.random.default_rng(1), 4, 6, 16, 24)
    x = base.transpose(2, 0, 3, 1)
    r = bf16_cast.round_to_bfloat16(x)
    _same_bits(r, x)
    assert r.strides == tuple(s // 2 for s in x.strides)  # the same layout, 2-byte elements


def test_strided_rows_of_a_fused_projection() -> None:
    qkv = _values(np.random.default_rng(2), 3, 64, 3, 4, 32)  # (batch, time, q/k/v, head, dim)
    for j in range(3):
        x = qkv[:, :, j]
        assert not x.flags.c_contiguous
        _same_bits(bf16_cast.round_to_bfloat16(x), x)
    cols = _values(np.random.default_rng(3), 200, 70)[:, 3:67]  # rows of 64 out of 70
    _same_bits(bf16_cast.round_to_bfloat16(cols), cols)


def test_layouts_neither_path_covers() -> None:
    x = _values(np.random.default_rng(4), 100, 90)
    for view in (x[::-1], x[:, ::-1], x[::2, ::3], np.broadcast_to(x[:1], (100, 90))):
        _same_bits(bf16_cast.round_to_bfloat16(view), view)


def test_without_kernels_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    x = _values(np.random.default_rng(5), 80, 100).T
    _same_bits(bf16_cast.round_to_bfloat16(x), x)


@pytest.mark.parametrize("shape,view", [((96, 64), None), ((96, 64), "T"), ((96, 128), "rows")])
def test_rounded_results_start_on_a_64_byte_boundary(shape: tuple[int, int], view: str | None) -> None:
    """The casts feeding bf16 products allocate aligned results (oneDNN's AMX kernels
    ran 1.3x faster from a 64-byte aligned operand); the values are ml_dtypes' rounding."""
    for seed in range(4):  # numpy's own allocations start on 16-byte boundaries: some need a skip
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        x = x.T if view == "T" else x[:, : shape[1] // 2] if view == "rows" else x
        r = bf16_cast.round_to_bfloat16(x)
        if bf16_cast.fused_run.enabled():  # else ml_dtypes rounds, into its own array
            assert r.ctypes.data % aligned.ALIGNMENT == 0
        np.testing.assert_array_equal(r.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))


@pytest.mark.parametrize("kernels", ["numba", "numpy"])
@pytest.mark.parametrize("view", [None, "T", "rows", "small"])
def test_widening_is_exact_on_every_path(kernels: str, view: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """bf16 to float32 is ml_dtypes' `astype` bit for bit (NaN payloads, infinities,
    signed zeros, subnormals) from the jit loop (contiguous, >= 4096 elements) and from
    numpy's shift (views, small arrays, no kernels); into a given buffer too."""
    if kernels == "numpy":
        monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    ran: list[int] = []
    jit = bf16_cast._widen_kernel()

    def counted(src: np.ndarray, out: np.ndarray) -> None:
        ran.append(src.size)
        jit(src, out)  # type: ignore[misc]

    if jit is not None:
        monkeypatch.setattr(bf16_cast, "_widen_kernel", lambda: counted)
    x = _values(np.random.default_rng(6), 8 if view == "small" else 96, 130).astype(BF)
    x = x.T if view == "T" else x[:, ::2] if view == "rows" else x
    want = x.astype(np.float32)
    got = bf16_cast.widen_bfloat16(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    into = np.full(x.shape, 7.0, np.float32)
    assert np.shares_memory(bf16_cast.widen_bfloat16(x, out=into), into)
    assert np.array_equal(into.view(np.uint32), want.view(np.uint32))
    jitted = kernels == "numba" and view is None and bf16_cast.fused_run.enabled()
    assert ran == ([x.size, x.size] if jitted else [])  # the jit loop ran where it applies, nowhere else
