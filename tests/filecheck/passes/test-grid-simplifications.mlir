// RUN: shardc-opt %s --test-grid-simplifications | filecheck %s

// mlir-opt's test pass runs the older pattern set: endomorphisms and grid_shape
// folding, not the collective fusions of shard-simplify.

shard.grid @g(shape = 3x?)

// CHECK-LABEL: func.func @endomorphism_and_shape
// CHECK-SAME: (%[[A:.*]]: tensor<4xi64>, %[[B:.*]]: tensor<4xi64>)
func.func @endomorphism_and_shape(%a: tensor<4xi64>, %b: tensor<4xi64>) -> (tensor<4xi64>, index, index) {
  // CHECK-NEXT: %[[C3:.*]] = arith.constant 3 : index
  // CHECK-NEXT: %[[M:.*]] = arith.maxui %[[A]], %[[B]] : tensor<4xi64>
  // CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[M]] on @g grid_axes = [0] reduction = max
  // CHECK-NEXT: %[[S:.*]] = shard.grid_shape @g axes = [1] : index
  // CHECK-NEXT: return %[[R]], %[[C3]], %[[S]]
  %ra = shard.all_reduce %a on @g grid_axes = [0] reduction = max : tensor<4xi64> -> tensor<4xi64>
  %rb = shard.all_reduce %b on @g grid_axes = [0] reduction = max : tensor<4xi64> -> tensor<4xi64>
  %m = arith.maxui %ra, %rb : tensor<4xi64>
  %s:2 = shard.grid_shape @g : index, index
  return %m, %s#0, %s#1 : tensor<4xi64>, index, index
}

// CHECK-LABEL: func.func @no_collective_fusion
func.func @no_collective_fusion(%x: tensor<6xf32>) -> (tensor<2xf32>, tensor<6xf32>) {
  // CHECK-NEXT: shard.all_reduce
  // CHECK-NEXT: shard.all_slice
  // CHECK-NEXT: shard.all_slice
  // CHECK-NEXT: shard.all_gather
  // CHECK-NEXT: return
  %r = shard.all_reduce %x on @g grid_axes = [0] : tensor<6xf32> -> tensor<6xf32>
  %s = shard.all_slice %r on @g grid_axes = [0] slice_axis = 0 : tensor<6xf32> -> tensor<2xf32>
  %t = shard.all_slice %x on @g grid_axes = [0] slice_axis = 0 : tensor<6xf32> -> tensor<2xf32>
  %g = shard.all_gather %t on @g grid_axes = [0] gather_axis = 0 : tensor<2xf32> -> tensor<6xf32>
  return %s, %g : tensor<2xf32>, tensor<6xf32>
}

// Constants are uniqued and hoisted to the function entry, as MLIR's greedy driver does.
// CHECK-LABEL: func.func @constants_hoisted
func.func @constants_hoisted(%i: index) -> (index, index, index) {
  // CHECK-NEXT: %[[C3:.*]] = arith.constant 3 : index
  // CHECK-NEXT: %[[ADD:.*]] = arith.addi %{{.*}}, %[[C3]] : index
  // CHECK-NEXT: return %[[ADD]], %[[C3]], %[[C3]]
  %0 = arith.addi %i, %i : index
  %c3 = arith.constant 3 : index
  %1 = arith.addi %i, %c3 : index
  %s:2 = shard.grid_shape @g : index, index
  return %1, %c3, %s#0 : index, index, index
}
