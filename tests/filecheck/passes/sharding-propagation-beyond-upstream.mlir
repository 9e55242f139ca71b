// RUN: shardc-opt %s --sharding-propagation | filecheck %s
// RUN: shardc-opt %s --sharding-propagation --shard-partition | filecheck %s --check-prefix=PART
// RUN: shardc-opt %s --sharding-propagation=complete=false --shard-partition | filecheck %s --check-prefix=UPSTREAM

// The order of the traversals where upstream has no result to keep. Upstream's default
// order (backward, then forward) visits the second matmul first: its replicated weight
// is the only sharding around it, so it runs replicated and asks for `%h` whole; the
// batch split of `%x` arrives later and is all-gathered. Where upstream succeeds (only
// ops it has sharding models for: @upstream_mlp) that is trunk's result and stays. A
// function holding an op upstream cannot propagate (torch-mlir's reshapes: @imported_mlp)
// has no upstream result, and the completion traverses it forward first: the batch
// split reaches every activation before the replicated weights' annotations spread back.

shard.grid @g(shape = 4)

// CHECK-LABEL: func.func @upstream_mlp
// CHECK: %[[H:.*]] = linalg.matmul
// CHECK-NEXT: %[[S:.*]] = shard.sharding @g split_axes = {{\[\[}}0]]
// CHECK-NEXT: %[[HS:.*]] = shard.shard %[[H]] to %[[S]] : tensor<8x32xf32>
// CHECK: shard.shard %{{.*}} : tensor<8x16xf32>
// CHECK-NEXT: %[[R:.*]] = shard.sharding @g split_axes = {{\[\[}}]]
// CHECK-NEXT: shard.shard %[[HS]] to %[[R]] annotate_for_users : tensor<8x32xf32>
// PART-LABEL: func.func @upstream_mlp
// PART: shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 0 : tensor<2x32xf32> -> tensor<8x32xf32>
// PART: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x32xf32>, tensor<32x16xf32>)
// UPSTREAM-LABEL: func.func @upstream_mlp
// UPSTREAM: shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 0 : tensor<2x32xf32> -> tensor<8x32xf32>
func.func @upstream_mlp(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %w2: tensor<32x16xf32>) -> tensor<8x16xf32> {
  %batch = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %x0 = shard.shard %x to %batch : tensor<8x16xf32>
  %x1 = shard.shard %x0 to %batch annotate_for_users : tensor<8x16xf32>
  %rep = shard.sharding @g split_axes = [[]] : !shard.sharding
  %w10 = shard.shard %w1 to %rep : tensor<16x32xf32>
  %w11 = shard.shard %w10 to %rep annotate_for_users : tensor<16x32xf32>
  %w20 = shard.shard %w2 to %rep : tensor<32x16xf32>
  %w21 = shard.shard %w20 to %rep annotate_for_users : tensor<32x16xf32>
  %e1 = tensor.empty() : tensor<8x32xf32>
  %h = linalg.matmul ins(%x1, %w11 : tensor<8x16xf32>, tensor<16x32xf32>) outs(%e1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %y = linalg.matmul ins(%h, %w21 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @imported_mlp
// CHECK: tensor.collapse_shape
// CHECK-NOT: split_axes = {{\[\[}}]] : !shard.sharding
// CHECK: tensor.expand_shape
// CHECK-NEXT: %[[S:.*]] = shard.sharding @g split_axes = {{\[\[}}0]]
// CHECK-NEXT: shard.shard %{{.*}} to %[[S]] : tensor<4x2x16xf32>
// PART-LABEL: func.func @imported_mlp(%{{.*}}: tensor<1x2x16xf32>, %{{.*}}: tensor<16x32xf32>, %{{.*}}: tensor<32x16xf32>) -> tensor<1x2x16xf32>
// PART-NOT: shard.all_gather
// PART: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<2x16xf32>, tensor<16x32xf32>)
// PART-NOT: shard.all_gather
// PART: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<2x32xf32>, tensor<32x16xf32>)
// PART-NOT: shard.
// PART: return
// Without the completion, upstream's order as given: the batch is gathered.
// UPSTREAM-LABEL: func.func @imported_mlp
// UPSTREAM: shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 0 : tensor<2x16xf32> -> tensor<8x16xf32>
func.func @imported_mlp(%x: tensor<4x2x16xf32>, %w1: tensor<16x32xf32>, %w2: tensor<32x16xf32>) -> tensor<4x2x16xf32> {
  %batch = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %x0 = shard.shard %x to %batch : tensor<4x2x16xf32>
  %x1 = shard.shard %x0 to %batch annotate_for_users : tensor<4x2x16xf32>
  %rep = shard.sharding @g split_axes = [[]] : !shard.sharding
  %w10 = shard.shard %w1 to %rep : tensor<16x32xf32>
  %w11 = shard.shard %w10 to %rep annotate_for_users : tensor<16x32xf32>
  %w20 = shard.shard %w2 to %rep : tensor<32x16xf32>
  %w21 = shard.shard %w20 to %rep annotate_for_users : tensor<32x16xf32>
  %flat = tensor.collapse_shape %x1 [[0, 1], [2]] : tensor<4x2x16xf32> into tensor<8x16xf32>
  %e1 = tensor.empty() : tensor<8x32xf32>
  %h = linalg.matmul ins(%flat, %w11 : tensor<8x16xf32>, tensor<16x32xf32>) outs(%e1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %y = linalg.matmul ins(%h, %w21 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r = tensor.expand_shape %y [[0, 1], [2]] output_shape [4, 2, 16] : tensor<8x16xf32> into tensor<4x2x16xf32>
  return %r : tensor<4x2x16xf32>
}
