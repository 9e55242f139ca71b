"""torch-mlir's TMTensor dialect, the part its linalg-on-tensors output uses:
`tm_tensor.scatter` (the backward of `nn.Embedding`, of `F.cross_entropy`'s gather, of
`index_put`), `tm_tensor.scan` (`torch.cumsum`: position ids of OPT and RoBERTa,
transformers' packed-sequence check) and their terminator `tm_tensor.yield`.

    %r = tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(false)
           ins(%updates, %indices : tensor<8x1x16xf32>, tensor<8x1xi64>)
           outs(%original : tensor<8x16xf32>) {
    ^bb0(%u: f32, %o: f32):
      %s = arith.addf %o, %u : f32
      tm_tensor.yield %s : f32
    } -> tensor<8x16xf32>

Semantics (torch-mlir's TMTensorOps.td): `indices` is `N x depth`; `updates` is `N x
slice...`, the slice aligned with the trailing dimensions of `original`. Update
`(n, j...)` lands at the position whose trailing coordinates are `j...` (zero where the
slice does not reach) plus, on dimension `dimension_map[i]`, `indices[n, i]`; the region
combines (update, current) into the new value. With `unique_indices(false)` positions
may repeat, and the region is then a reduction over `n`.

    %r:2 = tm_tensor.scan dimension(1) inclusive(true)
             ins(%x : tensor<4x8xf32>) outs(%out, %acc : tensor<4x8xf32>, tensor<4xf32>) {
    ^bb0(%prev: f32, %cur: f32):
      %s = arith.addf %prev, %cur : f32
      tm_tensor.yield %s : f32
    } -> tensor<4x8xf32>, tensor<4xf32>

Semantics (torch-mlir's `ScanOp::generateScalarImplementation`), along `dimension`, f
the region applied to (previous output, input): inclusive, `out[0] = x[0]` and
`out[i] = f(out[i-1], x[i])`; exclusive, `out[0] = acc` (the accumulator's initial
value) and `out[i] = f(out[i-1], x[i-1])`. The accumulator result is the last slice of
`out` (the initial accumulator where the dimension has a single element: only the steps
after the first write it).

https://github.com/llvm/torch-mlir/blob/main/include/torch-mlir-dialects/Dialect/TMTensor/IR/TMTensorOps.td
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    AnyFloat,
    BoolAttr,
    DenseArrayBase,
    IntegerAttr,
    I64,
    IntegerType,
    MemRefType,
    ShapedType,
    TensorType,
    i1,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    base,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, Pure, RecursiveMemoryEffect

from shardc.dialects.lazy_format import lazy_format_op_definition
from shardc.dialects.overlays import op_error

_Shaped = base(MemRefType) | base(TensorType)


@lazy_format_op_definition
class YieldOp(IRDLOperation):
    """The terminator of a tm_tensor region."""

    name = "tm_tensor.yield"

    operands_ = var_operand_def()

    traits = traits_def(IsTerminator(), Pure())

    assembly_format = "attr-dict ($operands_^ `:` type($operands_))?"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[list(values)])


def _parse_group(parser: Parser, keyword: str) -> list[SSAValue]:
    parser.parse_punctuation("(")
    pos = parser.pos
    names = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_unresolved_operand)
    parser.parse_punctuation(":")
    types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
    parser.parse_punctuation(")")
    if len(names) != len(types):
        parser.raise_error(f"{len(names)} operands in `{keyword}` but {len(types)} types", pos, parser.pos)
    return list(parser.resolve_operands(names, types, pos))


def _print_group(printer: Printer, keyword: str, values: Sequence[SSAValue]) -> None:
    printer.print_string(f" {keyword}(")
    printer.print_list(values, printer.print_operand)
    printer.print_string(" : ")
    printer.print_list([v.type for v in values], printer.print_attribute)
    printer.print_string(")")


def _parse_result_types(parser: Parser) -> list[Attribute]:
    """`-> type, ...` or `-> (type, ...)` when present."""
    if parser.parse_optional_punctuation("->") is None:
        return []
    if parser.parse_optional_punctuation("(") is not None:
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        parser.parse_punctuation(")")
        return types
    return parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)


def _print_result_types(printer: Printer, results: Sequence[SSAValue]) -> None:
    if results:
        printer.print_string(" -> ")
        printer.print_list([r.type for r in results], printer.print_attribute)


@irdl_op_definition
class ScatterOp(IRDLOperation):
    """Combine `updates` into `original` at the positions `indices` names (see the module
    docstring); on tensors the result is the updated copy."""

    name = "tm_tensor.scatter"

    inputs = var_operand_def(_Shaped)
    outputs = var_operand_def(_Shaped)
    results_ = var_result_def(TensorType)
    dimension_map = prop_def(DenseArrayBase.constr(i64))
    unique_indices = prop_def(BoolAttr, default_value=IntegerAttr(1, i1))
    region = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        updates: SSAValue,
        indices: SSAValue,
        original: SSAValue,
        dimension_map: Sequence[int],
        unique_indices: bool,
        region: Region,
    ):
        res = [original.type] if isinstance(original.type, TensorType) else []
        super().__init__(
            operands=[[updates, indices], [original]],
            result_types=[res],
            properties={
                "dimension_map": DenseArrayBase.from_list(i64, list(dimension_map)),
                "unique_indices": IntegerAttr(int(unique_indices), i1),
            },
            regions=[region],
        )

    # -- accessors ------------------------------------------------------------------
    @property
    def updates(self) -> SSAValue:
        return self.inputs[0]

    @property
    def indices(self) -> SSAValue:
        return self.inputs[1]

    @property
    def original(self) -> SSAValue:
        return self.outputs[0]

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(self.dimension_map.get_values())

    @property
    def unique(self) -> bool:
        return bool(self.unique_indices.value.data)

    def verify_(self) -> None:
        if len(self.inputs) != 2:
            raise op_error(self, "expected two input operands")
        if len(self.outputs) != 1:
            raise op_error(self, "expected one output operand")
        upd_t, ind_t, orig_t = self.updates.type, self.indices.type, self.original.type
        assert isinstance(upd_t, ShapedType) and isinstance(ind_t, ShapedType) and isinstance(orig_t, ShapedType)
        ind_shape, upd_shape, orig_shape = ind_t.get_shape(), upd_t.get_shape(), orig_t.get_shape()
        if len(ind_shape) != 2 or not isinstance(ind_t.get_element_type(), IntegerType):
            raise op_error(self, "expected indices to be of rank 2 of integer element type")
        depth = ind_shape[1]
        if depth < 0:
            raise op_error(self, "expected index depth is static")
        dims = self.dims
        if len(dims) != depth:
            raise op_error(self, "invalid number of dimension map entries ")
        if len(set(dims)) != len(dims) or any(not 0 <= d < len(orig_shape) for d in dims):
            raise op_error(self, "dimension map is invalid")
        if len(upd_shape) < 1:
            raise op_error(self, "expected update value to be at least rank 1")
        if upd_shape[0] >= 0 and ind_shape[0] >= 0 and upd_shape[0] != ind_shape[0]:
            raise op_error(self, "mismatch in shape of indices and update value at dim#0")
        slice_rank = len(upd_shape) - 1
        if slice_rank > len(orig_shape):
            raise op_error(self, "update value rank exceeds the rank of the original value")
        if len(orig_shape) > depth + slice_rank:
            raise op_error(self, "index depth and update value does not cover rank of original value")
        offset = len(orig_shape) - slice_rank
        for k in range(slice_rank):
            u, o = upd_shape[1 + k], orig_shape[offset + k]
            if u >= 0 and o >= 0 and u > o:
                raise op_error(self, f"shape of update value dim#{1 + k} exceeds original value at dim#{offset + k}")
        block = self.region.block
        if len(block.args) != 2:
            raise op_error(self, "expected region to have two arguments")
        a0, a1 = (a.type for a in block.args)
        if not isinstance(a0, IntegerType | AnyFloat) or not isinstance(a1, IntegerType | AnyFloat):
            raise op_error(self, "expected region to have scalar argument of integer or float types")
        if a0 != upd_t.get_element_type():
            raise op_error(self, f"mismatch in argument 0 of region {a0} and element type of update value {upd_t.get_element_type()}")
        if a1 != orig_t.get_element_type():
            raise op_error(self, f"mismatch in argument 1 of region {a1} and element type of original value {orig_t.get_element_type()}")
        term = block.last_op
        if not isinstance(term, YieldOp) or len(term.operands) != 1:
            raise op_error(self, "expected region to yield a single value")
        if term.operands[0].type != a0:
            raise op_error(self, f"mismatch in type of yielded value {term.operands[0].type} and argument of the region {a0}")
        if isinstance(orig_t, TensorType) and (len(self.results_) != 1 or self.results_[0].type != orig_t):
            raise op_error(self, "expected one result of the original value's type")

    # -- syntax -----------------------------------------------------------------------
    @classmethod
    def parse(cls, parser: Parser) -> ScatterOp:
        attrs = parser.parse_optional_attr_dict()
        parser.parse_keyword("unique_indices")
        parser.parse_punctuation("(")
        unique = parser.parse_boolean()
        parser.parse_punctuation(")")
        inputs: list[SSAValue] = []
        if parser.parse_optional_keyword("ins") is not None:
            inputs = _parse_group(parser, "ins")
        parser.parse_keyword("outs")
        outputs = _parse_group(parser, "outs")
        region = parser.parse_region()
        result_types = _parse_result_types(parser)
        dim_map = attrs.pop("dimension_map", None)
        if not isinstance(dim_map, DenseArrayBase):
            parser.raise_error("'tm_tensor.scatter' op requires attribute 'dimension_map' (array<i64: ...>)")
        op = cls.create(
            operands=[*inputs, *outputs],
            result_types=result_types,
            properties={
                "dimension_map": dim_map,
                "unique_indices": IntegerAttr(int(unique), i1),
                "operandSegmentSizes": DenseArrayBase.from_list(IntegerType(32), [len(inputs), len(outputs)]),
            },
            attributes=attrs,
            regions=[region],
        )
        return op

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes({"dimension_map": self.dimension_map, **self.attributes})
        printer.print_string(f" unique_indices({'true' if self.unique else 'false'})")
        if self.inputs:
            _print_group(printer, "ins", self.inputs)
        _print_group(printer, "outs", self.outputs)
        printer.print_string(" ")
        printer.print_region(self.region)
        _print_result_types(printer, self.results_)


@irdl_op_definition
class ScanOp(IRDLOperation):
    """A prefix scan of `input` along `dimension` by the region's combiner into `output`,
    the last step's value into `accumulator` (see the module docstring); on tensors the
    results are the updated copies of both."""

    name = "tm_tensor.scan"

    inputs = var_operand_def(_Shaped)
    outputs = var_operand_def(_Shaped)
    results_ = var_result_def(TensorType)
    dimension = prop_def(IntegerAttr[I64])
    inclusive = prop_def(BoolAttr)
    region = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        input: SSAValue,
        output: SSAValue,
        accumulator: SSAValue,
        dimension: int,
        inclusive: bool,
        region: Region,
    ):
        res = [v.type for v in (output, accumulator) if isinstance(v.type, TensorType)]
        super().__init__(
            operands=[[input], [output, accumulator]],
            result_types=[res],
            properties={
                "dimension": IntegerAttr(dimension, i64),
                "inclusive": IntegerAttr(int(inclusive), i1),
            },
            regions=[region],
        )

    # -- accessors ------------------------------------------------------------------
    @property
    def input(self) -> SSAValue:
        return self.inputs[0]

    @property
    def output(self) -> SSAValue:
        return self.outputs[0]

    @property
    def accumulator(self) -> SSAValue:
        return self.outputs[1]

    @property
    def dim(self) -> int:
        return self.dimension.value.data

    @property
    def is_inclusive(self) -> bool:
        return bool(self.inclusive.value.data)

    def combiner(self) -> Operation | None:
        """The region's single op when it is of (previous, current), both, and yielded
        (`arith.addf %prev, %cur` for cumsum), else None: what a scan vectorizes and
        splits by."""
        block = self.region.block
        ops = list(block.ops)
        if len(ops) != 2 or len(block.args) != 2:
            return None
        first, term = ops
        if len(first.results) != 1 or len(first.operands) != 2 or tuple(term.operands) != (first.results[0],):
            return None
        if set(first.operands) != set(block.args):
            return None
        return first

    def verify_(self) -> None:
        # torch-mlir's checks and messages, plus what it leaves unchecked and the runtime
        # needs: the dimension in range, the region's two scalars and single yield
        if len(self.inputs) != 1:
            raise op_error(self, "expected one input operands")
        if len(self.outputs) != 2:
            raise op_error(self, "expected two output operands")
        in_t, out_t, acc_t = self.input.type, self.output.type, self.accumulator.type
        assert isinstance(in_t, ShapedType) and isinstance(out_t, ShapedType) and isinstance(acc_t, ShapedType)
        elem = in_t.get_element_type()
        in_shape, out_shape, acc_shape = in_t.get_shape(), out_t.get_shape(), acc_t.get_shape()
        if acc_t.get_element_type() != elem:
            raise op_error(self, "expected input/accumulator element types to be identical")
        if len(acc_shape) != len(in_shape) - 1:
            raise op_error(self, "expected accumulator rank to be equal to input rank - 1")
        dim = self.dim
        if not 0 <= dim < len(in_shape):
            raise op_error(self, f"dimension {dim} is out of range for an input of rank {len(in_shape)}")

        def clash(a: Sequence[int], b: Sequence[int]) -> bool:
            return any(x >= 0 and y >= 0 and x != y for x, y in zip(a, b))

        if clash([n for d, n in enumerate(in_shape) if d != dim], acc_shape):
            raise op_error(self, "incompatible input/accumulator shapes")
        if out_t.get_element_type() != elem:
            raise op_error(self, "expected input/output element types to be identical")
        if len(in_shape) != len(out_shape):
            raise op_error(self, "expected input/output to have identical ranks")
        if clash(in_shape, out_shape):
            raise op_error(self, "incompatible input/output shapes")
        block = self.region.block
        if len(block.args) != 2 or any(a.type != elem for a in block.args):
            raise op_error(self, f"expected region to have two arguments of the element type {elem}")
        term = block.last_op
        if not isinstance(term, YieldOp) or len(term.operands) != 1 or term.operands[0].type != elem:
            raise op_error(self, f"expected region to yield a single value of the element type {elem}")
        tensors = [t for t in (out_t, acc_t) if isinstance(t, TensorType)]
        if [r.type for r in self.results_] != tensors:
            raise op_error(self, "expected a result of each tensor output's type")

    # -- syntax -----------------------------------------------------------------------
    @classmethod
    def parse(cls, parser: Parser) -> ScanOp:
        values: dict[str, Attribute] = {}
        for keyword in ("dimension", "inclusive"):
            parser.parse_keyword(keyword)
            parser.parse_punctuation("(")
            if keyword == "dimension":
                values[keyword] = IntegerAttr(parser.parse_integer(), i64)
            else:
                values[keyword] = IntegerAttr(int(parser.parse_boolean()), i1)
            parser.parse_punctuation(")")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_keyword("ins")
        inputs = _parse_group(parser, "ins")
        parser.parse_keyword("outs")
        outputs = _parse_group(parser, "outs")
        region = parser.parse_region()
        return cls.create(
            operands=[*inputs, *outputs],
            result_types=_parse_result_types(parser),
            properties={
                **values,
                "operandSegmentSizes": DenseArrayBase.from_list(IntegerType(32), [len(inputs), len(outputs)]),
            },
            attributes=attrs,
            regions=[region],
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(f" dimension({self.dim}) inclusive({'true' if self.is_inclusive else 'false'})")
        printer.print_op_attributes(self.attributes)
        _print_group(printer, "ins", self.inputs)
        _print_group(printer, "outs", self.outputs)
        printer.print_string(" ")
        printer.print_region(self.region)
        _print_result_types(printer, self.results_)


TMTensor = Dialect("tm_tensor", [ScatterOp, ScanOp, YieldOp], [])
