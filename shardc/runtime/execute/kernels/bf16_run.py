"""What generated code calls for bf16 arrays where numpy's own bf16 loops are slow.

ml_dtypes' bf16 ufuncs convert each element to float32 and back inside a generic loop;
for `maximum`/`minimum` (a relu, a clamp) that ran about 6x slower than widening both
operands to float32, running numpy's vectorised float32 loop and rounding back (1M
elements, measured). Widening is exact and max/min pick one of the operands, so the
result is the same values (a NaN operand gives NaN)."""

from __future__ import annotations

import numpy as np

_F32 = np.dtype(np.float32)


def widened_binary(ufunc: np.ufunc, a: object, b: object) -> object:
    """`ufunc(a, b)` computed on float32 copies, returned in bf16 (the operands' type)."""
    x, y = np.asarray(a), np.asarray(b)
    dt = x.dtype if x.dtype.kind == "V" else y.dtype
    return ufunc(x.astype(_F32), y.astype(_F32)).astype(dt)
