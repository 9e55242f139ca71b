"""`bf16_sums.sum_into`, the sum every bf16 reduction of the runtime ends in: the float32
sum of the contributions in the given order rounded to bf16 once, bit for bit ml_dtypes'
rounding of numpy's float32 sum, on the jit kernel and on the numpy path, for strided
first operands (a ZeRO column block), NaN, infinities and ties. The collectives that call
it run under mpiexec in tests/mpi/test_bf16_sums_mpi.py."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from shardc.runtime.execute import bf16_sums

BF = np.dtype(ml_dtypes.bfloat16)


def reference(parts: list[np.ndarray]) -> np.ndarray:
    total = parts[0].astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for p in parts[1:]:
            total = total + p.astype(np.float32)
    return total.astype(BF)


def special(shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))).astype(np.float32)
    flat = x.reshape(-1)
    flat[:: 97] = np.inf
    flat[5:: 89] = -np.inf
    flat[7:: 101] = np.nan
    flat[11:: 53] = 3.0e38  # sums overflow to infinity
    return x.astype(BF)


@pytest.fixture(params=["jit", "numpy"])
def path(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(bf16_sums, "_sum_kernel", lambda: None)
    else:
        assert bf16_sums._sum_kernel() is not None  # numba compiled it
    return request.param


@pytest.mark.parametrize("k", [2, 3, 5])
def test_sum_is_float32_sum_rounded_once(path, k):
    parts = [special((37, 4100), 10 + j) for j in range(k)]
    out = np.empty((37, 4100), BF)
    bf16_sums.sum_into(parts[0], np.stack([p.view(np.uint16) for p in parts[1:]]), out)
    want = reference(parts)
    assert np.array_equal(out.view(np.uint16), want.view(np.uint16))


def test_strided_first_and_strided_result(path):
    whole = special((64, 3, 4, 16), 1)
    mine = whole[:, :, 2:, :]  # a column block: strided
    other = special((64, 3, 2, 16), 2)
    out_whole = np.zeros((64, 3, 4, 16), BF)
    out = out_whole[:, :, :2, :]  # a strided receive buffer is written through a copy
    bf16_sums.pair_sum(mine, other.view(np.uint16), out)
    want = reference([np.ascontiguousarray(mine), other])
    assert np.array_equal(out.view(np.uint16), want.view(np.uint16))
    assert not out_whole[:, :, 2:, :].view(np.uint16).any()


def test_ties_round_to_even(path):
    one = np.array([1.0, 1.0, -1.0, 2.0] * 1200, np.float32).astype(BF)
    half_ulp = np.array([2.0**-8, 3 * 2.0**-8, -(2.0**-8), 2.0**-7] * 1200, np.float32).astype(BF)
    out = np.empty_like(one)
    bf16_sums.sum_into(one, half_ulp.view(np.uint16)[None], out)
    assert np.array_equal(out.view(np.uint16), reference([one, half_ulp]).view(np.uint16))
    assert out[0] == 1.0 and out[1] == np.float32(1.015625)  # 1 + 2^-8: even; 1 + 3*2^-8: up


def test_scalar_and_empty(path):
    a, b = np.array(1.5, BF), np.array(2.25, BF)
    out = np.empty((), BF)
    bf16_sums.sum_into(a, b.view(np.uint16).reshape(1), out)
    assert float(out) == 3.75
    bf16_sums.sum_into(np.empty((0, 3), BF), np.empty((1, 0, 3), np.uint16), np.empty((0, 3), BF))
