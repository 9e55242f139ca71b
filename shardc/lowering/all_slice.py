"""Lowering of `shard.all_slice` to local index arithmetic and a `tensor.extract_slice`
(upstream's `AllSliceOpLowering`, `Transforms.cpp`). No communication: each process takes
its part of the slice axis, the part given by its linear index inside the process group.
The ops come in upstream's order, so the greedy driver folds them as mlir-opt does:

    %c0 = arith.constant 0 : index
    %idx:n = shard.process_multi_index on @g axes = [...]      // in-group multi-index
    %shape:n = shard.grid_shape @g axes = [...]                 // in-group shape
    %size = <product of a second grid_shape ... axes = [...]>   // group size
    %dim = tensor.dim %x, %c<slice_axis>
    %rem = arith.remui %dim, %size ; %ok = arith.cmpi eq, %rem, %c0 ; cf.assert %ok, "..."
    %part = arith.divui %dim, %size
    %lin = <linearized %idx over %shape>                        // affine.apply for n >= 2
    %d_i = tensor.dim %x, %c<i>                                 // every other axis i
    %off = arith.muli %lin, %part
    %slice = tensor.extract_slice %x[0, .., %off, .., 0] [%d_0, .., %part, ..] [1, .., 1]
    %r = tensor.cast %slice : ... to <all_slice result type>

Differences from upstream: with empty grid_axes (a group of one process, where upstream's
builders assert) the group size is the constant 1 and the linear index 0; for groups of
three or more grid axes the strides stay separate `affine.apply`s where upstream composes
them into one map (same values; `canonicalize` composes them).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import affine, arith, cf, tensor
from xdsl.dialects.builtin import DYNAMIC_INDEX, AffineMapAttr, IndexType, IntegerAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from shardc.dialects import shard

NOT_DIVISIBLE = (
    "Slicing a tensor with axis size that is not exactly divisible by the "
    "grid process group size is not supported."
)
"""The `cf.assert` message, upstream's text."""


def index_constant(rewriter: PatternRewriter, value: int) -> SSAValue:
    return rewriter.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result


def collective_process_group_size(
    rewriter: PatternRewriter, grid: shard.GridOp, axes: Sequence[int]
) -> SSAValue:
    """The number of processes in a group over `axes` (upstream's
    `createCollectiveProcessGroupSize`: `1 * size_0 * size_1 ...` from a `grid_shape`)."""
    if not axes:
        return index_constant(rewriter, 1)
    shape = rewriter.insert(shard.GridShapeOp(grid, axes))
    product = index_constant(rewriter, 1)
    for size in shape.results:
        product = rewriter.insert(arith.MuliOp(product, size)).result
    return product


def _mul(lhs: AffineExpr, rhs: AffineExpr) -> AffineExpr:
    """A symbolic product (xDSL's `*` rejects semi-affine products)."""
    return AffineBinaryOpExpr(AffineBinaryOpKind.Mul, lhs, rhs)


def _add(lhs: AffineExpr, rhs: AffineExpr) -> AffineExpr:
    return AffineBinaryOpExpr(AffineBinaryOpKind.Add, lhs, rhs)


def _symbols_product(count: int) -> AffineMap:
    expr: AffineExpr = AffineExpr.symbol(0)
    for i in range(1, count):
        expr = _mul(expr, AffineExpr.symbol(i))
    return AffineMap(0, count, (expr,))


def linearize_index(
    rewriter: PatternRewriter, index: Sequence[SSAValue], basis: Sequence[SSAValue]
) -> SSAValue | int:
    """The row-major linear index of `index` over `basis`, as upstream's
    `affine::linearizeIndex` builds it: the value itself for one axis, 0 for none, and an
    `affine.apply` of `()[s0, s1, s2] -> (s0 * s1 + s2)` (index 0, stride, index 1) for
    two. For more axes the leading strides are `affine.apply` products of the basis."""
    n = len(index)
    if n == 0:
        return 0
    if n == 1:
        return index[0]
    strides: list[SSAValue] = []
    for k in range(n - 1):
        rest = basis[k + 1 :]
        if len(rest) == 1:
            strides.append(rest[0])
        else:
            apply = affine.ApplyOp(list(rest), AffineMapAttr(_symbols_product(len(rest))))
            strides.append(rewriter.insert(apply).result)
    operands: list[SSAValue] = []
    expr: AffineExpr | None = None
    for k in range(n - 1):
        term = _mul(AffineExpr.symbol(len(operands)), AffineExpr.symbol(len(operands) + 1))
        operands += [index[k], strides[k]]
        expr = term if expr is None else _add(expr, term)
    assert expr is not None
    expr = _add(expr, AffineExpr.symbol(len(operands)))
    operands.append(index[n - 1])
    amap = AffineMap(0, len(operands), (expr,))
    return rewriter.insert(affine.ApplyOp(operands, AffineMapAttr(amap))).result


def process_linear_index(
    rewriter: PatternRewriter, grid: str, axes: Sequence[int]
) -> SSAValue:
    """This process's linear index in its group over `axes` (upstream's
    `createProcessLinearIndex`): `process_multi_index` linearized over `grid_shape`."""
    if not axes:
        return index_constant(rewriter, 0)
    multi = rewriter.insert(shard.ProcessMultiIndexOp(grid, axes))
    shape = rewriter.insert(shard.GridShapeOp(grid, axes))
    linear = linearize_index(rewriter, list(multi.results), list(shape.results))
    return index_constant(rewriter, linear) if isinstance(linear, int) else linear


class AllSliceOpLowering(RewritePattern):
    """Rewrites `shard.all_slice` on a ranked tensor whose grid is known."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, shard.AllSliceOp):
            return
        source_type = op.input.type
        grid = shard.lookup_grid(op, op.grid)
        if grid is None or not isinstance(source_type, TensorType):
            return
        name = grid.sym_name.data
        axes = op.grid_axes_tuple
        slice_axis = op.slice_axis.value.data
        rank = source_type.get_num_dims()
        rewriter.insertion_point = InsertPoint.after(op)

        zero = index_constant(rewriter, 0)
        multi: Sequence[SSAValue] = ()
        shape: Sequence[SSAValue] = ()
        if axes:
            multi = rewriter.insert(shard.ProcessMultiIndexOp(name, axes)).results
            shape = rewriter.insert(shard.GridShapeOp(name, axes)).results
        group_size = collective_process_group_size(rewriter, grid, axes)
        dim = self._dim(rewriter, op.input, slice_axis)
        rem = rewriter.insert(arith.RemUIOp(dim, group_size)).result
        ok = rewriter.insert(arith.CmpiOp(rem, zero, "eq")).result
        rewriter.insert(cf.AssertOp(ok, NOT_DIVISIBLE))
        part = rewriter.insert(arith.DivUIOp(dim, group_size)).result
        linear = linearize_index(rewriter, multi, shape)

        sizes: list[SSAValue | int] = []
        for i in range(rank):
            sizes.append(part if i == slice_axis else self._dim(rewriter, op.input, i))
        linear_value = index_constant(rewriter, linear) if isinstance(linear, int) else linear
        offsets: list[SSAValue | int] = [0] * rank
        offsets[slice_axis] = rewriter.insert(arith.MuliOp(linear_value, part)).result
        sliced_type = TensorType(source_type.get_element_type(), [DYNAMIC_INDEX] * rank)
        sliced = rewriter.insert(
            tensor.ExtractSliceOp(op.input, offsets, sizes, [1] * rank, sliced_type)
        )
        result_type: Attribute = op.result.type
        cast = rewriter.insert(tensor.CastOp(sliced.result, result_type))  # pyright: ignore
        rewriter.replace(op, [], [cast.dest])

    @staticmethod
    def _dim(rewriter: PatternRewriter, source: SSAValue, axis: int) -> SSAValue:
        """`tensor.dim` with its own index constant, as MLIR's `DimOp` builder makes it."""
        return rewriter.insert(tensor.DimOp(source, index_constant(rewriter, axis))).result
