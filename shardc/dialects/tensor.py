"""The tensor overlay: xDSL's tensor dialect plus tensor.generate, tensor.rank and
tensor.parallel_insert_slice (the terminator body of scf.forall), which xDSL lacks.

Syntax and verifier messages follow MLIR (checked against mlir-opt 22.1.8).

https://mlir.llvm.org/docs/Dialects/TensorOps/
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import tensor as xtensor
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    IndexType,
    TensorType,
    UnrankedTensorType,
    i64,
)
from xdsl.dialects.utils import DynamicIndexList
from xdsl.dialects.utils.reshape_ops_utils import ContiguousArrayOfIntArray
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import (
    NoMemoryEffect,
    RecursiveMemoryEffect,
    SingleBlockImplicitTerminator,
)

from shardc.dialects.lazy_format import lazy_format_op_definition
from shardc.dialects.overlays import extend_dialect
from shardc.dialects.overlays import op_error


@lazy_format_op_definition
class RankOp(IRDLOperation):
    """The rank of a tensor, ranked or not, as an index."""

    name = "tensor.rank"

    tensor = operand_def(base(TensorType) | base(UnrankedTensorType))
    result = result_def(IndexType)

    traits = traits_def(NoMemoryEffect())

    assembly_format = "$tensor attr-dict `:` type($tensor)"

    def __init__(self, tensor: SSAValue | Operation):
        super().__init__(operands=[tensor], result_types=[IndexType()])


@lazy_format_op_definition
class GenerateOp(IRDLOperation):
    """A tensor whose elements the body computes from their indices; the operands are
    the dynamic extents of the result type."""

    name = "tensor.generate"

    dynamic_extents = var_operand_def(IndexType)
    result = result_def(TensorType)
    body = region_def("single_block")

    traits = traits_def(RecursiveMemoryEffect(), SingleBlockImplicitTerminator(xtensor.YieldOp))

    assembly_format = "$dynamic_extents $body attr-dict `:` type($result)"

    def __init__(
        self,
        result_type: TensorType,
        dynamic_extents: Sequence[SSAValue | Operation],
        body: Region | None = None,
    ):
        if body is None:
            body = Region(Block(arg_types=[IndexType()] * result_type.get_num_dims()))
        super().__init__(operands=[dynamic_extents], result_types=[result_type], regions=[body])

    def verify_(self) -> None:
        ty = self.result.type
        assert isinstance(ty, TensorType)
        if len(self.dynamic_extents) != list(ty.get_shape()).count(DYNAMIC_INDEX):
            raise op_error(self, "must have as many index operands as dynamic extents in the result type")
        block = self.body.block
        if len(block.args) != ty.get_num_dims() or not all(
            isinstance(a.type, IndexType) for a in block.args
        ):
            raise op_error(self, "must have one body argument per input dimension")
        last = block.last_op
        if isinstance(last, xtensor.YieldOp):
            if len(last.operands) != 1 or last.operands[0].type != ty.element_type:
                raise op_error(
                    self,
                    "body must be terminated with a `yield` operation of the tensor element type",
                )


@lazy_format_op_definition
class ParallelInsertSliceOp(IRDLOperation):
    """Insert `source` into the shared output `dest` of the enclosing scf.forall, at the
    given offsets, sizes and strides; it yields no value: the forall result does."""

    name = "tensor.parallel_insert_slice"

    source = operand_def(TensorType)
    dest = operand_def(TensorType)
    offsets = var_operand_def(IndexType)
    sizes = var_operand_def(IndexType)
    strides = var_operand_def(IndexType)
    static_offsets = prop_def(DenseArrayBase.constr(i64))
    static_sizes = prop_def(DenseArrayBase.constr(i64))
    static_strides = prop_def(DenseArrayBase.constr(i64))

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    custom_directives = (DynamicIndexList,)

    assembly_format = (
        "$source `into` $dest ``"
        "custom<DynamicIndexList>($offsets, $static_offsets)"
        "custom<DynamicIndexList>($sizes, $static_sizes)"
        "custom<DynamicIndexList>($strides, $static_strides)"
        "attr-dict `:` type($source) `into` type($dest)"
    )

    def __init__(
        self,
        source: SSAValue | Operation,
        dest: SSAValue | Operation,
        offsets: Sequence[SSAValue | int],
        sizes: Sequence[SSAValue | int],
        strides: Sequence[SSAValue | int],
    ):
        def split(values: Sequence[SSAValue | int]) -> tuple[list[SSAValue], DenseArrayBase]:
            dynamic = [v for v in values if not isinstance(v, int)]
            static = [v if isinstance(v, int) else DYNAMIC_INDEX for v in values]
            return dynamic, DenseArrayBase.from_list(i64, static)

        (do, so), (dsz, ssz), (dst, sst) = split(offsets), split(sizes), split(strides)
        super().__init__(
            operands=[source, dest, do, dsz, dst],
            properties={"static_offsets": so, "static_sizes": ssz, "static_strides": sst},
        )

    def verify_(self) -> None:
        parent = self.parent_op()
        if parent is None or parent.name != "scf.forall.in_parallel":
            raise op_error(
                self,
                "expected ParallelCombiningOpInterface parent, got:"
                + (f"'{parent.name}'" if parent is not None else "nullptr"),
            )
        dest = self.dest.type
        assert isinstance(dest, TensorType)
        for name, static, dynamic in (
            ("offset", self.static_offsets, self.offsets),
            ("size", self.static_sizes, self.sizes),
            ("stride", self.static_strides, self.strides),
        ):
            values = static.get_values()
            if len(values) != dest.get_num_dims():
                raise op_error(
                    self,
                    f"expected {dest.get_num_dims()} {name} values",
                )
            if values.count(DYNAMIC_INDEX) != len(dynamic):
                raise op_error(
                    self,
                    f"expected {values.count(DYNAMIC_INDEX)} dynamic {name} values",
                )


@irdl_op_definition
class ExpandShapeOp(xtensor.ExpandShapeOp):
    """xDSL's tensor.expand_shape, accepting a rank-0 source as MLIR does: `[]` expands
    a `tensor<f32>` (torch-mlir's unsqueeze of a scalar), which xDSL's verifier refuses."""

    src = operand_def(TensorType)
    dynamic_output_shape = var_operand_def(IndexType)
    reassociation = prop_def(ContiguousArrayOfIntArray())
    static_output_shape = prop_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)

    def verify_(self) -> None:
        src, res = self.src.type, self.result.type
        assert isinstance(src, TensorType) and isinstance(res, TensorType)
        if src.get_shape() == () and not self.reassociation.data:
            if len(self.static_output_shape) != len(res.get_shape()):
                raise op_error(
                    self,
                    "expected number of static shape dims to be equal to the output rank "
                    f"({len(res.get_shape())}) but found {len(self.static_output_shape)} inputs instead",
                )
            return  # mlir-opt 22 accepts any static result here
        super().verify_()


Tensor = extend_dialect(xtensor.Tensor, [RankOp, GenerateOp, ParallelInsertSliceOp, ExpandShapeOp])
