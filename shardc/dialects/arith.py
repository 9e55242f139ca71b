"""The arith overlay: arith.remf and arith.index_castui, which xDSL lacks, and
arith.trunci with MLIR's `overflowFlags` (printed in generic form, as mlir-opt does).

Syntax as in MLIR: `arith.remf %a, %b [fastmath<...>] : f32`,
`arith.index_castui %i : index to i64`, `arith.trunci %x [overflow<nsw>] : i64 to i32`.

https://mlir.llvm.org/docs/Dialects/ArithOps/
"""

from __future__ import annotations

from xdsl.dialects import arith as xarith
from xdsl.dialects.builtin import IndexType, IntegerType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, base, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure

from shardc.dialects.lazy_format import lazy_format_op_definition
from shardc.dialects.overlays import extend_dialect, op_error


@lazy_format_op_definition
class RemfOp(xarith.FloatingPointLikeBinaryOperation):
    """The floating-point remainder, with the sign of the dividend (C's fmod)."""

    name = "arith.remf"

    traits = traits_def(Pure())


@lazy_format_op_definition
class IndexCastUIOp(IRDLOperation):
    """index_cast that zero-extends instead of sign-extending."""

    name = "arith.index_castui"

    input = operand_def(base(IntegerType) | base(IndexType))
    result = result_def(base(IntegerType) | base(IndexType))

    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `to` type($result)"

    def __init__(self, input_arg: SSAValue | Operation, target_type: Attribute):
        super().__init__(operands=[input_arg], result_types=[target_type])

    def verify_(self) -> None:
        if not isinstance(self.input.type, IndexType) ^ isinstance(self.result.type, IndexType):
            raise op_error(
                self,
                f"operand type '{self.input.type}' and result type '{self.result.type}' are cast incompatible",
            )


@lazy_format_op_definition
class TruncIOp(xarith.TruncIOp):
    """xDSL's arith.trunci with MLIR's `overflowFlags` property (default `none`)."""

    input = operand_def(IntegerType)
    result = result_def(IntegerType)
    overflow_flags = prop_def(
        xarith.IntegerOverflowAttr,
        default_value=xarith.IntegerOverflowAttr("none"),
        prop_name="overflowFlags",
    )

    def verify_(self) -> None:
        # not xDSL's: its generated verify_ checks against its definition, which lacks
        # overflowFlags
        src, dst = self.input.type, self.result.type
        assert isinstance(src, IntegerType) and isinstance(dst, IntegerType)
        if not dst.width.data < src.width.data:
            raise op_error(self, f"operand type '{src}' and result type '{dst}' are cast incompatible")

    # the declarative format replaces xDSL's (the generated parser and printer)
    assembly_format = "$input (`overflow` `` $overflowFlags^)? attr-dict `:` type($input) `to` type($result)"
    parse = Operation.__dict__["parse"]
    print = Operation.__dict__["print"]


Arith = extend_dialect(xarith.Arith, [RemfOp, IndexCastUIOp, TruncIOp])
