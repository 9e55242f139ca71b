"""The linalg overlay: linalg.batch_matmul and linalg.map, which xDSL lacks, and
linalg.reduce with MLIR's short form.

MLIR prints a map or reduce whose body is one op applied to the block arguments in order
(`%in`s for map, `%in, %init` reversed for reduce) in the short form `{ arith.addf }`,
and parses it back into that body. batch_matmul's body is MLIR's `addf(acc, mul)`
(xDSL's own linalg.matmul builds `addf(mul, acc)`, visible in generic form).

https://mlir.llvm.org/docs/Dialects/Linalg/
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects import linalg as xlinalg
from xdsl.dialects.linalg import ops as xlinalg_ops
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    DenseArrayBase,
    MemRefType,
    TensorType,
    i64,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import YieldOp
from xdsl.dialects.linalg.abstract_ops import NamedOperation
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import (
    IRDLOperation,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import RecursiveMemoryEffect

from shardc.dialects.overlays import extend_dialect
from shardc.dialects.overlays import op_error as _error

_Shaped = base(MemRefType) | base(TensorType)


def _element_type(value: SSAValue) -> Attribute:
    ty = value.type
    return ty.get_element_type() if isinstance(ty, MemRefType | TensorType) else ty


def _mul_add_region(inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
    """The contraction body MLIR builds: `acc + a * b`."""
    types = NamedOperation.body_arg_types((*inputs, *outputs))
    add, mul = (
        (arith.AddfOp, arith.MulfOp)
        if isinstance(types[-1], AnyFloat)
        else (arith.AddiOp, arith.MuliOp)
    )

    @Builder.implicit_region(types)
    def body(args: tuple[BlockArgument, ...]) -> None:
        product = mul(args[0], args[1])
        YieldOp(add(args[2], product))

    return body


@irdl_op_definition
class BatchMatmulOp(NamedOperation):
    """A batch of matrix products: `C[b, m, n] += A[b, m, k] * B[b, k, n]`."""

    name = "linalg.batch_matmul"

    PRINT_ATTRS_IN_FRONT: ClassVar[bool] = True

    indexing_maps = prop_def(
        ArrayAttr[AffineMapAttr],
        default_value=ArrayAttr(
            [
                AffineMapAttr(AffineMap.from_callable(lambda b, m, n, k: (b, m, k))),
                AffineMapAttr(AffineMap.from_callable(lambda b, m, n, k: (b, k, n))),
                AffineMapAttr(AffineMap.from_callable(lambda b, m, n, k: (b, m, n))),
            ]
        ),
    )

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        outputs: Sequence[SSAValue],
        res: Sequence[Attribute] | None = None,
    ):
        if res is None:
            res = [o.type for o in outputs if isinstance(o.type, TensorType)]
        super().__init__(
            ins=inputs,
            outs=outputs,
            result_types=res,
            hidden_region=self.get_hidden_region(inputs, outputs),
        )

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        return _mul_add_region(inputs, outputs)

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        return tuple(m.data for m in self.indexing_maps.data)

    def get_indexing_maps(self) -> ArrayAttr[AffineMapAttr]:
        return self.indexing_maps

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        p, r = IteratorTypeAttr.parallel(), IteratorTypeAttr.reduction()
        return ArrayAttr([p, p, p, r])

    def print(self, printer: Printer) -> None:
        # The default maps are not printed; others would need `indexing_maps = [...]`.
        props = dict(self.properties)
        if props.get("indexing_maps") == type(self).get_irdl_definition().properties["indexing_maps"].default_value:
            self.properties.pop("indexing_maps", None)
            try:
                super().print(printer)
            finally:
                self.properties.update(props)
        else:
            super().print(printer)


# ---------------------------------------------------------------------------
# Short form `{ dialect.op }` of map and reduce
# ---------------------------------------------------------------------------


def _payload_op(region: Region, operands: Sequence[SSAValue]) -> Operation | None:
    """The single op of a body `op(operands...); yield op`, if the body is that."""
    block = region.blocks.first
    if block is None:
        return None
    ops = list(block.ops)
    if len(ops) != 2 or not isinstance(ops[1], YieldOp):
        return None
    payload = ops[0]
    if (
        len(payload.results) != 1
        or payload.regions
        or tuple(payload.operands) != tuple(operands)
        or tuple(ops[1].operands) != (payload.results[0],)
        or payload.attributes
    ):
        return None
    fastmath = payload.properties.get("fastmath")
    if any(k != "fastmath" for k in payload.properties) or (
        fastmath is not None and fastmath != arith.FastMathFlagsAttr("none")
    ):
        return None
    return payload


def _parse_short_form(parser: Parser) -> str | None:
    """`{ dialect.op }` -> the op name."""
    if parser.parse_optional_punctuation("{") is None:
        return None
    name = parser.parse_identifier()
    parser.parse_punctuation("}")
    return name


def _build_payload(parser: Parser, name: str, arg_types: Sequence[Attribute], operand_order: Sequence[int]) -> Region:
    op_def = parser.ctx.get_optional_op(name)
    if op_def is None:
        parser.raise_error(f"custom op '{name}' is unknown")
    block = Block(arg_types=arg_types)
    operands = [block.args[i] for i in operand_order]
    result_type = arg_types[-1]
    payload = op_def.create(operands=operands, result_types=[result_type])
    if issubclass(op_def, IRDLOperation):
        for prop_name, prop in op_def.get_irdl_definition().properties.items():
            default = getattr(prop, "default_value", None)
            if default is not None:
                payload.properties[prop_name] = default
    block.add_ops([payload, YieldOp(payload.results[0])])
    return Region(block)


def _parse_ins_outs(parser: Parser, keyword: str) -> list[SSAValue]:
    parser.parse_keyword(keyword)
    parser.parse_punctuation("(")
    pos = parser.pos
    names = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_unresolved_operand)
    parser.parse_punctuation(":")
    types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
    parser.parse_punctuation(")")
    return list(parser.resolve_operands(names, types, pos))


def _print_ins_outs(printer: Printer, keyword: str, values: Sequence[SSAValue]) -> None:
    printer.print_string(f" {keyword}(")
    printer.print_list(values, printer.print_operand)
    printer.print_string(" : ")
    printer.print_list([v.type for v in values], printer.print_attribute)
    printer.print_string(")")


def _print_long_body(printer: Printer, region: Region) -> None:
    with printer.indented():
        printer._print_new_line()  # pyright: ignore[reportPrivateUsage]
        printer.print_string("(")
        printer.print_list(region.block.args, printer.print_block_argument)
        printer.print_string(") ")
        printer.print_region(region, print_entry_block_args=False)


@irdl_op_definition
class MapOp(IRDLOperation):
    """Apply the body elementwise to the inputs, writing `init`; on tensors it returns
    the result."""

    name = "linalg.map"

    inputs = var_operand_def(_Shaped)
    init = operand_def(_Shaped)
    result = var_result_def(TensorType)
    mapper = region_def("single_block")

    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self, inputs: Sequence[SSAValue], init: SSAValue, mapper: Region
    ):
        res = [init.type] if isinstance(init.type, TensorType) else []
        super().__init__(operands=[inputs, init], result_types=[res], regions=[mapper])

    def verify_(self) -> None:
        init_type = self.init.type
        assert isinstance(init_type, TensorType | MemRefType)
        block = self.mapper.block
        if len(block.args) != len(self.inputs) + 1:
            raise _error(
                self,
                f"expects number of operands to match the arity of mapper, but got: "
                f"{len(self.inputs) + 1} and {len(block.args)}",
            )
        for i, (value, arg) in enumerate(zip([*self.inputs, self.init], block.args)):
            if _element_type(value) != arg.type:
                raise _error(
                    self,
                    f"expected element type of input {_element_type(value)} to match "
                    f"bbArg type {arg.type}",
                )
            ty = value.type
            assert isinstance(ty, TensorType | MemRefType)
            if ty.get_shape() != init_type.get_shape():
                raise _error(
                    self,
                    f"expected shape of input ({', '.join(map(str, ty.get_shape()))}) to match "
                    f"shape of output ({', '.join(map(str, init_type.get_shape()))})",
                )
        if isinstance(init_type, TensorType) and len(self.result) != 1:
            raise _error(self, "expected one result for a tensor init")

    @classmethod
    def parse(cls, parser: Parser) -> MapOp:
        short = _parse_short_form(parser)
        inputs = _parse_ins_outs(parser, "ins")
        (init,) = _parse_ins_outs(parser, "outs")
        attrs = parser.parse_optional_attr_dict()
        arg_types = [_element_type(v) for v in (*inputs, init)]
        if short is not None:
            region = _build_payload(parser, short, arg_types, range(len(inputs)))
        else:
            args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
            region = parser.parse_region(args)
        op = cls(inputs, init, region)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        payload = _payload_op(self.mapper, self.mapper.block.args[: len(self.inputs)])
        if payload is not None:
            printer.print_string(f" {{ {payload.name} }}")
        _print_ins_outs(printer, "ins", self.inputs)
        _print_ins_outs(printer, "outs", [self.init])
        printer.print_op_attributes(self.attributes)
        if payload is None:
            _print_long_body(printer, self.mapper)


@irdl_op_definition
class ReduceOp(xlinalg_ops.ReduceOp):
    """xDSL's linalg.reduce with MLIR's short form `linalg.reduce { arith.addf }`."""

    input = operand_def(_Shaped)
    init = operand_def(_Shaped)
    result = var_result_def(TensorType)
    region = region_def("single_block")
    dimensions = prop_def(DenseArrayBase.constr(i64))

    @classmethod
    def parse(cls, parser: Parser) -> ReduceOp:
        short = _parse_short_form(parser)
        (input,) = _parse_ins_outs(parser, "ins")
        (init,) = _parse_ins_outs(parser, "outs")
        parser.parse_keyword("dimensions")
        parser.parse_punctuation("=")
        dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        attrs = parser.parse_optional_attr_dict()
        if short is not None:
            region = _build_payload(parser, short, [_element_type(input), _element_type(init)], (1, 0))
        else:
            args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
            region = parser.parse_region(args)
        op = cls(input, init, DenseArrayBase.from_list(i64, dims), region)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        args = self.region.block.args
        payload = _payload_op(self.region, (args[1], args[0])) if len(args) == 2 else None
        if payload is not None:
            printer.print_string(f" {{ {payload.name} }}")
        _print_ins_outs(printer, "ins", [self.input])
        _print_ins_outs(printer, "outs", [self.init])
        printer.print_string(" dimensions = [")
        printer.print_string(", ".join(str(d) for d in self.dimensions.get_values()))
        printer.print_string("] ")
        printer.print_op_attributes(self.attributes)
        if payload is None:
            _print_long_body(printer, self.region)


Linalg = extend_dialect(xlinalg.Linalg, [BatchMatmulOp, MapOp, ReduceOp])
