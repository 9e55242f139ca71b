"""`Operation.create` without its per-field layers.

`Operation.__init__` sets every field through a property setter (operands, successors),
a generator (results), `add_region` per region and, for IRDL ops, a walk of the op
definition for default properties and attributes. The passes create tens of thousands
of ops (annotations in propagation, clones in partition, lowered collectives), so that
is several percent of a pipeline. `create_op(cls, ...)` makes the op `cls.create(...)`
makes: the same fields in the same order, the same use-list order, properties and
attributes in the same order (given ones first, then the definition's defaults), and
the same errors for an attached region. `init_op` is the same on an instance made by
`cls.__new__` (for constructors that call `Operation.__init__` themselves).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any, TypeVar

from xdsl.dialects.builtin import UNKNOWN_LOC
from xdsl.dialects.builtin import LocationAttr
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue, SSAValues
from xdsl.ir.core import Use
from xdsl.irdl import IRDLOperation
from xdsl.irdl.operations import OptionalDef

_Op = TypeVar("_Op", bound=Operation)

_Defaults = tuple[tuple[tuple[str, Attribute], ...], tuple[tuple[str, Attribute], ...]]
_DEFAULTS: dict[type[Operation], _Defaults | None] = {}
"""op class -> (default properties, default attributes) as IRDLOperation.__post_init__
fills them in, or None where the class's `__post_init__` is another one (it is called)."""

_IRDL_POST_INIT = IRDLOperation.__post_init__
_CREATE = Operation.create.__func__  # pyright: ignore[reportFunctionMemberAccess]
_EMPTY: Mapping[str, Attribute] = {}


def _required_defaults(defs: Mapping[str, Any]) -> tuple[tuple[str, Attribute], ...]:
    return tuple((name, d.default_value) for name, d in defs.items() if not isinstance(d, OptionalDef) and d.default_value is not None)


def _defaults(cls: type[Operation]) -> _Defaults | None:
    if cls.__post_init__ is not _IRDL_POST_INIT:  # pyright: ignore[reportUnnecessaryComparison]
        found = None
    else:
        op_def = cls.get_irdl_definition()  # type: ignore[attr-defined]
        found = (_required_defaults(op_def.properties), _required_defaults(op_def.attributes))
        assert cls.name != "" and isinstance(cls.name, str)  # Operation.__post_init__
    _DEFAULTS[cls] = found
    return found


def init_op(
    op: Operation,
    operands: Sequence[SSAValue] = (),
    result_types: Sequence[Attribute] = (),
    properties: Mapping[str, Attribute] = _EMPTY,
    attributes: Mapping[str, Attribute] = _EMPTY,
    location: LocationAttr | None = None,
    successors: Sequence[Block] = (),
    regions: Sequence[Region] = (),
) -> None:
    """`Operation.__init__(op, ...)` (keyword arguments of the same names)."""
    fields = op.__dict__
    values = SSAValues(operands)
    uses = tuple([Use(op, i) for i in range(len(values))])
    for value, use in zip(values, uses):  # SSAValue.add_use
        first = value.first_use
        use._next_use = first  # pyright: ignore[reportPrivateUsage]
        if first is not None:
            first._prev_use = use  # pyright: ignore[reportPrivateUsage]
        value.first_use = use
    fields["_operands"] = values
    fields["_operand_uses"] = uses
    fields["results"] = SSAValues([OpResult(t, op, i) for i, t in enumerate(result_types)])
    props = fields["properties"] = dict(properties)
    attrs = fields["attributes"] = dict(attributes)
    fields["location"] = UNKNOWN_LOC if location is None else location
    if successors:
        blocks = tuple(successors)
        block_uses = tuple([Use(op, i) for i in range(len(blocks))])
        for block, use in zip(blocks, block_uses):
            block.add_use(use)
        fields["_successors"] = blocks
        fields["_successor_uses"] = block_uses
    else:
        fields["_successors"] = ()
        fields["_successor_uses"] = ()
    fields["regions"] = ()
    if regions:
        for region in regions:
            op.add_region(region)  # its error for an attached region
    cls = type(op)
    defaults = _DEFAULTS[cls] if cls in _DEFAULTS else _defaults(cls)
    if defaults is None:
        op.__post_init__()
        return
    for name, value in defaults[0]:
        if name not in props:
            props[name] = value
    for name, value in defaults[1]:
        if name not in attrs:
            attrs[name] = value


def create_op(
    cls: type[_Op],
    operands: Sequence[SSAValue] = (),
    result_types: Sequence[Attribute] = (),
    properties: Mapping[str, Attribute] = _EMPTY,
    attributes: Mapping[str, Attribute] = _EMPTY,
    location: LocationAttr | None = None,
    successors: Sequence[Block] = (),
    regions: Sequence[Region] = (),
) -> _Op:
    """`cls.create(...)` (keyword arguments of the same names); a class with its own
    `create` gets it called."""
    if cls.create.__func__ is not _CREATE:  # pyright: ignore[reportFunctionMemberAccess]
        return cls.create(
            operands=operands,
            result_types=result_types,
            properties=properties,
            attributes=attributes,
            location=location,
            successors=successors,
            regions=regions,
        )
    op = cls.__new__(cls)
    init_op(op, operands, result_types, properties, attributes, location, successors, regions)
    return op



type_of = attrgetter("_type")
"""An SSA value's type, read in C (`SSAValue.type` is a Python property): for keys
built from many values (`map(type_of, values)`)."""

_tuple_item = tuple.__getitem__
"""`SSAValues(...)[i]` for an int `i` without its Python-level `__getitem__` (operands
and results are SSAValues tuples)."""


def _direct_accessors() -> dict[Any, type]:
    """Subclasses of xDSL's accessor for a single construct before any variadic one
    that read the op's own tuple: still accessors (xDSL's declarative format looks them
    up in the class and calls their `index`), one Python call per read instead of four
    (`get_op_constructs`, a fresh `OpOperands` view, its `__getitem__`)."""
    global _DIRECT
    if _DIRECT is not None:
        return _DIRECT
    from xdsl.irdl.operations import BeforeVariadicSingleAccessor, VarIRConstruct

    # (plain subclasses of the frozen dataclass: its fields, init, eq and hash)
    class OperandAt(BeforeVariadicSingleAccessor):
        def __get__(self, obj: Operation, objtype: Any = None) -> Any:
            return _tuple_item(obj._operands, self.idx)  # pyright: ignore[reportPrivateUsage]

    class ResultAt(BeforeVariadicSingleAccessor):
        def __get__(self, obj: Operation, objtype: Any = None) -> Any:
            return _tuple_item(obj.results, self.idx)

    class RegionAt(BeforeVariadicSingleAccessor):
        def __get__(self, obj: Operation, objtype: Any = None) -> Any:
            return obj.regions[self.idx]

    _DIRECT = {VarIRConstruct.OPERAND: OperandAt, VarIRConstruct.RESULT: ResultAt, VarIRConstruct.REGION: RegionAt}
    return _DIRECT


_DIRECT: dict[Any, type] | None = None


def fast_accessors(classes: Sequence[type[_Op]]) -> list[type[_Op]]:
    """Give each class's single operands, results and regions that come before any
    variadic one a direct accessor (`_direct_accessors`): the passes read
    `shard.shard`'s `src` and `sharding` tens of thousands of times. Only the classes
    given change, and only how a read is done (the op definitions, what an accessor
    answers and that writing is an error stay xDSL's). Returns `classes` as a list."""
    from xdsl.irdl.operations import BeforeVariadicSingleAccessor

    direct = _direct_accessors()
    for cls in classes:
        for name, value in list(vars(cls).items()):
            if type(value) is BeforeVariadicSingleAccessor and value.construct in direct:
                setattr(cls, name, direct[value.construct](value.construct, value.idx))
    return list(classes)
