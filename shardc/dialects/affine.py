"""The affine overlay: xDSL's affine dialect plus delinearize_index, linearize_index and
max, which the shard->MPI lowering uses for process indices.

Syntax, verifier messages and the constant folds follow MLIR (checked against mlir-opt
22.1.8). Folded constants are materialized as `arith.constant`, as MLIR's affine dialect
does.

https://mlir.llvm.org/docs/Dialects/Affine/
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialect_interfaces.constant_materialization import ConstantMaterializationInterface
from xdsl.dialects import affine as xaffine
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    BoolAttr,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
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
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException

from shardc.dialects.overlays import extend_dialect


def _error(op: Operation, message: str) -> VerifyException:
    return VerifyException(f"'{op.name}' op {message}")


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
        raise _error(op, "no basis element may be statically non-positive")


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
            raise _error(
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
            raise _error(
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
            raise _error(
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
            raise _error(
                self, "operand count and affine map dimension and symbol count must match"
            )
        if not m.results:
            raise _error(self, "affine map expect at least one result")

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


class AffineConstantMaterialization(ConstantMaterializationInterface):
    """Folded index values become `arith.constant`, as in MLIR's affine dialect."""

    def materialize_constant(self, value: Attribute, type: Attribute) -> Operation | None:
        if isinstance(value, IntegerAttr) and isinstance(type, IndexType):
            return arith.ConstantOp(value, type)
        return None


Affine = extend_dialect(
    xaffine.Affine,
    [DelinearizeIndexOp, LinearizeIndexOp, MaxOp, MinOp],
    interfaces=[AffineConstantMaterialization()],
)
