"""Two sharding-propagation bugs the training step hit, on small IR of their own:
a 0-d tensor operand left a non-empty option without a grid (an assertion), and an
existing producer annotation placed after another user of the value was reused in place
(that user then read a value defined after it, and shard-partition failed)."""

from xdsl.dialects import func

from shardc.context import make_context
from shardc.passes.partition import ShardPartitionPass
from shardc.passes.sharding_propagation import ShardingPropagationPass

ZERO_D = """
shard.grid @g(shape = 2)
func.func @f(%x: tensor<f32>) -> tensor<f32> {
  %s = shard.sharding @g split_axes = [[]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<f32>
  %e = tensor.empty() : tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%a : tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %in : f32
    linalg.yield %m : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
"""

LATE_ANNOTATION = """
shard.grid @g(shape = 2)
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s0 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s0 annotate_for_users : tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %in : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %u = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%r : tensor<4xf32>) outs(%e2 : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.addf %in, %in : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %s1 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %late = shard.shard %r to %s1 : tensor<4xf32>
  %s2 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %u2 = shard.shard %u to %s2 : tensor<4xf32>
  return %late, %u2 : tensor<4xf32>, tensor<4xf32>
}
"""


def _parse(text: str):
    from xdsl.parser import Parser

    return Parser(make_context(), text).parse_module()


def _dominance_ok(module) -> bool:
    for f in module.ops:
        if not isinstance(f, func.FuncOp):
            continue
        seen = set(f.body.block.args)
        for op in f.body.block.ops:
            if any(o not in seen and o.owner.parent_block() is f.body.block for o in op.operands):
                return False
            seen.update(op.results)
    return True


def test_zero_d_operand_annotated_for_users_propagates():
    module = _parse(ZERO_D)
    ShardingPropagationPass(traversal="forward-backward").apply(make_context(), module)
    ShardPartitionPass().apply(make_context(), module)
    module.verify()


def test_reused_producer_annotation_is_moved_before_the_other_users():
    module = _parse(LATE_ANNOTATION)
    ShardingPropagationPass(traversal="forward-backward").apply(make_context(), module)
    assert _dominance_ok(module)
    ShardPartitionPass().apply(make_context(), module)
    module.verify()
