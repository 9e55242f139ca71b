"""`split-shared-inits`: one `tensor.empty` (or zero-filled tensor) per user.

Front ends and CSE share one `tensor.empty` (and one `linalg.fill` of it) between every
op that needs an init of that shape, whatever the ops compute: torch-mlir gives the
token embedding, the residual adds and the layer norms of a transformer one
`tensor.empty : BxTxE`, and when B*T equals E also the weight transposes of the same
shape; the forward products and the backward's weight gradients share one zero-filled
init. A value has one producer sharding, so sharding propagation must then give
unrelated ops one sharding for their init: a weight transpose split over the batch axis
(partition all-gathers the weight before each matmul), or an activation replicated
because a replicated op shares its init (the batch split lost right after the
embedding lookup).

An empty tensor holds no data and a fill only constants, so each user gets its own copy,
built right before it, and the sharding of one user's init no longer constrains
another's. Nothing else changes: the copies are the same ops with the same operands
(a dynamic `tensor.empty`'s sizes and a fill's scalar dominate every user of the
original). CSE merges them back after partition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter


def _is_empty(op: object) -> bool:
    return isinstance(op, Operation) and op.name == "tensor.empty" and len(op.results) == 1


def _is_fill_of_empty(op: Operation) -> bool:
    return (
        op.name == "linalg.fill"
        and len(op.results) == 1
        and bool(op.operands)
        and _is_empty(op.operands[-1].owner)
    )


def _give_each_use_a_copy(op: Operation, copy_of: Callable[[], list[Operation]]) -> int:
    """Every use of `op`'s result after the first reads a fresh copy built right before
    its user; returns how many copies were made."""
    uses = list(op.results[0].uses)
    for use in uses[1:]:
        new_ops = copy_of()
        Rewriter.insert_op(new_ops, InsertPoint.before(use.operation))
        use.operation.operands[use.index] = new_ops[-1].results[0]
    return max(len(uses) - 1, 0)


def split_shared_inits(module: Operation) -> int:
    """Give every use of a shared `linalg.fill` of a `tensor.empty`, and of a shared
    `tensor.empty`, its own copy (the module docstring says why); returns the number of
    copies made."""
    count = 0
    fills = [op for op in module.walk() if op.name == "linalg.fill"]
    for fill in fills:
        if not _is_fill_of_empty(fill):
            continue
        empty = fill.operands[-1].owner
        assert isinstance(empty, Operation)

        def copy_fill(fill: Operation = fill, empty: Operation = empty) -> list[Operation]:
            new_empty = empty.clone()
            new_fill = fill.clone()
            new_fill.operands[len(new_fill.operands) - 1] = new_empty.results[0]
            return [new_empty, new_fill]

        count += _give_each_use_a_copy(fill, copy_fill)
    for empty in [op for op in module.walk() if _is_empty(op)]:
        count += _give_each_use_a_copy(empty, lambda empty=empty: [empty.clone()])
    return count


@dataclass(frozen=True)
class SplitSharedInitsPass(ModulePass):
    """Give each user of a shared `tensor.empty` (or a zero fill of one) its own copy."""

    name = "split-shared-inits"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        split_shared_inits(op)
