// RUN: shardc-opt %s --split-input-file --forward-send-copies | filecheck %s
// RUN: shardc-opt %s --split-input-file --convert-shard-to-mpi --forward-send-copies --canonicalize | filecheck %s --check-prefix=LOWERED

// A copy that only stages a send buffer: the collective reads the copy's source.
// CHECK-LABEL: func.func @staged_reduce_scatter(
// CHECK-SAME: %[[SRC:.*]]: memref<2x5x3xf32>
func.func @staged_reduce_scatter(%src: memref<2x5x3xf32>) -> memref<5x3xf32> {
  %world = mpi.comm_world : !mpi.comm
  // CHECK-NOT: linalg.copy
  // CHECK-NOT: memref<2x5x3xf32>
  // CHECK: %[[OUT:.*]] = memref.alloc() : memref<5x3xf32>
  // CHECK-NEXT: mpi.reduce_scatter_block(%[[SRC]], %[[OUT]], MPI_MAX, %{{.*}}) : memref<2x5x3xf32>, memref<5x3xf32>
  // CHECK-NEXT: return %[[OUT]]
  %staged = memref.alloc() : memref<2x5x3xf32>
  linalg.copy ins(%src : memref<2x5x3xf32>) outs(%staged : memref<2x5x3xf32>)
  %out = memref.alloc() : memref<5x3xf32>
  mpi.reduce_scatter_block(%staged, %out, MPI_MAX, %world) : memref<2x5x3xf32>, memref<5x3xf32>
  memref.dealloc %staged : memref<2x5x3xf32>
  return %out : memref<5x3xf32>
}

// -----

// mpi.allgather only reads its send buffer too.
// CHECK-LABEL: func.func @staged_all_gather(
// CHECK-SAME: %[[SRC:.*]]: memref<6xi64>
func.func @staged_all_gather(%src: memref<6xi64>) -> memref<4x6xi64> {
  %world = mpi.comm_world : !mpi.comm
  // CHECK-NOT: linalg.copy
  // CHECK: mpi.allgather(%[[SRC]], %{{.*}}, %{{.*}}) : memref<6xi64>, memref<4x6xi64>
  %staged = memref.alloc() : memref<6xi64>
  linalg.copy ins(%src : memref<6xi64>) outs(%staged : memref<6xi64>)
  %out = memref.alloc() : memref<4x6xi64>
  mpi.allgather(%staged, %out, %world) : memref<6xi64>, memref<4x6xi64>
  return %out : memref<4x6xi64>
}

// -----

// The source is written after the copy: MPI must send what was copied, so the copy stays.
// CHECK-LABEL: func.func @source_written_in_between(
func.func @source_written_in_between(%src: memref<4x2xf32>, %v: f32) -> memref<2x2xf32> {
  %c0 = arith.constant 0 : index
  %world = mpi.comm_world : !mpi.comm
  // CHECK: %[[STAGED:.*]] = memref.alloc() : memref<4x2xf32>
  // CHECK: linalg.copy
  // CHECK: memref.store
  // CHECK: mpi.reduce_scatter_block(%[[STAGED]],
  %staged = memref.alloc() : memref<4x2xf32>
  linalg.copy ins(%src : memref<4x2xf32>) outs(%staged : memref<4x2xf32>)
  memref.store %v, %src[%c0, %c0] : memref<4x2xf32>
  %out = memref.alloc() : memref<2x2xf32>
  mpi.reduce_scatter_block(%staged, %out, MPI_SUM, %world) : memref<4x2xf32>, memref<2x2xf32>
  return %out : memref<2x2xf32>
}

// -----

// An op of unknown effects between copy and collective may write the source: kept.
// CHECK-LABEL: func.func @unknown_op_in_between(
func.func @unknown_op_in_between(%src: memref<4x2xf32>) -> memref<2x2xf32> {
  %world = mpi.comm_world : !mpi.comm
  // CHECK: linalg.copy
  // CHECK: call @touch
  // CHECK: mpi.reduce_scatter_block(%alloc,
  %staged = memref.alloc() : memref<4x2xf32>
  linalg.copy ins(%src : memref<4x2xf32>) outs(%staged : memref<4x2xf32>)
  func.call @touch(%src) : (memref<4x2xf32>) -> ()
  %out = memref.alloc() : memref<2x2xf32>
  mpi.reduce_scatter_block(%staged, %out, MPI_SUM, %world) : memref<4x2xf32>, memref<2x2xf32>
  return %out : memref<2x2xf32>
}
func.func private @touch(memref<4x2xf32>)

// -----

// The staging buffer is read again after the collective (returned): kept.
// CHECK-LABEL: func.func @staged_buffer_escapes(
func.func @staged_buffer_escapes(%src: memref<4x2xf32>) -> (memref<2x2xf32>, memref<4x2xf32>) {
  %world = mpi.comm_world : !mpi.comm
  // CHECK: linalg.copy
  // CHECK: mpi.reduce_scatter_block(%alloc,
  %staged = memref.alloc() : memref<4x2xf32>
  linalg.copy ins(%src : memref<4x2xf32>) outs(%staged : memref<4x2xf32>)
  %out = memref.alloc() : memref<2x2xf32>
  mpi.reduce_scatter_block(%staged, %out, MPI_SUM, %world) : memref<4x2xf32>, memref<2x2xf32>
  return %out, %staged : memref<2x2xf32>, memref<4x2xf32>
}

// -----

// The receive buffer is not fresh (it might alias the source): kept.
// CHECK-LABEL: func.func @receive_into_argument(
func.func @receive_into_argument(%src: memref<4x2xf32>, %out: memref<2x2xf32>) {
  %world = mpi.comm_world : !mpi.comm
  // CHECK: linalg.copy
  // CHECK: mpi.reduce_scatter_block(%alloc,
  %staged = memref.alloc() : memref<4x2xf32>
  linalg.copy ins(%src : memref<4x2xf32>) outs(%staged : memref<4x2xf32>)
  mpi.reduce_scatter_block(%staged, %out, MPI_SUM, %world) : memref<4x2xf32>, memref<2x2xf32>
  return
}

// -----

// A strided source is not what MPI may read as one contiguous buffer: the copy stays.
// CHECK-LABEL: func.func @strided_source(
func.func @strided_source(%src: memref<4x2xf32, strided<[4, 1]>>) -> memref<2x2xf32> {
  %world = mpi.comm_world : !mpi.comm
  // CHECK: linalg.copy
  // CHECK: mpi.reduce_scatter_block(%alloc,
  %staged = memref.alloc() : memref<4x2xf32>
  linalg.copy ins(%src : memref<4x2xf32, strided<[4, 1]>>) outs(%staged : memref<4x2xf32>)
  %out = memref.alloc() : memref<2x2xf32>
  mpi.reduce_scatter_block(%staged, %out, MPI_SUM, %world) : memref<4x2xf32>, memref<2x2xf32>
  return %out : memref<2x2xf32>
}

// -----

// After convert-shard-to-mpi, a reduce_scatter along an inner dimension sends the
// transpose's own buffer, tensor or memref result alike (no copy, no dealloc).
shard.grid @g(shape = 2x3)

// LOWERED-LABEL: func.func @zero_grad_inner(
func.func @zero_grad_inner(%grad: tensor<4x6x2xf32>) -> tensor<4x2x2xf32> {
  // LOWERED: linalg.transpose {{.*}} permutation = [1, 0, 2, 3]
  // LOWERED-NEXT: %[[SEND:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<3x4x2x2xf32> to memref<3x4x2x2xf32>
  // LOWERED-NOT: linalg.copy
  // LOWERED: %[[OUT:.*]] = memref.alloc() : memref<4x2x2xf32>
  // LOWERED-NEXT: mpi.reduce_scatter_block(%[[SEND]], %[[OUT]], MPI_SUM, %{{.*}}) : memref<3x4x2x2xf32>, memref<4x2x2xf32>
  %0 = shard.reduce_scatter %grad on @g grid_axes = [1] scatter_dim = 1 : tensor<4x6x2xf32> -> tensor<4x2x2xf32>
  return %0 : tensor<4x2x2xf32>
}

// LOWERED-LABEL: func.func @zero_grad_inner_memref(
func.func @zero_grad_inner_memref(%grad: memref<5x4xf64>) -> memref<5x2xf64> {
  // LOWERED: %[[SEND:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<2x5x2xf64> to memref<2x5x2xf64>
  // LOWERED-NOT: linalg.copy
  // LOWERED: mpi.reduce_scatter_block(%[[SEND]], %[[OUT:.*]], MPI_SUM, %{{.*}}) : memref<2x5x2xf64>, memref<5x2xf64>
  // LOWERED-NOT: memref.dealloc
  // LOWERED-NEXT: return %[[OUT]]
  %0 = shard.reduce_scatter %grad on @g grid_axes = [0] scatter_dim = 1 : memref<5x4xf64> -> memref<5x2xf64>
  return %0 : memref<5x2xf64>
}
