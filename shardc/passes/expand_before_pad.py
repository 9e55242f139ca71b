"""expand-shapes-before-pads: `tensor.expand_shape` of a `tensor.pad` whose padded
dimensions the expansion leaves alone becomes the pad of the expanded source (upstream's
`FoldReshapeWithProducerPadOpByExpansion` does the same rewrite in linalg's fusion
patterns).

Why: the training import computes a strided convolution's weight gradient as a grouped
convolution (`linalg.conv_2d_ngchw_gfchw`) of the padded input expanded to expose its
group dimension, `expand_shape(pad(x))`. A convolution split along an image dimension
takes its halos from the `tensor.pad` right before it (interfaces/conv.py); behind a
reshape the pad is out of its sight, so propagation kept the image whole and partition
gathered it. With the pad moved after the reshape the convolution reads the pad directly
and the image stays split, with halos. The reshape itself is the same for any sharding
(the padded dimensions are singleton groups of the reassociation).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import tensor
from xdsl.dialects.builtin import Attribute, DenseArrayBase, IndexType, ModuleOp, TensorType, i32, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from shardc.dialects.tensor import ExpandShapeOp
from shardc.ir.types import tensor_type


def _groups(op: Operation) -> list[list[int]]:
    return [[i.value.data for i in g.data] for g in op.reassociation.data]  # type: ignore[attr-defined]


def _static_pads(pad: tensor.PadOp) -> tuple[list[int], list[int]] | None:
    if pad.low or pad.high:  # dynamic amounts
        return None
    return list(pad.static_low.get_values()), list(pad.static_high.get_values())


def _rewrite(expand: ExpandShapeOp) -> bool:
    pad = expand.src.owner
    if not isinstance(pad, tensor.PadOp) or expand.dynamic_output_shape or pad.result.uses.get_length() != 1:
        return False
    pads = _static_pads(pad)
    source_t, result_t = pad.source.type, expand.result.type
    if pads is None or not isinstance(source_t, TensorType) or not isinstance(result_t, TensorType):
        return False
    if any(n < 0 for n in (*source_t.get_shape(), *result_t.get_shape())):
        return False  # dynamic sizes
    low, high = pads
    groups = _groups(expand)
    if any((low[d] or high[d]) and len(g) != 1 for d, g in enumerate(groups)):
        return False
    # The expansion of the unpadded source, and the pads on the expanded dimensions.
    source_shape = list(source_t.get_shape())
    out_shape = list(result_t.get_shape())
    new_shape = list(out_shape)
    new_low, new_high = [0] * len(out_shape), [0] * len(out_shape)
    for d, g in enumerate(groups):
        if len(g) == 1:
            new_shape[g[0]] = source_shape[d]
            new_low[g[0]], new_high[g[0]] = low[d], high[d]
    element = source_t.get_element_type()
    new_expand = ExpandShapeOp(pad.source, [], expand.reassociation, new_shape, tensor_type(element, new_shape))
    # The pad's region takes one index per dimension of the new rank; its yield is the
    # pad value (torch-mlir's pads yield a constant defined outside).
    block = pad.region.block
    yielded = block.last_op
    if not isinstance(yielded, tensor.YieldOp) or len(list(block.ops)) != 1:
        return False
    value = yielded.operands[0]
    if isinstance(value.owner, Block) or (isinstance(value.owner, Operation) and pad.is_ancestor(value.owner)):
        return False
    body = Block(arg_types=[IndexType()] * len(out_shape))
    body.add_op(tensor.YieldOp(value))
    new_pad = _pad_like(pad, new_expand.result, new_low, new_high, Region(body), result_t)
    for new in (new_expand, new_pad):
        new.location = expand.location  # type: ignore[attr-defined]
    Rewriter.insert_op([new_expand, new_pad], InsertPoint.before(expand))
    expand.result.replace_all_uses_with(new_pad.results[0])
    Rewriter.erase_op(expand)
    Rewriter.erase_op(pad)
    return True


def _pad_like(
    pad: tensor.PadOp, source: SSAValue, low: list[int], high: list[int], region: Region, result_t: Attribute
) -> Operation:
    """A static tensor.pad of `source` with `pad`'s attributes."""
    properties = dict(pad.properties)
    properties["static_low"] = DenseArrayBase.from_list(i64, low)
    properties["static_high"] = DenseArrayBase.from_list(i64, high)
    properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, [1, 0, 0])
    return tensor.PadOp.create(
        operands=[source],
        result_types=[result_t],
        properties=properties,
        attributes=dict(pad.attributes),
        regions=[region],
    )


def expand_shapes_before_pads(module: ModuleOp) -> int:
    """Rewrite every such expand_shape (module docstring); returns how many."""
    return sum(_rewrite(op) for op in [op for op in module.walk() if isinstance(op, ExpandShapeOp)])


@dataclass(frozen=True)
class ExpandShapesBeforePadsPass(ModulePass):
    """Expand a pad's source instead of the padded tensor, where the padded dimensions
    are not reshaped."""

    name = "expand-shapes-before-pads"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        expand_shapes_before_pads(op)


__all__ = ["ExpandShapesBeforePadsPass", "expand_shapes_before_pads"]
