"""float32 <-> bf16 casts of arrays as bit operations: `arith.truncf`/`extf` on arrays,
what the mixed-precision pass puts before every product, call `cast_float`.

float32 to bf16 rounds to nearest even on the float32 bits in a numba loop
(`round_to_bfloat16`: 5.5x ml_dtypes' `astype` on 1.5M elements, Intel Xeon with AMX);
bf16 to float32 shifts the 16 bits up (`widen_bfloat16`: 2x). Both give ml_dtypes'
bits; a NaN stays a quiet NaN with its sign. Apart from `bf16_run` because the loop is
compiled through `fused_run`, which the code checker (imported by `fused_run`) needs
`bf16_run` for."""

from __future__ import annotations

import numpy as np

from shardc.runtime.execute.kernels import fused_run
from shardc.runtime.execute.kernels.bf16_run import bfloat16, is_bfloat16

_F32 = np.dtype(np.float32)

_ROUND_SOURCE = """
def kernel(bits, out):
    for i in range(bits.size):
        v = bits[i]
        if (v & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
            out[i] = np.uint16((v >> np.uint32(16)) | np.uint32(0x40))
        else:
            out[i] = np.uint16((v + np.uint32(0x7FFF) + ((v >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
"""

_ROUND_KERNEL: list[object] = []  # [the jit kernel, or None where numba refused it]


def _round_kernel() -> object | None:
    """The rounding loop jit-compiled (once per process, cached on disk like the fused
    kernels), or None where fused kernels are off (`SHARDC_KERNELS=numpy`, no numba)."""
    if not fused_run.enabled():
        return None
    if not _ROUND_KERNEL:
        try:
            _ROUND_KERNEL.append(fused_run.njit_kernel("bf16round", _ROUND_SOURCE, []))
        except fused_run.KernelRefused:
            _ROUND_KERNEL.append(None)
    return _ROUND_KERNEL[0]


def round_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 `x` rounded to bf16 (nearest, ties to even), as ml_dtypes rounds."""
    kernel = _round_kernel() if x.size >= 4096 else None  # small: the call costs more
    if kernel is None:
        return x.astype(bfloat16())
    bits = np.ascontiguousarray(x).view(np.uint32).reshape(-1)
    out = np.empty(x.shape, np.uint16)
    kernel(bits, out.reshape(-1))  # type: ignore[operator]
    return out.view(bfloat16())


def widen_bfloat16(x: np.ndarray) -> np.ndarray:
    """bf16 `x` as float32 (exact): its 16 bits are float32's top half."""
    out = np.empty(x.shape, np.uint32)
    np.left_shift(x.view(np.uint16), 16, out=out, dtype=np.uint32)
    return out.view(np.float32)


def cast_float(x: object, dt: np.dtype) -> object:
    """`arith.truncf`/`extf` of an array to `dt`: bf16 from/to float32 by the bit
    operations above, anything else by numpy's `astype`."""
    a = np.asarray(x)
    if a.dtype == _F32 and is_bfloat16(dt):
        return round_to_bfloat16(a)
    if dt == _F32 and is_bfloat16(a.dtype):
        return widen_bfloat16(a)
    return a.astype(dt)
