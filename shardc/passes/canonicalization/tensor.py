"""MLIR's tensor folders and canonicalization patterns (TensorOps.cpp) for the ops our
lowerings emit: `tensor.dim` of a known size, `tensor.cast` chains, identity
`tensor.extract_slice`, constant slice operands folded into the static lists, and
`tensor.extract` at constant indices of a constant or a `tensor.from_elements`, and a
`tensor.from_elements` of constants to a dense constant (what folds the shard_shape
lowering's offset table away under a DLTI rank, in trunk's order)."""

from __future__ import annotations

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from shardc.ir import dense
from shardc.passes.canonicalization.common import constant_int
from shardc.passes.folding import constant_value
from shardc.passes.fold_registry import (
    FoldResult,
    register_folder,
    register_materializer,
    register_patterns,
)


def _shape(t: Attribute) -> tuple[int, ...] | None:
    return tuple(t.get_shape()) if isinstance(t, TensorType) else None  # pyright: ignore


@register_folder(tensor.DimOp)
def fold_dim(op: tensor.DimOp) -> FoldResult:
    """A static size; the matching dynamic size of a `tensor.empty`."""
    index = constant_int(op.index)
    shape = _shape(op.source.type)
    if index is None or shape is None or not 0 <= index < len(shape):
        return None
    if shape[index] != DYNAMIC_INDEX:
        return [IntegerAttr(shape[index], IndexType())]
    empty = op.source.owner
    if isinstance(empty, tensor.EmptyOp):
        position = sum(1 for s in shape[:index] if s == DYNAMIC_INDEX)
        return [empty.dynamic_sizes[position]]
    return None


@register_folder(tensor.CastOp)
def fold_cast(op: tensor.CastOp) -> FoldResult:
    return [op.source] if op.source.type == op.dest.type else None


def _join(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The most static shape compatible with both, None if they conflict."""
    if len(a) != len(b):
        return None
    out: list[int] = []
    for x, y in zip(a, b):
        if x == DYNAMIC_INDEX:
            out.append(y)
        elif y == DYNAMIC_INDEX or x == y:
            out.append(x)
        else:
            return None
    return tuple(out)


class ChainedTensorCast(RewritePattern):
    """`cast(cast(x : A -> B) : B -> C)` -> `cast(x : A -> C)` when B adds nothing that
    A and C do not know already."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, tensor.CastOp):
            return
        inner = op.source.owner
        if not isinstance(inner, tensor.CastOp):
            return
        a, b, c = (_shape(v.type) for v in (inner.source, inner.dest, op.dest))
        if a is None or b is None or c is None:
            return
        ab = _join(a, b)
        abc = _join(ab, c) if ab is not None else None
        ac = _join(a, c)
        if abc is None or ac != abc:
            return
        rewriter.replace(op, tensor.CastOp(inner.source, op.dest.type))


def _static(values: DenseArrayBase) -> list[int]:
    return list(values.get_values())  # pyright: ignore[reportReturnType]


@register_folder(tensor.ExtractSliceOp)
def fold_extract_slice(op: tensor.ExtractSliceOp) -> FoldResult:
    """A slice of the whole tensor is the tensor."""
    source = _shape(op.source.type)
    if op.source.type != op.result.type or source is None:
        return None
    if op.offsets or op.sizes or op.strides:
        return None
    if any(_static(op.static_offsets)) or any(s != 1 for s in _static(op.static_strides)):
        return None
    return [op.source] if tuple(_static(op.static_sizes)) == source else None


def _fold_mixed(static: list[int], dynamic: list[SSAValue]) -> tuple[list[int], list[SSAValue]]:
    values = iter(dynamic)
    kept: list[SSAValue] = []
    out: list[int] = []
    for s in static:
        if s != DYNAMIC_INDEX:
            out.append(s)
            continue
        value = next(values)
        c = constant_int(value)
        if c is None:
            out.append(s)
            kept.append(value)
        else:
            out.append(c)
    return out, kept


class ExtractSliceConstantArgumentFolder(RewritePattern):
    """Constant offsets, sizes and strides move into the static lists; a result type
    that becomes more static is cast back to the old one (MLIR's
    OpWithOffsetSizesAndStridesConstantArgumentFolder; rank-reducing slices excepted)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, tensor.ExtractSliceOp):
            return
        dynamic = [*op.offsets, *op.sizes, *op.strides]
        if not any(constant_int(v) is not None for v in dynamic):
            return
        offsets, d_offsets = _fold_mixed(_static(op.static_offsets), list(op.offsets))
        sizes, d_sizes = _fold_mixed(_static(op.static_sizes), list(op.sizes))
        strides, d_strides = _fold_mixed(_static(op.static_strides), list(op.strides))
        if any(s < 0 and s != DYNAMIC_INDEX for s in sizes) or 0 in strides:
            return
        old = op.result.type
        assert isinstance(old, TensorType)
        if len(sizes) != len(old.get_shape()):  # pyright: ignore
            return
        new_type = TensorType(old.element_type, sizes, old.encoding)  # pyright: ignore
        new = tensor.ExtractSliceOp.build(
            operands=[op.source, d_offsets, d_sizes, d_strides],
            properties={
                "static_offsets": DenseArrayBase.from_list(i64, offsets),
                "static_sizes": DenseArrayBase.from_list(i64, sizes),
                "static_strides": DenseArrayBase.from_list(i64, strides),
            },
            result_types=[new_type],
        )
        if new_type == old:
            rewriter.replace(op, new)
        else:
            rewriter.replace(op, [new, cast := tensor.CastOp(new.result, old)], [cast.dest])


def linear_index(indices: list[SSAValue], shape: tuple[int, ...] | None) -> int | None:
    """The row-major position of constant, in-bounds `indices` in `shape`, else None."""
    if shape is None or len(indices) != len(shape) or DYNAMIC_INDEX in shape:
        return None
    position = 0
    for value, size in zip(indices, shape):
        index = constant_int(value)
        if index is None or not 0 <= index < size:
            return None
        position = position * size + index
    return position


def element_of(attr: Attribute | None, position: int | None) -> Attribute | None:
    """Element `position` of a dense constant (any position of a splat)."""
    if not isinstance(attr, DenseIntOrFPElementsAttr):
        return None
    if dense.is_splat(attr):
        return dense.element_attr(attr, 0)
    if position is None:
        return None
    return dense.element_attr(attr, position)


@register_folder(tensor.ExtractOp)
def fold_extract(op: tensor.ExtractOp) -> FoldResult:
    """MLIR's ExtractOp::fold: an element of a constant (a splat's at any index), or the
    operand of a `tensor.from_elements` at constant indices."""
    indices = list(op.indices)
    position = linear_index(indices, _shape(op.tensor.type))
    source = op.tensor.owner
    if isinstance(source, tensor.FromElementsOp):
        return [source.elements[position]] if position is not None else None
    element = element_of(constant_value(op.tensor), position)
    return [element] if element is not None else None


@register_folder(tensor.FromElementsOp)
def fold_from_elements(op: tensor.FromElementsOp) -> FoldResult:
    """MLIR's FromElementsOp::fold: elements that are all integer or float constants make
    a dense constant of the result type (materialised as `arith.constant dense<...>`)."""
    result_type = op.result.type
    if not isinstance(result_type, TensorType) or DYNAMIC_INDEX in result_type.get_shape():
        return None
    values: list[int | float] = []
    for element in op.elements:
        attr = constant_value(element)
        if not isinstance(attr, IntegerAttr | FloatAttr):
            return None
        values.append(attr.value.data)
    if len(values) != dense.element_count(result_type):
        return None
    return [DenseIntOrFPElementsAttr.from_list(result_type, values)]


register_patterns(tensor.CastOp, ChainedTensorCast())
register_patterns(tensor.ExtractSliceOp, ExtractSliceConstantArgumentFolder())
register_materializer(
    "tensor",
    lambda value, type: arith.ConstantOp(value, type)  # pyright: ignore[reportArgumentType]
    if (isinstance(value, IntegerAttr | FloatAttr) and value.type == type)
    or (isinstance(value, DenseIntOrFPElementsAttr) and value.get_type() == type)
    else None,
)
