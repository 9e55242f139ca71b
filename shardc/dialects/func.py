"""The func overlay: func.func with MLIR's signature syntax, plus func.call_indirect and
func.constant, which xDSL lacks.

xDSL prints a declaration without results as `@f() -> ()` and drops the argument
attributes of declarations when parsing; MLIR's function syntax (FunctionInterface's
`printFunctionOp`) is followed here instead: `-> ` only when there are results,
parentheses around results only when needed, empty attribute dictionaries dropped.

https://mlir.llvm.org/docs/Dialects/Func/
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func as xfunc
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FlatSymbolRefAttr,
    FlatSymbolRefAttrConstr,
    FunctionType,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
)
from xdsl.ir import Attribute, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
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
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    IsolatedFromAbove,
    Pure,
    SymbolOpInterface,
    SymbolUserOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from shardc.dialects.lazy_format import lazy_format_op_definition
from shardc.dialects.overlays import extend_dialect

_RESERVED = ("sym_name", "function_type", "sym_visibility", "arg_attrs", "res_attrs")


def _attrs_array(dicts: Sequence[dict[str, Attribute]]) -> ArrayAttr[DictionaryAttr] | None:
    """MLIR stores arg/res attributes only when one of them is non-empty."""
    if not any(dicts):
        return None
    return ArrayAttr(DictionaryAttr(d) for d in dicts)


def _attr_dicts(attrs: ArrayAttr[DictionaryAttr] | None, n: int) -> list[dict[str, Attribute]]:
    if attrs is None:
        return [{} for _ in range(n)]
    return [dict(d.data) for d in attrs.data] + [{} for _ in range(n - len(attrs.data))]


def print_result_list(
    printer: Printer, types: Sequence[Attribute], attrs: Sequence[dict[str, Attribute]]
) -> None:
    """`t`, or `(t {a}, u)` when there is more than one result, a function type or an
    attribute (MLIR's printFunctionResultList)."""
    parens = len(types) != 1 or isinstance(types[0], FunctionType) or bool(attrs[0])
    if parens:
        printer.print_string("(")
    for i, (ty, attr) in enumerate(zip(types, attrs)):
        if i:
            printer.print_string(", ")
        printer.print_attribute(ty)
        if attr:
            printer.print_string(" ")
            printer.print_attr_dict(attr)
    if parens:
        printer.print_string(")")


def parse_result_list(parser: Parser) -> tuple[list[Attribute], list[dict[str, Attribute]]]:
    """After `->`: a single type, or a parenthesized list of types with attributes."""
    if parser.parse_optional_punctuation("(") is None:
        return [parser.parse_type()], [{}]
    types: list[Attribute] = []
    attrs: list[dict[str, Attribute]] = []
    if parser.parse_optional_punctuation(")") is not None:
        return types, attrs
    while True:
        types.append(parser.parse_type())
        attr = parser.parse_optional_attr_dict()
        attrs.append(attr)
        parser.parse_optional_location()
        if parser.parse_optional_punctuation(",") is None:
            break
    parser.parse_punctuation(")")
    return types, attrs


@irdl_op_definition
class FuncOp(xfunc.FuncOp):
    """xDSL's func.func, parsed and printed with MLIR's function syntax."""

    body = region_def()
    sym_name = prop_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    sym_visibility = opt_prop_def(StringAttr)
    arg_attrs = opt_prop_def(ArrayAttr[DictionaryAttr])
    res_attrs = opt_prop_def(ArrayAttr[DictionaryAttr])

    traits = traits_def(
        IsolatedFromAbove(), SymbolOpInterface(), xfunc.FuncOpCallableInterface()
    )

    def verify_(self) -> None:
        block = self.body.blocks.first
        if block is None:
            return
        inputs = self.function_type.inputs.data
        if len(block.args) != len(inputs):
            raise VerifyException(
                f"'func.func' op entry block must have {len(inputs)} arguments to match "
                "function signature"
            )
        for i, (arg, ty) in enumerate(zip(block.args, inputs)):
            if arg.type != ty:
                raise VerifyException(
                    f"'func.func' op type of entry block argument #{i}({arg.type}) must "
                    "match the type of the corresponding argument in function "
                    f"signature({ty})"
                )

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        visibility = parser.parse_optional_visibility_keyword()
        name = parser.parse_symbol_name().data
        entry_args: list[Parser.Argument] = []
        inputs: list[Attribute] = []
        arg_attrs: list[dict[str, Attribute]] = []

        def parse_input() -> None:
            arg = parser.parse_optional_argument()
            if arg is not None:
                if len(entry_args) != len(inputs):
                    parser.raise_error("expected type instead of SSA identifier")
                entry_args.append(arg)
                assert arg.type is not None
                inputs.append(arg.type)
            else:
                if entry_args:
                    parser.raise_error("expected SSA identifier")
                inputs.append(parser.parse_type())
            arg_attrs.append(parser.parse_optional_attr_dict())
            loc = parser.parse_optional_location()
            if arg is not None and loc is not None:
                arg.location = loc  # pyright: ignore[reportAttributeAccessIssue]

        parser.parse_comma_separated_list(parser.Delimiter.PAREN, parse_input)
        outputs: list[Attribute] = []
        res_attrs: list[dict[str, Attribute]] = []
        if parser.parse_optional_punctuation("->") is not None:
            outputs, res_attrs = parse_result_list(parser)
        extra = parser.parse_optional_attr_dict_with_keyword(_RESERVED)
        region = parser.parse_optional_region(entry_args)
        if region is None:
            region = Region()
        op = cls(
            name,
            (inputs, outputs),
            region,
            visibility,
            arg_attrs=_attrs_array(arg_attrs),
            res_attrs=_attrs_array(res_attrs),
        )
        if extra is not None:
            op.attributes |= extra.data
        return op

    def print(self, printer: Printer) -> None:
        if self.sym_visibility is not None:
            printer.print_string(f" {self.sym_visibility.data}")
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        inputs = self.function_type.inputs.data
        outputs = self.function_type.outputs.data
        arg_attrs = _attr_dicts(self.arg_attrs, len(inputs))
        block = self.body.blocks.first
        printer.print_string("(")
        for i, ty in enumerate(inputs):
            if i:
                printer.print_string(", ")
            if block is None:
                printer.print_attribute(ty)
                if arg_attrs[i]:
                    printer.print_string(" ")
                    printer.print_attr_dict(arg_attrs[i])
            else:
                _print_argument(printer, block.args[i], arg_attrs[i])
        printer.print_string(")")
        if outputs:
            printer.print_string(" -> ")
            print_result_list(printer, outputs, _attr_dicts(self.res_attrs, len(outputs)))
        printer.print_op_attributes(
            self.attributes, reserved_attr_names=_RESERVED, print_keyword=True
        )
        if block is not None:
            printer.print_string(" ")
            printer.print_region(self.body, print_entry_block_args=False)


def _print_argument(printer: Printer, arg: SSAValue, attrs: dict[str, Attribute]) -> None:
    """`%arg0: t {attrs} loc(...)`, as MLIR's printRegionArgument."""
    printer.print_ssa_value(arg)
    printer.print_string(": ")
    printer.print_attribute(arg.type)
    if attrs:
        printer.print_string(" ")
        printer.print_attr_dict(attrs)
    if printer.print_debuginfo:
        printer.print_string(" ")
        printer.print_attribute(arg.location)  # pyright: ignore[reportAttributeAccessIssue]


@irdl_op_definition
class CallIndirectOp(IRDLOperation):
    """Call a function value: `call_indirect %f(%a) : (i32) -> i32`."""

    name = "func.call_indirect"

    callee = operand_def(FunctionType)
    callee_operands = var_operand_def()
    results_ = var_result_def()
    arg_attrs = opt_prop_def(ArrayAttr[DictionaryAttr])
    res_attrs = opt_prop_def(ArrayAttr[DictionaryAttr])

    def __init__(self, callee: SSAValue, arguments: Sequence[SSAValue]):
        assert isinstance(callee.type, FunctionType)
        super().__init__(
            operands=[callee, arguments], result_types=[callee.type.outputs.data]
        )

    @classmethod
    def parse(cls, parser: Parser) -> CallIndirectOp:
        callee = parser.parse_unresolved_operand()
        args = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        ty = parser.parse_type()
        if not isinstance(ty, FunctionType):
            parser.raise_error("expected function type", at_position=pos)
        if len(args) != len(ty.inputs.data):
            parser.raise_error(
                f"{len(args)} operands present, but expected {len(ty.inputs.data)}"
            )
        return cls.build(
            operands=[
                parser.resolve_operand(callee, ty),
                [parser.resolve_operand(a, t) for a, t in zip(args, ty.inputs.data)],
            ],
            attributes=attrs,
            result_types=[ty.outputs.data],
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.callee)
        printer.print_string("(")
        printer.print_list(self.callee_operands, printer.print_operand)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.callee.type)

    def verify_(self) -> None:
        ty = self.callee.type
        assert isinstance(ty, FunctionType)
        if tuple(o.type for o in self.callee_operands) != ty.inputs.data:
            raise VerifyException(
                "'func.call_indirect' op failed to verify that callee input types match "
                "argument types"
            )
        if tuple(r.type for r in self.results_) != ty.outputs.data:
            raise VerifyException(
                "'func.call_indirect' op failed to verify that callee result types match "
                "result types"
            )


class _ConstantSymbolUse(SymbolUserOpInterface):
    def verify(self, op: IRDLOperation) -> None:
        assert isinstance(op, ConstantOp)
        from xdsl.traits import SymbolTable

        fn = SymbolTable.lookup_symbol(op, op.value)
        if not isinstance(fn, xfunc.FuncOp):
            raise VerifyException(
                f"'func.constant' op reference to undefined function '{op.value.string_value()}'"
            )
        if fn.function_type != op.result.type:
            raise VerifyException(
                "'func.constant' op reference to function with mismatched type"
            )


@lazy_format_op_definition
class ConstantOp(IRDLOperation):
    """A function symbol as an SSA value: `%f = constant @g : (i32) -> i32`."""

    name = "func.constant"

    value = prop_def(FlatSymbolRefAttrConstr)
    result = result_def(FunctionType)

    traits = traits_def(Pure(), _ConstantSymbolUse())

    assembly_format = "attr-dict $value `:` type($result)"

    def __init__(self, value: str | FlatSymbolRefAttr, type: FunctionType):
        if isinstance(value, str):
            value = SymbolRefAttr(value)
        super().__init__(properties={"value": value}, result_types=[type])

    def get_asm_result_names(self) -> Sequence[str | None]:
        """MLIR names every result `%f`."""
        return ("f",)


Func = extend_dialect(xfunc.Func, [FuncOp, CallIndirectOp, ConstantOp])
