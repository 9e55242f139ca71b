"""What generated code calls for bf16 arrays where numpy's own bf16 loops are slow.

ml_dtypes' bf16 ufuncs convert each element to float32 and back inside a generic loop;
for `maximum`/`minimum` (a relu, a clamp) that ran about 6x slower than widening both
operands to float32, running numpy's vectorised float32 loop and rounding back (1M
elements, measured). Widening is exact and max/min pick one of the operands, so the
result is the same values (a NaN operand gives NaN).

The casts between float32 and bf16 are in `bf16_cast`."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_F32 = np.dtype(np.float32)


def widened_binary(ufunc: np.ufunc, a: object, b: object) -> object:
    """`ufunc(a, b)` computed on float32 copies, returned in bf16 (the operands' type)."""
    x, y = np.asarray(a), np.asarray(b)
    dt = x.dtype if x.dtype.kind == "V" else y.dtype
    return ufunc(x.astype(_F32), y.astype(_F32)).astype(dt)


@functools.cache
def bfloat16() -> np.dtype:
    """bf16's runtime dtype: `ml_dtypes.bfloat16`, the numpy extension type JAX uses.
    Imported on first use: ml_dtypes registers casts between all its types when imported
    (0.6 s of CPU measured), which programs without bf16 should not pay."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def is_bfloat16(dt: np.dtype) -> bool:
    """Whether `dt` is bf16's dtype, without importing ml_dtypes where it is not loaded."""
    return dt.name == "bfloat16" and dt.kind == "V"


BF16_UNIT_FLAGS = ("amx_bf16", "avx512_bf16")


def bf16_units() -> bool:
    """Whether this CPU multiplies bf16 in hardware: one of `BF16_UNIT_FLAGS` among the
    flags of /proc/cpuinfo (False where it is unreadable). `SHARDC_BF16_UNITS=0|1`
    overrides the answer (tests of the no-bf16-unit path; read at every call)."""
    forced = os.environ.get("SHARDC_BF16_UNITS")
    if forced in ("0", "1"):
        return forced == "1"
    return _cpuinfo_bf16_units()


@functools.cache
def _cpuinfo_bf16_units() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return bool(set(line.split(":", 1)[1].split()) & set(BF16_UNIT_FLAGS))
    except OSError:
        pass
    return False


@dataclass
class Bf16Results:
    """A fused elementwise kernel (`kernels/fused.py`'s `FusedKernel`) some of whose
    results are bf16: it stores their bits as uint16 (numba has no bf16), seen here as
    bf16 (a view: no copy). Called as the kernel is; None where it declines (the numpy
    path runs)."""

    kernel: Any
    bf16: tuple[int, ...]
    """The results the kernel stores as bf16 bits."""

    def __call__(self, args: Sequence[object], sizes: Sequence[int]) -> list[object] | None:
        vals = self.kernel(args, sizes)
        if vals is None:
            return None
        bf = bfloat16()
        return [v.view(bf) if k in self.bf16 else v for k, v in enumerate(vals)]
