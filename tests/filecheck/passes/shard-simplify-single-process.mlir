// RUN: shardc-opt %s --shard-simplify | filecheck %s
// RUN: shardc-opt %s --canonicalize | filecheck %s --check-prefix=CANON

// Beyond upstream: shard-simplify folds collectives whose grid axes all have static
// size 1. canonicalize keeps upstream's behaviour (only empty grid axes fold there).

shard.grid @dp_tp(shape = 4x1)
shard.grid @ones(shape = 1x1x1)
shard.grid @dyn(shape = 1x?)

// CHECK-LABEL: func.func @every_kind
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
// CANON-LABEL: func.func @every_kind
// CANON-COUNT-10: shard.
func.func @every_kind(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = shard.all_reduce %x on @dp_tp grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = shard.all_gather %x on @dp_tp grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = shard.all_slice %x on @dp_tp grid_axes = [1] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = shard.all_to_all %x on @ones grid_axes = [0, 2] split_axis = 0 concat_axis = 1 : tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = shard.reduce_scatter %x on @dp_tp grid_axes = [1] reduction = max scatter_axis = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  %5 = shard.broadcast %x on @dp_tp grid_axes = [1] root = [0] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %6 = shard.gather %x on @dp_tp grid_axes = [1] gather_axis = 1 root = [0] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %7 = shard.scatter %x on @dp_tp grid_axes = [1] scatter_axis = 0 root = [0] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %8 = shard.reduce %x on @ones grid_axes = [1] root = [0] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %9 = shard.shift %x on @dp_tp grid_axes = [1] shift_axis = 1 offset = 1 rotate : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// Only static and dynamic sizes differ: a tensor.cast.
// CHECK-LABEL: func.func @cast
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[C:.*]] = tensor.cast %[[X]] : tensor<4x8xf32> to tensor<?x8xf32>
// CHECK-NEXT: return %[[C]]
func.func @cast(%x: tensor<4x8xf32>) -> tensor<?x8xf32> {
  %0 = shard.all_gather %x on @dp_tp grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// CHECK-LABEL: func.func @kept
// A group of 4 processes, an axis of dynamic size, a mixed group.
// CHECK: shard.all_reduce %{{.*}} on @dp_tp grid_axes = [0]
// CHECK: shard.all_reduce %{{.*}} on @dyn grid_axes = [1]
// CHECK: shard.all_reduce %{{.*}} on @dp_tp grid_axes = [1, 0]
// The element type changes (a wider accumulator).
// CHECK: shard.all_reduce %{{.*}} on @dp_tp grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf64>
// A shift without rotate by a nonzero offset: the lone process receives nothing.
// CHECK: shard.shift
// CHECK: return
func.func @kept(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf64>, tensor<4x8xf32>) {
  %0 = shard.all_reduce %x on @dp_tp grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = shard.all_reduce %x on @dyn grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = shard.all_reduce %x on @dp_tp grid_axes = [1, 0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = shard.all_reduce %x on @dp_tp grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf64>
  %4 = shard.shift %x on @dp_tp grid_axes = [1] shift_axis = 1 offset = 1 : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0, %1, %2, %3, %4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf64>, tensor<4x8xf32>
}

// Empty grid axes are left to canonicalize (upstream's pattern there).
// CHECK-LABEL: func.func @no_axes
// CHECK-NEXT: shard.all_reduce %{{.*}} on @dp_tp :
// CANON-LABEL: func.func @no_axes
// CANON-NEXT: return %arg0
func.func @no_axes(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = shard.all_reduce %x on @dp_tp : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
