"""The vector overlay: xDSL's vector dialect plus `vector.constant_mask`,
`vector.multi_reduction`, `vector.mask` and `vector.yield`, which programs given to
`convert-shard-to-mpi` may hold (vectorized halo and reduction code). shardc reads,
verifies and prints them as mlir-opt does and passes them through its passes unchanged;
the runtime does not execute them.

https://mlir.llvm.org/docs/Dialects/Vector/
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import vector as xvector
from xdsl.dialects.builtin import DenseArrayBase, IntegerType, VectorType, i64
from xdsl.dialects.vector import CombiningKindAttr, CombiningKindFlag
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure

from shardc.dialects.lazy_format import lazy_format_op_definition
from shardc.dialects.overlays import extend_dialect, op_error


def _shape(t: Attribute) -> tuple[int, ...]:
    return tuple(t.get_shape()) if isinstance(t, VectorType) else ()  # pyright: ignore


def _is_i1_vector(t: Attribute) -> bool:
    return isinstance(t, VectorType) and t.element_type == IntegerType(1)


def _print_int_list(printer: Printer, values: Sequence[int]) -> None:
    printer.print_string("[" + ", ".join(str(v) for v in values) + "]")


def _parse_int_list(parser: Parser) -> list[int]:
    return parser.parse_comma_separated_list(
        Parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
    )


@irdl_op_definition
class ConstantMaskOp(IRDLOperation):
    """`vector.constant_mask [2, 3] : vector<4x8xi1>`: true in the leading `2 x 3` box."""

    name = "vector.constant_mask"

    mask_dim_sizes = prop_def(DenseArrayBase.constr(i64))
    result = result_def(VectorType)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> ConstantMaskOp:
        sizes = _parse_int_list(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result = parser.parse_type()
        return cls.create(
            properties={"mask_dim_sizes": DenseArrayBase.from_list(i64, sizes)},
            attributes=attrs,
            result_types=[result],
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_int_list(printer, self.mask_dim_sizes.get_values())  # pyright: ignore
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        shape = _shape(self.result.type)
        sizes = self.mask_dim_sizes.get_values()
        if not _is_i1_vector(self.result.type):
            raise op_error(self, "result #0 must be vector of 1-bit signless integer values")
        if len(sizes) != len(shape):
            raise op_error(self, "must specify array attr of size equal vector result rank")
        for size, dim in zip(sizes, shape):
            if not 0 <= size <= dim:  # pyright: ignore[reportOperatorIssue]
                raise op_error(
                    self, "array attr of size out of bounds of vector result dimension size"
                )


@irdl_op_definition
class MultiReductionOp(IRDLOperation):
    """`vector.multi_reduction <add>, %src, %acc [1] : vector<4x8xf32> to vector<4xf32>`:
    `source` combined over `reduction_dims` into `acc`."""

    name = "vector.multi_reduction"

    source = operand_def(VectorType)
    acc = operand_def(AnyAttr())
    dest = result_def(AnyAttr())
    kind = prop_def(CombiningKindAttr)
    reduction_dims = prop_def(DenseArrayBase.constr(i64))

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> MultiReductionOp:
        with parser.in_angle_brackets():
            kind = CombiningKindAttr(CombiningKindFlag(parser.parse_identifier()))
        parser.parse_punctuation(",")
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        acc = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        dims = _parse_int_list(parser)
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        parser.parse_keyword("to")
        dest_type = parser.parse_type()
        operands = parser.resolve_operands([source, acc], [source_type, dest_type], parser.pos)
        return cls.create(
            operands=operands,
            result_types=[dest_type],
            properties={"kind": kind, "reduction_dims": DenseArrayBase.from_list(i64, dims)},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(f" <{self.kind.data}>, ")
        printer.print_operand(self.source)
        printer.print_string(", ")
        printer.print_operand(self.acc)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" ")
        _print_int_list(printer, self.reduction_dims.get_values())  # pyright: ignore
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" to ")
        printer.print_attribute(self.dest.type)

    def verify_(self) -> None:
        shape = _shape(self.source.type)
        dims = self.reduction_dims.get_values()
        kept = [s for i, s in enumerate(shape) if i not in dims]
        dest = self.dest.type
        element = self.source.type.element_type  # pyright: ignore[reportAttributeAccessIssue]
        expected: Attribute = VectorType(element, kept) if kept else element
        in_range = all(0 <= d < len(shape) for d in dims)  # pyright: ignore[reportOperatorIssue]
        if dest != expected or not in_range:
            raise op_error(
                self, f"destination type '{dest}' is incompatible with source type '{self.source.type}'"
            )
        if self.acc.type != dest:
            raise op_error(self, "failed to verify that all of {dest, acc} have same type")


@lazy_format_op_definition
class YieldOp(IRDLOperation):
    """The terminator of `vector.mask`, implicit in its custom syntax."""

    name = "vector.yield"

    operands_ = var_operand_def(AnyAttr())

    traits = lazy_traits_def(lambda: (IsTerminator(), Pure(), HasParent(MaskOp)))

    assembly_format = "attr-dict ($operands_^ `:` type($operands_))?"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])


@irdl_op_definition
class MaskOp(IRDLOperation):
    """`vector.mask %m[, %passthru] { <maskable op> } : vector<..xi1> [-> types]`: the
    region's one op executes under the mask."""

    name = "vector.mask"

    mask = operand_def(VectorType)
    passthru = opt_operand_def(AnyAttr())
    results_ = var_result_def(AnyAttr())
    body = region_def("single_block")


    @classmethod
    def parse(cls, parser: Parser) -> MaskOp:
        mask = parser.parse_unresolved_operand()
        passthru = parser.parse_unresolved_operand() if parser.parse_optional_punctuation(",") else None
        body = parser.parse_region()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        mask_type = parser.parse_type()
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            result_types = parser.parse_comma_separated_list(
                Parser.Delimiter.NONE, parser.parse_type
            )
        pos = parser.pos
        operands = parser.resolve_operands([mask], [mask_type], pos)
        if passthru is not None:
            if not result_types:
                parser.raise_error("expects a result if passthru operand is provided", pos, pos)
            operands.append(parser.resolve_operand(passthru, result_types[0]))
        _ensure_terminator(body)
        return cls.create(
            operands=operands, result_types=result_types, regions=[body], attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.mask)
        if self.passthru is not None:
            printer.print_string(", ")
            printer.print_operand(self.passthru)
        printer.print_string(" { ")
        inner = self.maskable_op
        if inner is not None:
            printer.print_string(inner.name)
            inner.print(printer)
        printer.print_string(" }")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.mask.type)
        if self.results:
            printer.print_string(" -> ")
            printer.print_list([r.type for r in self.results], printer.print_attribute)

    @property
    def maskable_op(self) -> Operation | None:
        block = self.body.block
        ops = list(block.ops)
        return ops[0] if len(ops) == 2 else None

    def verify_(self) -> None:
        if not _is_i1_vector(self.mask.type):
            raise op_error(self, "operand #0 must be vector of 1-bit signless integer values")
        ops = list(self.body.block.ops)
        if not ops or not isinstance(ops[-1], YieldOp):
            raise op_error(self, "expects a terminator within the mask region")
        if len(ops) > 2:
            raise op_error(self, "expects only one operation to mask")
        if self.passthru is not None and isinstance(ops[0], MultiReductionOp):
            raise op_error(self, "doesn't expect a passthru argument for this maskable operation")
        yielded = [v.type for v in ops[-1].operands]
        if yielded != [r.type for r in self.results]:
            raise op_error(self, "expects result type to match maskable operation result type")


def _ensure_terminator(body: Region) -> None:
    """MLIR's `ensureTerminator`: a region written without its `vector.yield` yields
    the results of its one op."""
    if not body.blocks:
        body.add_block(Block())
    block = body.block
    last = block.last_op
    if isinstance(last, YieldOp):
        return
    block.add_op(YieldOp(list(last.results) if last is not None else []))


Vector = extend_dialect(xvector.Vector, [ConstantMaskOp, MultiReductionOp, MaskOp, YieldOp])
