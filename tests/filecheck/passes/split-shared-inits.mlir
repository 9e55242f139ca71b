// RUN: shardc-opt %s --split-shared-inits --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-shared-inits --sharding-propagation --shard-partition --split-input-file | filecheck %s --check-prefix=PART

// torch-mlir's form when batch x seq equals the hidden size: one empty is the init of an
// activation split over the batch and of a weight's transpose. Each user gets its own.
// CHECK-LABEL: func.func @shared_empty
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: linalg.transpose ins(%{{.*}} : tensor<4x4xf32>) outs(%[[E2]] : tensor<4x4xf32>)
// CHECK: linalg.generic {{.*}} outs(%[[E1]] : tensor<4x4xf32>)
// CHECK-NOT: tensor.empty

// Partitioned, the weight's transpose stays whole, the activation's init is built
// split (shared, it would be built whole and sliced).
// PART-LABEL: func.func @shared_empty
// PART-NOT: shard.all_
// PART: linalg.transpose ins(%{{.*}} : tensor<4x4xf32>) outs(%{{.*}} : tensor<4x4xf32>)
// PART-NOT: shard.all_
// PART: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4xf32>)
// PART-NOT: shard.all_
// PART: return
shard.grid @grid(shape = 2)
func.func @shared_empty(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %xs = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %x0 = shard.shard %x to %xs : tensor<4x4xf32>
  %x1 = shard.shard %x0 to %xs annotate_for_users : tensor<4x4xf32>
  %ws = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %w0 = shard.shard %w to %ws : tensor<4x4xf32>
  %w1 = shard.shard %w0 to %ws annotate_for_users : tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %t = linalg.transpose ins(%w1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) permutation = [1, 0]
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %t, %y : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A zero fill shared by two contractions: each gets its own fill of its own empty.
// CHECK-LABEL: func.func @shared_fill
// CHECK: %[[Z:.*]] = arith.constant 0.0
// CHECK: %[[E1:.*]] = tensor.empty()
// CHECK: %[[F1:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E1]] : tensor<4x4xf32>)
// CHECK: %[[E2:.*]] = tensor.empty()
// CHECK: %[[F2:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E2]] : tensor<4x4xf32>)
// CHECK: linalg.matmul {{.*}} outs(%[[F2]] : tensor<4x4xf32>)
// CHECK: linalg.matmul {{.*}} outs(%[[F1]] : tensor<4x4xf32>)
func.func @shared_fill(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = linalg.matmul ins(%b, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0, %1 : tensor<4x4xf32>, tensor<4x4xf32>
}
