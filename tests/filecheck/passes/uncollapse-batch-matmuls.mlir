// RUN: shardc-opt %s --uncollapse-batch-matmuls --split-input-file | filecheck %s
// RUN: shardc-opt %s --uncollapse-batch-matmuls --sharding-propagation --shard-partition --split-input-file | filecheck %s --check-prefix=PART

// Grouped-query attention's `probs @ v`: v comes from repeat_kv (BxGxRxTxD collapsed to
// (B*G*R)xTxD), the probabilities from BxHxTxT (H = G*R). One contraction over b, g, r:
// the probabilities expanded to BxGxRxTxT, the product collapsed back to BxHxTxD.
// CHECK-LABEL: func.func @gqa
// CHECK-NOT: linalg.batch_matmul
// CHECK: %[[P:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2], [3], [4]] output_shape [2, 2, 2, 3, 3] : tensor<2x4x3x3xf32> into tensor<2x2x2x3x3xf32>
// CHECK: %[[Z:.*]] = linalg.fill
// CHECK: %[[C:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[P]], %{{.*}} : tensor<2x2x2x3x3xf32>, tensor<2x2x2x3x5xf32>) outs(%[[Z]] : tensor<2x2x2x3x5xf32>)
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[C]] {{\[}}[0], [1, 2], [3], [4]] : tensor<2x2x2x3x5xf32> into tensor<2x4x3x5xf32>
// CHECK: return %[[R]]

// Split over the batch and the key/value groups (heads follow the groups), nothing is
// gathered: each rank multiplies its own heads.
// PART-LABEL: func.func @gqa
// PART-NOT: shard.all_gather
// PART: linalg.generic {{.*}}"reduction"]} ins({{.*}} : tensor<1x1x2x3x3xf32>, tensor<1x1x2x3x5xf32>) outs(%{{.*}} : tensor<1x1x2x3x5xf32>)
// PART-NOT: shard.all_gather
// PART: return %{{.*}} : tensor<1x2x3x5xf32>
shard.grid @grid(shape = 2x2)
func.func @gqa(%p: tensor<2x4x3x3xf32>, %v: tensor<2x2x3x5xf32>) -> tensor<2x4x3x5xf32> {
  %s = shard.sharding @grid split_axes = [[0], [1]] : !shard.sharding
  %p0 = shard.shard %p to %s : tensor<2x4x3x3xf32>
  %p1 = shard.shard %p0 to %s annotate_for_users : tensor<2x4x3x3xf32>
  %v0 = shard.shard %v to %s : tensor<2x2x3x5xf32>
  %v1 = shard.shard %v0 to %s annotate_for_users : tensor<2x2x3x5xf32>
  %e = tensor.empty() : tensor<2x2x2x3x5xf32>
  %rep = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%v1 : tensor<2x2x3x5xf32>) outs(%e : tensor<2x2x2x3x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x2x2x3x5xf32>
  %vc = tensor.collapse_shape %rep [[0, 1, 2], [3], [4]] : tensor<2x2x2x3x5xf32> into tensor<8x3x5xf32>
  %pc = tensor.collapse_shape %p1 [[0, 1], [2], [3]] : tensor<2x4x3x3xf32> into tensor<8x3x3xf32>
  %z = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<8x3x5xf32>
  %f = linalg.fill ins(%z : f32) outs(%e2 : tensor<8x3x5xf32>) -> tensor<8x3x5xf32>
  %bmm = linalg.batch_matmul ins(%pc, %vc : tensor<8x3x3xf32>, tensor<8x3x5xf32>) outs(%f : tensor<8x3x5xf32>) -> tensor<8x3x5xf32>
  %out = tensor.expand_shape %bmm [[0, 1], [2], [3]] output_shape [2, 4, 3, 5] : tensor<8x3x5xf32> into tensor<2x4x3x5xf32>
  return %out : tensor<2x4x3x5xf32>
}

// -----

// Batch dimensions that differ without a common factorization stay a batch_matmul.
// CHECK-LABEL: func.func @no_common_factors
// CHECK: linalg.batch_matmul
// PART-LABEL: func.func @no_common_factors
func.func @no_common_factors(%a: tensor<2x3x4x4xf32>, %b: tensor<3x2x4x4xf32>) -> tensor<6x4x4xf32> {
  %ac = tensor.collapse_shape %a [[0, 1], [2], [3]] : tensor<2x3x4x4xf32> into tensor<6x4x4xf32>
  %bc = tensor.collapse_shape %b [[0, 1], [2], [3]] : tensor<3x2x4x4xf32> into tensor<6x4x4xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x4x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<6x4x4xf32>) -> tensor<6x4x4xf32>
  %bmm = linalg.batch_matmul ins(%ac, %bc : tensor<6x4x4xf32>, tensor<6x4x4xf32>) outs(%f : tensor<6x4x4xf32>) -> tensor<6x4x4xf32>
  %out = tensor.expand_shape %bmm [[0, 1], [2], [3]] output_shape [2, 3, 4, 4] : tensor<6x4x4xf32> into tensor<2x3x4x4xf32>
  %r = tensor.collapse_shape %out [[0, 1], [2], [3]] : tensor<2x3x4x4xf32> into tensor<6x4x4xf32>
  return %r : tensor<6x4x4xf32>
}
