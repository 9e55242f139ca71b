"""`math.fpowi` at run time: LLVM's powi (repeated squaring, the reciprocal for a negative
exponent) on float arrays, which numpy's float power computed 50x slower for negative
bases (a GPT-2 MLP's x ** 3)."""

import numpy as np
import pytest

from shardc.runtime.execute.kernels.math_run import fpowi


def _powi(x: np.ndarray, n: int) -> np.ndarray:
    """compiler-rt's __powisf2, element by element."""
    out = np.empty_like(x)
    for i, a in enumerate(x.flat):
        r, b = x.dtype.type(1), abs(n)
        while True:
            if b & 1:
                r = x.dtype.type(r * a)
            b //= 2
            if b == 0:
                break
            a = x.dtype.type(a * a)
        out.flat[i] = x.dtype.type(1) / r if n < 0 else r
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, -1, -3])
def test_fpowi_is_llvm_powi(dtype, n):
    x = np.random.default_rng(n + 10).standard_normal((4, 33)).astype(dtype)
    got = fpowi(x, np.int64(n))
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_array_equal(got, _powi(x, n))
    np.testing.assert_allclose(got, np.power(x.astype(np.float64), n), rtol=1e-5 if dtype == np.float32 else 1e-13)
    assert got is not x and not np.shares_memory(got, x)  # a new array, as np.power makes


def test_fpowi_of_scalars_and_huge_exponents_keeps_numpys_power():
    assert fpowi(2.0, 3) == 8.0
    x = np.array([1.0, -1.0, 1.0000001], np.float64)
    np.testing.assert_allclose(fpowi(x, 1000), np.power(x, 1000.0))
