// RUN: not shardc-opt --sharding-propagation %s 2>&1 | filecheck %s
// RUN: not shardc-opt --sharding-propagation=complete=false %s 2>&1 | filecheck %s

// Two functions of one module (no --split-input-file), each with its own error: both are
// reported, in order, as mlir-opt reports them. The second comes from an op's sharding
// interface refusing an option, which must not hide the first function's error.

// CHECK: error: 'func.func' op only one block is supported!
// CHECK: error: 'tosa.matmul' op cannot shard operand 1 dimension 1: its indexing expression is constant
shard.grid @pair(shape = 2)

func.func @branches(%v: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %s = shard.sharding @pair split_axes = [[0]] : !shard.sharding
  %w = shard.shard %v to %s : tensor<4x4xf32>
  cf.br ^exit
^exit:
  return %w : tensor<4x4xf32>
}

func.func @broadcast_rhs_split(%l: tensor<2x3x5xf32>, %r: tensor<1x5x7xf32>, %z: tensor<1xf32>) -> tensor<2x3x7xf32> {
  %s = shard.sharding @pair split_axes = [[0]] : !shard.sharding
  %rs = shard.shard %r to %s annotate_for_users : tensor<1x5x7xf32>
  %p = tosa.matmul %l, %rs, %z, %z : (tensor<2x3x5xf32>, tensor<1x5x7xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x3x7xf32>
  return %p : tensor<2x3x7xf32>
}
