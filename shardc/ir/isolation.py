"""IsolatedFromAbove: which ops have it, and its verifier without xDSL's cost.

xDSL's `IsolatedFromAbove.verify` asks, for every operand of every op inside a function,
`op.is_ancestor(owner)` (a walk up the parents, one property call a step) and, for every
nested op, `has_trait(IsolatedFromAbove)` (an ABC isinstance test per trait of its class):
a few percent of the whole shard-to-mpi pipeline, since every verification of a module
runs it over each function. `verify_isolated_from_above` answers the same question from
the set of blocks the check covers, and lets xDSL's verifier run (and raise its own
exception) whenever that answer is not a plain yes.
"""

from __future__ import annotations

from xdsl.ir import Block, Operation
from xdsl.traits import IsolatedFromAbove

from shardc.ir.traits import has_trait


def is_isolated(op: Operation) -> bool:
    """Whether `op` has regions and is isolated from above."""
    return bool(op.regions) and has_trait(op, IsolatedFromAbove)


def verify_isolated_from_above(trait: IsolatedFromAbove, op: Operation) -> None:
    """`trait.verify(op)`: raises exactly what it raises (by running it) when an operand
    inside `op` may be defined outside it."""
    if not _uses_only_inner_values(op):
        trait.verify(op)


def _uses_only_inner_values(op: Operation) -> bool:
    """True when every operand of the ops xDSL's check visits (`op`'s regions, nested
    ones too but those of isolated ops) is defined strictly inside `op`."""
    blocks: set[int] = set()
    ops: list[Operation] = []
    regions = list(op.regions)
    while regions:
        block = regions.pop()._first_block  # pyright: ignore[reportPrivateUsage]
        while block is not None:
            blocks.add(id(block))
            child = block._first_op  # pyright: ignore[reportPrivateUsage]
            while child is not None:
                ops.append(child)
                if child.regions and not is_isolated(child):
                    regions.extend(child.regions)
                child = child._next_op  # pyright: ignore[reportPrivateUsage]
            block = block._next_block  # pyright: ignore[reportPrivateUsage]
    for child in ops:
        for operand in child._operands:  # pyright: ignore[reportPrivateUsage]
            owner = operand.owner
            block = owner if type(owner) is Block else owner.parent
            if id(block) in blocks:
                continue  # defined in a block inside `op`: `op` is its ancestor, not it
            if not op.is_ancestor(owner) or owner is op:
                return False
    return True
