"""Parameters' bf16 copies made where each product reads them, not once for the step.

The mixed-precision pass casts a value once, where it is made, and every product shares
the copy (`shardc.passes.mixed_precision`); CSE merges any second cast of the same value.
For a function argument (a parameter) that is made at the top of the step and read by
its forward product and again by the backward one (`dx = dy W^T`), so every layer's
bf16 weights were alive at once at the step's peak, between the forward and the
backward: 162 MiB of the GPT step at n_layer 12, n_embd 768, 1 rank. Here, on the
runtime's private copy of the module, such a cast moves down to its first reader and is
made again (a clone) before each later reader in the function's entry block; the
generated code frees each copy after its last reader (`builder.free_dead_values`). The
same float32 bits rounded the same way: the products read the same values. The cost
is one more cast pass over each parameter per extra reader (about 1 ns an element on
one core).

Only casts that read a function argument directly qualify: one made after a
resharding (a ZeRO/FSDP parameter gathered in bf16) would need its collective again.
A function whose argument copies come to at most `KEEP_MAX_BYTES` keeps them as made
(one cast each, shared by the forward and the backward, as `torch.autocast`'s cast
cache does): there the extra passes cost more than the memory is worth.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Block, BlockArgument, Operation

from shardc.passes.cost_model import tensor_bytes


KEEP_MAX_BYTES = 32 << 20
"""A function's argument casts whose copies total at most this many bytes are not
remade (the bf16 copies of 16M parameters). Measured on the n_layer-4, n_embd-256 GPT
step in bf16 (6.6 MB of copies; 1 rank, Zen 4, one process, alternating): 2.4% faster
with the copies kept; at n_layer 12, n_embd 768 they are 162 MiB and are remade."""


def is_cast_copy(op: GenericOp) -> bool:
    """Whether `op` only converts its input element by element (`arith.truncf`: the
    mixed-precision pass's bf16 copy of a value)."""
    return [o.name for o in op.body.block.ops] == ["arith.truncf", "linalg.yield"]


def _argument_cast(op: Operation, block: Block) -> bool:
    """A float32 -> bf16 copy (`is_cast_copy`) of an argument of `block`."""
    if not isinstance(op, GenericOp) or len(op.inputs) != 1 or len(op.results) != 1 or not is_cast_copy(op):
        return False
    src = op.inputs[0]
    return isinstance(src, BlockArgument) and src.block is block


def _top(op: Operation, block: Block) -> Operation | None:
    """The ancestor of `op` (or `op`) that is an op of `block`."""
    while op.parent is not None and op.parent is not block:
        parent = op.parent_op()
        if parent is None:
            return None
        op = parent
    return op if op.parent is block else None


def remake_argument_casts(module: ModuleOp) -> int:
    """Move each argument cast to its first reader and clone it before each later one
    (the module docstring); returns how many clones were made."""
    made = 0
    for f in [o for o in module.walk() if isinstance(o, func.FuncOp)]:
        if len(f.body.blocks) != 1:
            continue
        block = f.body.blocks.first
        assert block is not None
        casts = [op for op in block.ops if _argument_cast(op, block)]
        if not casts:
            continue
        copies = [op.results[0] for op in casts]
        if all(d >= 0 for v in copies for d in v.type.get_shape()) and sum(map(tensor_bytes, copies)) <= KEEP_MAX_BYTES:  # type: ignore[attr-defined]
            continue
        order = {op: k for k, op in enumerate(block.ops)}
        for cast in casts:
            result = cast.results[0]
            readers: dict[Operation, list] = {}
            for use in list(result.uses):
                top = _top(use.operation, block)
                if top is None:
                    break
                readers.setdefault(top, []).append(use)
            else:
                if not readers:
                    continue
                ranked = sorted(readers, key=order.__getitem__)
                cast.detach()
                block.insert_op_before(cast, ranked[0])
                for reader in ranked[1:]:
                    clone = cast.clone()
                    block.insert_op_before(clone, reader)
                    for use in readers[reader]:
                        use.operation.operands[use.index] = clone.results[0]
                    made += 1
    return made


__all__ = ["KEEP_MAX_BYTES", "remake_argument_casts"]
