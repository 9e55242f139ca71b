"""An op's traits, looked up once per op class (an op's traits are those of its class).

xDSL answers `has_trait` by walking the class's traits with an ABC isinstance test each,
on every call: the verifier asks it for every block and isolated op, grid lookups for
every op up to the symbol table, the greedy driver and region DCE for every op of every
iteration. A module of its own, so that propagation and partition use it without
importing the folding machinery."""

from __future__ import annotations

from typing import TypeVar

from xdsl.dialects.builtin import UnregisteredOp
from xdsl.ir import Operation

T = TypeVar("T")

_HAS_TRAIT: dict[tuple[type[Operation], object, bool], bool] = {}
_TRAITS_OF_TYPE: dict[tuple[type[Operation], type], tuple] = {}


def has_trait(op: Operation, trait: object, value_if_unregistered: bool = True) -> bool:
    """`op.has_trait(trait)`, once per op class (an op's traits are those of its class)."""
    key = (type(op), trait, value_if_unregistered)
    found = _HAS_TRAIT.get(key)
    if found is None:
        found = _HAS_TRAIT[key] = op.has_trait(trait, value_if_unregistered=value_if_unregistered)  # type: ignore[arg-type]
    return found


def traits_of_type(op: Operation, trait: type[T]) -> tuple[T, ...]:
    """`op.get_traits_of_type(trait)`, once per op class."""
    key = (type(op), trait)
    found = _TRAITS_OF_TYPE.get(key)
    if found is None:
        found = _TRAITS_OF_TYPE[key] = tuple(op.get_traits_of_type(trait))
    return found


_TRAIT: dict[tuple[type[Operation], type], object] = {}


def get_trait(op: Operation, trait: type[T]) -> T | None:
    """`op.get_trait(trait)`, once per op class."""
    key = (type(op), trait)
    if key in _TRAIT:
        return _TRAIT[key]  # type: ignore[return-value]
    found = _TRAIT[key] = op.get_trait(trait)
    return found


_INSTANCE: dict[tuple[type, object], bool] = {}


def is_instance(obj: object, classes: object) -> bool:
    """`isinstance(obj, classes)`, once per class of `obj`: xDSL's op and attribute
    classes are ABCs, whose test takes ABCMeta's path (about 0.3 us, as slow when it
    fails), and the verifier, printer, CSE and builders ask it of every op or type."""
    key = (type(obj), classes)
    found = _INSTANCE.get(key)
    if found is None:
        found = _INSTANCE[key] = isinstance(obj, classes)  # type: ignore[arg-type]
    return found


def is_unregistered(op: Operation) -> bool:
    """`isinstance(op, UnregisteredOp)`, once per op class."""
    return is_instance(op, UnregisteredOp)
