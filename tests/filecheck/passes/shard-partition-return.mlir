// RUN: shardc-opt %s --split-input-file --sharding-propagation --shard-partition | filecheck %s

// A function returning a value annotated only for its producer returns it in that
// sharding (trunk insists on an annotate_for_users copy, which propagation never adds).

shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @split_result
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[N:.*]] = tosa.negate %[[X]]
// CHECK: return %[[N]] : tensor<2x8xf32>
func.func @split_result(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x8xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %n = tosa.negate %xs, %zp, %zp : (tensor<4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x8xf32>
  %ns = shard.shard %n to %s : tensor<4x8xf32>
  return %ns : tensor<4x8xf32>
}

// -----

shard.grid @g(shape = 2)
// The returned value is gathered when its users need it whole: here the return itself
// asks for it replicated.
// CHECK-LABEL: func.func @gathered_result
// CHECK-SAME: -> tensor<4x8xf32>
// CHECK: shard.all_gather
// CHECK: return
func.func @gathered_result(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %r = shard.sharding @g split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x8xf32>
  %xr = shard.shard %xs to %r annotate_for_users : tensor<4x8xf32>
  return %xr : tensor<4x8xf32>
}
