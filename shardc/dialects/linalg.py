"""The linalg overlay: linalg.batch_matmul and linalg.map, which xDSL lacks;
linalg.reduce with MLIR's short form; linalg.generic with MLIR's multi-result syntax
(`%r:2 = linalg.generic ... -> (t1, t2)`, as torch-mlir writes max/argmax) and sorted
leading dictionary; linalg.matmul with MLIR's body.

MLIR prints a map or reduce whose body is one op applied to the block arguments in order
(`%in`s for map, `%in, %init` reversed for reduce) in the short form `{ arith.addf }`,
and parses it back into that body. The bodies of batch_matmul and matmul are MLIR's
`addf(acc, mul)` (xDSL's own linalg.matmul builds `addf(mul, acc)`, visible in generic
form). The convolution and pooling ops are `shardc.dialects.linalg_conv`'s.

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
    IntegerType,
    MemRefType,
    ShapedType,
    StringAttr,
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
    SameVariadicOperandSize,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from shardc.dialects.linalg_conv import WINDOW_OPS
from shardc.dialects.overlays import extend_dialect
from shardc.dialects.overlays import op_error
from shardc.ir.op_init import create_op
from shardc.ir.segments import ins_outs
from shardc.ir.linalg_build import body_arg_types, fast_named_build, generic_op, iterator_types_attr, yield_first

_Shaped = base(MemRefType) | base(TensorType)
_SEGMENTS = "operandSegmentSizes"


def _element_type(value: SSAValue) -> Attribute:
    ty = value.type
    return ty.get_element_type() if isinstance(ty, MemRefType | TensorType) else ty


def _cast_to(value: SSAValue, to: Attribute) -> SSAValue:
    """`value` as `to`, cast as MLIR's named ops cast operands (`cast_signed`)."""
    src = value.type
    if src == to:
        return value
    src_float, to_float = isinstance(src, AnyFloat), isinstance(to, AnyFloat)
    if src_float and to_float:
        assert isinstance(src, AnyFloat) and isinstance(to, AnyFloat)
        cast = arith.ExtFOp(value, to) if to.bitwidth > src.bitwidth else arith.TruncFOp(value, to)
    elif to_float:
        cast = arith.SIToFPOp(value, to)
    elif src_float:
        cast = arith.FPToSIOp(value, to)
    else:
        assert isinstance(src, IntegerType) and isinstance(to, IntegerType)
        cast = arith.ExtSIOp(value, to) if to.width.data > src.width.data else arith.TruncIOp(value, to)
    return cast.result


def _mul_add_region(inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
    """The contraction body MLIR builds: `acc + cast(a) * cast(b)`, the operands cast
    to the accumulator's element type."""
    types = body_arg_types((*inputs, *outputs))
    if len(types) == 3 and types[0] == types[1] == types[2] and isinstance(types[2], AnyFloat):
        # The common case (no casts), made directly: the builder's implicit insertion
        # is most of the cost of parsing a matmul. The same ops, defaults included.
        block = Block(arg_types=types)
        a, b, acc = block.args
        product = create_op(arith.MulfOp, operands=(a, b), result_types=(types[2],))
        total = create_op(arith.AddfOp, operands=(acc, product.results[0]), result_types=(types[2],))
        block.add_ops((product, total, create_op(YieldOp, operands=(total.results[0],))))
        return Region(block)
    add, mul = (
        (arith.AddfOp, arith.MulfOp)
        if isinstance(types[-1], AnyFloat)
        else (arith.AddiOp, arith.MuliOp)
    )

    @Builder.implicit_region(types)
    def body(args: tuple[BlockArgument, ...]) -> None:
        product = mul(_cast_to(args[0], types[-1]), _cast_to(args[1], types[-1]))
        YieldOp(add(args[2], product))

    return body


@irdl_op_definition
class BatchMatmulOp(NamedOperation):
    """A batch of matrix products: `C[b, m, n] += A[b, m, k] * B[b, k, n]`."""

    name = "linalg.batch_matmul"

    PRINT_ATTRS_IN_FRONT: ClassVar[bool] = True

    build = classmethod(fast_named_build)  # the parser's builder, direct

    @classmethod
    def parse(cls, parser: Parser) -> BatchMatmulOp:
        return _parse_named(cls, parser)  # type: ignore[return-value]

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


@irdl_op_definition
class MatmulOp(xlinalg_ops.MatmulOp):
    """xDSL's linalg.matmul with MLIR's body `acc + a * b` (xDSL builds `a * b + acc`,
    visible in generic form)."""

    inputs = var_operand_def()
    outputs = var_operand_def(ShapedType)
    res = var_result_def(TensorType)
    body = region_def("single_block")
    indexing_maps = prop_def(
        ArrayAttr[AffineMapAttr],
        default_value=xlinalg_ops.MatmulOp.get_irdl_definition().properties["indexing_maps"].default_value,
    )

    build = classmethod(fast_named_build)  # the parser's builder, direct

    @classmethod
    def parse(cls, parser: Parser) -> MatmulOp:
        return _parse_named(cls, parser)  # type: ignore[return-value]

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        return _mul_add_region(inputs, outputs)

    def print(self, printer: Printer) -> None:
        _print_named(self, printer)


def _parse_named(cls: type[NamedOperation], parser: Parser) -> NamedOperation:
    """`NamedOperation.parse`, its plain form (`ins(...) outs(...) -> t`) read at once by
    a `FastParser` (`parse_named_operands_fast`); the same op."""
    fast = getattr(parser, "parse_named_operands_fast", None)
    found = fast() if fast is not None else None
    if found is None:
        return NamedOperation.parse.__func__(cls, parser)  # type: ignore[attr-defined]
    ins, outs, res_types = found
    try:
        return cls.build(
            operands=(ins, outs),
            result_types=(res_types,),
            properties={},
            attributes={},
            regions=(cls.get_hidden_region(ins, outs),),
        )
    except ValueError:
        parser.raise_error("Could not build linalg op")


_NOT_PRINTED = ("indexing_maps", "linalg.memoized_indexing_maps", "iterator_types", "doc", "library_call", _SEGMENTS)


def _print_named(op: NamedOperation, printer: Printer) -> None:
    """`NamedOperation.print` for the common case (no extra attributes, the operands
    split by their segment sizes), reading the operands directly instead of through
    the `inputs`/`outputs` accessors (one generic descriptor call per access)."""
    sizes = op.properties.get(_SEGMENTS)
    operands = op.operands
    extra = any(k not in _NOT_PRINTED for k in op.attributes) or any(k not in _NOT_PRINTED for k in op.properties)
    if extra or not isinstance(sizes, DenseArrayBase):
        NamedOperation.print(op, printer)
        return
    counts = sizes.get_values()
    if len(counts) != 2 or counts[0] + counts[1] != len(operands):
        NamedOperation.print(op, printer)
        return
    ins, outs = operands[: counts[0]], operands[counts[0] :]
    for word, values in ((" ins(", ins), (" outs(", outs)):
        if values:
            printer.print_string(word)
            printer.print_list(values, printer.print_ssa_value)
            printer.print_string(" : ")
            printer.print_list([v.type for v in values], printer.print_attribute)
            printer.print_string(")")
    results = op.results
    if results:
        printer.print_string(" -> ")
        if len(results) == 1:
            printer.print_attribute(results[0].type)
        else:
            with printer.in_parens():
                printer.print_list(results, lambda r: printer.print_attribute(r.type))


@irdl_op_definition
class FillOp(xlinalg_ops.FillOp):
    """xDSL's linalg.fill, parsed and built without the generic builder and
    `Builder.implicit_region` (`shardc.ir.linalg_build`): the same op."""

    inputs = var_operand_def()
    outputs = var_operand_def(ShapedType)
    res = var_result_def(TensorType)
    body = region_def("single_block")

    build = classmethod(fast_named_build)

    @classmethod
    def parse(cls, parser: Parser) -> FillOp:
        return _parse_named(cls, parser)  # type: ignore[return-value]

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        return yield_first(body_arg_types((*inputs, *outputs)))

    def print(self, printer: Printer) -> None:
        _print_named(self, printer)

    def _shape_key(self) -> tuple[int, int, int]:
        inputs, outputs = ins_outs(self)  # asked once per op and pass
        output_type = outputs[0].type
        assert isinstance(output_type, ShapedType)
        return len(inputs), len(outputs), len(output_type.get_shape())

    # The maps and iterator types depend only on the operand counts and the rank;
    # xDSL builds them anew on every call (the passes ask for them per op).
    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        key = self._shape_key()
        if (found := _FILL_MAPS.get(key)) is None:
            found = _FILL_MAPS[key] = tuple(super().get_default_indexing_maps())
        return found

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        key = self._shape_key()
        if (found := _FILL_ITERATORS.get(key)) is None:
            found = _FILL_ITERATORS[key] = super().get_iterator_types()
        return found


_FILL_MAPS: dict[tuple[int, int, int], tuple[AffineMap, ...]] = {}
_FILL_ITERATORS: dict[tuple[int, int, int], ArrayAttr[IteratorTypeAttr]] = {}


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


def _parse_ins_outs(parser: Parser, keyword: str | None) -> list[SSAValue]:
    """`keyword(%a, %b : t, u)` (the keyword already read when None)."""
    if keyword is not None:
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
            raise op_error(
                self,
                f"expects number of operands to match the arity of mapper, but got: "
                f"{len(self.inputs) + 1} and {len(block.args)}",
            )
        for i, (value, arg) in enumerate(zip([*self.inputs, self.init], block.args)):
            if _element_type(value) != arg.type:
                raise op_error(
                    self,
                    f"expected element type of input {_element_type(value)} to match "
                    f"bbArg type {arg.type}",
                )
            ty = value.type
            assert isinstance(ty, TensorType | MemRefType)
            if ty.get_shape() != init_type.get_shape():
                raise op_error(
                    self,
                    f"expected shape of input ({', '.join(map(str, ty.get_shape()))}) to match "
                    f"shape of output ({', '.join(map(str, init_type.get_shape()))})",
                )
        if isinstance(init_type, TensorType) and len(self.result) != 1:
            raise op_error(self, "expected one result for a tensor init")

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
    """xDSL's linalg.reduce with MLIR's variadic operands (`ins(%a, %b : ...) outs(%x,
    %y : ...)`, several inputs reduced together, one result per init) and its short
    form `linalg.reduce { arith.addf }`.

    xDSL's fields `input` and `init` stay the first input and init (what code written
    for one-input reductions reads); the others are `extra_inputs` / `extra_inits`,
    and `inputs` / `inits` are all of them. The operands are MLIR's (inputs, then
    inits), split evenly (SameVariadicOperandSize)."""

    input = operand_def(_Shaped)
    extra_inputs = var_operand_def(_Shaped)
    init = operand_def(_Shaped)
    extra_inits = var_operand_def(_Shaped)
    result = var_result_def(TensorType)
    region = region_def("single_block")
    dimensions = prop_def(DenseArrayBase.constr(i64))

    irdl_options = (SameVariadicOperandSize(),)

    def __init__(
        self,
        input: SSAValue | Sequence[SSAValue],
        init: SSAValue | Sequence[SSAValue],
        dimensions: Attribute,
        region: Region,
    ):
        inputs = [input] if isinstance(input, SSAValue) else list(input)
        inits = [init] if isinstance(init, SSAValue) else list(init)
        IRDLOperation.__init__(
            self,
            properties={"dimensions": dimensions},
            operands=[inputs[0], inputs[1:], inits[0], inits[1:]],
            regions=[region],
            result_types=[[v.type for v in inits if isinstance(v.type, TensorType)]],
        )

    @property
    def inputs(self) -> Sequence[SSAValue]:
        return (self.input, *self.extra_inputs)

    @property
    def inits(self) -> Sequence[SSAValue]:
        return (self.init, *self.extra_inits)

    def verify_(self) -> None:
        # Not xDSL's: its generated verify_ checks one input and one init.
        dims = self.dimensions.get_values()
        for input, init in zip(self.inputs, self.inits):
            in_t, init_t = input.type, init.type
            assert isinstance(in_t, TensorType | MemRefType) and isinstance(init_t, TensorType | MemRefType)
            if in_t.get_element_type() != init_t.get_element_type():
                raise VerifyException(
                    f"Reduction element types must be equal, but input is {in_t.get_element_type()} "
                    f"and init is {init_t.get_element_type()}"
                )
            in_shape, init_shape = in_t.get_shape(), init_t.get_shape()
            if len(init_shape) != len(in_shape) - len(dims):
                raise VerifyException(
                    "Output rank must equal input rank minus number of dimensions being reduced over"
                )
            kept = [d for d in range(len(in_shape)) if d not in dims]
            for j, d in enumerate(kept):
                if in_shape[d] != init_shape[j]:
                    raise VerifyException(f"Non-reduced input dimension {d} must equal output dimension {j}")
        args = self.region.block.args
        if len(args) != 2 * len(self.inputs):
            raise op_error(
                self,
                f"mismatching number of operands and block arguments: expected {2 * len(self.inputs)}, "
                f"got {len(args)}",
            )

    @classmethod
    def parse(cls, parser: Parser) -> ReduceOp:
        short = _parse_short_form(parser)
        start = parser.pos
        inputs = _parse_ins_outs(parser, "ins")
        inits = _parse_ins_outs(parser, "outs")
        if not inputs or len(inputs) != len(inits):
            parser.raise_error(
                f"linalg.reduce needs as many inits as inputs, got {len(inputs)} and {len(inits)}", start, parser.pos
            )
        parser.parse_keyword("dimensions")
        parser.parse_punctuation("=")
        dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        attrs = parser.parse_optional_attr_dict()
        if short is not None:
            if len(inputs) != 1:
                parser.raise_error("the short form `{ op }` of linalg.reduce takes one input", start, parser.pos)
            region = _build_payload(parser, short, [_element_type(inputs[0]), _element_type(inits[0])], (1, 0))
        else:
            args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
            region = parser.parse_region(args)
        op = cls(inputs, inits, DenseArrayBase.from_list(i64, dims), region)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        # also prints xDSL's ReduceOp (one input, one init)
        inputs = getattr(self, "inputs", (self.input,))
        inits = getattr(self, "inits", (self.init,))
        args = self.region.block.args
        payload = _payload_op(self.region, (args[1], args[0])) if len(args) == 2 else None
        if payload is not None:
            printer.print_string(f" {{ {payload.name} }}")
        _print_ins_outs(printer, "ins", inputs)
        _print_ins_outs(printer, "outs", inits)
        printer.print_string(" dimensions = [")
        printer.print_string(", ".join(str(d) for d in self.dimensions.get_values()))
        printer.print_string("] ")
        printer.print_op_attributes(self.attributes)
        if payload is None:
            _print_long_body(printer, self.region)


@irdl_op_definition
class GenericOp(xlinalg_ops.GenericOp):
    """xDSL's linalg.generic, parsing MLIR's `-> (t1, t2)` result list of a multi-result
    generic (xDSL's parser reads only a bare list)."""

    inputs = var_operand_def()
    outputs = var_operand_def(ShapedType)
    res = var_result_def(TensorType)
    body = region_def("single_block")
    indexing_maps = prop_def(ArrayAttr[AffineMapAttr])
    iterator_types = prop_def(ArrayAttr[IteratorTypeAttr])
    doc = opt_prop_def(StringAttr)
    library_call = opt_prop_def(StringAttr)

    @classmethod
    def parse(cls, parser: Parser) -> GenericOp:
        start = parser.pos
        attrs = parser.parse_optional_attr_dict()
        end = parser.pos
        traits: dict[str, Attribute] = {}
        for name in ("indexing_maps", "iterator_types", "doc", "library_call"):
            if name in attrs:
                traits[name] = attrs.pop(name)
        for name in ("indexing_maps", "iterator_types"):
            if not isinstance(traits.get(name), ArrayAttr):
                parser.raise_error(f"Expected {name} for linalg.generic", start, end)
        iterators = iterator_types_attr(traits["iterator_types"])  # pyright: ignore[reportArgumentType]
        if not isinstance(iterators, ArrayAttr):
            parser.raise_error(f"Unknown iterator type {iterators}", start, end)
        inputs = _parse_ins_outs(parser, None) if parser.parse_optional_characters("ins") else []
        outputs = _parse_ins_outs(parser, None) if parser.parse_optional_characters("outs") else []
        extra: dict[str, Attribute] = {}
        if parser.parse_optional_keyword("attrs"):
            parser.parse_punctuation("=")
            extra = parser.expect(parser.parse_optional_attr_dict, "expect extra attributes")
        body = parser.parse_region()
        results: list[Attribute] = []
        if parser.parse_optional_punctuation("->"):
            if parser._current_token.text == "(":  # pyright: ignore[reportPrivateUsage]
                results = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
            else:
                results = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        # What `cls(inputs, outputs, body, maps, iterators, results, doc, library_call)`
        # makes, without xDSL's generic builder (`linalg_build.generic_op`)
        op = generic_op(
            cls,
            inputs,
            outputs,
            body,
            traits["indexing_maps"],  # pyright: ignore[reportArgumentType]
            iterators,
            results,
            traits.get("doc"),
            traits.get("library_call"),
        )
        op.attributes |= attrs | extra
        return op

    def print(self, printer: Printer) -> None:
        # MLIR's leading dictionary is sorted: doc, indexing_maps, iterator_types, library_call
        printer.print_string(" {")
        if self.doc is not None:
            printer.print_string("doc = ")
            printer.print_attribute(self.doc)
            printer.print_string(", ")
        printer.print_string("indexing_maps = ")
        printer.print_attribute(self.indexing_maps)
        printer.print_string(", iterator_types = [")
        printer.print_list(self.iterator_types, lambda it: printer.print_string_literal(it.data))
        printer.print_string("]")
        if self.library_call is not None:
            printer.print_string(", library_call = ")
            printer.print_attribute(self.library_call)
        printer.print_string("}")
        inputs, outputs = ins_outs(self)
        if inputs:
            _print_ins_outs(printer, "ins", inputs)
        if outputs:
            _print_ins_outs(printer, "outs", outputs)
        if self.attributes:
            printer.print_string(" attrs = ")
            printer.print_op_attributes(self.attributes)
        printer.print_string(" ")
        printer.print_region(self.body)
        results = self.results  # the one result group
        if len(results) == 1:
            printer.print_string(" -> ")
            printer.print_attribute(results[0].type)
        elif results:
            printer.print_string(" -> (")
            printer.print_list(results.types, printer.print_attribute)
            printer.print_string(")")


Linalg = extend_dialect(xlinalg.Linalg, [BatchMatmulOp, MatmulOp, FillOp, MapOp, ReduceOp, GenericOp, *WINDOW_OPS])
