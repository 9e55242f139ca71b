"""What memref code calls at run time, apart from its emitters (`kernels.memref`): a
compile-cache hit names these alone, so it loads neither the emitters nor xDSL's memref
dialect (22 ms)."""

from __future__ import annotations

import numpy as np


def view_reshape(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Reshape without copying (a copy would break aliasing)."""
    v = x.view()
    try:
        v.shape = shape
    except AttributeError:
        raise RuntimeError(f"runtime: memref reshape of a non-contiguous view {x.shape} -> {shape} is not supported") from None
    return v


__all__ = ["view_reshape"]


def reinterpret_view(x: np.ndarray, offset: int, sizes: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    base = x
    while isinstance(base.base, np.ndarray):
        base = base.base
    flat = base.reshape(-1)
    item = x.itemsize
    start = (x.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    start = 0 if offset is None else offset  # MLIR offsets are relative to the base allocation
    return np.lib.stride_tricks.as_strided(flat[start:], shape=sizes, strides=tuple(s * item for s in strides))
