"""The scf overlay: scf.forall and scf.forall.in_parallel, which xDSL lacks, and
xDSL's scf.parallel with MLIR's custom syntax.

Syntax and verifier messages follow MLIR (checked against mlir-opt 22.1.8).

https://mlir.llvm.org/docs/Dialects/SCFDialect/
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import scf as xscf
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DenseArrayBase,
    FunctionType,
    IndexType,
    i64,
)
from xdsl.dialects.utils.dynamic_index_list import (
    parse_dynamic_index_list_without_types,
    print_dynamic_index_list,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    lazy_traits_def,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsTerminator,
    NoTerminator,
    RecursiveMemoryEffect,
    SingleBlockImplicitTerminator,
)

from shardc.dialects.overlays import extend_dialect
from shardc.dialects.overlays import op_error


def _print_arrow_types(printer: Printer, types: Sequence[Attribute]) -> None:
    """MLIR's printOptionalArrowTypeList: ` -> t` or ` -> (t, u)`."""
    if not types:
        return
    printer.print_string(" -> ")
    if len(types) == 1 and not isinstance(types[0], FunctionType):
        printer.print_attribute(types[0])
    else:
        printer.print_string("(")
        printer.print_list(types, printer.print_attribute)
        printer.print_string(")")


def _parse_arrow_types(parser: Parser) -> list[Attribute]:
    if parser.parse_optional_punctuation("->") is None:
        return []
    types = parser.parse_optional_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
    return types if types is not None else [parser.parse_type()]


@irdl_op_definition
class InParallelOp(IRDLOperation):
    """The terminator of scf.forall: its body inserts each thread's slice into the
    shared outputs (tensor.parallel_insert_slice)."""

    name = "scf.forall.in_parallel"

    region = region_def("single_block")

    traits = lazy_traits_def(
        lambda: (IsTerminator(), NoTerminator(), RecursiveMemoryEffect(), HasParent(ForallOp))
    )

    def __init__(self, region: Region | None = None):
        super().__init__(regions=[region if region is not None else Region(Block())])

    @classmethod
    def parse(cls, parser: Parser) -> InParallelOp:
        region = parser.parse_region()
        if not region.blocks:
            region.add_block(Block())
        attrs = parser.parse_optional_attr_dict()
        op = cls(region)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_region(self.region, False, False, False)
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class ForallOp(IRDLOperation):
    """A parallel loop nest over a multi-dimensional index space; `shared_outs` tensors
    are written through the in_parallel terminator and returned."""

    name = "scf.forall"

    dynamicLowerBound = var_operand_def(IndexType)
    dynamicUpperBound = var_operand_def(IndexType)
    dynamicStep = var_operand_def(IndexType)
    outputs = var_operand_def()
    staticLowerBound = prop_def(DenseArrayBase.constr(i64))
    staticUpperBound = prop_def(DenseArrayBase.constr(i64))
    staticStep = prop_def(DenseArrayBase.constr(i64))
    mapping = opt_prop_def(ArrayAttr)
    res = var_result_def()
    region = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    traits = traits_def(RecursiveMemoryEffect(), SingleBlockImplicitTerminator(InParallelOp))

    @property
    def rank(self) -> int:
        return len(self.staticUpperBound.get_values())

    def is_normalized(self) -> bool:
        return (
            not self.dynamicLowerBound
            and not self.dynamicStep
            and all(v == 0 for v in self.staticLowerBound.get_values())
            and all(v == 1 for v in self.staticStep.get_values())
        )

    def verify_(self) -> None:
        n = self.rank
        block = self.region.block
        if len(block.args) != n + len(self.outputs):
            raise op_error(self, "region expects {} arguments".format(n + len(self.outputs)))
        if len(self.staticLowerBound.get_values()) != n or len(self.staticStep.get_values()) != n:
            raise op_error(
                self,
                f"expects the same number of induction variables: {n} as bound and step values",
            )
        for name, static, dynamic in (
            ("lower bound", self.staticLowerBound, self.dynamicLowerBound),
            ("upper bound", self.staticUpperBound, self.dynamicUpperBound),
            ("step", self.staticStep, self.dynamicStep),
        ):
            if static.get_values().count(DYNAMIC_INDEX) != len(dynamic):
                raise op_error(self, f"expected as many dynamic {name} values as kDynamic entries")
        if len(self.res) != len(self.outputs):
            raise op_error(self, "must have as many results as outputs")
        for i, (out, res, arg) in enumerate(zip(self.outputs, self.res, block.args[n:])):
            if arg.type != out.type:
                raise op_error(self, f"type mismatch between {i}th output and corresponding block argument")
            if res.type != out.type:
                raise op_error(self, f"type mismatch between {i}th result and corresponding output")
        for i, arg in enumerate(block.args[:n]):
            if not isinstance(arg.type, IndexType):
                raise op_error(self, f"expects index type for induction variable {i}")
        if self.mapping is not None and len(self.mapping.data) != n:
            raise op_error(self, "mapping attribute size must match op rank")

    @classmethod
    def parse(cls, parser: Parser) -> ForallOp:
        ivs = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )

        def bounds() -> tuple[list[UnresolvedOperand], Sequence[int]]:
            return parse_dynamic_index_list_without_types(parser, DYNAMIC_INDEX, delimiter=Parser.Delimiter.PAREN)

        n = len(ivs)
        if parser.parse_optional_keyword("in") is not None:
            ub_dyn, ub = bounds()
            lb_dyn, lb, step_dyn, step = [], [0] * n, [], [1] * n
        else:
            parser.parse_punctuation("=")
            lb_dyn, lb = bounds()
            parser.parse_keyword("to")
            ub_dyn, ub = bounds()
            parser.parse_keyword("step")
            step_dyn, step = bounds()
        index = IndexType()
        out_args: list[Parser.Argument] = []
        outputs: list[SSAValue] = []
        if parser.parse_optional_keyword("shared_outs") is not None:

            def shared_out() -> None:
                arg = parser.parse_argument(expect_type=False)
                parser.parse_punctuation("=")
                out_args.append(arg)
                unresolved.append(parser.parse_unresolved_operand())

            unresolved: list[UnresolvedOperand] = []
            parser.parse_comma_separated_list(parser.Delimiter.PAREN, shared_out)
        else:
            unresolved = []
        result_types = _parse_arrow_types(parser)
        if len(result_types) != len(unresolved):
            parser.raise_error("expected as many result types as shared_outs")
        outputs = [parser.resolve_operand(u, t) for u, t in zip(unresolved, result_types)]
        args = [iv.resolve(index) for iv in ivs] + [a.resolve(t) for a, t in zip(out_args, result_types)]
        region = parser.parse_region(args)
        attrs = parser.parse_optional_attr_dict()
        props: dict[str, Attribute] = {
            "staticLowerBound": DenseArrayBase.from_list(i64, lb),
            "staticUpperBound": DenseArrayBase.from_list(i64, ub),
            "staticStep": DenseArrayBase.from_list(i64, step),
        }
        if "mapping" in attrs:
            props["mapping"] = attrs.pop("mapping")
        block = region.blocks.first
        assert block is not None
        if block.last_op is None or not isinstance(block.last_op, InParallelOp):
            block.add_op(InParallelOp())
        return cls.build(
            operands=[
                [parser.resolve_operand(v, index) for v in lb_dyn],
                [parser.resolve_operand(v, index) for v in ub_dyn],
                [parser.resolve_operand(v, index) for v in step_dyn],
                outputs,
            ],
            result_types=[result_types],
            properties=props,
            attributes=attrs,
            regions=[region],
        )

    def print(self, printer: Printer) -> None:
        block = self.region.block
        n = self.rank
        printer.print_string(" (")
        printer.print_list(block.args[:n], printer.print_operand)
        printer.print_string(")")
        paren = Parser.Delimiter.PAREN

        def bounds(dynamic: Sequence[SSAValue], static: DenseArrayBase) -> None:
            print_dynamic_index_list(printer, DYNAMIC_INDEX, dynamic, static.get_values(), delimiter=paren)

        if self.is_normalized():
            printer.print_string(" in ")
            bounds(self.dynamicUpperBound, self.staticUpperBound)
        else:
            printer.print_string(" = ")
            bounds(self.dynamicLowerBound, self.staticLowerBound)
            printer.print_string(" to ")
            bounds(self.dynamicUpperBound, self.staticUpperBound)
            printer.print_string(" step ")
            bounds(self.dynamicStep, self.staticStep)
        if self.outputs:
            printer.print_string(" shared_outs(")
            for i, (arg, out) in enumerate(zip(block.args[n:], self.outputs)):
                if i:
                    printer.print_string(", ")
                printer.print_operand(arg)
                printer.print_string(" = ")
                printer.print_operand(out)
            printer.print_string(")")
        printer.print_string(" ")
        if self.res:
            printer.print_string("-> (")
            printer.print_list(self.result_types, printer.print_attribute)
            printer.print_string(") ")
        printer.print_region(self.region, False, True, bool(self.res))
        attrs = dict(self.attributes)
        if self.mapping is not None:
            attrs["mapping"] = self.mapping
        printer.print_op_attributes(attrs)


@irdl_op_definition
class ParallelOp(xscf.ParallelOp):
    """xDSL's scf.parallel with MLIR's syntax:
    `scf.parallel (%i) = (%lb) to (%ub) step (%s) init (%x) -> f32 {...}`."""

    lowerBound = var_operand_def(IndexType)
    upperBound = var_operand_def(IndexType)
    step = var_operand_def(IndexType)
    initVals = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")

    traits = traits_def(SingleBlockImplicitTerminator(xscf.ReduceOp), RecursiveMemoryEffect())

    @classmethod
    def parse(cls, parser: Parser) -> ParallelOp:
        index = IndexType()
        ivs = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )

        def operands() -> list[SSAValue]:
            return parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, lambda: parser.parse_operand(index)
            )

        parser.parse_punctuation("=")
        lbs = operands()
        parser.parse_keyword("to")
        ubs = operands()
        parser.parse_keyword("step")
        steps = operands()
        init: list[UnresolvedOperand] = []
        if parser.parse_optional_keyword("init") is not None:
            init = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_unresolved_operand)
        types = _parse_arrow_types(parser)
        if len(types) != len(init):
            parser.raise_error("expects the same number of init values and result types")
        region = parser.parse_region([iv.resolve(index) for iv in ivs])
        block = region.blocks.first
        assert block is not None
        if block.last_op is None or not isinstance(block.last_op, xscf.ReduceOp):
            block.add_op(xscf.ReduceOp())
        attrs = parser.parse_optional_attr_dict()
        return cls.build(
            operands=[lbs, ubs, steps, [parser.resolve_operand(u, t) for u, t in zip(init, types)]],
            result_types=[types],
            attributes=attrs,
            regions=[region],
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" (")
        printer.print_list(self.body.block.args, printer.print_operand)
        printer.print_string(") = (")
        printer.print_list(self.lowerBound, printer.print_operand)
        printer.print_string(") to (")
        printer.print_list(self.upperBound, printer.print_operand)
        printer.print_string(") step (")
        printer.print_list(self.step, printer.print_operand)
        printer.print_string(")")
        if self.initVals:
            printer.print_string(" init (")
            printer.print_list(self.initVals, printer.print_operand)
            printer.print_string(")")
        _print_arrow_types(printer, self.result_types)
        printer.print_string(" ")
        printer.print_region(self.body, False)
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class ExecuteRegionOp(xscf.ExecuteRegionOp):
    """xDSL's scf.execute_region printed as MLIR does (`-> index` without parentheses)
    and keeping its attribute dictionary when parsed."""

    outs = var_result_def()
    region = region_def()

    traits = traits_def(xscf.ExecuteRegionOpHasCanonicalizationPatternsTrait())

    @classmethod
    def parse(cls, parser: Parser) -> ExecuteRegionOp:
        types = _parse_arrow_types(parser)
        region = parser.parse_region()
        attrs = parser.parse_optional_attr_dict()
        op = cls(types, region)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        _print_arrow_types(printer, self.result_types)
        printer.print_string(" ")
        printer.print_region(self.region, False, True, bool(self.outs))
        printer.print_op_attributes(self.attributes)


SCF = extend_dialect(xscf.Scf, [ForallOp, InParallelOp, ParallelOp, ExecuteRegionOp])
