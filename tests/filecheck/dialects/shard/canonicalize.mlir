// RUN: shardc-opt %s --split-input-file --canonicalize | filecheck %s

// Collectives over no grid axes are the identity when the type does not change.

shard.grid @g(shape = 2x4)

// CHECK-LABEL: func.func @empty_grid_axes
// CHECK-SAME: (%[[ARG:.*]]: tensor<4x8xf32>
func.func @empty_grid_axes(%arg0: tensor<4x8xf32>, %m: memref<4xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-NOT: shard.all_gather
  // CHECK-NOT: shard.all_slice
  // CHECK-NOT: shard.all_to_all
  // CHECK-NOT: shard.broadcast
  // CHECK-NOT: shard.gather
  // CHECK-NOT: shard.reduce_scatter
  %0 = shard.all_gather %arg0 on @g gather_axis = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = shard.all_slice %0 on @g slice_axis = 1 : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = shard.all_to_all %1 on @g split_axis = 0 concat_axis = 1 : tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = shard.broadcast %2 on @g root = [] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = shard.gather %arg0 on @g gather_axis = 1 root = [] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = shard.reduce_scatter %arg0 on @g reduction = max scatter_axis = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  %6 = shard.scatter %arg0 on @g scatter_axis = 0 root = [] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %7 = shard.reduce %arg0 on @g root = [] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NOT: shard.all_reduce %{{.*}} : memref<4xf32>
  %8 = shard.all_reduce %m on @g : memref<4xf32> -> memref<4xf32>
  // CHECK-NOT: shard.send
  // CHECK-NOT: shard.recv
  %9 = shard.send %arg0 on @g destination = [] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %10 = shard.recv %arg0 on @g : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: return %[[ARG]], %[[ARG]], %[[ARG]], %[[ARG]], %[[ARG]], %[[ARG]]
  return %3, %4, %5, %6, %7, %10 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @kept_collectives
func.func @kept_collectives(%arg0: tensor<4x8xf32>) -> (tensor<4x8xf64>, tensor<8x8xf32>, tensor<4x8xf32>) {
  // CHECK: shard.all_reduce %{{.*}} on @g : tensor<4x8xf32> -> tensor<4x8xf64>
  %0 = shard.all_reduce %arg0 on @g : tensor<4x8xf32> -> tensor<4x8xf64>
  // CHECK: shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 0
  %1 = shard.all_gather %arg0 on @g grid_axes = [0] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  // CHECK: shard.all_reduce %{{.*}} on @g grid_axes = [1]
  %2 = shard.all_reduce %arg0 on @g grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0, %1, %2 : tensor<4x8xf64>, tensor<8x8xf32>, tensor<4x8xf32>
}

// -----

// shard.sharding: constant dynamic entries become static, trivial lists disappear.

shard.grid @g(shape = 4)

// CHECK-LABEL: func.func @normalize_shardings
func.func @normalize_shardings(%arg0: tensor<12xf32>, %h: i64) -> (tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>) {
  %c0 = arith.constant 0 : i64
  %c2 = arith.constant 2 : i64
  %c3 = arith.constant 3 : i64
  %cm1 = arith.constant -1 : i64
  // CHECK-DAG: shard.sharding @g split_axes = {{\[\[}}0]] halo_sizes = [2, %{{.*}}] : !shard.sharding
  %s0 = shard.sharding @g split_axes = [[0]] halo_sizes = [%c2, %h] : !shard.sharding
  // CHECK-DAG: shard.sharding @g split_axes = {{\[\[}}0]] halo_sizes = [%{{.*}}, 3] : !shard.sharding
  %s1 = shard.sharding @g split_axes = [[0]] halo_sizes = [%cm1, %c3] : !shard.sharding
  // CHECK-DAG: shard.sharding @g split_axes = {{\[\[}}0]] sharded_dims_offsets = [0, 2, 5, 9, 12] : !shard.sharding
  %s2 = shard.sharding @g split_axes = [[0]] sharded_dims_offsets = [%c0, %c2, 5, 9, 12] : !shard.sharding
  // The next three normalise to the plain split sharding.
  %s3 = shard.sharding @g split_axes = [[0]] halo_sizes = [%c0, 0] : !shard.sharding
  %s4 = shard.sharding @g split_axes = [[0]] sharded_dims_offsets = [0, 3, 6, 9, 12] : !shard.sharding
  %s5 = shard.sharding @g split_axes = [[0]] sharded_dims_offsets = [%c0, %c3, 6, 9, 12] : !shard.sharding
  // CHECK-DAG: shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
  // CHECK-NOT: arith.constant
  %a0 = shard.shard %arg0 to %s0 : tensor<12xf32>
  %a1 = shard.shard %arg0 to %s1 : tensor<12xf32>
  %a2 = shard.shard %arg0 to %s2 : tensor<12xf32>
  %a3 = shard.shard %arg0 to %s3 : tensor<12xf32>
  %a4 = shard.shard %arg0 to %s4 : tensor<12xf32>
  %a5 = shard.shard %arg0 to %s5 : tensor<12xf32>
  return %a0, %a1, %a2, %a3, %a4, %a5 : tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>
}

// -----

// Duplicate annotations of one value.

shard.grid @g(shape = 4)

// CHECK-LABEL: func.func @same_sharding_twice
// CHECK-SAME: (%[[ARG:.*]]: tensor<8xf32>)
func.func @same_sharding_twice(%arg0: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %s0 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %s1 = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  // CHECK: %[[A:.*]] = shard.shard %[[ARG]] to %{{.*}} : tensor<8xf32>
  %a = shard.shard %arg0 to %s0 : tensor<8xf32>
  // CHECK-NOT: shard.shard
  %b = shard.shard %arg0 to %s1 : tensor<8xf32>
  // CHECK: return %[[A]], %[[A]]
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @other_sharding
// CHECK-SAME: (%[[ARG:.*]]: tensor<8xf32>)
func.func @other_sharding(%arg0: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %s0 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %s1 = shard.sharding @g split_axes = [[]] : !shard.sharding
  // CHECK: %[[A:.*]] = shard.shard %[[ARG]] to %{{.*}} : tensor<8xf32>
  %a = shard.shard %arg0 to %s0 : tensor<8xf32>
  // CHECK: %[[B:.*]] = shard.shard %[[A]] to %{{.*}} annotate_for_users : tensor<8xf32>
  %b = shard.shard %arg0 to %s1 annotate_for_users : tensor<8xf32>
  // CHECK: return %[[A]], %[[B]]
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @later_user_blocks_folding
// CHECK-SAME: (%[[ARG:.*]]: tensor<8xf32>)
func.func @later_user_blocks_folding(%arg0: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %s0 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  // CHECK: shard.shard %[[ARG]] to
  // CHECK: shard.shard %[[ARG]] to
  %a = shard.shard %arg0 to %s0 : tensor<8xf32>
  %b = shard.shard %arg0 to %s0 : tensor<8xf32>
  // CHECK: arith.negf %[[ARG]]
  %c = arith.negf %arg0 : tensor<8xf32>
  return %a, %b, %c : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
