"""`forward-send-copies`: an MPI collective sends the buffer a fresh copy was made from.

Upstream's `convert-shard-to-mpi` (and shardc's, which follows it) stages the send buffer
of a `reduce_scatter` along a dimension other than the first: the input, transposed so
that the ranks axis leads, is copied into a `memref.alloc` (`linalg.copy`) that
`mpi.reduce_scatter_block` then reads. MPI only reads a send buffer, so the copy buys
nothing; in a ZeRO step it is one more pass over every such gradient (the attention and
MLP weights of a GPT). `canonicalize` keeps it, as MLIR's does, so it is a pass of its
own, run by shardc's pipelines after the lowering and by the runtime before it compiles.

The copy is forwarded, the collective reading the copy's source, only when that is the
same computation:

- the staging buffer is a static `memref.alloc` of the source's own type (so the source
  is as contiguous as the buffer MPI was given), written only by the copy and read only
  by the collective's send operand; any other use is a `memref.dealloc` after it;
- copy and collective are in one block, and no op between them may write or free memory
  (an op whose effects are unknown counts as one that may): the source still holds what
  was copied when MPI reads it;
- the collective is blocking (`mpi.reduce_scatter_block`, `mpi.allgather`) and receives
  into a fresh `memref.alloc`, which cannot alias the source.

The copy, the staging alloc and its deallocs are then erased.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import MemoryEffectKind, get_effects

_SENDING = ("mpi.reduce_scatter_block", "mpi.allgather")
"""Blocking collectives whose operand 0 is a send buffer (read only) and operand 1 the
receive buffer."""


def _is_static_alloc(op: object) -> bool:
    return (
        isinstance(op, Operation)
        and op.name == "memref.alloc"
        and not op.operands
        and isinstance(op.results[0].type, MemRefType)
    )


def _may_write(op: Operation) -> bool:
    """Whether `op` may write or free memory (unknown effects count as may)."""
    effects = get_effects(op)
    if effects is None:
        return True
    return any(e.kind in (MemoryEffectKind.WRITE, MemoryEffectKind.FREE) for e in effects)


def _ops_between(first: Operation, last: Operation) -> list[Operation] | None:
    """The ops strictly between `first` and `last` in their block, None if `last` does
    not follow `first` there."""
    between: list[Operation] = []
    op = first.next_op
    while op is not None and op is not last:
        between.append(op)
        op = op.next_op
    return between if op is last else None


def _forwardable_copy(collective: Operation) -> tuple[Operation, SSAValue] | None:
    """The `linalg.copy` staging `collective`'s send buffer and the value it copies,
    when the copy can be forwarded (the module docstring lists when)."""
    staged, received = collective.operands[0], collective.operands[1]
    if not _is_static_alloc(staged.owner) or not _is_static_alloc(received.owner):
        return None
    copy: Operation | None = None
    deallocs: list[Operation] = []
    for use in staged.uses:
        user = use.operation
        if user is collective and use.index == 0:
            continue
        if user.name == "linalg.copy" and copy is None and len(user.operands) == 2 and use.index == 1 and not user.results:
            copy = user
        elif user.name == "memref.dealloc":
            deallocs.append(user)
        else:
            return None
    if copy is None or copy.parent is not collective.parent:
        return None
    source = copy.operands[0]
    if source.type != staged.type:
        return None
    between = _ops_between(copy, collective)
    if between is None or any(_may_write(op) for op in between):
        return None
    if any(d.parent is not collective.parent or _ops_between(collective, d) is None for d in deallocs):
        return None
    return copy, source


def forward_send_copies(root: Operation) -> int:
    """Make each blocking MPI collective under `root` send the source of a copy that only
    stages its send buffer (the module docstring says when), erasing the copy, the
    staging alloc and its deallocs; returns how many were forwarded."""
    forwarded = 0
    for collective in [op for op in root.walk() if op.name in _SENDING]:
        found = _forwardable_copy(collective)
        if found is None:
            continue
        copy, source = found
        staged = collective.operands[0]
        alloc = staged.owner
        assert isinstance(alloc, Operation)
        collective.operands[0] = source
        copy.detach()
        copy.erase()
        for use in list(staged.uses):
            use.operation.detach()
            use.operation.erase()
        alloc.detach()
        alloc.erase()
        forwarded += 1
    return forwarded


@dataclass(frozen=True)
class ForwardSendCopiesPass(ModulePass):
    """Forward copies that only stage an MPI collective's send buffer (module docstring)."""

    name = "forward-send-copies"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        forward_send_copies(op)
