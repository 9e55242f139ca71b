"""The loop nests' float32 exp and tanh (`shardc.runtime.execute.kernels.vecmath`): within one
ulp of the correctly rounded result over a dense sweep of the float32 line and at the
edges (+-0, subnormals, huge, +-inf, NaN), within two of numpy's own float32 ufuncs;
and vectorized (SIMD arithmetic in the compiled loop, no call)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from shardc.runtime.execute.kernels import fused_run

numba = pytest.importorskip("numba", reason="numba (the [fast] extra) is not installed")
if fused_run._numba() is None:
    pytest.skip("numba does not load here", allow_module_level=True)


def _kernel(name: str):
    helper = fused_run._vecmath()[name]

    @numba.njit(nogil=True, error_model="numpy")
    def apply(x, out):
        for i in range(x.shape[0]):
            out[i] = np.float32(helper(x[i]))

    return apply


def _ordinal(a: np.ndarray) -> np.ndarray:
    """float32 bit patterns as a monotonic integer line (so ulp distance is a difference)."""
    i = a.astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = np.abs(_ordinal(a) - _ordinal(b))
    d[np.isnan(a) & np.isnan(b)] = 0
    return d


EDGES = np.array(
    [0.0, -0.0, 1e-45, -1e-45, 1e-38, -1e-38, 1e-30, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan,
     88.72, 88.73, -87.3, -103.9, -104.0, -110.0, 9.0, 9.1, 10.0, -10.0, 1e-4, 0.5, -0.5, 1.0],
    dtype=np.float32,
)


def sweep() -> np.ndarray:
    """Every 509th float32 bit pattern (8.4 million values, all exponents and signs), the edges."""
    bits = np.arange(0, 1 << 32, 509, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bits.view(np.float32), EDGES])


@pytest.mark.slow
@pytest.mark.parametrize("name,ref", [("exp32", np.exp), ("tanh32", np.tanh)])
def test_within_one_ulp_of_correctly_rounded(name, ref):
    x = sweep()
    got = np.empty_like(x)
    _kernel(name)(x, got)
    with np.errstate(all="ignore"):
        rounded = ref(x.astype(np.float64)).astype(np.float32)  # float64 libm, then one rounding
        numpy32 = ref(x)
    assert ulps(got, rounded).max() <= 1
    assert ulps(got, numpy32).max() <= 2  # numpy's float32 loops are themselves within ~1 ulp
    assert np.array_equal(np.isnan(got), np.isnan(x))


def test_edges_exact():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 200.0, -200.0, 1e-45, -1e-45], np.float32)
    e, t = np.empty_like(x), np.empty_like(x)
    _kernel("exp32")(x, e)
    _kernel("tanh32")(x, t)
    np.testing.assert_array_equal(e[:4], [1.0, 1.0, np.inf, 0.0])
    assert np.isnan(e[4]) and e[5] == np.inf and e[6] == 0.0 and e[7] == 1.0 and e[8] == 1.0
    np.testing.assert_array_equal(t[:4], [0.0, -0.0, 1.0, -1.0])
    assert np.signbit(t[1]) and not np.signbit(t[0])
    assert np.isnan(t[4]) and t[5] == 1.0 and t[6] == -1.0 and t[7] == x[7] and t[8] == x[8]


@pytest.mark.parametrize("name", ["exp32", "tanh32"])
def test_the_loop_is_vectorized(name):
    """Packed float64 arithmetic in the loop and no call out of it (libm would be per element)."""
    k = _kernel(name)
    k(np.ones(64, np.float32), np.empty(64, np.float32))
    (asm,) = k.inspect_asm().values()
    assert re.search(r"\bv(mul|add|fmadd\w*)pd\s+%[yz]mm", asm), "no packed double arithmetic"
    assert not re.search(r"call\w*\s+.*\b(exp|tanh)", asm)
