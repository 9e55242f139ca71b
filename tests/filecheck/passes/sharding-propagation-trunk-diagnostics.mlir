// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation))" %s --split-input-file --verify-diagnostics
// RUN: not shardc-opt --sharding-propagation %s --split-input-file 2>&1 | filecheck %s

// Diagnostics of sharding-propagation with trunk's words and places. Trunk is newer than
// MLIR 22.1.8 here: 22.1.8 reads no `shard.grid "private"` and propagates the split of a
// broadcast tosa.matmul batch instead of refusing it (it splits the size-one dimension).

// CHECK: error: 'func.func' op only one block is supported!
shard.grid "private" @one(shape = 1)
// expected-error @+1 {{'func.func' op only one block is supported!}}
func.func @two_blocks(%x: tensor<6x6xi32>) -> tensor<6x6xi32> {
  %s = shard.sharding @one split_axes = [[0]] : !shard.sharding
  %y = shard.shard %x to %s : tensor<6x6xi32>
  cf.br ^tail
^tail:
  return %y : tensor<6x6xi32>
}

// -----

// A tosa.matmul operand whose batch broadcasts (size 1 against a batch of 2) is indexed
// by a constant: splitting that dimension is refused.
// CHECK: error: 'tosa.matmul' op cannot shard operand 0 dimension 1: its indexing expression is constant
shard.grid @two(shape = 2)
func.func @lhs_broadcast_batch_split(%a: tensor<1x4x8xf32>, %b: tensor<2x8x16xf32>, %zp: tensor<1xf32>) -> tensor<2x4x16xf32> {
  %s = shard.sharding @two split_axes = [[0]] : !shard.sharding
  %as = shard.shard %a to %s annotate_for_users : tensor<1x4x8xf32>
  // expected-error @+1 {{'tosa.matmul' op cannot shard operand 0 dimension 1: its indexing expression is constant}}
  %0 = tosa.matmul %as, %b, %zp, %zp : (tensor<1x4x8xf32>, tensor<2x8x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

// CHECK: error: 'tosa.matmul' op cannot shard operand 1 dimension 1: its indexing expression is constant
shard.grid @two(shape = 2)
func.func @rhs_broadcast_batch_split(%a: tensor<2x4x8xf32>, %b: tensor<1x8x16xf32>, %zp: tensor<1xf32>) -> tensor<2x4x16xf32> {
  %s = shard.sharding @two split_axes = [[0]] : !shard.sharding
  %bs = shard.shard %b to %s annotate_for_users : tensor<1x8x16xf32>
  // expected-error @+1 {{'tosa.matmul' op cannot shard operand 1 dimension 1: its indexing expression is constant}}
  %0 = tosa.matmul %a, %bs, %zp, %zp : (tensor<2x4x8xf32>, tensor<1x8x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

// Splitting a broadcast operand along another dimension is fine; a batch split that comes
// from the result leaves the broadcast operand's batch unsplit.
shard.grid @two(shape = 2)
// CHECK-LABEL: func.func @broadcast_operand_not_split_on_batch
func.func @broadcast_operand_not_split_on_batch(%a: tensor<1x4x8xf32>, %b: tensor<2x8x16xf32>, %zp: tensor<1xf32>) -> tensor<2x4x16xf32> {
  // CHECK: %[[A:.*]] = shard.sharding @two split_axes = [[]] : !shard.sharding
  // CHECK: shard.shard %arg0 to %[[A]] annotate_for_users : tensor<1x4x8xf32>
  // CHECK: %[[B:.*]] = shard.sharding @two split_axes = [[0]] : !shard.sharding
  // CHECK: shard.shard %arg1 to %[[B]] annotate_for_users : tensor<2x8x16xf32>
  // CHECK: tosa.matmul
  %0 = tosa.matmul %a, %b, %zp, %zp : (tensor<1x4x8xf32>, tensor<2x8x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x16xf32>
  %s = shard.sharding @two split_axes = [[0]] : !shard.sharding
  %r = shard.shard %0 to %s : tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}
