// RUN: shardc-opt %s --pass-pipeline='builtin.module(reduction-precision{type=bf16 grid-axes=0})' | filecheck %s
// RUN: shardc-opt %s --pass-pipeline='builtin.module(reduction-precision)' | filecheck %s --check-prefix=EVERY
// RUN: shardc-opt %s --pass-pipeline='builtin.module(reduction-precision{type=f32})' | filecheck %s --check-prefix=F32
// RUN: not shardc-opt %s --pass-pipeline='builtin.module(reduction-precision{type=f16})' 2>&1 | filecheck %s --check-prefix=BAD

// Gradients' sums over the batch axis (0) of a 2x2 grid: a ZeRO weight gradient's
// reduce_scatter and a replicated bias gradient's all_reduce reduce bf16 copies, their
// results widened back. The loss (a scalar), a tensor-parallel all_reduce over axis 1,
// a max and a sum over both axes keep float32 under grid-axes=0; with no grid-axes
// every float32 sum of rank >= 1 is narrowed.
// CHECK-LABEL: func.func @grads
// CHECK-SAME: (%[[G:.*]]: tensor<8x4xf32>, %[[B:.*]]: tensor<4xf32>, %[[L:.*]]: tensor<f32>, %[[A:.*]]: tensor<6x4xf32>, %[[M:.*]]: tensor<4xf32>, %[[BOTH:.*]]: tensor<4xf32>)
// CHECK: %[[GD:.*]] = linalg.generic {{.*}} ins(%[[G]] : tensor<8x4xf32>) outs(%{{.*}} : tensor<8x4xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: %[[RS:.*]] = shard.reduce_scatter %[[GD]] on @grid grid_axes = [0] scatter_dim = 0 : tensor<8x4xbf16> -> tensor<4x4xbf16>
// CHECK: %[[GU:.*]] = linalg.generic {{.*}} ins(%[[RS]] : tensor<4x4xbf16>) outs(%{{.*}} : tensor<4x4xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[BD:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<4xf32>) outs(%{{.*}} : tensor<4xbf16>)
// CHECK: %[[AR:.*]] = shard.all_reduce %[[BD]] on @grid grid_axes = [0] : tensor<4xbf16> -> tensor<4xbf16>
// CHECK: %[[BU:.*]] = linalg.generic {{.*}} ins(%[[AR]] : tensor<4xbf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[LR:.*]] = shard.all_reduce %[[L]] on @grid grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: %[[AA:.*]] = shard.all_reduce %[[A]] on @grid grid_axes = [1] : tensor<6x4xf32> -> tensor<6x4xf32>
// CHECK: %[[MM:.*]] = shard.all_reduce %[[M]] on @grid grid_axes = [0] reduction = {{ *}}max : tensor<4xf32> -> tensor<4xf32>
// CHECK: %[[BB:.*]] = shard.all_reduce %[[BOTH]] on @grid grid_axes = [1, 0] : tensor<4xf32> -> tensor<4xf32>
// CHECK: return %[[GU]], %[[BU]], %[[LR]], %[[AA]], %[[MM]], %[[BB]] :

// EVERY-LABEL: func.func @grads
// EVERY: shard.reduce_scatter %{{.*}} grid_axes = [0] scatter_dim = 0 : tensor<8x4xbf16> -> tensor<4x4xbf16>
// EVERY: shard.all_reduce %{{.*}} grid_axes = [0] : tensor<4xbf16> -> tensor<4xbf16>
// EVERY: shard.all_reduce %{{.*}} grid_axes = [0] : tensor<f32> -> tensor<f32>
// EVERY: shard.all_reduce %{{.*}} grid_axes = [1] : tensor<6x4xbf16> -> tensor<6x4xbf16>
// EVERY: shard.all_reduce %{{.*}} max : tensor<4xf32> -> tensor<4xf32>
// EVERY: shard.all_reduce %{{.*}} grid_axes = [1, 0] : tensor<4xbf16> -> tensor<4xbf16>

// F32-LABEL: func.func @grads
// F32-NOT: bf16

// BAD: shardc-opt: for the --type option of pass 'reduction-precision': Cannot find option named 'f16'! (choose from: bf16, f32)
shard.grid @grid(shape = 2x2)
func.func @grads(%g: tensor<8x4xf32>, %b: tensor<4xf32>, %l: tensor<f32>, %a: tensor<6x4xf32>, %m: tensor<4xf32>, %both: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>, tensor<f32>, tensor<6x4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = shard.reduce_scatter %g on @grid grid_axes = [0] scatter_dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %1 = shard.all_reduce %b on @grid grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %2 = shard.all_reduce %l on @grid grid_axes = [0] : tensor<f32> -> tensor<f32>
  %3 = shard.all_reduce %a on @grid grid_axes = [1] : tensor<6x4xf32> -> tensor<6x4xf32>
  %4 = shard.all_reduce %m on @grid grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
  %5 = shard.all_reduce %both on @grid grid_axes = [1, 0] : tensor<4xf32> -> tensor<4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4x4xf32>, tensor<4xf32>, tensor<f32>, tensor<6x4xf32>, tensor<4xf32>, tensor<4xf32>
}
