"""Small runtime helpers the generated code calls: integer semantics of arith that
numpy and Python do not give directly (truncating division, unsigned views, shifts
past the bit width), casts, dense-attribute decoding and scalar arguments by their
type's text."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

UNSIGNED = {
    np.dtype(np.int8): np.dtype(np.uint8),
    np.dtype(np.int16): np.dtype(np.uint16),
    np.dtype(np.int32): np.dtype(np.uint32),
    np.dtype(np.int64): np.dtype(np.uint64),
    np.dtype(np.bool_): np.dtype(np.bool_),
}


def wrap(value: int, width: int) -> int:
    half = 1 << (width - 1)
    return ((value + half) & ((1 << width) - 1)) - half


# --- scalar integer ops (Python ints, signed interpretation) ---------------------------


def divsi(a: int, b: int, w: int) -> int:
    if b == 0:
        return 0  # undefined behaviour in MLIR
    q = abs(a) // abs(b)
    return wrap(-q if (a < 0) != (b < 0) else q, w)


def remsi(a: int, b: int, w: int) -> int:
    if b == 0:
        return 0
    r = abs(a) % abs(b)
    return wrap(-r if a < 0 else r, w)


def floordivsi(a: int, b: int, w: int) -> int:
    return 0 if b == 0 else wrap(a // b, w)


def ceildivsi(a: int, b: int, w: int) -> int:
    return 0 if b == 0 else wrap(-((-a) // b), w)


def divui(a: int, b: int, w: int) -> int:
    m = (1 << w) - 1
    b &= m
    return 0 if b == 0 else wrap((a & m) // b, w)


def remui(a: int, b: int, w: int) -> int:
    m = (1 << w) - 1
    b &= m
    return 0 if b == 0 else wrap((a & m) % b, w)


def ceildivui(a: int, b: int, w: int) -> int:
    m = (1 << w) - 1
    b &= m
    return 0 if b == 0 else wrap(-((-(a & m)) // b), w)


def shli(a: int, b: int, w: int) -> int:
    b &= (1 << w) - 1
    return wrap(a << b, w) if b < w else 0


def shrsi(a: int, b: int, w: int) -> int:
    b &= (1 << w) - 1
    return a >> b if b < w else 0


def shrui(a: int, b: int, w: int) -> int:
    m = (1 << w) - 1
    b &= m
    return wrap((a & m) >> b, w) if b < w else 0


def fptosi(x: float, w: int) -> int:
    try:
        return wrap(int(x), w)
    except (ValueError, OverflowError):
        return 0  # NaN/inf: poison in MLIR


def fptoui(x: float, w: int) -> int:
    return fptosi(x, w + 1) & ((1 << w) - 1) if w < 64 else fptosi(x, 65)


def bitcast_scalar(x: object, src: np.dtype, dst: np.dtype) -> object:
    return np.asarray(x, dtype=src).view(dst)[()]


def mul_extended(a: int, b: int, w: int, unsigned: bool) -> tuple[int, int]:
    m = (1 << w) - 1
    p = (a & m) * (b & m) if unsigned else a * b
    return wrap(p, w), wrap(p >> w, w)


def addui_extended(a: int, b: int, w: int) -> tuple[int, bool]:
    m = (1 << w) - 1
    s = (a & m) + (b & m)
    return wrap(s, w), s > m


# --- array integer ops -------------------------------------------------------------------


def arr(x: object, dt: np.dtype) -> np.ndarray:
    return np.asarray(x, dtype=dt) if not (isinstance(x, np.ndarray) and x.dtype == dt) else x


def uview(x: object, dt: np.dtype) -> np.ndarray:
    return arr(x, dt).view(UNSIGNED[dt])


def divsi_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    a, b = arr(a, dt), arr(b, dt)
    q = np.floor_divide(a, b)
    adjust = (q * b != a) & ((a < 0) != (b < 0))
    return (q + adjust.astype(dt)).astype(dt, copy=False)


def remsi_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    return np.fmod(arr(a, dt), arr(b, dt))


def floordivsi_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    return np.floor_divide(arr(a, dt), arr(b, dt))


def ceildivsi_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    a, b = arr(a, dt), arr(b, dt)
    q = np.floor_divide(a, b)
    return (q + (q * b != a).astype(dt)).astype(dt, copy=False)


def divui_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    return np.floor_divide(uview(a, dt), uview(b, dt)).view(dt)


def remui_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    return np.remainder(uview(a, dt), uview(b, dt)).view(dt)


def ceildivui_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    ua, ub = uview(a, dt), uview(b, dt)
    q = np.floor_divide(ua, ub)
    return (q + (q * ub != ua).astype(ua.dtype)).view(dt)


def _shift_ok(b: np.ndarray, dt: np.dtype) -> np.ndarray:
    return uview(b, dt) < dt.itemsize * 8


def shli_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    a, b = arr(a, dt), arr(b, dt)
    ok = _shift_ok(b, dt)
    return np.where(ok, np.left_shift(a, np.where(ok, b, 0)), 0).astype(dt, copy=False)


def shrsi_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    a, b = arr(a, dt), arr(b, dt)
    ok = _shift_ok(b, dt)
    return np.where(ok, np.right_shift(a, np.where(ok, b, 0)), 0).astype(dt, copy=False)


def shrui_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    ua, ub = uview(a, dt), uview(b, dt)
    ok = ub < dt.itemsize * 8
    r = np.right_shift(ua, np.where(ok, ub, 0).astype(ua.dtype))
    return np.where(ok, r, 0).astype(ua.dtype).view(dt)


def minui_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    return np.minimum(uview(a, dt), uview(b, dt)).view(dt)


def maxui_a(a: object, b: object, dt: np.dtype) -> np.ndarray:
    return np.maximum(uview(a, dt), uview(b, dt)).view(dt)


def minui(a: int, b: int, w: int) -> int:
    m = (1 << w) - 1
    return a if (a & m) <= (b & m) else b


def maxui(a: int, b: int, w: int) -> int:
    m = (1 << w) - 1
    return a if (a & m) >= (b & m) else b


def fptoi_a(x: object, dt: np.dtype, unsigned: bool) -> np.ndarray:
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if unsigned and dt != np.bool_:
            return np.asarray(x, dtype=np.float64).astype(np.int64 if dt.itemsize < 8 else np.uint64).astype(UNSIGNED[dt]).view(dt)
        return x.astype(np.int64).astype(dt) if dt.itemsize < 8 else x.astype(dt)


def uitofp_a(x: object, src: np.dtype, dst: np.dtype) -> np.ndarray:
    return uview(x, src).astype(dst)


def extui_a(x: object, src: np.dtype, dst: np.dtype) -> np.ndarray:
    return uview(x, src).astype(dst)


def extsi_a(x: object, src: np.dtype, dst: np.dtype) -> np.ndarray:
    a = arr(x, src)
    if src == np.bool_:
        return -(a.astype(dst))
    return a.astype(dst)


def trunci_a(x: object, src: np.dtype, dst: np.dtype) -> np.ndarray:
    a = arr(x, src)
    if dst == np.bool_:
        return (a & 1).astype(np.bool_)
    return a.astype(dst)


def sitofp_a(x: object, src: np.dtype, dst: np.dtype) -> np.ndarray:
    a = arr(x, src)
    if src == np.bool_:
        return -(a.astype(dst))
    return a.astype(dst)


def mul_extended_a(a: object, b: object, dt: np.dtype, unsigned: bool) -> tuple[np.ndarray, np.ndarray]:
    w = dt.itemsize * 8
    if w < 64:
        wide = np.int64 if not unsigned else np.uint64
        src = uview(a, dt) if unsigned else arr(a, dt)
        srcb = uview(b, dt) if unsigned else arr(b, dt)
        p = src.astype(wide) * srcb.astype(wide)
        return p.astype(dt), (p >> w).astype(dt)
    fa = np.vectorize(lambda x, y: mul_extended(int(x), int(y), 64, unsigned), otypes=[np.int64, np.int64])
    lo, hi = fa(arr(a, dt), arr(b, dt))
    return lo, hi


def addui_extended_a(a: object, b: object, dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    ua, ub = uview(a, dt), uview(b, dt)
    s = ua + ub
    return s.view(dt), s < ua


# --- dense attributes ------------------------------------------------------------------


def dense_to_array(attr: object, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    """Decode a DenseIntOrFPElementsAttr (splat or full) into a read-only array; a
    splat held as its one element (`shardc.ir.dense`: a large one) as a broadcast view
    of it (what reads it allocates what it needs; a dead one costs nothing)."""
    size = int(np.prod(shape, dtype=np.int64))
    raw = getattr(getattr(attr, "data", None), "data", None)
    if isinstance(raw, bytes) and dt != np.bool_ and len(raw) in (dt.itemsize, size * dt.itemsize):
        flat = np.frombuffer(raw, dtype=dt.newbyteorder("<")).astype(dt)
        if flat.size == 1 and size > 1:  # a splat held compact (a large one): never expanded here
            return np.broadcast_to(flat.reshape((1,) * len(shape)), shape)
        out = np.full(shape, flat[0], dtype=dt) if flat.size == 1 and size != 1 else flat.reshape(shape)
        out.flags.writeable = False
        return out
    values = attr.get_values()  # type: ignore[attr-defined]
    if dt == np.bool_:
        flat = np.array([bool(v) for v in values], dtype=np.bool_)
    elif dt.kind in "iu":
        w = dt.itemsize * 8
        flat = np.array([wrap(int(v), w) for v in values], dtype=dt)
    else:
        flat = np.array(values, dtype=dt)
    out = np.full(shape, flat[0], dtype=dt) if flat.size == 1 and size != 1 else flat.reshape(shape)
    out.flags.writeable = False
    return out


def _int_scalar(width: int) -> Callable[[object], object]:
    if width == 1:
        return bool
    return lambda value: wrap(int(value), width)  # type: ignore[call-overload]


_SCALARS: dict[str, Callable[[object], object]] = {
    "f64": np.float64, "f32": np.float32, "f16": np.float16, "index": int,  # type: ignore[dict-item]
    **{f"i{w}": _int_scalar(w) for w in (1, 8, 16, 32, 64)},
}
"""Scalar argument types by their text -> the conversion `dtypes.to_scalar` makes for
them (a cache hit converts scalars without building xDSL types)."""


def scalar_converter(text: str) -> Callable[[object], object] | None:
    """The conversion of a scalar argument whose type prints as `text` (`f32`, `i8`,
    `index`, any `iN`), or None where there is none (`dtypes.to_scalar` uses it too)."""
    conv = _SCALARS.get(text)
    if conv is None and text[:1] == "i" and text[1:].isdigit() and int(text[1:]) > 0:
        conv = _int_scalar(int(text[1:]))
    return conv
