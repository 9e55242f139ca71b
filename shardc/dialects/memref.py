"""The memref overlay: xDSL's memref ops printed and verified as mlir-opt does.

xDSL's memref.copy and memref.cast have no custom syntax, and its collapse_shape and
expand_shape print the reassociation with types (`[[0 : i64, 1 : i64]]`). The
subclasses here take their place under the same names, so isinstance checks against
xDSL's classes still hold; code that builds these ops for printing should build ours.

https://mlir.llvm.org/docs/Dialects/MemRef/
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import memref as xmemref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    I64,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    MemRefType,
    UnrankedMemRefType,
    i64,
)
from xdsl.dialects.utils import DynamicIndexList
from xdsl.dialects.utils.reshape_ops_utils import ContiguousArrayOfIntArray
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    BaseAttr,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    MemoryAllocEffect,
    MemoryReadEffect,
    MemoryWriteEffect,
    NoMemoryEffect,
    SymbolOpInterface,
)

from shardc.dialects.lazy_format import lazy_format_op_definition
from shardc.dialects.overlays import extend_dialect
from shardc.dialects.overlays import op_error

AnyMemRef = BaseAttr(MemRefType) | BaseAttr(UnrankedMemRefType)


def _dynamic(value: int | None) -> bool:
    return value is None or value == DYNAMIC_INDEX


def _compatible(a: int | None, b: int | None) -> bool:
    return _dynamic(a) or _dynamic(b) or a == b


def cast_compatible(source: Attribute, dest: Attribute) -> bool:
    """MLIR's memref::CastOp::areCastCompatible."""
    if isinstance(source, UnrankedMemRefType) and isinstance(dest, UnrankedMemRefType):
        return False
    assert isinstance(source, MemRefType | UnrankedMemRefType)
    assert isinstance(dest, MemRefType | UnrankedMemRefType)
    if source.element_type != dest.element_type or source.memory_space != dest.memory_space:
        return False
    if not isinstance(source, MemRefType) or not isinstance(dest, MemRefType):
        return True
    s_shape, d_shape = source.get_shape(), dest.get_shape()
    if len(s_shape) != len(d_shape):
        return False
    if not all(_compatible(a, b) for a, b in zip(s_shape, d_shape)):
        return False
    if source.layout == dest.layout:
        return True
    s_strides, d_strides = source.get_strides(), dest.get_strides()
    if s_strides is None or d_strides is None:
        return False
    return _compatible(source.get_offset(), dest.get_offset()) and all(
        _compatible(a, b) for a, b in zip(s_strides, d_strides)
    )


@lazy_format_op_definition
class CopyOp(xmemref.CopyOp):
    """Copy `source` into `target` (ranked or unranked memrefs of one shape and type)."""

    source = operand_def(AnyMemRef)
    destination = operand_def(AnyMemRef)

    traits = traits_def(MemoryWriteEffect(), MemoryReadEffect())

    assembly_format = (
        "$source `,` $destination attr-dict `:` type($source) `to` type($destination)"
    )

    def verify_(self) -> None:
        types = [self.source.type, self.destination.type]
        assert isinstance(types[0], MemRefType | UnrankedMemRefType)
        assert isinstance(types[1], MemRefType | UnrankedMemRefType)
        if types[0].element_type != types[1].element_type:
            raise op_error(self, "requires the same element type for all operands")
        if isinstance(types[0], MemRefType) and isinstance(types[1], MemRefType):
            a, b = types[0].get_shape(), types[1].get_shape()
            if len(a) != len(b) or not all(_compatible(x, y) for x, y in zip(a, b)):
                raise op_error(self, "requires the same shape for all operands")


@lazy_format_op_definition
class CastOp(xmemref.CastOp):
    """Change static/dynamic sizes, strides or rankedness without touching the data."""

    source = operand_def(AnyMemRef)
    dest = result_def(AnyMemRef)

    traits = traits_def(NoMemoryEffect())

    assembly_format = "$source attr-dict `:` type($source) `to` type($dest)"

    def __init__(self, source: SSAValue | Operation, dest: MemRefType | UnrankedMemRefType):
        super().__init__(operands=[source], result_types=[dest])

    def verify_(self) -> None:
        if not cast_compatible(self.source.type, self.dest.type):
            raise op_error(
                self,
                f"operand type '{self.source.type}' and result type '{self.dest.type}' "
                "are cast incompatible",
            )


@irdl_custom_directive
class Reassociation(CustomDirective):
    """`[[0, 1], [2]]`: the reassociation groups, printed without integer types."""

    reassociation: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        def group() -> ArrayAttr[IntegerAttr]:
            return ArrayAttr(
                IntegerAttr(i, i64)
                for i in parser.parse_comma_separated_list(
                    parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
                )
            )

        groups = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, group)
        self.reassociation.set(state, ArrayAttr(groups))
        return True

    def print(self, printer: Printer, state: PrintingState, op: Operation) -> None:
        state.print_whitespace(printer)
        attr = self.reassociation.get(op)
        assert isinstance(attr, ArrayAttr)
        printer.print_string(
            "["
            + ", ".join(
                "[" + ", ".join(str(i.value.data) for i in g) + "]"  # pyright: ignore
                for g in attr  # pyright: ignore
            )
            + "]"
        )


@lazy_format_op_definition
class CollapseShapeOp(xmemref.CollapseShapeOp):
    """xDSL's memref.collapse_shape, printing `[[0, 1]]` as mlir-opt does."""

    src = operand_def(MemRefType)
    reassociation = prop_def(ContiguousArrayOfIntArray())
    result = result_def(MemRefType)

    traits = traits_def(NoMemoryEffect())

    # Drop the printer and parser xDSL generated for its own format; ours replaces them.
    print = Operation.print
    parse = Operation.__dict__["parse"]

    custom_directives = (Reassociation,)
    assembly_format = (
        "$src custom<Reassociation>($reassociation) attr-dict `:` type($src) `into` "
        "type($result)"
    )


@lazy_format_op_definition
class ExpandShapeOp(xmemref.ExpandShapeOp):
    """xDSL's memref.expand_shape, printing `[[0, 1]]` as mlir-opt does."""

    src = operand_def(MemRefType)
    reassociation = prop_def(ContiguousArrayOfIntArray())
    output_shape = var_operand_def(IndexType)
    static_output_shape = prop_def(DenseArrayBase.constr(i64))
    result = result_def(MemRefType)

    traits = traits_def(NoMemoryEffect())

    print = Operation.print
    parse = Operation.__dict__["parse"]

    custom_directives = (Reassociation, DynamicIndexList)
    assembly_format = (
        "$src custom<Reassociation>($reassociation) `output_shape` "
        "custom<DynamicIndexList>($output_shape, $static_output_shape) attr-dict `:` "
        "type($src) `into` type($result)"
    )


@irdl_op_definition
class GlobalOp(xmemref.GlobalOp):
    """xDSL's memref.global with MLIR's syntax: `memref.global "private" constant @g :
    memref<4xf32> = dense<...>`, `= uninitialized`, or no initializer (a declaration)."""

    sym_name = prop_def(SymbolNameConstraint())
    sym_visibility = opt_prop_def(StringAttr)
    type = prop_def(MemRefType)
    initial_value = opt_prop_def(UnitAttr | DenseIntOrFPElementsAttr)
    constant = opt_prop_def(UnitAttr)
    alignment = opt_prop_def(IntegerAttr[I64])

    traits = traits_def(SymbolOpInterface(), MemoryAllocEffect())

    def verify_(self) -> None:
        ty = self.type
        init = self.initial_value
        if isinstance(init, DenseIntOrFPElementsAttr):
            expected = TensorType(ty.element_type, ty.get_shape())
            if init.type != expected:
                raise op_error(
                    self,
                    f"initial value expected to be of type {expected}, but was of type "
                    f"{init.type}",
                )
        if self.alignment is not None:
            value = self.alignment.value.data
            if value <= 0 or value & (value - 1):
                raise op_error(
                    self,
                    "attribute 'alignment' failed to satisfy constraint: 64-bit signless "
                    "integer attribute whose value is positive and whose value is a power "
                    "of two > 0",
                )

    @classmethod
    def parse(cls, parser: Parser) -> GlobalOp:
        props: dict[str, Attribute] = {}
        if (visibility := parser.parse_optional_str_literal()) is not None:
            props["sym_visibility"] = StringAttr(visibility)
        if parser.parse_optional_keyword("constant") is not None:
            props["constant"] = UnitAttr()
        props["sym_name"] = parser.parse_symbol_name()
        parser.parse_punctuation(":")
        pos = parser.pos
        ty = parser.parse_type()
        if not isinstance(ty, MemRefType):
            parser.raise_error("type should be static shaped memref", at_position=pos)
        props["type"] = ty
        if parser.parse_optional_punctuation("=") is not None:
            if parser.parse_optional_keyword("uninitialized") is not None:
                props["initial_value"] = UnitAttr()
            else:
                parser.parse_keyword("dense")
                props["initial_value"] = parser.parse_dense_int_or_fp_elements_attr(
                    TensorType(ty.element_type, ty.get_shape())
                )
        attrs = parser.parse_optional_attr_dict()
        for name in ("alignment",):
            if name in attrs:
                props[name] = attrs.pop(name)
        return cls.build(properties=props, attributes=attrs)

    def print(self, printer: Printer) -> None:
        if self.sym_visibility is not None:
            printer.print_string(" ")
            printer.print_string_literal(self.sym_visibility.data)
        if self.constant is not None:
            printer.print_string(" constant")
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" : ")
        printer.print_attribute(self.type)
        init = self.initial_value
        if isinstance(init, UnitAttr):
            printer.print_string(" = uninitialized")
        elif init is not None:
            printer.print_string(" = ")
            init.print_without_type(printer)
        attrs = dict(self.attributes)
        if self.alignment is not None:
            attrs["alignment"] = self.alignment
        printer.print_op_attributes(attrs)


@lazy_format_op_definition
class GetGlobalOp(xmemref.GetGlobalOp):
    """xDSL's memref.get_global, with MLIR's check that the global exists and matches."""

    memref = result_def(MemRefType)
    name_ = prop_def(SymbolRefAttr, prop_name="name")

    traits = traits_def(NoMemoryEffect())

    print = Operation.print
    parse = Operation.__dict__["parse"]

    assembly_format = "$name `:` type($memref) attr-dict"

    def verify_(self) -> None:
        from xdsl.traits import SymbolTable

        found = SymbolTable.lookup_symbol(self, self.name_)
        name = self.name_.root_reference.data
        if not isinstance(found, xmemref.GlobalOp):
            raise op_error(self, f"'{name}' does not reference a valid global memref")
        if found.type != self.memref.type:
            raise op_error(
                self,
                f"result type '{self.memref.type}' does not match type '{found.type}' of the "
                f"global memref @{name}",
            )


def reassociation_attr(groups: Sequence[Sequence[int]]) -> ArrayAttr[ArrayAttr[IntegerAttr]]:
    """The `reassociation` property for collapse_shape / expand_shape."""
    return ArrayAttr(ArrayAttr(IntegerAttr(i, i64) for i in g) for g in groups)


MemRef = extend_dialect(
    xmemref.MemRef,
    [CopyOp, CastOp, CollapseShapeOp, ExpandShapeOp, GlobalOp, GetGlobalOp],
)
