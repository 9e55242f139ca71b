"""Unit tests of the option computation of the ShardingInterface (no IR rewriting)."""

from __future__ import annotations

import pytest
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.interfaces.sharding import (
    ShardingInfo,
    collect_diagnostics,
    get_sharding_interface,
    operand_expr_loops,
)
from shardc.passes.sharding_propagation import ordered_possible_shardings

MATMUL = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x6xf32>) outs(%c : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}
"""


def _first_op(text: str):
    module = Parser(make_context(), text).parse_module()
    func = next(iter(module.ops))
    return next(iter(func.body.block.ops))


def S(*axes: list[int]) -> ShardingInfo:
    return ShardingInfo.get("g", axes)


def test_matmul_loops_and_maps():
    op = _first_op(MATMUL)
    impl = get_sharding_interface(op)
    assert impl is not None
    assert [str(t) for t in impl.get_loop_iterator_types(op)] == ["parallel", "parallel", "reduction"]
    maps = impl.get_indexing_maps(op)
    assert len(maps) == 4 and maps[3] == maps[2]  # the result is indexed as its init
    assert [str(k) for k in impl.get_reduction_loop_iterator_kinds(op)] == ["sum"]


def test_option_from_operand_and_result():
    op = _first_op(MATMUL)
    impl = get_sharding_interface(op)
    option = impl.get_sharding_option(op, [S([0], [1]), None, None], [None])
    assert option is not None and not option.empty
    assert option.sharding_array == [[0], [], [1]] and option.grid == "g"
    shardings = impl.get_sharding_annotations(op, option)
    assert [s.split_axes if s else None for s in shardings] == [
        ((0,), (1,)),
        ((1,),),
        ((0,),),
        ((0,),),
    ]


def test_conflicting_loop_assignments_fail():
    op = _first_op(MATMUL)
    impl = get_sharding_interface(op)
    # Loop 0 split on axis 0 by the lhs, on axis 1 by the result.
    assert impl.get_sharding_option(op, [S([0]), None, None], [S([1])]) is None
    # The same grid axis on two loops.
    assert impl.get_sharding_option(op, [S([0], [0]), None, None], [None]) is None


def test_empty_option_without_annotations():
    op = _first_op(MATMUL)
    impl = get_sharding_interface(op)
    assert impl.get_sharding_option(op, [None, None, None], [None]).empty


def test_last_operand_decides_emptiness_like_upstream():
    op = _first_op(MATMUL)
    impl = get_sharding_interface(op)
    # The result is annotated, but the last annotated operand has no split axes at all.
    option = impl.get_sharding_option(op, [None, ShardingInfo.get("g", []), None], [S([0])])
    assert option is not None and option.empty


def test_explicit_empty_sub_array_conflicts():
    op = _first_op(MATMUL)
    impl = get_sharding_interface(op)
    # `[[]]` on the init says "loop 0 not split", which conflicts with the lhs.
    assert impl.get_sharding_option(op, [S([0]), None, S([])], [None]) is None


def test_invalid_implementation_is_reported_not_raised():
    text = """
func.func @f(%a: memref<4xf32>, %b: memref<4xf32>) {
  linalg.copy ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)
  return
}
"""
    op = _first_op(text)
    impl = get_sharding_interface(op)
    with collect_diagnostics() as found:
        assert impl.get_sharding_option(op, [None, None], []) is None
    assert [d.message for d in found] == ["'linalg.copy' op invalid sharding interface implementation"]


@pytest.mark.parametrize(
    ("expr", "loops"),
    [
        (AffineDimExpr(1), [1]),
        (AffineBinaryOpExpr(AffineBinaryOpKind.Add, AffineDimExpr(0), AffineDimExpr(2)), [0, 2]),
        (AffineBinaryOpExpr(AffineBinaryOpKind.Mul, AffineDimExpr(0), AffineConstantExpr(2)), [0]),
        (AffineBinaryOpExpr(AffineBinaryOpKind.Add, AffineDimExpr(0), AffineConstantExpr(1)), None),
        (AffineBinaryOpExpr(AffineBinaryOpKind.Add, AffineDimExpr(0), AffineDimExpr(0)), None),
        (AffineConstantExpr(0), None),
    ],
)
def test_operand_expressions(expr, loops):
    assert operand_expr_loops(expr, 3) == loops


def test_ordered_possible_shardings():
    a, b = S([0]), S([1])
    combos = ordered_possible_shardings([a, None, None], [None, b, None])
    assert combos == [[a, b, None], [a, None, None]]


def test_registry_by_name_and_class():
    tosa = _first_op(
        """
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = tosa.abs %a : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""
    )
    assert get_sharding_interface(tosa) is not None
    cast = _first_op(
        """
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = tensor.cast %a : tensor<4xf32> to tensor<4xf32>
  return %r : tensor<4xf32>
}
"""
    )
    assert get_sharding_interface(cast) is None
