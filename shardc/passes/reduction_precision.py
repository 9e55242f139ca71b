"""`reduction-precision{type=bf16 grid-axes=0}`: sum collectives over the given grid axes
reduce bf16 copies of their float32 operands (`--grad-reduce bf16`).

A data-parallel gradient is the partial sum of a product over each rank's part of the
batch; partition reduces it with an `all_reduce` on the product's float32 result, which
`shard-simplify` merges with the slice a ZeRO or FSDP layout takes into a
`reduce_scatter`. FSDP2's `MixedPrecisionPolicy(reduce_dtype=torch.bfloat16)` reduces
that partial sum in bf16: half the bytes on the wire. The collectives exist only once
partition has made them, so this pass runs after `shard-simplify`, and rewrites each
qualifying one

    %r = shard.reduce_scatter %g on @grid grid_axes = [0] scatter_dim = 1 : tensor<64x256xf32> -> tensor<64x128xf32>

into a cast of its operand to bf16, the same collective on bf16 and a cast of its
result back to float32 (casts as elementwise `linalg.generic`s, as `mixed-precision`
makes them).
Each rank's partial sum is rounded to bf16 once, the contributions are summed in
float32 and the sum rounded to bf16 once (the runtime's rule for bf16 reductions,
`runtime/execute/bf16_sums.py`, which moves the 16-bit patterns).

Qualifying: `all_reduce` and `reduce_scatter` whose reduction is `sum`, of a float32
tensor of rank >= 1 (a scalar, such as the loss's sum, stays float32: it is no
gradient, and its bytes are nothing), over grid axes that are all among `grid-axes`
(the data-parallel axes: a tensor-parallel product's all_reduce of activations keeps
float32); an empty `grid-axes` takes every axis. `type=f32` changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Float32Type, ModuleOp, TensorType, bf16, f32
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from shardc.dialects import shard
from shardc.passes.mixed_precision import cast_op


def qualifies(op: Operation, grid_axes: tuple[int, ...]) -> bool:
    """Whether `op` is a sum collective this pass narrows (the module docstring)."""
    if not isinstance(op, (shard.AllReduceOp, shard.ReduceScatterOp)) or op.reduction != shard.SUM:
        return False
    t, r = op.input.type, op.result.type
    if not (isinstance(t, TensorType) and isinstance(r, TensorType)):
        return False
    if not (isinstance(t.element_type, Float32Type) and isinstance(r.element_type, Float32Type) and t.get_shape()):
        return False
    return not grid_axes or set(op.grid_axes_tuple) <= set(grid_axes)


def narrow(op: shard.AllReduceOp | shard.ReduceScatterOp) -> None:
    """Rewrite `op` to reduce a bf16 copy of its operand; its users read the float32
    widening of the bf16 result."""
    down = cast_op(op.input, bf16)
    Rewriter.insert_op(down, InsertPoint.before(op))
    result_type = op.result.type
    assert isinstance(result_type, TensorType)
    new = type(op).create(
        operands=[down[-1].results[0]],
        result_types=[TensorType(bf16, result_type.get_shape())],
        properties=dict(op.properties),
        attributes=dict(op.attributes),
    )
    up = cast_op(new.results[0], f32)
    Rewriter.insert_op([new, *up], InsertPoint.after(op))
    op.result.replace_all_uses_with(up[-1].results[0])
    Rewriter.erase_op(op)


@dataclass(frozen=True)
class ReductionPrecisionPass(ModulePass):
    """Sum collectives over the data-parallel grid axes reduce bf16 copies (the module docstring)."""

    name = "reduction-precision"

    type: Literal["bf16", "f32"] = "bf16"
    """The type the qualifying collectives reduce in: `bf16`, or `f32` (no change)."""

    grid_axes: tuple[int, ...] = ()
    """The grid axes whose reductions are narrowed (all of a collective's must be among
    them); empty: every axis."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.type == "f32":
            return
        for f in [o for o in op.ops if isinstance(o, func.FuncOp)]:
            for c in [o for o in f.walk() if qualifies(o, self.grid_axes)]:
                narrow(c)


__all__ = ["ReductionPrecisionPass", "narrow", "qualifies"]
