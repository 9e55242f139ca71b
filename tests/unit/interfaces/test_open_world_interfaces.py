"""The ShardingInterface implementations beyond upstream's set: loops and maps, which
splits they allow, and (by execution on simulated ranks) that their `partition` computes
what the unsharded op does."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.interfaces.sharding import ShardingInfo, get_sharding_interface
from shardc.tools.verification import verify

GRID = "shard.grid @g(shape = 2x2)\n"


def _op(text: str, name: str):
    module = Parser(make_context(), GRID + text).parse_module()
    return next(op for op in module.walk() if op.name == name)


def _check(text: str, inputs=None) -> None:
    report = verify(GRID + text, ranks=4, inputs=inputs)
    assert report.status == "ok", report


def S(*axes):
    return ShardingInfo.get("g", axes)


COLLAPSE = """
func.func @f(%x: tensor<1x8x6xf32>) -> tensor<8x6xf32> {
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<1x8x6xf32> into tensor<8x6xf32>
  return %c : tensor<8x6xf32>
}
"""


def test_collapse_major_dimension_skips_size_one():
    op = _op(COLLAPSE, "tensor.collapse_shape")
    impl = get_sharding_interface(op)
    maps = impl.get_indexing_maps(op)
    assert str(maps[1]) == "(d0, d1, d2) -> (d1, d2)"  # dim 0 of the result follows loop 1
    option = impl.get_sharding_option(op, [None], [S([0])])
    assert option.sharding_array[:2] == [[], [0]]
    # a split of the size-one dimension has no counterpart: dropped
    option = impl.get_sharding_option(op, [S([0])], [None])
    assert not any(option.sharding_array)


def test_expand_partitions_with_local_output_shape():
    _check("""
func.func @f(%x: tensor<8x6xf32>) -> tensor<2x4x6xf32> {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x6xf32>
  %c = tensor.expand_shape %a [[0, 1], [2]] output_shape [2, 4, 6] : tensor<8x6xf32> into tensor<2x4x6xf32>
  %e = tosa.exp %c : (tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return %e : tensor<2x4x6xf32>
}
""")


def test_extract_slice_refuses_splitting_a_sliced_dimension():
    op = _op("""
func.func @f(%x: tensor<8x12xf32>) -> tensor<8x4xf32> {
  %v = tensor.extract_slice %x[0, 4] [8, 4] [1, 1] : tensor<8x12xf32> to tensor<8x4xf32>
  return %v : tensor<8x4xf32>
}
""", "tensor.extract_slice")
    impl = get_sharding_interface(op)
    option = impl.get_sharding_option(op, [S([0], [1])], [None])
    assert option.sharding_array[0] == [0] and option.sharding_array[1:2] in ([], [[]])


def test_insert_slice_split_along_whole_dimension():
    _check("""
func.func @f(%x: tensor<8x4xf32>, %d: tensor<8x12xf32>) -> tensor<8x12xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x4xf32>
  %r = tensor.insert_slice %a into %d[0, 4] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x12xf32>
  %e = tosa.exp %r : (tensor<8x12xf32>) -> tensor<8x12xf32>
  return %e : tensor<8x12xf32>
}
""")


def test_concat_split_off_the_concatenated_dimension():
    _check("""
func.func @f(%x: tensor<8x4xf32>, %y: tensor<8x2xf32>) -> tensor<8x6xf32> {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x4xf32>
  %r = tensor.concat dim(1) %a, %y : (tensor<8x4xf32>, tensor<8x2xf32>) -> tensor<8x6xf32>
  %e = tosa.exp %r : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %e : tensor<8x6xf32>
}
""")


@pytest.mark.parametrize(
    "body",
    [
        # batch_matmul, batch split
        """
func.func @f(%a: tensor<4x2x3xf32>, %b: tensor<4x3x5xf32>) -> tensor<4x2x5xf32> {
  %s = shard.sharding @g split_axes = [[0, 1]] : !shard.sharding
  %x = shard.shard %a to %s : tensor<4x2x3xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2x5xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<4x2x5xf32>) -> tensor<4x2x5xf32>
  %r = linalg.batch_matmul ins(%x, %b : tensor<4x2x3xf32>, tensor<4x3x5xf32>) outs(%i : tensor<4x2x5xf32>) -> tensor<4x2x5xf32>
  return %r : tensor<4x2x5xf32>
}
""",
        # transpose of a split tensor
        """
func.func @f(%a: tensor<4x6xf32>) -> tensor<6x4xf32> {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %x = shard.shard %a to %s : tensor<4x6xf32>
  %e = tensor.empty() : tensor<6x4xf32>
  %t = linalg.transpose ins(%x : tensor<4x6xf32>) outs(%e : tensor<6x4xf32>) permutation = [1, 0]
  return %t : tensor<6x4xf32>
}
""",
        # reduce over a split dimension: a partial sum then all_reduce
        """
func.func @f(%a: tensor<4x6xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %x = shard.shard %a to %s : tensor<4x6xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r = linalg.reduce ins(%x : tensor<4x6xf32>) outs(%i : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %y = arith.addf %in, %acc : f32
      linalg.yield %y : f32
    }
  return %r : tensor<4xf32>
}
""",
        # broadcast of a split tensor
        """
func.func @f(%a: tensor<4xf32>) -> tensor<4x6xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %x = shard.shard %a to %s : tensor<4xf32>
  %e = tensor.empty() : tensor<4x6xf32>
  %b = linalg.broadcast ins(%x : tensor<4xf32>) outs(%e : tensor<4x6xf32>) dimensions = [1]
  return %b : tensor<4x6xf32>
}
""",
    ],
    ids=["batch_matmul", "transpose", "reduce", "broadcast"],
)
def test_linalg_ops_partition_and_compute_the_same(body):
    _check(body)


ARGMAX = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#r = affine_map<(d0, d1) -> (d0)>
func.func @f(%x: tensor<4x8xf32>, %m0: tensor<4xf32>, %i0: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>) {
  %r:2 = linalg.generic {indexing_maps = [#id, #r, #r], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%m0, %i0 : tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%in: f32, %out: f32, %out_i: i64):
    %j = linalg.index 1 : index
    %jj = arith.index_cast %j : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %sel = arith.select %gt, %jj, %out_i : i64
    linalg.yield %mx, %sel : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xi64>
}
"""


def test_reductions_the_partitioning_cannot_combine_are_not_chosen():
    op = _op(ARGMAX, "linalg.generic")
    impl = get_sharding_interface(op)
    from shardc.interfaces.sharding import ShardingOption

    assert impl.allows_option(op, ShardingOption([[0], []], "g"))
    assert not impl.allows_option(op, ShardingOption([[0], [1]], "g"))  # two inits
    matmul = _op("""
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x6xf32>) outs(%c : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}
""", "linalg.matmul")
    assert get_sharding_interface(matmul).allows_option(matmul, ShardingOption([[], [], [1]], "g"))


def test_split_dense_constant_is_sliced_from_the_whole_value():
    _check("""
func.func @f(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %c = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %c to %s : tensor<4x2xf32>
  %b = shard.shard %x to %s : tensor<4x2xf32>
  %r = tosa.add %a, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}
""")
