// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(shard-partition))" %s --split-input-file | filecheck %s

// Fully annotated programs beyond trunk's lit tests: one value resharded differently for
// each of its users, a tensor captured by a linalg body, 0-d and scalar values.

shard.grid @g(shape = 2x2)
// Each annotation for users reshards the one local tensor on its own; the returned
// producer annotation is the argument itself.
// CHECK-LABEL: func.func @many_users
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<8x8xf32>, tensor<4x8xf32>)
// CHECK-DAG: shard.all_slice %[[X]] on @g grid_axes = [1] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK-DAG: shard.all_gather %[[X]] on @g grid_axes = [0] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK: tosa.abs
// CHECK: tosa.abs
// CHECK: return %{{.*}}, %{{.*}}, %[[X]] : tensor<8x4xf32>, tensor<8x8xf32>, tensor<4x8xf32>
func.func @many_users(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %row = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %col = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %rep = shard.sharding @g split_axes = [[]] : !shard.sharding
  %xa = shard.shard %x to %row : tensor<8x8xf32>
  %x1 = shard.shard %xa to %col annotate_for_users : tensor<8x8xf32>
  %x2 = shard.shard %xa to %rep annotate_for_users : tensor<8x8xf32>
  %a = tosa.abs %x1 : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %aa = shard.shard %a to %col : tensor<8x8xf32>
  %b = tosa.abs %x2 : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %ba = shard.shard %b to %rep : tensor<8x8xf32>
  return %aa, %ba, %xa : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

shard.grid @g(shape = 2)
// The table is read at global indices inside the body: it is gathered whole first.
// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[IDS:.*]]: tensor<2xi64>, %[[T:.*]]: tensor<8x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[G:.*]] = shard.all_gather %[[T]] on @g grid_axes = [0] gather_axis = 0 : tensor<8x4xf32> -> tensor<16x4xf32>
// CHECK: %[[C:.*]] = tensor.cast %[[G]]
// CHECK: linalg.generic
// CHECK: tensor.extract %[[C]][
func.func @gather(%ids: tensor<4xi64>, %table: tensor<16x4xf32>) -> tensor<4x4xf32> {
  %row = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %ia = shard.shard %ids to %row : tensor<4xi64>
  %i1 = shard.shard %ia to %row annotate_for_users : tensor<4xi64>
  %ta = shard.shard %table to %row : tensor<16x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %ea = shard.shard %e to %row : tensor<4x4xf32>
  %e1 = shard.shard %ea to %row annotate_for_users : tensor<4x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%i1 : tensor<4xi64>) outs(%e1 : tensor<4x4xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %j = linalg.index 1 : index
    %x = tensor.extract %ta[%i, %j] : tensor<16x4xf32>
    linalg.yield %x : f32
  } -> tensor<4x4xf32>
  %ra = shard.shard %r to %row : tensor<4x4xf32>
  return %ra : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2)
// A 0-d sum and the scalar read from it need no annotation (trunk asks for one on every
// result, which no shard.shard can give a scalar).
// CHECK-LABEL: func.func @scalars
// CHECK-SAME: -> (tensor<f32>, f32)
// CHECK: linalg.generic
// CHECK: %[[S:.*]] = shard.all_reduce
// CHECK: %[[V:.*]] = tensor.extract %[[S]][] : tensor<f32>
// CHECK: return %[[S]], %[[V]] : tensor<f32>, f32
func.func @scalars(%x: tensor<8xf32>) -> (tensor<f32>, f32) {
  %row = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %xa = shard.shard %x to %row : tensor<8xf32>
  %x1 = shard.shard %xa to %row annotate_for_users : tensor<8xf32>
  %e = tensor.empty() : tensor<f32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%x1 : tensor<8xf32>) outs(%e : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  %v = tensor.extract %s[] : tensor<f32>
  return %s, %v : tensor<f32>, f32
}
