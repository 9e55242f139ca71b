"""The affine overlay: xDSL's affine dialect plus delinearize_index, linearize_index and
max, which the shard->MPI lowering uses for process indices.

Syntax, verifier messages and the constant folds follow MLIR (checked against mlir-opt
22.1.8). Folded constants are materialized as `arith.constant`, as MLIR's affine dialect
does.

https://mlir.llvm.org/docs/Dialects/Affine/
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialect_interfaces.constant_materialization import ConstantMaterializationInterface
from xdsl.dialects import affine as xaffine
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    AffineSetAttr,
    BoolAttr,
    DenseArrayBase,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    UnitAttr,
    i1,
    i64,
)
from xdsl.dialects.utils.dynamic_index_list import (
    get_dynamic_index_list,
    parse_dynamic_index_list_without_types,
    print_dynamic_index_list,
    split_dynamic_index_list,
)
from xdsl.interfaces import HasFolderInterface
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    ConstantLike,
    IsTerminator,
    Pure,
    RecursiveMemoryEffect,
    RecursivelySpeculatable,
    SingleBlockImplicitTerminator,
)

from shardc.dialects.overlays import extend_dialect
from shardc.dialects.overlays import op_error

# Affine expressions built as MLIR builds them live in shardc.ir.affine_parser (which
# imports no dialect, so the parser can use it); re-exported for this dialect's users.
from shardc.ir.affine_parser import MLIRAffineParser, MLIRAffineParsing  # noqa: F401


def _constant_index(value: SSAValue) -> int | None:
    """The value of an index defined by a constant-like op, None otherwise."""
    attr = ConstantLike.get_constant_value(value) if value.owner else None
    if isinstance(attr, IntegerAttr):
        return attr.value.data
    return None


def _index(value: int) -> IntegerAttr:
    return IntegerAttr(value, IndexType())


def _verify_static_basis(op: Operation, static: Sequence[int]) -> None:
    if any(b != DYNAMIC_INDEX and b <= 0 for b in static):
        raise op_error(op, "no basis element may be statically non-positive")


class _BasisOp(IRDLOperation):
    """Shared by delinearize and linearize: a basis of mixed static and dynamic sizes."""

    dynamic_basis = var_operand_def(IndexType)
    static_basis = prop_def(DenseArrayBase.constr(i64))

    def basis(self) -> list[SSAValue | int]:
        """The basis with constants folded in where the dynamic entry is a constant."""
        mixed = get_dynamic_index_list(
            self.static_basis.get_values(), self.dynamic_basis, DYNAMIC_INDEX
        )
        return [
            b if isinstance(b, int) else (c if (c := _constant_index(b)) is not None else b)
            for b in mixed
        ]

    def verify_(self) -> None:
        static = self.static_basis.get_values()
        if static.count(DYNAMIC_INDEX) != len(self.dynamic_basis):
            raise op_error(
                self,
                "mismatch between dynamic and static basis (kDynamic marker but no "
                "corresponding dynamic basis entry) -- this can only happen due to an "
                "incorrect fold/rewrite",
            )

    def _print_basis(self, printer: Printer) -> None:
        print_dynamic_index_list(
            printer,
            DYNAMIC_INDEX,
            self.dynamic_basis,
            self.static_basis.get_values(),
            delimiter=Parser.Delimiter.PAREN,
        )


@irdl_op_definition
class DelinearizeIndexOp(_BasisOp, HasFolderInterface):
    """Split a linear index into a multi-index over `basis`; with one result more than
    the basis has entries, the first result is unbounded."""

    name = "affine.delinearize_index"

    linear_index = operand_def(IndexType)
    dynamic_basis = var_operand_def(IndexType)
    static_basis = prop_def(DenseArrayBase.constr(i64))
    multi_index = var_result_def(IndexType)

    traits = traits_def(Pure())

    def __init__(
        self,
        linear_index: SSAValue | Operation,
        basis: Sequence[SSAValue | int],
        *,
        unbounded_outer: bool = False,
    ):
        static, dynamic = split_dynamic_index_list(basis, DYNAMIC_INDEX)
        n = len(basis) + (1 if unbounded_outer else 0)
        super().__init__(
            operands=[linear_index, dynamic],
            properties={"static_basis": DenseArrayBase.from_list(i64, static)},
            result_types=[[IndexType()] * n],
        )

    def has_outer_bound(self) -> bool:
        return len(self.multi_index) == len(self.static_basis.get_values())

    def verify_(self) -> None:
        n_basis = len(self.static_basis.get_values())
        if len(self.multi_index) not in (n_basis, n_basis + 1):
            raise op_error(
                self,
                "should return an index for each basis element and up to one extra index",
            )
        super().verify_()
        _verify_static_basis(self, self.static_basis.get_values())

    def fold(self) -> Sequence[SSAValue | Attribute] | None:
        basis = self.basis()
        if len(self.multi_index) == 1:
            return (self.linear_index,)
        linear = _constant_index(self.linear_index)
        if linear is None or not all(isinstance(b, int) for b in basis):
            return None
        sizes = [b for b in basis if isinstance(b, int)]
        if self.has_outer_bound():
            sizes = sizes[1:]
        digits: list[int] = []
        for size in reversed(sizes):
            digits.append(linear % size)
            linear //= size
        digits.append(linear)
        return tuple(_index(d) for d in reversed(digits))

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.linear_index)
        printer.print_string(" into ")
        self._print_basis(printer)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list(self.result_types, printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> DelinearizeIndexOp:
        linear = parser.parse_operand(IndexType())
        parser.parse_keyword("into")
        dynamic, static = parse_dynamic_index_list_without_types(
            parser, DYNAMIC_INDEX, delimiter=Parser.Delimiter.PAREN
        )
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        op = cls.build(
            operands=[linear, [parser.resolve_operand(d, IndexType()) for d in dynamic]],
            properties={"static_basis": DenseArrayBase.from_list(i64, static)},
            attributes=attributes,
            result_types=[types],
        )
        return op


@irdl_op_definition
class LinearizeIndexOp(_BasisOp, HasFolderInterface):
    """Combine a multi-index into a linear index over `basis` (the first entry may be
    left out: it only bounds the first index). `disjoint` asserts each index is in
    bounds."""

    name = "affine.linearize_index"

    multi_index = var_operand_def(IndexType)
    dynamic_basis = var_operand_def(IndexType)
    static_basis = prop_def(DenseArrayBase.constr(i64))
    disjoint = opt_prop_def(UnitAttr | BoolAttr)
    """A unit property; mlir-opt's generic form spells the unset value `disjoint = false`."""
    linear_index = result_def(IndexType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    traits = traits_def(Pure())

    def __init__(
        self,
        multi_index: Sequence[SSAValue | Operation],
        basis: Sequence[SSAValue | int],
        *,
        disjoint: bool = False,
    ):
        static, dynamic = split_dynamic_index_list(basis, DYNAMIC_INDEX)
        properties: dict[str, Attribute] = {
            "static_basis": DenseArrayBase.from_list(i64, static)
        }
        properties["disjoint"] = UnitAttr() if disjoint else BoolAttr(False, i1)
        super().__init__(
            operands=[multi_index, dynamic],
            properties=properties,
            result_types=[IndexType()],
        )

    def is_disjoint(self) -> bool:
        return isinstance(self.disjoint, UnitAttr) or (
            isinstance(self.disjoint, IntegerAttr) and bool(self.disjoint.value.data)
        )

    def verify_(self) -> None:
        n_basis = len(self.static_basis.get_values())
        if len(self.multi_index) not in (n_basis, n_basis + 1):
            raise op_error(
                self,
                "should be passed a basis element for each index except possibly the first",
            )
        super().verify_()

    def fold(self) -> Sequence[SSAValue | Attribute] | None:
        if not self.multi_index:
            return (_index(0),)
        basis = self.basis()
        if len(self.multi_index) == 1 and len(basis) <= 1:
            return (self.multi_index[0],)
        indices = [_constant_index(v) for v in self.multi_index]
        if any(i is None for i in indices) or not all(isinstance(b, int) for b in basis):
            return None
        sizes = [b for b in basis if isinstance(b, int)]
        if len(sizes) == len(indices):
            sizes = sizes[1:]
        linear = 0
        for index, size in zip(indices, [*sizes, 1]):
            assert index is not None
            linear = (linear + index) * size
        return (_index(linear),)

    def print(self, printer: Printer) -> None:
        if self.is_disjoint():
            printer.print_string(" disjoint")
        printer.print_string(" [")
        printer.print_list(self.multi_index, printer.print_operand)
        printer.print_string("] by ")
        self._print_basis(printer)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.linear_index.type)

    @classmethod
    def parse(cls, parser: Parser) -> LinearizeIndexOp:
        disjoint = parser.parse_optional_keyword("disjoint") is not None
        indices = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
        )
        parser.parse_keyword("by")
        dynamic, static = parse_dynamic_index_list_without_types(
            parser, DYNAMIC_INDEX, delimiter=Parser.Delimiter.PAREN
        )
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        properties: dict[str, Attribute] = {"static_basis": DenseArrayBase.from_list(i64, static)}
        # MLIR materializes the unset unit property; its generic form shows `disjoint = false`.
        properties["disjoint"] = UnitAttr() if disjoint else BoolAttr(False, i1)
        return cls.build(
            operands=[indices, [parser.resolve_operand(d, IndexType()) for d in dynamic]],
            properties=properties,
            attributes=attributes,
            result_types=[result_type],
        )


class _MinMaxOp(IRDLOperation):
    """affine.min / affine.max: the min or max of the results of an affine map."""

    arguments = var_operand_def(IndexType())
    map = prop_def(AffineMapAttr)
    result = result_def(IndexType())

    traits = traits_def(Pure())

    def __init__(self, map_operands: Sequence[SSAValue | Operation], affine_map: AffineMapAttr):
        super().__init__(
            operands=[map_operands], properties={"map": affine_map}, result_types=[IndexType()]
        )

    def verify_(self) -> None:
        m = self.map.data
        if len(self.arguments) != m.num_dims + m.num_symbols:
            raise op_error(
                self, "operand count and affine map dimension and symbol count must match"
            )
        if not m.results:
            raise op_error(self, "affine map expect at least one result")

    def print(self, printer: Printer) -> None:
        m = self.map.data
        operands = list(self.arguments)
        printer.print_string(" ")
        printer.print_attribute(self.map)
        printer.print_string("(")
        printer.print_list(operands[: m.num_dims], printer.print_operand)
        printer.print_string(")")
        if m.num_symbols:
            printer.print_string("[")
            printer.print_list(operands[m.num_dims :], printer.print_operand)
            printer.print_string("]")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> _MinMaxOp:
        pos = parser.pos
        m = parser.parse_attribute()
        if not isinstance(m, AffineMapAttr):
            parser.raise_error("expected affine map", at_position=pos)
        dims = parser.parse_optional_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_operand(IndexType())
        )
        syms = parser.parse_optional_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
        )
        attributes = parser.parse_optional_attr_dict()
        return cls.build(
            operands=[[*(dims or []), *(syms or [])]],
            properties={"map": m},
            attributes=attributes,
            result_types=[IndexType()],
        )


@irdl_op_definition
class MaxOp(_MinMaxOp):
    name = "affine.max"


@irdl_op_definition
class MinOp(_MinMaxOp, xaffine.MinOp):
    """xDSL's affine.min with MLIR's verifier messages (and a shared printer with max)."""

    arguments = var_operand_def(IndexType())
    map = prop_def(AffineMapAttr)
    result = result_def(IndexType())


def parse_affine_map_of_ssa_ids(parser: Parser) -> tuple[AffineMap, list[SSAValue]]:
    """`[%i + 1, symbol(%n)]` with MLIR's meaning, its operands resolved as index."""
    affine = MLIRAffineParser(parser._parser_state)  # pyright: ignore[reportPrivateUsage]
    m, dim_spans, sym_spans = affine.parse_ssa_id_map()
    parser._resume_from(affine._parser_state)  # pyright: ignore[reportPrivateUsage]
    operands = [
        parser.resolve_operand(UnresolvedOperand(span, 0), IndexType())
        for span in (*dim_spans, *sym_spans)
    ]
    return m, operands


def _parse_access(parser: Parser) -> tuple[SSAValue, AffineMapAttr, list[SSAValue], MemRefType]:
    """`%memref[<exprs of SSA ids>] : type`; each SSA id becomes a map dimension, as in
    MLIR (xDSL's parser makes them symbols, which mlir-opt rejects in generic form)."""
    memref = parser.parse_unresolved_operand()
    m, indices = parse_affine_map_of_ssa_ids(parser)
    parser.parse_punctuation(":")
    pos = parser.pos
    memref_type = parser.parse_type()
    if not isinstance(memref_type, MemRefType):
        parser.raise_error("expected memref type", at_position=pos)
    return parser.resolve_operand(memref, memref_type), AffineMapAttr(m), list(indices), memref_type


def _print_access(printer: Printer, memref: SSAValue, m: AffineMap, indices: Sequence[SSAValue]) -> None:
    """`%m[%i + 1, symbol(%s)] : memref<...>`, MLIR's printAffineMapOfSSAIds."""
    from shardc.ir.printer import affine_expr_text

    printer.print_operand(memref)
    n = m.num_dims
    dims = [f"\0{i}\0" for i in range(n)]
    syms = [f"symbol(\0{n + i}\0)" for i in range(m.num_symbols)]
    text = "[" + ", ".join(affine_expr_text(r, dims, syms) for r in m.results) + "]"
    for i, part in enumerate(text.split("\0")):
        if i % 2:
            printer.print_operand(indices[int(part)])
        else:
            printer.print_string(part)
    printer.print_string(" : ")
    printer.print_attribute(memref.type)


def _verify_access(op: Operation, memref: SSAValue, m: AffineMap, indices: Sequence[SSAValue]) -> None:
    assert isinstance(memref.type, MemRefType)
    if len(m.results) != memref.type.get_num_dims():
        raise op_error(op, "affine map num results must equal memref rank")
    if m.num_dims + m.num_symbols != len(indices):
        raise op_error(op, "expects as many subscripts as affine map inputs")


@irdl_op_definition
class LoadOp(xaffine.LoadOp):
    """xDSL's affine.load, with the subscripts as map dimensions (MLIR's form)."""

    T: ClassVar = VarConstraint("T", AnyAttr())

    memref = operand_def(MemRefType.constr(T))
    indices = var_operand_def(IndexType)
    result = result_def(T)
    map = prop_def(AffineMapAttr)

    def verify_(self) -> None:
        _verify_access(self, self.memref, self.map.data, self.indices)

    @classmethod
    def parse(cls, parser: Parser) -> LoadOp:
        memref, m, indices, memref_type = _parse_access(parser)
        attrs = parser.parse_optional_attr_dict()
        op = cls(memref, indices, m, memref_type.get_element_type())
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_access(printer, self.memref, self.map.data, self.indices)
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class StoreOp(xaffine.StoreOp):
    """xDSL's affine.store, with the subscripts as map dimensions (MLIR's form)."""

    T: ClassVar = VarConstraint("T", AnyAttr())

    value = operand_def(T)
    memref = operand_def(MemRefType.constr(T))
    indices = var_operand_def(IndexType)
    map = prop_def(AffineMapAttr)

    def verify_(self) -> None:
        _verify_access(self, self.memref, self.map.data, self.indices)

    @classmethod
    def parse(cls, parser: Parser) -> StoreOp:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        memref, m, indices, memref_type = _parse_access(parser)
        attrs = parser.parse_optional_attr_dict()
        op = cls(parser.resolve_operand(value, memref_type.get_element_type()), memref, indices, m)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.value)
        printer.print_string(", ")
        _print_access(printer, self.memref, self.map.data, self.indices)
        printer.print_op_attributes(self.attributes)


def _ensure_yield(region: Region) -> None:
    """MLIR's ensureTerminator: an empty `{}` gets a block ending in `affine.yield`."""
    if not region.blocks:
        region.add_block(Block())
    block = region.blocks.first
    assert block is not None
    if block.last_op is None or not block.last_op.has_trait(IsTerminator):
        block.add_op(xaffine.YieldOp.get())


def _parse_dim_and_symbol_list(parser: Parser) -> tuple[list[SSAValue], int]:
    """`(%d0, %d1)[%s0]`: the operands and the number of dimensions."""
    dims = parser.parse_comma_separated_list(
        parser.Delimiter.PAREN, lambda: parser.parse_operand(IndexType())
    )
    syms = parser.parse_optional_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
    )
    return [*dims, *(syms or [])], len(dims)


def _print_dim_and_symbol_list(printer: Printer, operands: Sequence[SSAValue], num_dims: int) -> None:
    printer.print_string("(")
    printer.print_list(operands[:num_dims], printer.print_operand)
    printer.print_string(")")
    if len(operands) > num_dims:
        printer.print_string("[")
        printer.print_list(operands[num_dims:], printer.print_operand)
        printer.print_string("]")


@irdl_op_definition
class IfOp(xaffine.IfOp):
    """xDSL's affine.if with MLIR's custom syntax: `affine.if #set(%d)[%s] -> (t) {...}
    else {...}`; the yields of result-less regions are implicit."""

    args = var_operand_def(IndexType)
    res = var_result_def()
    condition = prop_def(AffineSetAttr)
    then_region = region_def("single_block")
    else_region = region_def()

    traits = traits_def(
        RecursiveMemoryEffect(),
        RecursivelySpeculatable(),
        SingleBlockImplicitTerminator(xaffine.YieldOp),
    )

    def verify_(self) -> None:
        s = self.condition.data
        if len(self.args) != s.num_dims + s.num_symbols:
            raise op_error(
                self,
                "operand count and condition integer set dimension and symbol count must match",
            )
        if len(self.else_region.blocks) > 1:
            raise op_error(self, "expects region #1 to have 0 or 1 blocks")
        for region in (self.then_region, self.else_region):
            block = region.blocks.first
            if block is None:
                if self.res:
                    raise op_error(self, "must have an else block if defining values")
                continue
            last = block.last_op
            if isinstance(last, xaffine.YieldOp):
                if len(last.arguments) != len(self.res):
                    raise op_error(
                        self,
                        "parent of yield must have same number of results as the yield operands",
                    )

    @classmethod
    def parse(cls, parser: Parser) -> IfOp:
        pos = parser.pos
        condition = parser.parse_attribute()
        if not isinstance(condition, AffineSetAttr):
            parser.raise_error("expected integer set", at_position=pos)
        operands, num_dims = _parse_dim_and_symbol_list(parser)
        if num_dims != condition.data.num_dims:
            parser.raise_error("dim operand count and integer set dim count must match")
        if len(operands) - num_dims != condition.data.num_symbols:
            parser.raise_error("symbol operand count and integer set symbol count must match")
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            result_types = parser.parse_optional_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_type
            ) or [parser.parse_type()]
        then_region = parser.parse_region()
        _ensure_yield(then_region)
        else_region = Region()
        if parser.parse_optional_keyword("else") is not None:
            else_region = parser.parse_region()
            _ensure_yield(else_region)
        attrs = parser.parse_optional_attr_dict()
        return cls.build(
            operands=[operands],
            result_types=[result_types],
            properties={"condition": condition},
            attributes=attrs,
            regions=[then_region, else_region],
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.condition)
        _print_dim_and_symbol_list(printer, self.args, self.condition.data.num_dims)
        if self.res:
            printer.print_string(" -> ")
            types = self.result_types
            if len(types) == 1 and not isinstance(types[0], FunctionType):
                printer.print_attribute(types[0])
            else:
                printer.print_string("(")
                printer.print_list(types, printer.print_attribute)
                printer.print_string(")")
        printer.print_string(" ")
        terminators = bool(self.res)
        printer.print_region(self.then_region, False, True, terminators)
        if self.else_region.blocks:
            printer.print_string(" else ")
            printer.print_region(self.else_region, False, True, terminators)
        printer.print_op_attributes(self.attributes)


class AffineConstantMaterialization(ConstantMaterializationInterface):
    """Folded index values become `arith.constant`, as in MLIR's affine dialect."""

    def materialize_constant(self, value: Attribute, type: Attribute) -> Operation | None:
        if isinstance(value, IntegerAttr) and isinstance(type, IndexType):
            return arith.ConstantOp(value, type)
        return None


Affine = extend_dialect(
    xaffine.Affine,
    [DelinearizeIndexOp, LinearizeIndexOp, MaxOp, MinOp, LoadOp, StoreOp, IfOp],
    interfaces=[AffineConstantMaterialization()],
)
