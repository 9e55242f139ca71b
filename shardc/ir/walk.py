"""Listing the ops of a whole module (or those of a class) without xDSL's generator walk.

`Operation.walk()` is a chain of nested generators (op, region, block, op, ...): a few
microseconds an op, paid for every op of the module by a pass that only wants its
functions (shard-partition, and `shard-to-mpi-pipeline` recording and attaching the
boundary shardings each walk the whole 2,000-op program for one `func.func`;
convert-shard-to-mpi walks the lowered module five times). Reading
the linked lists behind the walk (`_first_block`/`_next_block`, `_first_op`/`_next_op`)
visits the same ops in the same (pre-)order, as a list made before the caller changes
anything.
"""

from __future__ import annotations

from typing import Any, TypeVar

from xdsl.ir import Block, Operation, Region

_T = TypeVar("_T", bound=Operation)

_IS: dict[tuple[Any, type], bool] = {}
"""(class or tuple of classes, op class) -> whether ops of the second are instances of the first: the ABC
isinstance test of another class is a Python call, once per op otherwise."""


def all_ops(root: Operation) -> list[Operation]:
    """The ops of `root`'s tree (`root` included) in the order of `root.walk()`."""
    found: list[Operation] = []
    stack: list[Operation] = [root]
    while stack:
        op = stack.pop()
        found.append(op)
        regions = op.regions
        if not regions:
            continue
        children: list[Operation] = []
        for region in regions:
            block = region._first_block  # pyright: ignore[reportPrivateUsage]
            while block is not None:
                child = block._first_op  # pyright: ignore[reportPrivateUsage]
                while child is not None:
                    children.append(child)
                    child = child._next_op  # pyright: ignore[reportPrivateUsage]
                block = block._next_block  # pyright: ignore[reportPrivateUsage]
        children.reverse()  # popped first to last
        stack.extend(children)
    return found


def ops_of_class(root: Operation, cls: type[_T] | tuple[type[Operation], ...]) -> list[_T]:
    """The ops of `all_ops(root)` that are instances of `cls` (a class or a tuple)."""
    known = _IS
    found: list[_T] = []
    for op in all_ops(root):
        key = (cls, type(op))
        hit = known.get(key)
        if hit is None:
            hit = known[key] = isinstance(op, cls)
        if hit:
            found.append(op)  # type: ignore[arg-type]
    return found


def block_ops(block: Block) -> list[Operation]:
    """`list(block.ops)` in one pass: `list()` first asks the ops' view for its length,
    which walks the whole block once more."""
    ops: list[Operation] = []
    op = block._first_op  # pyright: ignore[reportPrivateUsage]
    while op is not None:
        ops.append(op)
        op = op._next_op  # pyright: ignore[reportPrivateUsage]
    return ops


def region_blocks(region: Region) -> list[Block]:
    """`list(region.blocks)` in one pass (`list()` first asks the blocks' view for its
    length, which walks the region once more)."""
    blocks: list[Block] = []
    block = region._first_block  # pyright: ignore[reportPrivateUsage]
    while block is not None:
        blocks.append(block)
        block = block._next_block  # pyright: ignore[reportPrivateUsage]
    return blocks
