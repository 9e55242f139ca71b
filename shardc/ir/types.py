"""Shared tensor and memref type objects for the types the passes build.

xDSL types are immutable values; building one runs its `__init__` and verifier, and
every distinct object that later reaches the verifier is hashed again (a chain of
dataclass hashes), where ops whose types are the very same objects are recognised by
`id` (`shardc.ir.fast_verify`). The parser already shares the types of equal text;
these give the passes' types the same property. The objects are equal to the ones
built directly, so the printed IR is the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from xdsl.dialects.builtin import MemRefType, TensorType
from xdsl.ir import Attribute

_LIMIT = 4096


@lru_cache(maxsize=_LIMIT)
def _tensor(element: Attribute, shape: tuple[int, ...]) -> TensorType:
    return TensorType(element, shape)


@lru_cache(maxsize=_LIMIT)
def _memref(element: Attribute, shape: tuple[int, ...]) -> MemRefType:
    return MemRefType(element, shape)


def tensor_type(element: Attribute, shape: Sequence[int]) -> TensorType:
    """`TensorType(element, shape)` (no encoding), one object per distinct type."""
    return _tensor(element, tuple(shape))


def memref_type(element: Attribute, shape: Sequence[int]) -> MemRefType:
    """`MemRefType(element, shape)` (identity layout, no memory space), one object per
    distinct type."""
    return _memref(element, tuple(shape))


_TENSOR_OF: dict[int, tuple[MemRefType, TensorType]] = {}
_MEMREF_OF: dict[int, tuple[TensorType, MemRefType]] = {}


def _by_identity(table: dict[int, tuple[Any, Any]], t: Any, make: Callable[[Any, tuple[int, ...]], Any]) -> Any:
    """`make(element, shape)` of `t`, looked up by the type object (the entry keeps it
    alive, so its `id` is its own)."""
    found = table.get(id(t))
    if found is None or found[0] is not t:
        if len(table) >= _LIMIT:
            table.clear()
        found = table[id(t)] = (t, make(t.get_element_type(), t.get_shape()))
    return found[1]


def tensor_of_memref(t: MemRefType) -> TensorType:
    """`TensorType(t.element_type, t.shape)`, what `bufferization.to_tensor` yields."""
    return _by_identity(_TENSOR_OF, t, tensor_type)


def memref_of_tensor(t: TensorType) -> MemRefType:
    """`MemRefType(t.element_type, t.shape)`, what `bufferization.to_buffer` yields by
    default."""
    return _by_identity(_MEMREF_OF, t, memref_type)
