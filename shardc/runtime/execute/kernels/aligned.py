"""Arrays whose data starts on a 64-byte boundary, for what bf16 products read and write.

numpy's allocator starts arrays on 16 bytes; oneDNN 3.2's AMX matmul ran a 2048x768x3072
product at 940 GFLOP/s from such operands, 1,225 with `a` 64-byte aligned and 1,300 with
the result too (one thread, CPU time, Intel Xeon with AMX: AVX-512 loads and stores split
across cache lines). So the bf16 results of casts and kernels (a bf16 product's likely
operands) and the float32 results of bf16 products are allocated here.
"""

from __future__ import annotations

import math

import numpy as np

ALIGNMENT = 64
"""Byte alignment of the arrays `aligned_empty` allocates."""


def aligned_empty(shape: tuple[int, ...], dtype: object = np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an `ALIGNMENT` boundary
    (a view into a slightly larger 1-D array of the same dtype)."""
    dt = np.dtype(dtype)  # type: ignore[call-overload]
    n = math.prod(shape)
    raw = np.empty(n + ALIGNMENT // dt.itemsize, dt)
    skip = (-raw.ctypes.data % ALIGNMENT) // dt.itemsize
    return raw[skip : skip + n].reshape(shape)


_UINT16 = np.dtype(np.uint16)


def result_array(shape: tuple[int, ...], dtype: object) -> np.ndarray:
    """A kernel's result: bf16 ones (a bf16 product's likely operands) `aligned_empty`,
    the others as numpy allocates them. A numba kernel writes bf16 as its 16-bit
    patterns (`bf16_run.Bf16Results`), so uint16 results count as bf16: allocated by
    numpy they reached the products 16-byte aligned, and oneDNN's matmul copied 21 of
    the n_layer-4 step's left operands into aligned buffers first."""
    dt = np.dtype(dtype)  # type: ignore[call-overload]
    return aligned_empty(shape, dt) if dt.kind == "V" or dt == _UINT16 else np.empty(shape, dt)
