"""kernels/onednn_matmul.py: bf16 products through oneDNN's matmul primitive, float32
accumulation. Each result is checked against float64 products of the same (already
rounded) bf16 inputs within float32 rounding (k * eps32 * (|A| @ |B|)); a bf16 result
within one bf16 rounding of that. Skipped where oneDNN does not load (the
onednn-cpu-gomp wheel, or SHARDC_ONEDNN naming its libdnnl.so.3)."""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np
import pytest

from shardc.runtime.execute.kernels import bf16_gemm, onednn_matmul

BF = ml_dtypes.bfloat16
EPS32 = float(np.finfo(np.float32).eps)
EPS16 = 2.0**-8

needs_onednn = pytest.mark.skipif(not onednn_matmul.available(), reason="oneDNN is not loadable here (onednn-cpu-gomp wheel / SHARDC_ONEDNN)")


def _exact(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a64 @ b64, np.abs(a64) @ np.abs(b64)


def _close(r: np.ndarray, exact: np.ndarray, size: np.ndarray, k: int, eps: float = 0.0) -> None:
    bound = k * EPS32 * size + (EPS32 + eps) * np.abs(exact) + 1e-30
    assert np.all(np.abs(r.astype(np.float64) - exact) <= bound), float(np.max(np.abs(r - exact) / bound))


def _bf(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(BF)


@needs_onednn
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 7, 3), (33, 65, 17), (128, 64, 128), (257, 300, 129)])
def test_plain_products_match_float64(m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, b = _bf(rng, m, k), _bf(rng, k, n)
    c = np.full((m, n), np.nan, np.float32)
    assert onednn_matmul.matmul(a, b, c)
    _close(c, *_exact(a, b), k)


@needs_onednn
def test_transposed_views_batches_and_broadcast() -> None:
    rng = np.random.default_rng(1)
    a = _bf(rng, 3, 5, 40, 24).swapaxes(-1, -2)  # (3, 5, 24, 40), transposed matrices
    b = _bf(rng, 3, 5, 30, 40).swapaxes(-1, -2)  # (3, 5, 40, 30)
    c = np.empty((3, 5, 24, 30), np.float32)
    assert onednn_matmul.matmul(a, b, c)
    _close(c, *_exact(a, b), 40)
    w = _bf(rng, 40, 30)  # one matrix for the whole batch, as np.matmul broadcasts
    assert onednn_matmul.matmul(a, w, c)
    _close(c, *_exact(a, w), 40)
    one = _bf(rng, 1, 5, 40, 30)  # a batch axis of 1 against 3
    assert onednn_matmul.matmul(a, one, c)
    _close(c, *_exact(a, one), 40)


@needs_onednn
def test_alpha_beta_and_a_bf16_result() -> None:
    rng = np.random.default_rng(2)
    a, b = _bf(rng, 37, 50), _bf(rng, 50, 23)
    exact, size = _exact(a, b)
    c0 = rng.standard_normal((37, 23)).astype(np.float32)
    c = c0.copy()
    assert onednn_matmul.matmul(a, b, c, alpha=0.125, beta=1.0)
    _close(c, 0.125 * exact + c0, 0.125 * size + np.abs(c0), 50)
    c = c0.copy()
    assert onednn_matmul.matmul(a, b, c, alpha=1.0, beta=0.5)
    _close(c, exact + 0.5 * c0.astype(np.float64), size + np.abs(c0), 50)
    h = np.empty((37, 23), BF)
    assert onednn_matmul.matmul(a, b, h, alpha=2.0)
    _close(h.astype(np.float32), 2 * exact, 2 * size, 50, eps=EPS16)
    # nearest-even rounding of the float32 result, as bf16_cast rounds
    f = np.empty((37, 23), np.float32)
    assert onednn_matmul.matmul(a, b, f, alpha=2.0)
    assert np.array_equal(h.view(np.uint16), f.astype(BF).view(np.uint16))


@needs_onednn
def test_declines_what_it_cannot_run() -> None:
    rng = np.random.default_rng(3)
    a, b = _bf(rng, 8, 8), _bf(rng, 8, 8)
    c = np.zeros((8, 8), np.float32)
    assert not onednn_matmul.matmul(a[::-1], b, c)  # negative stride
    assert not onednn_matmul.matmul(np.broadcast_to(a[:1], (8, 8)), b, c)  # a zero stride (a broadcast view)
    assert not onednn_matmul.matmul(a, b, np.zeros((8, 8), BF), beta=1.0)  # accumulating into bf16
    ro = np.zeros((8, 8), np.float32)
    ro.flags.writeable = False
    assert not onednn_matmul.matmul(a, b, ro)
    assert not np.any(c) and not np.any(ro)


@needs_onednn
def test_threads_keep_their_own_primitives() -> None:
    """Simulated ranks are threads: the same layout run from several at once."""
    rng = np.random.default_rng(4)
    pairs = [(_bf(rng, 64, 48), _bf(rng, 48, 32)) for _ in range(4)]
    results: list[np.ndarray | None] = [None] * 4

    def work(i: int) -> None:
        c = np.empty((64, 32), np.float32)
        for _ in range(20):
            assert onednn_matmul.matmul(*pairs[i], c)
        results[i] = c

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (a, b), c in zip(pairs, results):
        assert c is not None
        _close(c, *_exact(a, b), 48)


def test_absent_library_declines(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("SHARDC_ONEDNN", str(tmp_path / "no-such-libdnnl.so"))
    assert not onednn_matmul.available()
    a = np.ones((4, 4), BF)
    c = np.zeros((4, 4), np.float32)
    assert not onednn_matmul.matmul(a, a, c)
    monkeypatch.setenv("SHARDC_BF16_GEMM", "onednn")
    assert bf16_gemm.backend() != "onednn"
    np.testing.assert_array_equal(bf16_gemm.matmul(a, a), np.full((4, 4), 4, np.float32))  # MKL or numpy runs it


def _shaped_routing(monkeypatch: pytest.MonkeyPatch) -> None:
    """`auto` on a CPU with bf16 units whose measured routing is the shape rule (as on
    the Intel Xeon it was measured on): `onednn_suits` picks what oneDNN runs."""
    monkeypatch.setenv("SHARDC_BF16_GEMM", "auto")
    monkeypatch.setenv("SHARDC_BF16_UNITS", "1")
    monkeypatch.setattr(bf16_gemm, "_ROUTING", {"agreed": "shaped"})
    assert bf16_gemm.backend() == "onednn" and bf16_gemm.routing() == "shaped"


@needs_onednn
def test_bf16_gemm_sends_batched_and_small_products_to_onednn(monkeypatch: pytest.MonkeyPatch) -> None:
    _shaped_routing(monkeypatch)
    calls: list[tuple[int, ...]] = []
    real = onednn_matmul.matmul

    def spy(a, b, c, alpha=1.0, beta=0.0):
        calls.append(c.shape)
        return real(a, b, c, alpha, beta)

    monkeypatch.setattr(onednn_matmul, "matmul", spy)
    rng = np.random.default_rng(5)
    a, b = _bf(rng, 2, 3, 16, 8), _bf(rng, 2, 3, 8, 16)
    r = bf16_gemm.matmul(a, b, alpha=0.5)
    _close(r, *(0.5 * x for x in _exact(a, b)), 8)
    big_k = _bf(rng, 4, bf16_gemm.ONEDNN_ROWS_MAX_K + 1)
    bf16_gemm.matmul(big_k, _bf(rng, bf16_gemm.ONEDNN_ROWS_MAX_K + 1, 4))  # 2-D, long contraction: MKL
    assert calls == [(2, 3, 16, 16)]
    assert bf16_gemm.onednn_suits((1024, 256), 768) and not bf16_gemm.onednn_suits((1024, 256), 1024)
    assert not bf16_gemm.onednn_suits((2048, 2304), 768) and bf16_gemm.onednn_suits((8, 12, 256, 64), 256)


def _primitive_for(c: np.ndarray) -> object:
    """This thread's primitive that last wrote a result of `c`'s shape."""
    found = [p for key, p in onednn_matmul._STATE.primitives.items() if key[4] == c.shape]
    assert found
    return found[-1]


@needs_onednn
@pytest.mark.parametrize("m,k,n", [(256, 64, 96), (300, 33, 17), (512, 200, 2)])
def test_blocked_weights_follow_every_change_of_b(m: int, k: int, n: int) -> None:
    """Products whose `b` is reordered into oneDNN's blocked layout reorder it at every
    call: a weight updated in place (as the optimizer does) is read afresh."""
    rng = np.random.default_rng(6)
    a, b = _bf(rng, m, k), _bf(rng, k, n)
    assert onednn_matmul.blocks_weights(a, b)
    c = np.empty((m, n), np.float32)
    for step in range(3):
        assert onednn_matmul.matmul(a, b, c, alpha=0.5 if step == 1 else 1.0)
        exact, size = _exact(a, b)
        scale = 0.5 if step == 1 else 1.0
        _close(c, scale * exact, scale * size, k)
        b[...] = _bf(rng, k, n)  # in place: same address, new values
    assert _primitive_for(c).reorder is not None
    acc = np.ones((m, n), np.float32)
    assert onednn_matmul.matmul(a, b, acc, beta=1.0)
    exact, size = _exact(a, b)
    _close(acc, exact + 1.0, size + 1.0, k)
    r16 = np.empty((m, n), BF)
    assert onednn_matmul.matmul(a, b, r16)
    _close(r16, exact, size, k, EPS16)


@needs_onednn
def test_transposed_or_short_operands_keep_plain_weights() -> None:
    rng = np.random.default_rng(7)
    a, b = _bf(rng, 256, 64), _bf(rng, 64, 96)
    assert not onednn_matmul.blocks_weights(a, np.asfortranarray(b))  # a transposed b reorders slowly
    assert not onednn_matmul.blocks_weights(np.asfortranarray(a), b)  # the weight gradient's transposed a
    assert not onednn_matmul.blocks_weights(a[: onednn_matmul.BLOCKED_MIN_ROWS - 1], b)  # too few rows to pay
    bt = np.asfortranarray(b)
    c = np.empty((256, 96), np.float32)
    assert onednn_matmul.matmul(a, bt, c)
    _close(c, *_exact(a, b), 64)
    assert _primitive_for(c).reorder is None


@needs_onednn
def test_a_misaligned_source_is_copied_to_an_aligned_one() -> None:
    rng = np.random.default_rng(8)
    raw = _bf(rng, 300 * 128 + 8)
    a = raw[8:].reshape(300, 128)  # 16 bytes past numpy's own start: never on a 64-byte boundary with it
    if a.ctypes.data % 64 == 0:
        a = raw[:-8].reshape(300, 128)
    assert a.ctypes.data % 64 and a.nbytes >= onednn_matmul.ALIGN_SOURCE_MIN_BYTES
    b = _bf(rng, 128, onednn_matmul.ALIGN_SOURCE_MIN_COLUMNS)
    c = np.empty((300, b.shape[1]), np.float32)
    assert onednn_matmul.matmul(a, b, c)
    _close(c, *_exact(a, b), 128)
    copy = onednn_matmul._STATE.source
    assert copy.size >= a.nbytes and copy.ctypes.data % 64 == 0  # the product read an aligned copy
    before = a.copy()
    assert onednn_matmul.matmul(a, b, c)
    np.testing.assert_array_equal(a.view(np.uint16), before.view(np.uint16))  # the caller's `a` untouched


@needs_onednn
def test_bf16_gemm_sends_large_products_with_unit_stride_rows_of_a_to_onednn(monkeypatch: pytest.MonkeyPatch) -> None:
    _shaped_routing(monkeypatch)
    assert bf16_gemm.onednn_suits((2048, 3072), 768, a_rows=True)
    assert bf16_gemm.onednn_suits((1024, 256), bf16_gemm.ONEDNN_ROWS_MAX_K, a_rows=True)
    assert not bf16_gemm.onednn_suits((2048, 3072), 768, a_rows=False)  # a transposed: MKL's packed B is faster
    assert not bf16_gemm.onednn_suits((2048, 768), bf16_gemm.ONEDNN_ROWS_MAX_K + 1, a_rows=True)
    calls: list[tuple[int, ...]] = []
    real = onednn_matmul.matmul

    def spy(a, b, c, alpha=1.0, beta=0.0):
        calls.append(c.shape)
        return real(a, b, c, alpha, beta)

    monkeypatch.setattr(onednn_matmul, "matmul", spy)
    monkeypatch.setattr(bf16_gemm, "ONEDNN_MAX_FLOPS", 1000)  # every 2-D product here counts as large
    rng = np.random.default_rng(9)
    a, b = _bf(rng, 256, 64), _bf(rng, 64, 32)
    _close(bf16_gemm.matmul(a, b), *_exact(a, b), 64)
    _close(bf16_gemm.matmul(a, np.asfortranarray(b)), *_exact(a, b), 64)
    _close(bf16_gemm.matmul(np.asfortranarray(a), b), *_exact(a, b), 64)  # a transposed: MKL
    assert calls == [(256, 32), (256, 32)]
