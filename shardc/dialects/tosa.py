"""The tosa overlay: xDSL's tosa dialect plus the ops shard programs use and xDSL lacks.

Syntax, verifier rules and messages follow MLIR (checked against mlir-opt 22.1.8):
elementwise ops print `operands attr-dict : functional-type(operands, results)`, enum
attributes print bare in the attribute dictionary (`{nan_mode = IGNORE}`), and
`nan_mode` is materialized with its default when parsed from the custom form, as MLIR
does. xDSL's add, sub, mul, matmul, clamp and reduce_max/min are replaced by subclasses
with MLIR's rules (4-operand matmul with any batch, nan_mode syntax); isinstance checks
against xDSL's classes keep working.

https://mlir.llvm.org/docs/Dialects/TOSA/
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import tosa as xtosa
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    I8,
    I32,
    AnyFloatConstr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    TensorType,
    UnitAttr,
    UnrankedTensorType,
    i32,
)
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    AnyAttr,
    BaseAttr,
    IRDLOperation,
    VarConstraint,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    param_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import Commutative, Pure
from xdsl.utils.exceptions import VerifyException

from shardc.dialects.overlays import extend_dialect
from shardc.dialects.overlays import op_error

NanMode = xtosa.NanMode
NanModeAttr = xtosa.NanModeAttr

AnyTensor = BaseAttr(TensorType) | BaseAttr(UnrankedTensorType)
"""Tosa_Tensor: ranked or unranked; element and rank rules are checked in verify_."""


# --------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------


@irdl_attr_definition
class ShapeType(ParametrizedAttribute, TypeAttribute):
    """`!tosa.shape<N>`: a shape value of rank N, produced by `tosa.const_shape`."""

    name = "tosa.shape"

    rank: IntAttr = param_def()

    def __init__(self, rank: int | IntAttr):
        super().__init__(IntAttr(rank) if isinstance(rank, int) else rank)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return (IntAttr(parser.parse_integer(allow_boolean=False, allow_negative=False)),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.rank.data}>")

    def verify(self) -> None:
        if self.rank.data < 0:
            raise VerifyException("invalid rank")


# --------------------------------------------------------------------------------------
# Shape and type helpers (MLIR's broadcast and compatibility rules)
# --------------------------------------------------------------------------------------


def _shape(t: Attribute) -> tuple[int, ...] | None:
    """The shape of a ranked tensor type, None when unranked."""
    return tuple(t.get_shape()) if isinstance(t, TensorType) else None


def _element_type(t: Attribute) -> Attribute:
    assert isinstance(t, TensorType | UnrankedTensorType)
    return t.element_type


def shape_str(shape: Sequence[int]) -> str:
    """MLIR's shape spelling in messages: `2x?x3`."""
    return "x".join("?" if d == DYNAMIC_INDEX else str(d) for d in shape)


def _broadcast_dim(a: int, b: int) -> int | None:
    if a == DYNAMIC_INDEX or b == DYNAMIC_INDEX:
        # Follow MLIR (and TensorFlow): a static dim > 1 wins, 1 yields the other one.
        if a > 1:
            return a
        if b > 1:
            return b
        if a == 1:
            return b
        if b == 1:
            return a
        return DYNAMIC_INDEX
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    return None


def broadcast_shapes(shapes: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
    """The broadcast of `shapes` aligned from the right, None if incompatible."""
    result: list[int] = []
    for shape in shapes:
        if len(shape) > len(result):
            result = [1] * (len(shape) - len(result)) + result
        offset = len(result) - len(shape)
        for i, dim in enumerate(shape):
            merged = _broadcast_dim(result[offset + i], dim)
            if merged is None:
                return None
            result[offset + i] = merged
    return tuple(result)


def _dims_compatible(a: int, b: int) -> bool:
    return a == b or a == DYNAMIC_INDEX or b == DYNAMIC_INDEX


def shapes_compatible(a: Sequence[int] | None, b: Sequence[int] | None) -> bool:
    """MLIR's verifyCompatibleShape: unranked matches anything, else dim by dim."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(_dims_compatible(x, y) for x, y in zip(a, b))


def verify_broadcastable(op: Operation) -> None:
    """ResultsBroadcastableShape: operands broadcast together, results match the broadcast."""
    ranked = [s for v in op.operands if (s := _shape(v.type)) is not None]
    inferred = broadcast_shapes(ranked)
    if inferred is None:
        raise op_error(op, "operands don't have broadcast-compatible shapes")
    for result in op.results:
        shape = _shape(result.type)
        if shape is None:
            continue
        if len(shape) != len(inferred) or not all(
            _dims_compatible(x, y) for x, y in zip(inferred, shape)
        ):
            raise op_error(
                op,
                f"result type '{shape_str(shape)}' not broadcast compatible with "
                f"broadcasted operands's shapes '{shape_str(inferred)}'",
            )


def verify_same_operand_ranks(op: Operation, values: Sequence[SSAValue]) -> None:
    """TOSA's elementwise rule: every ranked operand has the same rank."""
    ranks = {len(s) for v in values if (s := _shape(v.type)) is not None}
    if len(ranks) > 1:
        raise op_error(op, "operands don't have matching ranks")


def verify_same_element_type(op: Operation, values: Sequence[SSAValue], what: str) -> None:
    if len({_element_type(v.type) for v in values}) > 1:
        raise op_error(op, f"requires the same element type for all {what}")


def verify_same_shape(op: Operation, values: Sequence[SSAValue]) -> None:
    shapes = [_shape(v.type) for v in values]
    if any(not shapes_compatible(shapes[0], s) for s in shapes[1:]):
        raise op_error(op, "requires the same shape for all operands and results")


def verify_input_output_type(op: Operation, input: SSAValue, output: SSAValue) -> None:
    in_type, out_type = _element_type(input.type), _element_type(output.type)
    if in_type != out_type:
        raise op_error(
            op,
            "expect input and output to have same element type, "
            f"got '{in_type}' and '{out_type}'",
        )


_I1_TENSOR = "tosa-conformant tensor of 1-bit signless integer values"


def _is_i1_tensor(t: Attribute) -> bool:
    return isinstance(t, TensorType | UnrankedTensorType) and t.element_type == IntegerType(1)


def verify_i1(op: Operation, value: SSAValue) -> None:
    """Tosa_I1Tensor, with MLIR's `operand #i must be ...` message."""
    if _is_i1_tensor(value.type):
        return
    kind, index = (
        ("result", op.results.index(value))
        if value in op.results
        else ("operand", list(op.operands).index(value))
    )
    raise op_error(op, f"{kind} #{index} must be {_I1_TENSOR}, but got '{value.type}'")


# --------------------------------------------------------------------------------------
# Custom syntax: `operands attr-dict : functional-type(operands, results)`
# --------------------------------------------------------------------------------------


class FunctionalFormat:
    """The syntax of most TOSA ops, with MLIR's attr-dict conventions: entries sorted by
    name, default-valued enums elided, `nan_mode` printed as a bare keyword."""

    DEFAULTS: ClassVar[dict[str, Attribute]] = {}
    """Properties materialized when absent from the custom form (DefaultValuedAttr)."""

    def print(self, printer: Printer) -> None:
        assert isinstance(self, IRDLOperation)
        if self.operands:
            printer.print_string(" ")
            printer.print_list(self.operands, printer.print_operand)
        entries = {
            **{k: v for k, v in self.properties.items() if self.DEFAULTS.get(k) != v},
            **self.attributes,
        }
        if entries:
            printer.print_string(" {")
            printer.print_list(sorted(entries.items()), lambda e: _print_entry(printer, *e))
            printer.print_string("}")
        printer.print_string(" : ")
        printer.print_function_type(self.operand_types, self.result_types)

    @classmethod
    def parse(cls, parser: Parser) -> Operation:
        assert issubclass(cls, IRDLOperation)
        pos = parser.pos
        operands = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
        )
        operands = operands or []
        entries: dict[str, Attribute] = {}
        if parser.parse_optional_punctuation("{") is not None:
            if parser.parse_optional_punctuation("}") is None:
                while True:
                    key, value = _parse_entry(parser)
                    if key in entries:
                        parser.raise_error(f"Duplicate key '{key}' in dictionary attribute")
                    entries[key] = value
                    if parser.parse_optional_punctuation(",") is None:
                        break
                parser.parse_punctuation("}")
        parser.parse_punctuation(":")
        func_type = parser.parse_function_type()
        op_def = cls.get_irdl_definition()
        expected = len(op_def.operands)
        if len(func_type.inputs.data) != expected:
            parser.raise_error(
                f"'{cls.name}' op expected {expected} operands, but found "
                f"{len(func_type.inputs.data)}",
                pos,
            )
        prop_names = cls.get_irdl_definition().properties
        properties = {k: v for k, v in entries.items() if k in prop_names}
        attributes = {k: v for k, v in entries.items() if k not in prop_names}
        for key, value in cls.DEFAULTS.items():
            properties.setdefault(key, value)
        return cls.build(
            operands=parser.resolve_operands(operands, func_type.inputs.data, pos),
            result_types=func_type.outputs.data,
            properties=properties,
            attributes=attributes,
        )


_ENUM_ENTRIES: dict[str, type[NanModeAttr]] = {"nan_mode": NanModeAttr}


def _print_entry(printer: Printer, key: str, value: Attribute) -> None:
    printer.print_identifier_or_string_literal(key)
    if isinstance(value, UnitAttr):
        return
    printer.print_string(" = ")
    if isinstance(value, NanModeAttr):
        printer.print_string(value.data)
    else:
        printer.print_attribute(value)


def _parse_entry(parser: Parser) -> tuple[str, Attribute]:
    key = parser.parse_optional_identifier_or_str_literal()
    if key is None:
        parser.raise_error("expected attribute name")
    if parser.parse_optional_punctuation("=") is None:
        return key, UnitAttr()
    if key in _ENUM_ENTRIES and (word := parser.parse_optional_identifier()) is not None:
        try:
            return key, NanModeAttr(NanMode(word))
        except ValueError:
            parser.raise_error(f"expected one of PROPAGATE, IGNORE for '{key}', got '{word}'")
    return key, parser.parse_attribute()


_PROPAGATE = NanModeAttr(NanMode.PROPAGATE)


# --------------------------------------------------------------------------------------
# Elementwise unary ops
# --------------------------------------------------------------------------------------


class ElementwiseUnaryOp(FunctionalFormat, IRDLOperation):
    """Tosa_ElementwiseUnaryOp: one tensor in, one tensor of the same shape and type out."""

    input1 = operand_def(AnyTensor)
    output = result_def(AnyTensor)

    traits = traits_def(Pure())

    def __init__(self, input1: SSAValue | Operation, result_type: Attribute | None = None):
        if result_type is None:
            result_type = SSAValue.get(input1).type
        super().__init__(operands=[input1], result_types=[result_type])

    def verify_(self) -> None:
        verify_same_shape(self, [self.input1, self.output])
        verify_same_element_type(self, [self.input1, self.output], "operands and results")


@irdl_op_definition
class AbsOp(ElementwiseUnaryOp):
    """Elementwise absolute value."""

    name = "tosa.abs"


@irdl_op_definition
class BitwiseNotOp(ElementwiseUnaryOp):
    name = "tosa.bitwise_not"


@irdl_op_definition
class CeilOp(ElementwiseUnaryOp):
    name = "tosa.ceil"


@irdl_op_definition
class ClzOp(ElementwiseUnaryOp):
    """Count leading zeros."""

    name = "tosa.clz"


@irdl_op_definition
class ErfOp(ElementwiseUnaryOp):
    """Gauss error function; GELU is written with it."""

    name = "tosa.erf"


@irdl_op_definition
class ExpOp(ElementwiseUnaryOp):
    name = "tosa.exp"


@irdl_op_definition
class FloorOp(ElementwiseUnaryOp):
    name = "tosa.floor"


@irdl_op_definition
class LogOp(ElementwiseUnaryOp):
    name = "tosa.log"


@irdl_op_definition
class RsqrtOp(ElementwiseUnaryOp):
    """1/sqrt(x); layer norms use it."""

    name = "tosa.rsqrt"


@irdl_op_definition
class SigmoidOp(ElementwiseUnaryOp):
    name = "tosa.sigmoid"


@irdl_op_definition
class TanhOp(ElementwiseUnaryOp):
    name = "tosa.tanh"


@irdl_op_definition
class LogicalNotOp(ElementwiseUnaryOp):
    name = "tosa.logical_not"

    def verify_(self) -> None:
        verify_i1(self, self.input1)
        verify_i1(self, self.output)
        super().verify_()


@irdl_op_definition
class CastOp(FunctionalFormat, IRDLOperation):
    """Elementwise conversion between element types; the shape is kept."""

    name = "tosa.cast"

    input = operand_def(AnyTensor)
    output = result_def(AnyTensor)

    traits = traits_def(Pure())

    def __init__(self, input: SSAValue | Operation, result_type: Attribute):
        super().__init__(operands=[input], result_types=[result_type])

    def verify_(self) -> None:
        verify_same_shape(self, [self.input, self.output])


def _scalar_or_unranked(t: Attribute) -> bool:
    """Tosa_ScalarTensor or unranked: a rank-1 tensor of one element, or tensor<*x..>."""
    if isinstance(t, UnrankedTensorType):
        return True
    return isinstance(t, TensorType) and tuple(t.get_shape()) == (1,)


_ZP_TENSOR = (
    "tosa-conformant unranked tensor of unsigned integer or signless integer or "
    "floating-point values or tosa-conformant scalar tensor of unsigned integer or "
    "signless integer or floating-point values"
)


def _const_zero_point(value: SSAValue) -> int | float | None:
    """The value of a zero point defined by `tosa.const`, None when not constant."""
    owner = value.owner
    if not isinstance(owner, xtosa.ConstOp):
        return None
    values = owner.values.get_values()
    return values[0] if values else None  # pyright: ignore[reportReturnType]


def verify_zero_point(op: Operation, value: SSAValue, operand: SSAValue, name: str) -> None:
    """Zero points: same element type as the tensor they apply to; zero unless i8."""
    value_type, zp_type = _element_type(value.type), _element_type(operand.type)
    if value_type != zp_type:
        raise op_error(
            op,
            f"expect both {name} and its zero point are the same element type, "
            f"got '{value_type}' and '{zp_type}'",
        )
    zp = _const_zero_point(operand)
    if zp is not None and zp != 0 and value_type != IntegerType(8):
        label = "input1" if name == "input1" else "output"
        raise op_error(op, f"{label} zero point must be zero for non-int8 integer types")


@irdl_op_definition
class NegateOp(FunctionalFormat, IRDLOperation):
    """Elementwise negation with input and output zero points (as tensors), as in trunk."""

    name = "tosa.negate"

    input1 = operand_def(AnyTensor)
    input1_zp = operand_def(AnyTensor)
    output_zp = operand_def(AnyTensor)
    output = result_def(AnyTensor)

    traits = traits_def(Pure())

    def __init__(
        self,
        input1: SSAValue | Operation,
        input1_zp: SSAValue | Operation,
        output_zp: SSAValue | Operation,
        result_type: Attribute | None = None,
    ):
        if result_type is None:
            result_type = SSAValue.get(input1).type
        super().__init__(operands=[input1, input1_zp, output_zp], result_types=[result_type])

    def verify_(self) -> None:
        for index, zp in ((1, self.input1_zp), (2, self.output_zp)):
            if not _scalar_or_unranked(zp.type):
                raise op_error(self, f"operand #{index} must be {_ZP_TENSOR}, but got '{zp.type}'")
        if not shapes_compatible(_shape(self.input1.type), _shape(self.output.type)):
            raise op_error(self, "requires the same shape for input1 and output")
        verify_input_output_type(self, self.input1, self.output)
        verify_zero_point(self, self.input1, self.input1_zp, "input1")
        verify_zero_point(self, self.output, self.output_zp, "output")


# --------------------------------------------------------------------------------------
# Elementwise binary ops
# --------------------------------------------------------------------------------------


class ElementwiseBinaryOp(FunctionalFormat, IRDLOperation):
    """Tosa_ElementwiseOp with SameOperandsAndResultElementType: broadcast of equal ranks."""

    input1 = operand_def(AnyTensor)
    input2 = operand_def(AnyTensor)
    output = result_def(AnyTensor)

    traits = traits_def(Pure())

    def __init__(
        self,
        input1: SSAValue | Operation,
        input2: SSAValue | Operation,
        result_type: Attribute,
        properties: dict[str, Attribute] | None = None,
    ):
        props = {**self.DEFAULTS, **(properties or {})}
        super().__init__(
            operands=[input1, input2], result_types=[result_type], properties=props
        )

    def verify_(self) -> None:
        verify_elementwise(self)
        verify_same_element_type(self, [*self.operands, *self.results], "operands and results")


def verify_elementwise(op: Operation) -> None:
    """The shape rules every TOSA elementwise op shares."""
    verify_broadcastable(op)
    verify_same_operand_ranks(op, op.operands)


class NanPropagatingBinaryOp(ElementwiseBinaryOp):
    """maximum and minimum: how NaN operands propagate is a property."""

    DEFAULTS: ClassVar[dict[str, Attribute]] = {"nan_mode": _PROPAGATE}

    nan_mode = opt_prop_def(NanModeAttr, default_value=_PROPAGATE)


@irdl_op_definition
class MaximumOp(NanPropagatingBinaryOp):
    name = "tosa.maximum"

    traits = traits_def(Pure(), Commutative())


@irdl_op_definition
class MinimumOp(NanPropagatingBinaryOp):
    name = "tosa.minimum"

    traits = traits_def(Pure(), Commutative())


@irdl_op_definition
class PowOp(ElementwiseBinaryOp):
    name = "tosa.pow"


@irdl_op_definition
class BitwiseAndOp(ElementwiseBinaryOp):
    name = "tosa.bitwise_and"

    traits = traits_def(Pure(), Commutative())


@irdl_op_definition
class BitwiseOrOp(ElementwiseBinaryOp):
    name = "tosa.bitwise_or"

    traits = traits_def(Pure(), Commutative())


@irdl_op_definition
class BitwiseXorOp(ElementwiseBinaryOp):
    name = "tosa.bitwise_xor"

    traits = traits_def(Pure(), Commutative())


@irdl_op_definition
class LogicalLeftShiftOp(ElementwiseBinaryOp):
    name = "tosa.logical_left_shift"


@irdl_op_definition
class LogicalRightShiftOp(ElementwiseBinaryOp):
    name = "tosa.logical_right_shift"


@irdl_op_definition
class IntDivOp(ElementwiseBinaryOp):
    """Integer division truncating toward zero."""

    name = "tosa.intdiv"


class LogicalBinaryOp(ElementwiseBinaryOp):
    """logical_and/or/xor: i1 tensors in and out."""

    traits = traits_def(Pure(), Commutative())

    def verify_(self) -> None:
        for value in (*self.operands, self.output):
            verify_i1(self, value)
        super().verify_()


@irdl_op_definition
class LogicalAndOp(LogicalBinaryOp):
    name = "tosa.logical_and"


@irdl_op_definition
class LogicalOrOp(LogicalBinaryOp):
    name = "tosa.logical_or"


@irdl_op_definition
class LogicalXorOp(LogicalBinaryOp):
    name = "tosa.logical_xor"


class ComparisonOp(ElementwiseBinaryOp):
    """equal, greater, greater_equal: operands of one element type, an i1 result."""

    def verify_(self) -> None:
        verify_i1(self, self.output)
        verify_elementwise(self)
        verify_same_element_type(self, list(self.operands), "operands")


@irdl_op_definition
class EqualOp(ComparisonOp):
    name = "tosa.equal"

    traits = traits_def(Pure(), Commutative())


@irdl_op_definition
class GreaterOp(ComparisonOp):
    name = "tosa.greater"


@irdl_op_definition
class GreaterEqualOp(ComparisonOp):
    name = "tosa.greater_equal"


@irdl_op_definition
class AddOp(FunctionalFormat, xtosa.AddOp):
    """xDSL's tosa.add with MLIR's rules and messages (ranks equal, types equal)."""

    input1 = operand_def(AnyTensor)
    input2 = operand_def(AnyTensor)
    output = result_def(AnyTensor)

    assembly_format = None

    def verify_(self) -> None:
        verify_elementwise(self)
        verify_same_element_type(self, [*self.operands, *self.results], "operands and results")


@irdl_op_definition
class SubOp(FunctionalFormat, xtosa.SubOp):
    """xDSL's tosa.sub with MLIR's rules and messages."""

    input1 = operand_def(AnyTensor)
    input2 = operand_def(AnyTensor)
    output = result_def(AnyTensor)

    assembly_format = None

    def verify_(self) -> None:
        verify_elementwise(self)
        verify_same_element_type(self, [*self.operands, *self.results], "operands and results")


@irdl_op_definition
class MulOp(FunctionalFormat, xtosa.MulOp):
    """xDSL's tosa.mul with MLIR's rules: the i8 `shift` operand takes no part in the
    broadcast."""

    input1 = operand_def(AnyTensor)
    input2 = operand_def(AnyTensor)
    shift = operand_def(TensorType[I8])
    output = result_def(AnyTensor)

    assembly_format = None

    def verify_(self) -> None:
        values = [self.input1, self.input2, self.output]
        ranked = [s for v in values[:2] if (s := _shape(v.type)) is not None]
        inferred = broadcast_shapes(ranked)
        if inferred is None:
            raise op_error(self, "operands don't have broadcast-compatible shapes")
        out = _shape(self.output.type)
        if out is not None and not shapes_compatible(out, inferred):
            raise op_error(
                self,
                f"result type '{shape_str(out)}' not broadcast compatible with "
                f"broadcasted operands's shapes '{shape_str(inferred)}'",
            )
        verify_same_operand_ranks(self, values[:2])


# --------------------------------------------------------------------------------------
# select
# --------------------------------------------------------------------------------------


@irdl_op_definition
class SelectOp(FunctionalFormat, IRDLOperation):
    """`input1 ? input2 : input3`, elementwise with broadcast."""

    name = "tosa.select"

    input1 = operand_def(AnyTensor)
    input2 = operand_def(AnyTensor)
    input3 = operand_def(AnyTensor)
    output = result_def(AnyTensor)

    traits = traits_def(Pure())

    def __init__(
        self,
        pred: SSAValue | Operation,
        on_true: SSAValue | Operation,
        on_false: SSAValue | Operation,
        result_type: Attribute,
    ):
        super().__init__(operands=[pred, on_true, on_false], result_types=[result_type])

    def verify_(self) -> None:
        verify_i1(self, self.input1)
        verify_elementwise(self)
        for value in (self.input2, self.input3):
            verify_input_output_type(self, value, self.output)


# --------------------------------------------------------------------------------------
# Data layout: const_shape, reshape, transpose
# --------------------------------------------------------------------------------------


@irdl_op_definition
class ConstShapeOp(FunctionalFormat, IRDLOperation):
    """A constant `!tosa.shape<N>` from N index values."""

    name = "tosa.const_shape"

    values = prop_def(DenseIntOrFPElementsAttr)
    output = result_def(ShapeType)

    traits = traits_def(Pure())

    def __init__(self, shape: Sequence[int]):
        values = DenseIntOrFPElementsAttr.from_list(
            TensorType(IndexType(), [len(shape)]), list(shape)
        )
        super().__init__(properties={"values": values}, result_types=[ShapeType(len(shape))])

    def print(self, printer: Printer) -> None:
        # mlir-opt prints an empty operand list followed by a space: two blanks in a row.
        printer.print_string(" ")
        super().print(printer)

    def get_shape(self) -> tuple[int, ...]:
        return tuple(int(v) for v in self.values.get_values())  # pyright: ignore

    def verify_(self) -> None:
        if not isinstance(self.values.get_element_type(), IndexType):
            raise op_error(
                self, "attribute 'values' failed to satisfy constraint: index elements attribute"
            )
        count = len(self.values.get_values())
        rank = self.output.type.rank.data  # pyright: ignore[reportAttributeAccessIssue]
        if count != rank:
            raise op_error(
                self,
                f"expect number of elements in attribute values ({count}) to be equal to "
                f"the rank ({rank}) for the result shape type",
            )


def constant_shape(value: SSAValue) -> tuple[int, ...] | None:
    """The values of a shape operand defined by `tosa.const_shape`, else None."""
    owner = value.owner
    return owner.get_shape() if isinstance(owner, ConstShapeOp) else None


@irdl_op_definition
class ReshapeOp(FunctionalFormat, IRDLOperation):
    """Same elements, new shape; the shape is a `!tosa.shape` operand (-1: inferred)."""

    name = "tosa.reshape"

    input1 = operand_def(AnyTensor)
    shape = operand_def(ShapeType)
    output = result_def(AnyTensor)

    traits = traits_def(Pure())

    def __init__(
        self, input1: SSAValue | Operation, shape: SSAValue | Operation, result_type: Attribute
    ):
        super().__init__(operands=[input1, shape], result_types=[result_type])

    def verify_(self) -> None:
        verify_input_output_type(self, self.input1, self.output)
        new_shape = constant_shape(self.shape)
        if new_shape is None:
            raise op_error(self, "shape operand is not compile time resolvable")
        if sum(1 for d in new_shape if d == -1) > 1:
            raise op_error(self, "expected at most one target dimension to be -1")
        out_shape = _shape(self.output.type)
        if out_shape is None:
            return
        if len(new_shape) != len(out_shape):
            raise op_error(self, "new shape does not match result rank")
        in_shape = _shape(self.input1.type)
        if (
            in_shape is not None
            and DYNAMIC_INDEX not in in_shape
            and DYNAMIC_INDEX not in out_shape
            and (n_in := _product(in_shape)) != (n_out := _product(out_shape))
        ):
            raise op_error(self, f"cannot reshape {n_in} elements into {n_out}")
        for new, out in zip(new_shape, out_shape):
            if new != -1 and out != DYNAMIC_INDEX and new != out:
                raise op_error(self, "new shape is inconsistent with result shape")


def _product(shape: Sequence[int]) -> int:
    result = 1
    for d in shape:
        result *= d
    return result


@irdl_op_definition
class TransposeOp(FunctionalFormat, IRDLOperation):
    """Permute dimensions: output dim i is input dim perms[i]."""

    name = "tosa.transpose"

    input1 = operand_def(AnyTensor)
    perms = prop_def(DenseArrayBase.constr(i32))
    output = result_def(AnyTensor)

    traits = traits_def(Pure())

    def __init__(self, input1: SSAValue | Operation, perms: Sequence[int], result_type: Attribute):
        super().__init__(
            operands=[input1],
            properties={"perms": DenseArrayBase.from_list(i32, perms)},
            result_types=[result_type],
        )

    def verify_(self) -> None:
        if _element_type(self.input1.type) != _element_type(self.output.type):
            raise op_error(
                self, "failed to verify that all of {input1, output} have same element type"
            )
        perms = self.perms.get_values()
        in_shape, out_shape = _shape(self.input1.type), _shape(self.output.type)
        if in_shape is not None and len(perms) != len(in_shape):
            raise op_error(
                self,
                f"expected perms attribute to have size {len(in_shape)} (input rank) but got "
                f"size {len(perms)}",
            )
        if sorted(perms) != list(range(len(perms))):
            raise op_error(self, "expected valid permutation indices")
        if in_shape is None or out_shape is None:
            return
        if len(in_shape) != len(out_shape):
            raise op_error(self, "expected input tensor rank to equal result tensor rank")
        for i, p in enumerate(perms):
            if not _dims_compatible(out_shape[i], in_shape[p]):
                raise op_error(
                    self,
                    f"expected output tensor dim {i} to match input dim {p} with value of "
                    f"{in_shape[p]}",
                )


# --------------------------------------------------------------------------------------
# matmul, clamp and reductions: xDSL's ops with MLIR's forms
# --------------------------------------------------------------------------------------


@irdl_op_definition
class MatMulOp(FunctionalFormat, xtosa.MatMulOp):
    """Batched matmul `[N,H,C] x [N,C,W] -> [N,H,W]` with zero-point tensors, as in trunk
    (xDSL's requires N == 1 and one type for all operands and the result)."""

    a = operand_def(AnyTensor)
    b = operand_def(AnyTensor)
    a_zp = operand_def(AnyTensor)
    b_zp = operand_def(AnyTensor)
    output = result_def(AnyTensor)

    assembly_format = None

    def __init__(
        self,
        a: SSAValue | Operation,
        b: SSAValue | Operation,
        a_zp: SSAValue | Operation,
        b_zp: SSAValue | Operation,
        result_type: Attribute,
    ):
        IRDLOperation.__init__(self, operands=[a, b, a_zp, b_zp], result_types=[result_type])

    def verify_(self) -> None:
        for index, value in enumerate((self.a, self.b, self.output)):
            shape = _shape(value.type)
            if shape is not None and len(shape) != 3:
                kind = "result #0" if value is self.output else f"operand #{index}"
                raise op_error(
                    self, f"{kind} must be 3-d tosa-conformant tensor, but got '{value.type}'"
                )
        for index, zp in ((2, self.a_zp), (3, self.b_zp)):
            if not _scalar_or_unranked(zp.type):
                raise op_error(self, f"operand #{index} must be {_ZP_TENSOR}, but got '{zp.type}'")
        for name, value, zp in (("a", self.a, self.a_zp), ("b", self.b, self.b_zp)):
            t, zt = _element_type(value.type), _element_type(zp.type)
            if t != zt:
                raise op_error(
                    self,
                    f"expect input {name} and {name}_zp have the same element type, "
                    f"got '{t}' and '{zt}'",
                )


@irdl_op_definition
class ClampOp(FunctionalFormat, xtosa.ClampOp):
    """xDSL's tosa.clamp, printed as mlir-opt prints it (`nan_mode = IGNORE`)."""

    DEFAULTS: ClassVar[dict[str, Attribute]] = {"nan_mode": _PROPAGATE}

    T: ClassVar[VarConstraint] = VarConstraint("T", AnyAttr())
    VALUE: ClassVar = IntegerAttr.constr(type=BaseAttr(IntegerType) & T) | FloatAttr.constr(
        type=AnyFloatConstr & T
    )

    min_val = prop_def(VALUE)
    max_val = prop_def(VALUE)
    nan_mode = opt_prop_def(NanModeAttr, default_value=_PROPAGATE)
    input = operand_def(TensorType.constr(T))
    output = result_def(TensorType.constr(T))

    assembly_format = None


class Reduction(FunctionalFormat):
    """The fields of xDSL's reductions, redeclared so that our syntax and MLIR's
    verifier replace xDSL's (which checks nothing)."""

    input = operand_def(AnyTensor)
    axis = prop_def(IntegerAttr[I32])
    output = result_def(AnyTensor)

    assembly_format = None

    def verify_(self) -> None:
        assert isinstance(self, IRDLOperation)
        verify_reduction(self, self.operands[0], self.results[0], self.properties["axis"])


def verify_reduction(
    op: Operation, input: SSAValue, output: SSAValue, axis_attr: Attribute
) -> None:
    """MLIR's reduction checks, then the inferred result type (input with axis size 1)."""
    assert isinstance(axis_attr, IntegerAttr)
    axis = axis_attr.value.data
    if axis < 0:
        raise op_error(op, "reduce axis must not be negative")
    in_shape, out_shape = _shape(input.type), _shape(output.type)
    if in_shape is None:
        return
    if axis >= len(in_shape):
        raise op_error(
            op, f"expect input tensor rank ({len(in_shape)}) to be larger than reduce axis ({axis})"
        )
    if out_shape is None:
        return
    if len(out_shape) != len(in_shape):
        raise op_error(op, "expect output tensor rank to be equal to input tensor rank")
    if out_shape[axis] not in (1, DYNAMIC_INDEX):
        raise op_error(op, f"expect reduced dimension size to be 1, got {out_shape[axis]}")
    inferred = [1 if i == axis else d for i, d in enumerate(in_shape)]
    if _element_type(input.type) != _element_type(output.type) or not shapes_compatible(
        inferred, out_shape
    ):
        inferred_type = TensorType(_element_type(input.type), inferred)
        raise op_error(
            op,
            f"inferred type(s) '{inferred_type}' are incompatible with return type(s) of "
            f"operation '{output.type}'",
        )


class NanReduction(Reduction):
    DEFAULTS: ClassVar[dict[str, Attribute]] = {"nan_mode": _PROPAGATE}

    nan_mode = opt_prop_def(NanModeAttr, default_value=_PROPAGATE)


@irdl_op_definition
class ReduceMaxOp(NanReduction, xtosa.ReduceMaxOp):
    """xDSL's tosa.reduce_max with MLIR's nan_mode syntax and checks."""


@irdl_op_definition
class ReduceMinOp(NanReduction, xtosa.ReduceMinOp):
    """xDSL's tosa.reduce_min with MLIR's nan_mode syntax and checks."""


@irdl_op_definition
class ReduceSumOp(Reduction, xtosa.ReduceSumOp):
    """xDSL's tosa.reduce_sum with MLIR's checks."""


@irdl_op_definition
class ReduceProductOp(Reduction, xtosa.ReduceProductOp):
    """xDSL's tosa.reduce_product with MLIR's checks."""


@irdl_op_definition
class ReduceAllOp(Reduction, xtosa.ReduceAllOp):
    """xDSL's tosa.reduce_all with MLIR's checks."""


@irdl_op_definition
class ReduceAnyOp(Reduction, xtosa.ReduceAnyOp):
    """xDSL's tosa.reduce_any with MLIR's checks."""


TOSA = extend_dialect(
    xtosa.TOSA,
    [
        AbsOp,
        BitwiseNotOp,
        CeilOp,
        ClzOp,
        ErfOp,
        ExpOp,
        FloorOp,
        LogOp,
        RsqrtOp,
        SigmoidOp,
        TanhOp,
        LogicalNotOp,
        CastOp,
        NegateOp,
        MaximumOp,
        MinimumOp,
        PowOp,
        BitwiseAndOp,
        BitwiseOrOp,
        BitwiseXorOp,
        LogicalLeftShiftOp,
        LogicalRightShiftOp,
        IntDivOp,
        LogicalAndOp,
        LogicalOrOp,
        LogicalXorOp,
        EqualOp,
        GreaterOp,
        GreaterEqualOp,
        AddOp,
        SubOp,
        MulOp,
        SelectOp,
        ConstShapeOp,
        ReshapeOp,
        TransposeOp,
        MatMulOp,
        ClampOp,
        ReduceMaxOp,
        ReduceMinOp,
        ReduceSumOp,
        ReduceProductOp,
        ReduceAllOp,
        ReduceAnyOp,
    ],
    [ShapeType],
)
