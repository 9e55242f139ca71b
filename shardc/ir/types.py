"""Shared tensor and memref type objects for the types the passes build.

xDSL types are immutable values; building one runs its `__init__` and verifier, and
every distinct object that later reaches the verifier is hashed again (a chain of
dataclass hashes), where ops whose types are the very same objects are recognised by
`id` (`shardc.ir.fast_verify`). The parser already shares the types of equal text;
these give the passes' types the same property. The objects are equal to the ones
built directly, so the printed IR is the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

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


def tensor_of_memref(t: MemRefType) -> TensorType:
    """`TensorType(t.element_type, t.shape)`, what `bufferization.to_tensor` yields,
    looked up by the memref type object (the entry keeps it alive, so its `id` is
    its own)."""
    found = _TENSOR_OF.get(id(t))
    if found is None or found[0] is not t:
        if len(_TENSOR_OF) >= _LIMIT:
            _TENSOR_OF.clear()
        found = _TENSOR_OF[id(t)] = (t, tensor_type(t.get_element_type(), t.get_shape()))
    return found[1]


def memref_of_tensor(t: TensorType) -> MemRefType:
    """`MemRefType(t.element_type, t.shape)`, what `bufferization.to_buffer` yields by
    default, looked up by the tensor type object."""
    found = _MEMREF_OF.get(id(t))
    if found is None or found[0] is not t:
        if len(_MEMREF_OF) >= _LIMIT:
            _MEMREF_OF.clear()
        found = _MEMREF_OF[id(t)] = (t, memref_type(t.get_element_type(), t.get_shape()))
    return found[1]
