"""Dense elements attributes held in proportion to their data.

xDSL's `DenseIntOrFPElementsAttr` keeps every element's bytes: a splat such as
`dense<1.0> : tensor<100000x100000xf32>` (nine characters of text) became 40 GB at
parse time, and a literal list went through one Python object per element. shardc
keeps the attribute class and its printing (`dense<...>` text is unchanged) and holds:

* a splat whose whole data would exceed `COMPACT_SPLAT_BYTES` as its one element
  (`len(attr) == 1` under a larger shape: xDSL's printer already prints that as the
  splat it is), made by `splat_attr` wherever shardc makes a splat, parsed or built, so
  that two equal splats are one attribute;
* a literal list or hex string read straight into a numpy buffer (`fast_parser`).

Readers of the values go through `shardc.runtime.execute.helpers.dense_to_array` (a compact
splat is a read-only broadcast of its element until an op reads it), `is_splat` and
`element_attr` here (the folders, the printer), or `get_values()[0]` of a splat."""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, IntegerType

COMPACT_SPLAT_BYTES = 1 << 16
"""A splat holds one element when its full data would exceed this many bytes (smaller
ones keep all their bytes, as xDSL makes them, so that every pass reading
`get_values()` of a small constant sees one value per element)."""


def element_count(type: Any) -> int:
    return math.prod(type.get_shape())


def is_compact(attr: DenseIntOrFPElementsAttr) -> bool:
    """Whether `attr` is a splat held as its one element."""
    return len(attr.data.data) == attr.get_element_type().compile_time_size and element_count(attr.get_type()) != 1


def compact_splat(type: Any, n_bytes: int) -> bool:
    """Whether a splat of `type` is held compact (`COMPACT_SPLAT_BYTES`)."""
    return element_count(type) * n_bytes > COMPACT_SPLAT_BYTES


def splat_attr(type: Any, value: Any) -> DenseIntOrFPElementsAttr:
    """The splat of `value` over `type`: xDSL's `from_list(type, [value])` when small,
    its one element when large (`COMPACT_SPLAT_BYTES`)."""
    element = type.get_element_type()
    if not compact_splat(type, element.compile_time_size):
        return DenseIntOrFPElementsAttr.from_list(type, [value])
    if isinstance(element, IntegerType):
        value = element.get_normalized_value(value)
    return DenseIntOrFPElementsAttr(type, BytesAttr(element.pack([value])))


def from_bytes(type: Any, data: bytes) -> DenseIntOrFPElementsAttr:
    """The attribute of `type` holding `data` (one element's bytes for a splat, or all
    of them), compact when it is a large splat: a list whose elements are all equal is
    held as the splat it prints as."""
    size = type.get_element_type().compile_time_size
    n = element_count(type)
    if len(data) == size * n and n > 1 and compact_splat(type, size) and data.count(data[:size]) == n:
        data = data[:size]
    elif len(data) == size and n != 1 and not compact_splat(type, size):
        data = data * n
    return DenseIntOrFPElementsAttr(type, BytesAttr(data))


_NUMPY_FORMATS = frozenset({"<e", "<f", "<d", "<b", "<h", "<i", "<q", "<B", "<H", "<I", "<Q"})
_SMALL = 100
"""Attributes of at most this many elements are read through xDSL (a value object each)."""


def _buffer(attr: DenseIntOrFPElementsAttr) -> Any:
    """The elements as a numpy array over the attribute's bytes (no copy), or None for
    a small attribute or an element type numpy does not hold (bf16, i1, complex)."""
    element = attr.get_element_type()
    fmt = getattr(element, "format", None)
    if fmt not in _NUMPY_FORMATS or len(attr.data.data) <= _SMALL * element.compile_time_size:
        return None
    import numpy as np  # large constants only: shardc-opt's start-up does without it

    return np.frombuffer(attr.data.data, dtype=np.dtype(fmt))


def has_buffer(attr: DenseIntOrFPElementsAttr) -> bool:
    """Whether `is_splat` reads `attr` from its buffer (large, of a numpy element type)."""
    element = attr.get_element_type()
    return getattr(element, "format", None) in _NUMPY_FORMATS and len(attr.data.data) > _SMALL * element.compile_time_size


def is_splat(attr: DenseIntOrFPElementsAttr) -> bool:
    """xDSL's `is_splat` (every value equal to the first: -0.0 equals 0.0, NaN never
    equals) read from the buffer for a large attribute instead of a tuple of values."""
    values = _buffer(attr)
    if values is None:
        return attr.is_splat()
    return bool((values == values[0]).all())


def element_attr(attr: DenseIntOrFPElementsAttr, position: int) -> Any:
    """Element `position` as xDSL's `get_attrs()[position]` makes it (an IntegerAttr or
    FloatAttr), unpacked alone; any position of a compact splat is its element."""
    from xdsl.dialects.builtin import AnyFloat, FloatAttr, IndexType, IntegerAttr

    element = attr.get_element_type()
    size = element.compile_time_size
    if is_compact(attr):
        position = 0
    chunk = attr.data.data[position * size : (position + 1) * size]
    if isinstance(element, IntegerType | IndexType):
        return next(iter(IntegerAttr.iter_unpack(element, chunk)))
    assert isinstance(element, AnyFloat)
    return next(iter(FloatAttr.iter_unpack(element, chunk)))


__all__ = ["element_attr", "has_buffer", "is_splat", "COMPACT_SPLAT_BYTES", "compact_splat", "element_count", "from_bytes", "is_compact", "splat_attr"]
