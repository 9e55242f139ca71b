"""iota-operands-as-indices: a `linalg.generic` input that holds each element's own
position along one loop (torch's `arange`, reshaped) is read as that loop's
`linalg.index`, and the input is dropped.

torch-mlir lowers advanced indexing by positions, `mask[arange(B)[:, None], j]` (T5's
extended attention mask), to a generic that reads the arange as an input and extracts
from the indexed tensor at the value it reads:

    %iota = linalg.generic ... outs(%e : tensor<4xi64>) { %i = linalg.index 0 ... yield }
    %pos = tensor.expand_shape %iota [[0, 1]] output_shape [4, 1] ...
    %g = linalg.generic {maps = [(d0, d1) -> (d0, 0), ...]} ins(%pos, ...) {
      ^bb0(%p: i64, ...): ... tensor.extract %mask[%p', ...] ...

The value read is `linalg.index 0` of the consumer, but sharding propagation sees data:
the extract's row index follows no loop, so the mask is read whole and partition
gathers it over the batch axis. Written as `arith.index_cast (linalg.index 0)`, the
row follows loop 0 (`shardc.interfaces.linalg.captured_loop_dims`) and the mask stays
split like the batch. The rewrite is exact on any program (the input's element at loop
position j is j); the arange's producer is erased when nothing else reads it.

Why a pass and not the generic's ShardingInterface: the proof needs the producer of the
input, which an interface, seeing one op and its shardings, does not get.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import IndexType, IntegerType, ModuleOp, TensorType
from xdsl.dialects.linalg import ops as linalg
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from shardc.dialects.linalg import GenericOp
from shardc.passes.uncollapse_batch_matmuls import erase_dead_reshapes


def _positions(value: SSAValue) -> int | None:
    """n when `value` holds 0, 1, ..., n-1 along its one dimension of extent n > 1 (its
    others of extent 1): a generic with no input whose body yields `linalg.index 0`
    (through `arith.index_cast`s), seen through reshapes that add or drop unit
    dimensions."""
    while isinstance(value.owner, (tensor.ExpandShapeOp, tensor.CollapseShapeOp)):
        value = value.owner.operands[0]
    op = value.owner
    type_ = value.type
    if not isinstance(op, GenericOp) or op.inputs or len(op.outputs) != 1 or not isinstance(type_, TensorType):
        return None
    shape = type_.get_shape()
    if len(shape) != 1 or shape[0] <= 1 or len(op.iterator_types) != 1:
        return None
    body = op.body.block
    (yield_op,) = [o for o in body.ops if isinstance(o, linalg.YieldOp)] or [None]
    if yield_op is None or len(yield_op.operands) != 1:
        return None
    yielded = yield_op.operands[0]
    while isinstance(yielded.owner, arith.IndexCastOp):
        yielded = yielded.owner.input
    index = yielded.owner
    if not isinstance(index, linalg.IndexOp) or index.dim.value.data != 0 or index.parent_op() is not op:
        return None
    return shape[0]


def _position_loop(generic: GenericOp, position: int) -> int | None:
    """The loop whose index input `position` of `generic` holds at every point, if any."""
    value = generic.inputs[position]
    n = _positions(value)
    type_ = value.type
    if n is None or not isinstance(type_, TensorType):
        return None
    element = type_.get_element_type()
    if not isinstance(element, (IndexType, IntegerType)):
        return None
    if isinstance(element, IntegerType) and (1 << (element.width.data - 1)) <= n - 1:
        return None  # the positions do not fit the element type
    shape = type_.get_shape()
    dims = [d for d, extent in enumerate(shape) if extent != 1]
    if len(dims) != 1 or shape[dims[0]] != n:
        return None
    expr = generic.indexing_maps.data[position].data.results[dims[0]]
    return expr.position if isinstance(expr, AffineDimExpr) else None


def _without_input(generic: GenericOp, position: int, loop: int) -> GenericOp:
    """`generic` reading `linalg.index loop` where it read input `position` (moved body)."""
    body = generic.body.block
    argument = body.args[position]
    index = linalg.IndexOp(loop)
    ops: list[Operation] = [index]
    value: SSAValue = index.result
    if not isinstance(argument.type, IndexType):
        cast = arith.IndexCastOp(index.result, argument.type)
        ops.append(cast)
        value = cast.result
    first = body.first_op
    for op in ops:
        if first is None:
            body.add_op(op)
        else:
            Rewriter.insert_op(op, InsertPoint.before(first))
    argument.replace_all_uses_with(value)
    body.erase_arg(argument)
    region = generic.detach_region(generic.body)
    inputs = [v for i, v in enumerate(generic.inputs) if i != position]
    maps = [m for i, m in enumerate(generic.indexing_maps.data) if i != position]
    new = GenericOp(
        inputs,
        list(generic.outputs),
        region,
        maps,
        list(generic.iterator_types.data),
        [r.type for r in generic.results],
        generic.doc,
        generic.library_call,
    )
    new.attributes |= generic.attributes
    new.location = generic.location
    return new


def iota_operands_as_indices(module: ModuleOp) -> int:
    """Rewrite every generic input that holds its loop's positions (module docstring);
    returns how many inputs were dropped."""
    count = 0
    for generic in [op for op in module.walk() if isinstance(op, GenericOp)]:
        position = 0
        while position < len(generic.inputs):
            loop = _position_loop(generic, position)
            if loop is None:
                position += 1
                continue
            new = _without_input(generic, position, loop)
            Rewriter.insert_op(new, InsertPoint.before(generic))
            for old, fresh in zip(generic.results, new.results):
                old.replace_all_uses_with(fresh)
            Rewriter.erase_op(generic)
            generic = new
            count += 1
    # The aranges nothing reads any more: their reshapes, then them, then their inits.
    erase_dead_reshapes(module, {"tensor.expand_shape"})
    for op in [op for op in module.walk() if isinstance(op, GenericOp) and op.results and not op.results[0].uses]:
        if _positions(op.results[0]) is not None:
            Rewriter.erase_op(op)
    erase_dead_reshapes(module)
    return count


@dataclass(frozen=True)
class IotaOperandsAsIndicesPass(ModulePass):
    """Generic inputs holding their loop's positions (an arange) read as `linalg.index`."""

    name = "iota-operands-as-indices"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        iota_operands_as_indices(op)


__all__ = ["IotaOperandsAsIndicesPass", "iota_operands_as_indices"]
