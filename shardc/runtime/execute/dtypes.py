"""Element types -> numpy dtypes, and the runtime representation of scalars.

Runtime values:
- tensors: numpy arrays, never mutated after they are produced;
- memrefs: numpy arrays (possibly views) that ops write in place;
- scalars: `index` and signless integers iN (N > 1) are Python ints in their signed
  interpretation (wrapped at the bit width after every op), i1 is a Python bool,
  floats numpy scalars of their width (so arithmetic rounds like the type and
  division by zero gives inf, not an exception).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    MemRefType,
    TensorType,
    VectorType,
)
from xdsl.ir import Attribute
from xdsl.utils.exceptions import DiagnosticException

from shardc.runtime.execute.kernels.bf16_run import bfloat16, is_bfloat16


class UnsupportedTypeError(DiagnosticException):
    """An element type the numpy runtime cannot represent."""


_INT_DTYPES = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def np_dtype(elem: Attribute) -> np.dtype:
    """The numpy dtype that stores elements of `elem`."""
    if isinstance(elem, Float32Type):
        return np.dtype(np.float32)
    if isinstance(elem, Float64Type):
        return np.dtype(np.float64)
    if isinstance(elem, Float16Type):
        return np.dtype(np.float16)
    if isinstance(elem, IndexType):
        return np.dtype(np.int64)
    if isinstance(elem, IntegerType):
        width = elem.width.data
        if width == 1:
            return np.dtype(np.bool_)
        if width in _INT_DTYPES:
            return np.dtype(_INT_DTYPES[width])
        raise UnsupportedTypeError(f"runtime: integer type i{width} is not supported (use i1, i8, i16, i32 or i64)")
    if isinstance(elem, BFloat16Type):
        return bfloat16()
    raise UnsupportedTypeError(f"runtime: element type {elem} is not supported")


def is_shaped(t: Attribute) -> bool:
    return isinstance(t, TensorType | MemRefType | VectorType)


def elem_type(t: Attribute) -> Attribute:
    """The element type of a shaped type, or `t` itself for a scalar type."""
    if is_shaped(t):
        return t.get_element_type()  # type: ignore[union-attr]
    return t


def int_width(t: Attribute) -> int | None:
    """Bit width of an integer-like scalar/element type (index counts as 64)."""
    e = elem_type(t)
    if isinstance(e, IndexType):
        return 64
    if isinstance(e, IntegerType):
        return e.width.data
    return None


def is_float(t: Attribute) -> bool:
    return isinstance(elem_type(t), Float16Type | Float32Type | Float64Type | BFloat16Type)


def is_index(t: Attribute) -> bool:
    return isinstance(elem_type(t), IndexType)


_SCALAR_NAMES = ((Float64Type, "f64"), (Float32Type, "f32"), (Float16Type, "f16"), (IndexType, "index"))


def scalar_ctor(t: Attribute) -> str:
    """Name of the Python/numpy constructor that turns a number into the scalar of `t`."""
    e = elem_type(t)
    if isinstance(e, Float64Type):
        return "_np.float64"
    if isinstance(e, Float32Type):
        return "_np.float32"
    if isinstance(e, Float16Type):
        return "_np.float16"
    if isinstance(e, IntegerType) and e.width.data == 1:
        return "bool"
    if isinstance(e, BFloat16Type):
        return "_np.bfloat16"
    return "int"


def to_scalar(value: object, t: Attribute) -> object:
    """Convert a number (or 0-d array) to the runtime scalar representation of `t`."""
    from shardc.runtime.execute.helpers import scalar_converter

    e = elem_type(t)
    if isinstance(e, IntegerType):
        text = f"i{e.width.data}"  # signless, signed or unsigned: a signed wrap
    else:
        text = next((name for cls, name in _SCALAR_NAMES if isinstance(e, cls)), "")
    conv = scalar_converter(text)
    if conv is not None:
        return conv(value)
    if isinstance(e, BFloat16Type):
        return bfloat16().type(value)
    np_dtype(e)
    raise UnsupportedTypeError(f"runtime: scalar type {t} is not supported")
