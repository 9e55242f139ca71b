// RUN: shardc-opt %s --convert-shard-to-mpi --canonicalize --split-input-file | filecheck %s

// Behaviours of trunk's convert-shard-to-mpi tests, on IR of our own.

// Vector code beside the shard ops is legal: a masked reduction to a scalar passes
// through, the dead scalar add after it goes.
// CHECK-LABEL: func.func @masked_scalar_reduction(
// CHECK-SAME: %[[V:.*]]: vector<4xf64>
// CHECK: %[[MASK:.*]] = vector.constant_mask [3] : vector<4xi1>
// CHECK: vector.mask %[[MASK]] { vector.multi_reduction <maximumf>, %[[V]], %{{.*}} [0] : vector<4xf64> to f64 } : vector<4xi1> -> f64
// CHECK-NOT: arith.mulf
// CHECK: return
func.func @masked_scalar_reduction(%v: vector<4xf64>, %acc: f64) {
  %mask = vector.constant_mask [3] : vector<4xi1>
  %r = vector.mask %mask { vector.multi_reduction <maximumf>, %v, %acc [0] : vector<4xf64> to f64 } : vector<4xi1> -> f64
  %unused = arith.mulf %r, %acc : f64
  return
}

// -----

// The deliberate difference from trunk: trunk leaves shard.send illegal ("failed to
// legalize operation 'shard.send' that was explicitly marked illegal"); shardc lowers
// it to an mpi.send on the group's communicator (here the world: one grid axis).
shard.grid @line(shape = 2)
// CHECK-LABEL: func.func @send_is_lowered(
// CHECK-SAME: %[[ARG:.*]]: tensor<3xi8>
func.func @send_is_lowered(%arg0: tensor<3xi8>) {
  // CHECK: %[[BUF:.*]] = bufferization.to_buffer %[[ARG]] read_only : tensor<3xi8> to memref<3xi8>
  // CHECK: mpi.send(%[[BUF]], %{{.*}}, %{{.*}}, %{{.*}}) : memref<3xi8>, i32, i32
  // CHECK-NOT: shard.send
  %0 = shard.send %arg0 on @line grid_axes = [0] destination = [1] : (tensor<3xi8>) -> tensor<3xi8>
  return
}

// -----

// shard_shape with sharded_dims_offsets folds to constants once the rank is known. Rank
// 13 on a 2x3x4 grid is (1, 0, 1): rows [0, 5, 7] -> shard 1 has 2, columns
// [0, 1, 1, 6] -> shard 0 has 1, planes [0, 2, 4, 6, 9] -> shard 1 has 2. The rank
// folds in canonicalize, as in trunk, so the constants come in trunk's order: the first
// size computed first.
module attributes {mpi.dlti = #dlti.map<"MPI:comm_world_rank" = 13>} {
  shard.grid @cube(shape = 2x3x4)
  // CHECK-LABEL: func.func @uneven_offsets() -> (index, index, index) {
  // CHECK-NEXT: %[[C2:.*]] = arith.constant 2 : index
  // CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : index
  // CHECK-NEXT: return %[[C2]], %[[C1]], %[[C2]] : index, index, index
  func.func @uneven_offsets() -> (index, index, index) {
    %s = shard.sharding @cube split_axes = [[0], [1], [2]] sharded_dims_offsets = [0, 5, 7, 0, 1, 1, 6, 0, 2, 4, 6, 9] : !shard.sharding
    %d:3 = shard.process_multi_index on @cube : index, index, index
    %c7 = arith.constant 7 : index
    %r:3 = shard.shard_shape dims = [%c7, 6, 9] sharding = %s device = [%d#0, %d#1, %d#2] : index, index, index
    return %r#0, %r#1, %r#2 : index, index, index
  }

  // Without offsets: 10 rows over 2 -> 5; 7 columns over 3 -> [2, 2, 3], shard 0 has 2;
  // 9 planes over 4 -> [2, 2, 2, 3], shard 1 has 2.
  // CHECK-LABEL: func.func @even_rule() -> (index, index, index) {
  // CHECK-DAG: %[[C5:.*]] = arith.constant 5 : index
  // CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
  // CHECK: return %[[C5]], %[[C2]], %[[C2]] : index, index, index
  func.func @even_rule() -> (index, index, index) {
    %s = shard.sharding @cube split_axes = [[0], [1], [2]] : !shard.sharding
    %d:3 = shard.process_multi_index on @cube : index, index, index
    %r:3 = shard.shard_shape dims = [10, 7, 9] sharding = %s device = [%d#0, %d#1, %d#2] : index, index, index
    return %r#0, %r#1, %r#2 : index, index, index
  }
}
