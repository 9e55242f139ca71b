"""math's run-time functions (erf, rsqrt, integer powers, bit counts): what generated
code calls, apart from the emitters in `kernels/math.py` (which re-exports them), so a
compile-cache hit loads no xDSL."""

from __future__ import annotations

import math as pymath

import numpy as np

from shardc.runtime.execute import helpers


# erf(x) = x * P(x^2) / Q(x^2) on |x| <= 4, a rational fit of degrees (6, 5) to
# math.erf (least squares on relative error, Lawson-reweighted toward minimax, on 8000
# points of [0, 4]): relative error 2.1e-9 when evaluated in float64, so float32 results
# are within one ulp of correctly rounded. Beyond 4, erf rounds to +-1 in float32.
# Coefficients by increasing power of x^2.
ERF_P = (
    1.1283791693857033,
    0.18520295669497167,
    0.054316905935542614,
    0.0038496045406990137,
    0.0003796099130650133,
    4.684812071013948e-06,
    -1.3202392462053289e-08,
)
ERF_Q = (
    1.0,
    0.49746526077522835,
    0.11395833292622633,
    0.01546207943007364,
    0.001307569847010381,
    6.311090377210358e-05,
)
_ERF_CHUNK = 1 << 15  # elements per block: the ~25 passes stay in cache (2.5x faster)


def _erf_block(x: np.ndarray, out: np.ndarray) -> None:
    """erf of one block into `out`: Horner in place, so the block's few float64
    temporaries are reused by every pass."""
    v = np.clip(x, -4.0, 4.0, dtype=np.float64)
    t = v * v
    num = t * ERF_P[-1]
    num += ERF_P[-2]
    for c in ERF_P[-3::-1]:
        num *= t
        num += c
    den = t * ERF_Q[-1]
    den += ERF_Q[-2]
    for c in ERF_Q[-3::-1]:
        den *= t
        den += c
    num /= den
    np.multiply(num, v, out=out, casting="unsafe")


_PY_ERF = np.frompyfunc(pymath.erf, 1, 1)


def erf(x: object) -> object:
    """Vectorized erf. float32/float16: the rational fit above, in float64, block by
    block; float64 (which the fit would not round correctly): math.erf per element."""
    a = np.asarray(x)
    if a.dtype not in (np.float32, np.float16):
        out = np.asarray(_PY_ERF(a)).astype(a.dtype if a.dtype.kind == "f" else np.float64)
        return out if a.ndim else out[()]
    out = np.empty(a.shape, a.dtype)
    flat_in, flat_out = a.reshape(-1), out.reshape(-1)
    for s in range(0, flat_in.size, _ERF_CHUNK):
        _erf_block(flat_in[s : s + _ERF_CHUNK], flat_out[s : s + _ERF_CHUNK])
    return out if a.ndim else out[()]


def rsqrt(x: object) -> object:
    a = np.asarray(x)
    one = a.dtype.type(1) if a.dtype.kind == "f" else 1.0
    return one / np.sqrt(x)


def ipowi(a: object, b: object, dt: np.dtype) -> object:
    base, exp = helpers.arr(a, dt), helpers.arr(b, dt)
    with np.errstate(all="ignore"):
        res = np.where(exp >= 0, np.power(base, np.maximum(exp, 0)), np.where(base == 1, 1, np.where(base == -1, np.where(exp % 2 == 0, 1, -1), 0)))
    res = res.astype(dt)
    return res if res.ndim or isinstance(a, np.ndarray) else int(res)


def fpowi(a: object, b: object) -> object:
    """`a ** b` for an integer `b` as LLVM's powi computes it (compiler-rt's __powisf2:
    repeated squaring, then the reciprocal for a negative `b`) on float arrays: numpy's
    power with a float exponent takes ~40 ns an element for a negative base (a GPT-2
    MLP's x ** 3 was 45 of its step's 80 ms)."""
    x = np.asarray(a)
    n = np.asarray(b)
    if n.ndim or x.ndim == 0 or x.dtype.kind != "f" or abs(int(n)) > 64:
        return np.power(a, n.astype(x.dtype))
    e = abs(int(n))
    result, base = None, x
    while e:
        if e & 1:
            result = base if result is None else result * base
        e >>= 1
        if e:
            base = base * base
    if result is None or result is x:  # b = 0, or 1: a new array, as np.power makes
        result = np.ones_like(x) if result is None else x.copy()
    return x.dtype.type(1) / result if int(n) < 0 else result


def bit_count(x: object, dt: np.dtype, kind: str) -> object:
    w = dt.itemsize * 8
    u = helpers.uview(x, dt).astype(np.uint64)
    if kind == "ctpop":
        res = np.bitwise_count(u).astype(np.int64)
    else:
        bits = (u[..., None] >> np.arange(w, dtype=np.uint64)) & np.uint64(1)
        if kind == "cttz":
            nz = bits.astype(bool)
            res = np.where(nz.any(-1), nz.argmax(-1), w)
        else:
            nz = bits[..., ::-1].astype(bool)
            res = np.where(nz.any(-1), nz.argmax(-1), w)
    res = np.asarray(res).astype(dt)
    return res if isinstance(x, np.ndarray) else int(res)
