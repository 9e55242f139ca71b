"""Legality conditions of the shard simplifications, the folders, and the greedy driver."""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.dialects import shard
from shardc.ir.printer import print_module
from shardc.lowering import all_op_lowering_patterns
from shardc.passes.folding import try_fold
from shardc.passes.greedy import apply_patterns_greedily
from shardc.passes.simplify import (
    ShardSimplifyPass,
    gather_slice_cancel,
    is_endomorphism,
    simplification_patterns,
)

SUM, MIN, MAX = shard.ReductionKind.SUM, shard.ReductionKind.MIN, shard.ReductionKind.MAX


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def ops_of(module: ModuleOp, kind: type[Operation]) -> list[Operation]:
    return [op for op in module.walk() if isinstance(op, kind)]


def printed(module: ModuleOp) -> str:
    out = StringIO()
    print_module(module, out)
    return out.getvalue()


REDUCES = """
shard.grid @g(shape = 2x2)
shard.grid @h(shape = 2x2)
func.func @f(%a: tensor<2xf32>, %b: tensor<2xf16>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %0 = shard.all_reduce %a on @g grid_axes = [0] : tensor<2xf32> -> tensor<2xf32>
  %1 = shard.all_reduce %a on @g grid_axes = [0] : tensor<2xf32> -> tensor<2xf32>
  %2 = shard.all_reduce %a on @g grid_axes = [1] : tensor<2xf32> -> tensor<2xf32>
  %3 = shard.all_reduce %a on @h grid_axes = [0] : tensor<2xf32> -> tensor<2xf32>
  %4 = shard.all_reduce %b on @g grid_axes = [0] : tensor<2xf16> -> tensor<2xf32>
  %5 = shard.all_reduce %a on @g grid_axes = [0] reduction = max : tensor<2xf32> -> tensor<2xf32>
  %6 = arith.addf %1, %1 : tensor<2xf32>
  return %0, %2, %3, %4, %5 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}
"""


def test_endomorphism_conditions():
    module = parse(REDUCES)
    r0, r1, r2, r3, r4, r5 = ops_of(module, shard.AllReduceOp)
    assert isinstance(r0, shard.AllReduceOp)
    assert is_endomorphism(r0, SUM, None)
    assert is_endomorphism(r0, SUM, r0)
    assert not is_endomorphism(r0, MIN, None), "wrong reduction kind"
    assert not is_endomorphism(r1, SUM, None), "two uses (by the same op)"
    assert not is_endomorphism(r2, SUM, r0), "other grid axes"
    assert not is_endomorphism(r3, SUM, r0), "other grid"
    assert not is_endomorphism(r4, SUM, None), "converts the element type"
    assert is_endomorphism(r5, MAX, None) and not is_endomorphism(r5, SUM, r0)
    assert not is_endomorphism(ops_of(module, arith.AddfOp)[0], SUM, None)


def test_gather_slice_cancel_conditions():
    module = parse("""
shard.grid @g(shape = 2x2)
shard.grid @h(shape = 2x2)
func.func @f(%x: tensor<4x4xf32>) -> (tensor<8x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>, tensor<4x2xf32>, tensor<2x4xf32>) {
  %g = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
  %s = shard.all_slice %g on @g grid_axes = [0] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %s1 = shard.all_slice %x on @h grid_axes = [0] slice_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  %s2 = shard.all_slice %x on @g grid_axes = [0] slice_axis = 1 : tensor<4x4xf32> -> tensor<4x2xf32>
  %s3 = shard.all_slice %x on @g grid_axes = [1] slice_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  return %g, %s, %s1, %s2, %s3 : tensor<8x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>, tensor<4x2xf32>, tensor<2x4xf32>
}
""")
    (gather,) = ops_of(module, shard.AllGatherOp)
    same, other_grid, other_axis, other_axes = ops_of(module, shard.AllSliceOp)
    assert isinstance(gather, shard.AllGatherOp)
    assert gather_slice_cancel(gather, same)  # pyright: ignore[reportArgumentType]
    for slice_op in (other_grid, other_axis, other_axes):
        assert not gather_slice_cancel(gather, slice_op)  # pyright: ignore[reportArgumentType]


def test_simplification_set_is_upstreams_older_one():
    names = [type(p).__name__ for p in simplification_patterns()]
    assert names.count("AllReduceEndomorphism") == 8
    assert "AllReduceAllSliceToReduceScatter" not in names
    assert names[-1] == "GridShapeFolder"


def test_minnumf_not_distributed():
    module = parse("""
shard.grid @g(shape = 2)
func.func @f(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  %0 = shard.all_reduce %a on @g grid_axes = [0] reduction = min : tensor<2xf32> -> tensor<2xf32>
  %1 = shard.all_reduce %b on @g grid_axes = [0] reduction = min : tensor<2xf32> -> tensor<2xf32>
  %2 = arith.minnumf %0, %1 : tensor<2xf32>
  return %2 : tensor<2xf32>
}
""")
    ShardSimplifyPass().apply(make_context(), module)
    assert len(ops_of(module, shard.AllReduceOp)) == 2


def test_grid_shape_of_unknown_grid_is_left_alone():
    module = parse("""
shard.grid @g(shape = 2)
func.func @f() -> index {
  %0 = shard.grid_shape @g : index
  return %0 : index
}
""")
    (query,) = ops_of(module, shard.GridShapeOp)
    assert isinstance(query, shard.GridShapeOp)
    query.grid = shard.FlatSymbolRefAttr("missing")  # pyright: ignore[reportAttributeAccessIssue]
    apply_patterns_greedily(module, simplification_patterns(), ctx=make_context())
    assert len(ops_of(module, shard.GridShapeOp)) == 1


def test_lowerings_need_the_grid():
    module = parse("""
shard.grid @g(shape = 2)
func.func @f(%x: tensor<4xf32>) -> (index, tensor<2xf32>) {
  %0 = shard.process_multi_index on @g : index
  %1 = shard.all_slice %x on @g grid_axes = [0] slice_axis = 0 : tensor<4xf32> -> tensor<2xf32>
  return %0, %1 : index, tensor<2xf32>
}
""")
    for op in module.walk():
        if isinstance(op, shard.ProcessMultiIndexOp | shard.AllSliceOp):
            op.grid = shard.FlatSymbolRefAttr("missing")  # pyright: ignore[reportAttributeAccessIssue]
    apply_patterns_greedily(module, all_op_lowering_patterns(), ctx=make_context())
    assert ops_of(module, shard.ProcessMultiIndexOp) and ops_of(module, shard.AllSliceOp)


def test_all_slice_with_empty_group_lowers_to_offset_zero():
    module = parse("""
shard.grid @g(shape = 2)
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = shard.all_slice %x on @g slice_axis = 0 : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
""")
    apply_patterns_greedily(module, all_op_lowering_patterns(), ctx=make_context())
    text = printed(module)
    assert "shard." not in text.replace("shard.grid @g", "")
    assert "tensor.extract_slice %arg0[0] [4] [1]" in text.replace("%c4", "4").replace("%c0", "0")
    module.verify()


def fold(op: Operation) -> list[object] | None:
    """The driver's fold of `op`: None, [] when changed in place, else the values."""
    result = try_fold(op)
    if result is None:
        return None
    return [] if result.values is None else list(result.values)


def index(v: int) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(v, IndexType()))


@pytest.mark.parametrize(
    ("op", "a", "b", "expected"),
    [
        (arith.DivUIOp, 7, 2, 3),
        (arith.DivUIOp, 7, 0, None),
        (arith.RemUIOp, 7, 0, None),
        (arith.RemUIOp, 7, 4, 3),
        (arith.DivSIOp, -7, 2, -3),
        (arith.RemSIOp, -7, 2, -1),
        (arith.SubiOp, 3, 5, -2),
        (arith.AddiOp, 2**63 - 1, 1, -(2**63)),
    ],
)
def test_integer_folds(op: type[Operation], a: int, b: int, expected: int | None):
    lhs, rhs = index(a), index(b)
    folded = fold(op(lhs, rhs))  # pyright: ignore[reportCallIssue]
    if expected is None:
        assert folded is None
    else:
        assert folded == [IntegerAttr(expected, IndexType())]


def test_multiplication_by_zero_is_the_zero_operand():
    x, zero = index(3), index(0)
    assert fold(arith.MuliOp(x, zero)) == [zero.result]


def test_commutative_fold_moves_constants_last():
    x = func.FuncOp("f", ((IndexType(),), ())).body.blocks[0].args[0]
    c = index(1)
    mul = arith.MuliOp(c, x)
    assert fold(mul) == []
    assert mul.lhs is x and mul.rhs is c.result
    assert fold(mul) == [x]


def test_greedy_driver_uniques_and_hoists_constants():
    module = parse("""
func.func @f(%i: index) -> (index, index) {
  %0 = arith.addi %i, %i : index
  %c1 = arith.constant 1 : index
  %1 = arith.addi %i, %c1 : index
  %c1_0 = arith.constant 1 : index
  return %1, %c1_0 : index, index
}
""")
    apply_patterns_greedily(module, [], ctx=make_context())
    body = ops_of(module, func.FuncOp)[0].body.blocks[0]  # pyright: ignore[reportAttributeAccessIssue]
    kinds = [op.name for op in body.ops]
    assert kinds == ["arith.constant", "arith.addi", "func.return"]
