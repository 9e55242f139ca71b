"""`op.has_trait(trait)` answered once per op class.

An op's traits are those of its class, and xDSL's `has_trait` walks them with an ABC
isinstance test each, on every call: the verifier asks it for every block and isolated
op, grid lookups for every op up to the symbol table, the greedy driver and region DCE
for every op of every iteration.
"""

from __future__ import annotations

from xdsl.ir import Operation

_HAS_TRAIT: dict[tuple[type[Operation], object, bool], bool] = {}


def has_trait(op: Operation, trait: object, value_if_unregistered: bool = True) -> bool:
    """`op.has_trait(trait)`, once per op class (an op's traits are those of its class)."""
    key = (type(op), trait, value_if_unregistered)
    found = _HAS_TRAIT.get(key)
    if found is None:
        found = _HAS_TRAIT[key] = op.has_trait(trait, value_if_unregistered=value_if_unregistered)  # type: ignore[arg-type]
    return found
