"""bf16_gemm's batched walk (`_batched`): a batch of small products as one pass over
precomputed addresses gives the per-matrix path's results bit for bit (the same MKL
calls) on the layouts attention makes (heads strided inside a (b, t, h, d) array,
k transposed, a broadcast operand, a strided output accumulated into with beta) and
declines where a matrix would need a copy or the product packs B."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from shardc.runtime.execute.kernels import bf16_gemm

BF = ml_dtypes.bfloat16


@pytest.fixture(autouse=True)
def mkl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDC_BF16_GEMM", "mkl")
    if bf16_gemm.backend() != "mkl":
        pytest.skip("MKL's cblas_gemm_bf16bf16f32 is not loadable here (the [fast] extra's mkl wheel)")


def per_matrix(monkeypatch: pytest.MonkeyPatch, *args, **kw) -> np.ndarray:
    with monkeypatch.context() as m:
        m.setattr(bf16_gemm, "_batched", lambda *a: False)
        return bf16_gemm.matmul(*args, **kw)


def walked(calls: list[int], monkeypatch: pytest.MonkeyPatch, *args, **kw) -> np.ndarray:
    real = bf16_gemm._batched
    with monkeypatch.context() as m:
        m.setattr(bf16_gemm, "_batched", lambda *a: calls.append(r := real(*a)) or r)
        return bf16_gemm.matmul(*args, **kw)


def test_attention_layouts_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    b, t, h, d = 3, 20, 4, 8
    q = rng.standard_normal((b, t, h, d)).astype(BF)
    k = rng.standard_normal((b, t, h, d)).astype(BF)
    qh, kt = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 3, 1)  # (b, h, t, d) and (b, h, d, t), strided
    calls: list[int] = []
    got = walked(calls, monkeypatch, qh, kt)
    assert calls == [True]
    want = per_matrix(monkeypatch, qh, kt)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.matmul(qh.astype(np.float32), kt.astype(np.float32)), rtol=1e-5, atol=1e-5)
    p = rng.standard_normal((b, h, t, t)).astype(BF)
    np.testing.assert_array_equal(walked(calls, monkeypatch, p, qh), per_matrix(monkeypatch, p, qh))  # p v


def test_broadcast_operand_and_strided_output_with_beta(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 16, 24)).astype(BF)
    w = rng.standard_normal((24, 8)).astype(BF)[None, None]  # one weight for every matrix
    base = rng.standard_normal((2, 3, 16, 20)).astype(np.float32)
    out1, out2 = base.copy(), base.copy()
    calls: list[int] = []
    walked(calls, monkeypatch, a, w, out1[..., 4:12], alpha=0.5, beta=1.0)
    per_matrix(monkeypatch, a, w, out2[..., 4:12], alpha=0.5, beta=1.0)
    assert calls == [True]
    np.testing.assert_array_equal(out1, out2)
    np.testing.assert_array_equal(out1[..., :4], base[..., :4])  # outside the view: untouched


def test_declines_copies_and_packed_products(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 6, 10, 12)).astype(BF)[:, ::2, ::2, ::3]  # neither matrix axis of unit stride
    b = rng.standard_normal((2, 3, 4, 7)).astype(BF)
    calls: list[int] = []
    got = walked(calls, monkeypatch, a, b)
    assert calls == [False]
    np.testing.assert_array_equal(got, per_matrix(monkeypatch, a, b))
    monkeypatch.setattr(bf16_gemm, "PACK_MIN_FLOPS", 1)
    calls.clear()
    c = rng.standard_normal((2, 8, 8)).astype(BF)
    walked(calls, monkeypatch, c, c)
    assert calls == [False]
