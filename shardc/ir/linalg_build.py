"""Named linalg ops (fill, copy, matmul, ...) built without xDSL's generic machinery.

A named op's constructor goes through `IRDLOperation`'s builder (argument-list checks,
segment sizes) and builds its hidden body with `Builder.implicit_region`, whose
insertion hooks make each body op several times dearer than the op itself. The parser
builds one per `linalg.fill` / `linalg.matmul` of a program and the passes one per
partitioned reduction and lowered collective. The ops here are the same: the same class,
operands, results, properties in the same order (the op's own, then
`operandSegmentSizes`, then the defaults), attributes and body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from xdsl.dialects.builtin import AnyFloat, ArrayAttr, DenseArrayBase, IntegerType, MemRefType, StringAttr, TensorType, i32
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.dialects.linalg.ops import CopyOp, FillOp, YieldOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import AttrSizedOperandSegments, IRDLOperation
from xdsl.irdl.operations import OptionalDef, VariadicDef

from shardc.ir.op_init import create_op
from shardc.ir.traits import is_instance

_Op = TypeVar("_Op", bound=IRDLOperation)

_SEGMENTS = AttrSizedOperandSegments.attribute_name
_SIZES: dict[tuple[int, int], DenseArrayBase] = {}
_SHAPE_OK: dict[type[Operation], bool] = {}


def _segment_sizes(n_ins: int, n_outs: int) -> DenseArrayBase:
    key = (n_ins, n_outs)
    if (found := _SIZES.get(key)) is None:
        found = _SIZES[key] = DenseArrayBase.from_list(i32, [n_ins, n_outs])
    return found


def _named_shape(cls: type[Operation]) -> bool:
    """Whether `cls` is laid out as a named linalg op: operands (ins..., outs...), one
    variadic result group, one region, sizes as the `operandSegmentSizes` property."""
    if (found := _SHAPE_OK.get(cls)) is not None:
        return found
    op_def = cls.get_irdl_definition()  # type: ignore[attr-defined]
    segments = [o for o in op_def.options if isinstance(o, AttrSizedOperandSegments)]
    found = (
        len(op_def.operands) == 2
        and all(isinstance(d, VariadicDef) and not isinstance(d, OptionalDef) for _, d in op_def.operands)
        and len(op_def.results) == 1
        and isinstance(op_def.results[0][1], VariadicDef)
        and not isinstance(op_def.results[0][1], OptionalDef)
        and len(op_def.regions) == 1
        and not isinstance(op_def.regions[0][1], VariadicDef)
        and not op_def.successors
        and len(segments) == 1
        and segments[0].as_property
    )
    _SHAPE_OK[cls] = found
    return found


def named_op(
    cls: type[_Op],
    ins: Sequence[SSAValue],
    outs: Sequence[SSAValue],
    res: Sequence[Attribute],
    region: Region,
    properties: Mapping[str, Attribute | None] | None = None,
    attributes: Mapping[str, Attribute | None] | None = None,
) -> _Op:
    """`cls.build(operands=[ins, outs], result_types=[res], properties=...,
    attributes=..., regions=[region])`, the same op made directly."""
    props: dict[str, Attribute] = {}
    if properties:
        props = {k: v for k, v in properties.items() if v is not None}
    props[_SEGMENTS] = _segment_sizes(len(ins), len(outs))
    attrs = {k: v for k, v in attributes.items() if v is not None} if attributes else {}
    return create_op(cls, operands=(*ins, *outs), result_types=res, properties=props, attributes=attrs, regions=(region,))


def fast_named_build(cls: type[_Op], **kwargs: Any) -> _Op:
    """A named op's `build`: the direct construction when the arguments have exactly
    the form the linalg parser passes (`operands=(ins, outs), result_types=(res,),
    regions=(body,)`, all values and types), else xDSL's builder (which also raises
    its errors)."""
    operands = kwargs.get("operands")
    result_types = kwargs.get("result_types")
    regions = kwargs.get("regions")
    if (
        set(kwargs) <= {"operands", "result_types", "properties", "attributes", "regions"}
        and _named_shape(cls)
        and isinstance(operands, Sequence)
        and len(operands) == 2
        and all(isinstance(g, Sequence) and all(isinstance(v, SSAValue) for v in g) for g in operands)
        and isinstance(result_types, Sequence)
        and len(result_types) == 1
        and isinstance(result_types[0], Sequence)
        and all(isinstance(t, Attribute) for t in result_types[0])
        and isinstance(regions, Sequence)
        and len(regions) == 1
        and isinstance(regions[0], Region)
    ):
        return named_op(
            cls,
            operands[0],
            operands[1],
            result_types[0],
            regions[0],
            kwargs.get("properties"),
            kwargs.get("attributes"),
        )
    return IRDLOperation.build.__func__(cls, **kwargs)  # type: ignore[attr-defined]


_SHAPED = MemRefType | TensorType
_SCALAR = AnyFloat | IntegerType


def body_arg_types(operands: Sequence[SSAValue]) -> list[Attribute]:
    """`LinalgStructuredOperation.body_arg_types` with class tests once per type class
    (its `isa` goes through typing hints): the element type of each shaped operand, the
    operand's own type otherwise."""
    result: list[Attribute] = []
    for value in operands:
        ty = value.type
        element = ty.get_element_type() if is_instance(ty, _SHAPED) else ty
        assert is_instance(element, _SCALAR)
        result.append(element)
    return result


def yield_first(types: Sequence[Attribute]) -> Region:
    """`^bb0(%in, ...): linalg.yield %in`, the body of fill and copy."""
    block = Block(arg_types=types)
    block.add_op(create_op(YieldOp, operands=(block.args[0],)))
    return Region(block)


def fill_op(inputs: Sequence[SSAValue], outputs: Sequence[SSAValue], res: Sequence[Attribute]) -> FillOp:
    """`FillOp(inputs, outputs, res)`."""
    body = yield_first(body_arg_types((*inputs, *outputs)))
    return named_op(FillOp, inputs, outputs, list(res), body)


def copy_op(inputs: Sequence[SSAValue], outputs: Sequence[SSAValue], res: Sequence[Attribute]) -> CopyOp:
    """`CopyOp(inputs, outputs, res=res)`."""
    body = yield_first(body_arg_types((*inputs, *outputs)))
    return named_op(CopyOp, inputs, outputs, list(res), body)


def generic_op(
    cls: type[_Op],
    inputs: Sequence[SSAValue],
    outputs: Sequence[SSAValue],
    body: Region,
    indexing_maps: ArrayAttr[Any],
    iterator_types: ArrayAttr[Any],
    result_types: Sequence[Attribute],
    doc: Attribute | None = None,
    library_call: Attribute | None = None,
) -> _Op:
    """`cls(inputs, outputs, body, indexing_maps, iterator_types, result_types, doc,
    library_call)` for xDSL's linalg.generic (or a subclass keeping its constructor),
    the maps and iterator types given as array attributes (its constructor wraps them
    in equal new ones)."""
    props: dict[str, Attribute] = {"indexing_maps": indexing_maps, "iterator_types": iterator_types}
    if doc is not None:
        props["doc"] = doc
    if library_call is not None:
        props["library_call"] = library_call
    props[_SEGMENTS] = _segment_sizes(len(inputs), len(outputs))
    return create_op(
        cls, operands=(*inputs, *outputs), result_types=tuple(result_types), properties=props, regions=(body,)
    )


_ITERATOR_NAMES = {t.value: t for t in IteratorType}
_ITERATORS: dict[ArrayAttr[Any], ArrayAttr[IteratorTypeAttr]] = {}


def iterator_types_attr(parsed: ArrayAttr[Any]) -> ArrayAttr[IteratorTypeAttr] | Attribute:
    """linalg.generic's parsed `iterator_types` as its parser makes them: each
    `"parallel"` string an `IteratorTypeAttr`, in an `ArrayAttr` (one object per
    distinct list). An element that is neither is returned for the parser to report."""
    found = _ITERATORS.get(parsed)
    if found is not None:
        return found
    iterators: list[IteratorTypeAttr] = []
    for it in parsed:
        if isinstance(it, IteratorTypeAttr):
            iterators.append(it)
        elif isinstance(it, StringAttr) and it.data in _ITERATOR_NAMES:
            iterators.append(IteratorTypeAttr(_ITERATOR_NAMES[it.data]))
        else:
            return it
    found = ArrayAttr(iterators)
    if len(_ITERATORS) >= 4096:
        _ITERATORS.clear()
    _ITERATORS[parsed] = found
    return found
