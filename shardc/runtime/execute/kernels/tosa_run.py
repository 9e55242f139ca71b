"""The run time of the `tosa` ops that are not one numpy expression: what the code
`codegen/kernels/tosa.py` emits calls (integer multiply with shift, rescale, zero-point
matmul and negate, TOSA's saturating cast, clamp, the unary functions numpy lacks)."""

from __future__ import annotations

import numpy as np

from shardc.runtime.execute import helpers


def first(x: object) -> np.generic:
    """The one element of a zero point or shift tensor."""
    return np.asarray(x).reshape(-1)[0]


def mul_shift(a: np.ndarray, b: np.ndarray, shift: np.ndarray, dt: np.dtype) -> np.ndarray:
    s = int(first(shift)) if np.size(shift) else 0
    if dt.kind == "f" or s == 0:
        return np.asarray(a * b).astype(dt, copy=False)
    wide = a.astype(np.int64) * b.astype(np.int64)
    wide = (wide + (1 << (s - 1))) >> s
    return wide.astype(dt)


def clamp(x: np.ndarray, lo: object, hi: object, propagate: bool) -> np.ndarray:
    r = np.minimum(np.maximum(x, x.dtype.type(lo)), x.dtype.type(hi))
    if not propagate and x.dtype.kind == "f":
        r = np.where(np.isnan(x), x.dtype.type(lo), r)
    return r


def matmul(a: np.ndarray, b: np.ndarray, azp: np.ndarray, bzp: np.ndarray, dt: np.dtype) -> np.ndarray:
    if dt.kind in "iu":
        a = a.astype(dt) - first(azp).astype(dt)
        b = b.astype(dt) - first(bzp).astype(dt)
    return np.matmul(a, b).astype(dt, copy=False)


def rescale(x, mult, shift, izp, ozp, dt, double_round, in_unsigned, out_unsigned):  # type: ignore[no-untyped-def]
    v = (helpers.uview(x, x.dtype) if in_unsigned else x).astype(np.int64) - int(first(izp))
    m = np.asarray(mult).astype(np.int64)
    s = np.asarray(shift).astype(np.int64)
    rnd = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    if double_round:
        rnd = rnd + np.where(s > 31, np.where(v >= 0, 1 << 30, -(1 << 30)), 0)
    r = (v * m + rnd) >> s
    r = r + int(first(ozp))
    target = helpers.UNSIGNED[dt] if out_unsigned else dt
    info = np.iinfo(target)
    r = np.clip(r, info.min, info.max).astype(target)
    return r.view(dt) if out_unsigned else r


def sigmoid(x: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-x))).astype(x.dtype, copy=False)


def rsqrt(x: np.ndarray) -> np.ndarray:
    return (1 / np.sqrt(x)).astype(x.dtype, copy=False)


def clz(x: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    u = helpers.uview(x, x.dtype).astype(np.uint64)
    n = np.zeros(x.shape, dtype=np.int64)
    for b in range(bits):  # vectorised over the array, one pass per bit
        n += (u >> np.uint64(b)) != 0
    return (bits - n).astype(x.dtype)


def negate(x: np.ndarray, izp: np.ndarray, ozp: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        return -x
    i, o = int(first(izp)), int(first(ozp))
    info = np.iinfo(x.dtype)
    return np.clip(-(x.astype(np.int64) - i) + o, info.min, info.max).astype(x.dtype)


def cast(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """TOSA's cast: float to int rounds half to even and saturates; int to int wraps;
    to bool is `!= 0`."""
    if dt == np.bool_:
        return x != 0
    if x.dtype.kind == "f" and dt.kind in "iu":
        info = np.iinfo(dt)
        r = np.clip(np.rint(x.astype(np.float64)), info.min, info.max)
        return np.where(np.isnan(r), 0, r).astype(dt)
    return x.astype(dt)
