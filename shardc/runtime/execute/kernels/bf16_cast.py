"""float32 <-> bf16 casts of arrays as bit operations: `arith.truncf`/`extf` on arrays,
what the mixed-precision pass puts before every product, call `cast_float`.

float32 to bf16 rounds to nearest even on the float32 bits in a numba loop
(`round_to_bfloat16`: 5.5x ml_dtypes' `astype` on 1.5M elements, Intel Xeon with AMX);
bf16 to float32 shifts the 16 bits up (`widen_bfloat16`: 2x; its numba loop 3x
numpy's shift). Both give ml_dtypes'
bits; a NaN stays a quiet NaN with its sign. Apart from `bf16_run` because the loop is
compiled through `fused_run`, which the code checker (imported by `fused_run`) needs
`bf16_run` for."""

from __future__ import annotations

import numpy as np

from shardc.runtime.execute.kernels import fused_run
from shardc.runtime.execute.kernels.aligned import aligned_empty
from shardc.runtime.execute.kernels.bf16_run import bfloat16, is_bfloat16

_F32 = np.dtype(np.float32)


def rounding_lines(indent: int) -> str:
    """Kernel source that stores the float32 bits `v` rounded to bf16 bits (nearest, ties
    to even; a NaN stays a quiet NaN) in `dst[i]`, indented by `indent` spaces: the
    rounding every kernel that writes bf16 bits shares (ml_dtypes' bits)."""
    lines = (
        "if (v & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):",
        "    dst[i] = np.uint16((v >> np.uint32(16)) | np.uint32(0x40))",
        "else:",
        "    dst[i] = np.uint16((v + np.uint32(0x7FFF) + ((v >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))",
    )
    return "".join(" " * indent + line + "\n" for line in lines)


# float32 bits rounded to bf16 bits over rows of `n` elements `stride` apart in `bits` (a
# contiguous array is one row; a strided view's memory from its first element), written
# to the contiguous `out`; row slices, so that the inner loop's indices are known
# non-negative and it vectorizes.
_ROUND_SOURCE = """
def kernel(bits, stride, n, out):
    for r in range(out.size // n):
        row = bits[r * stride : r * stride + n]
        dst = out[r * n : r * n + n]
        for i in range(n):
            v = row[i]
""" + rounding_lines(12)

JIT_MIN_ELEMENTS = 4096
"""Casts of fewer elements stay with numpy: the kernel's call costs more than it saves."""


def _round_kernel() -> object | None:
    """The rounding loop, jit-compiled (`fused_run.jit_once`)."""
    return fused_run.jit_once("bf16roundrows", _ROUND_SOURCE)


def _strided_rows(x: np.ndarray) -> tuple[np.ndarray, int, int] | None:
    """`x`'s float32 bits as (memory from its first element, row stride, row length) where
    its trailing axes are dense (the row) and the others fold into one row axis without a copy
    (q, k or v picked out of a fused projection's result); None otherwise."""
    if x.ndim < 2 or x.size == 0:
        return None
    n, step = 1, 4  # the contiguous tail: axes from the last while each is dense
    for d in range(x.ndim - 1, 0, -1):
        if x.strides[d] != step and x.shape[d] != 1:
            break
        n, step = n * x.shape[d], step * x.shape[d]
    if n == 1:
        return None
    try:
        rows = np.reshape(x.view(np.uint32), (-1, n), copy=False)
    except ValueError:
        return None
    stride = rows.strides[0]
    if stride < 4 * n or stride % 4:
        return None
    span = (rows.shape[0] - 1) * (stride // 4) + n
    return np.lib.stride_tricks.as_strided(rows, shape=(span,), strides=(4,)), stride // 4, n


def round_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 `x` rounded to bf16 (nearest, ties to even), as ml_dtypes rounds. A
    transposed layout (a weight's transpose) is kept, as numpy's `astype` keeps it, and
    rounded in memory order; rows of a strided view are read in place: both took a
    copy to a contiguous array first, 20x the rounding's own time for a transposed
    768x3072 weight (measured). The result starts on a 64-byte boundary (`aligned_empty`)."""
    kernel = _round_kernel() if x.size >= JIT_MIN_ELEMENTS else None
    if kernel is None:
        return x.astype(bfloat16())
    rows = None
    if not x.flags.c_contiguous:
        order = sorted(range(x.ndim), key=lambda d: -abs(x.strides[d]))
        y = x.transpose(order)
        if y.flags.c_contiguous:  # a permutation of a contiguous array
            back = [order.index(d) for d in range(x.ndim)]
            return round_to_bfloat16(y).transpose(back)
        rows = _strided_rows(x)
        if rows is None:
            x = np.ascontiguousarray(x)
    bits, stride, n = rows if rows is not None else (x.view(np.uint32).reshape(-1), x.size, x.size)
    out = aligned_empty(x.shape, np.uint16)
    kernel(bits, stride, n, out.reshape(-1))  # type: ignore[operator]
    return out.view(bfloat16())


# bf16 bits shifted into float32's top half, contiguous to contiguous.
_WIDEN_SOURCE = """
def kernel(src, out):
    for i in range(src.size):
        out[i] = np.uint32(src[i]) << np.uint32(16)
"""


def _widen_kernel() -> object | None:
    """The widening loop, jit-compiled (`fused_run.jit_once`): 3x numpy's `left_shift`
    into uint32 on 1M elements (AMD EPYC Zen 4, measured)."""
    return fused_run.jit_once("bf16widen", _WIDEN_SOURCE)


def widen_bfloat16(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """bf16 `x` as float32 (exact): its 16 bits are float32's top half. `out`, a
    float32 array of `x`'s shape, lets a loop reuse one buffer."""
    src = x.view(np.uint16)
    bits = np.empty(x.shape, np.uint32) if out is None else out.view(np.uint32)
    kernel = _widen_kernel() if x.size >= JIT_MIN_ELEMENTS and src.flags.c_contiguous and bits.flags.c_contiguous else None
    if kernel is None:
        np.left_shift(src, 16, out=bits, dtype=np.uint32)
    else:
        kernel(src.reshape(-1), bits.reshape(-1))  # type: ignore[operator]
    return bits.view(np.float32)


def cast_float(x: object, dt: np.dtype) -> object:
    """`arith.truncf`/`extf` of an array to `dt`: bf16 from/to float32 by the bit
    operations above, anything else by numpy's `astype`."""
    a = np.asarray(x)
    if a.dtype == _F32 and is_bfloat16(dt):
        return round_to_bfloat16(a)
    if dt == _F32 and is_bfloat16(a.dtype):
        return widen_bfloat16(a)
    return a.astype(dt)
