// RUN: shardc-opt %s --shard-to-mpi-pipeline | filecheck %s
// RUN: shardc-opt %s --pass-pipeline="builtin.module(shard-to-mpi-pipeline{traversal=forward-backward keep-shardings=false})" | filecheck %s --check-prefix=PLAIN

// A row-parallel matmul on a 2x2 grid: the contraction dimension of both operands is
// split over axis 1, so the partial products are summed over axis 1 after the local
// matmul; the pipeline leaves mpi ops only, and records the global signature.
shard.grid @grid(shape = 2x2)

// CHECK-LABEL: func.func @row_parallel(
// CHECK-SAME: %[[A:.*]]: tensor<8x4xf32> {shardc.global_type = tensor<8x8xf32>, shardc.name = "a", shardc.sharding = {grid = @grid, {{.*}}split_axes = [array<i16>, array<i16: 1>]}}
// CHECK-SAME: %[[B:.*]]: tensor<4x6xf32> {shardc.global_type = tensor<8x6xf32>, shardc.name = "b", shardc.sharding = {grid = @grid, {{.*}}split_axes = [array<i16: 1>]}}
// CHECK-SAME: -> (tensor<8x6xf32> {shardc.global_type = tensor<8x6xf32>, shardc.sharding = {grid = @grid, {{.*}}split_axes = [array<i16>]}})
// CHECK-NOT: shard.
// CHECK: %[[P:.*]] = linalg.matmul ins(%[[A]], %[[B]] : tensor<8x4xf32>, tensor<4x6xf32>)
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[P]] read_only
// CHECK: %[[BUF:.*]] = memref.alloc() : memref<8x6xf32>
// CHECK: linalg.copy ins(%[[IN]] : memref<8x6xf32>) outs(%[[BUF]] : memref<8x6xf32>)
// CHECK: %[[WORLD:.*]] = mpi.comm_world : !mpi.comm
// CHECK: %[[COMM:.*]] = mpi.comm_split(%[[WORLD]], %{{.*}}, %{{.*}}) : !mpi.comm
// CHECK: mpi.allreduce(%[[BUF]], %[[BUF]], MPI_SUM, %[[COMM]]) : memref<8x6xf32>, memref<8x6xf32>
// CHECK: %[[OUT:.*]] = bufferization.to_tensor %[[BUF]] restrict
// CHECK: return %[[OUT]] : tensor<8x6xf32>
// CHECK-NOT: shard.

// PLAIN-LABEL: func.func @row_parallel(%arg0: tensor<8x4xf32>, %arg1: tensor<4x6xf32>) -> tensor<8x6xf32> {
// PLAIN: mpi.allreduce
func.func @row_parallel(%a: tensor<8x8xf32>, %b: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %sa = shard.sharding @grid split_axes = [[], [1]] : !shard.sharding
  %sb = shard.sharding @grid split_axes = [[1]] : !shard.sharding
  %sr = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %a_s = shard.shard %a to %sa : tensor<8x8xf32>
  %b_s = shard.shard %b to %sb : tensor<8x6xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x6xf32>) -> tensor<8x6xf32>
  %p = linalg.matmul ins(%a_s, %b_s : tensor<8x8xf32>, tensor<8x6xf32>) outs(%f : tensor<8x6xf32>) -> tensor<8x6xf32>
  %r = shard.shard %p to %sr : tensor<8x6xf32>
  return %r : tensor<8x6xf32>
}
