// RUN: shardc-opt %s --convert-shard-to-mpi --canonicalize | filecheck %s

// Trunk's memref forms of the collectives: a memref argument is the MPI buffer itself
// (no bufferization.to_buffer), the result is a fresh memref.alloc. Rank 13 on a 2x3x4
// grid is the process (1, 0, 1).
module attributes {dlti.map = #dlti.map<"MPI:comm_world_rank" = 13>} {
  shard.grid @grid(shape = 2x3x4)

  // CHECK-LABEL: func.func @reduce_scatter_leading(
  // CHECK-SAME: %[[ARG:.*]]: memref<6x2xf64>) -> memref<2x2xf64>
  func.func @reduce_scatter_leading(%arg0: memref<6x2xf64>) -> memref<2x2xf64> {
    // Group along axis 1: color = linear index over axes (0, 2) = 1*4+1, key = 0.
    // CHECK-DAG: %[[COLOR:.*]] = arith.constant 5 : i32
    // CHECK-DAG: %[[KEY:.*]] = arith.constant 0 : i32
    // CHECK: %[[WORLD:.*]] = mpi.comm_world : !mpi.comm
    // CHECK: %[[COMM:.*]] = mpi.comm_split(%[[WORLD]], %[[COLOR]], %[[KEY]]) : !mpi.comm
    // CHECK: %[[OUT:.*]] = memref.alloc() : memref<2x2xf64>
    // CHECK: mpi.reduce_scatter_block(%[[ARG]], %[[OUT]], MPI_PROD, %[[COMM]]) : memref<6x2xf64>, memref<2x2xf64>
    // CHECK-NEXT: return %[[OUT]] : memref<2x2xf64>
    %0 = shard.reduce_scatter %arg0 on @grid grid_axes = [1] reduction = product scatter_dim = 0 : memref<6x2xf64> -> memref<2x2xf64>
    return %0 : memref<2x2xf64>
  }

  // A scatter dim other than the leading one: the ranks axis is brought to the front
  // through tensors and copied into a fresh send buffer, freed after the collective (as
  // trunk does).
  // CHECK-LABEL: func.func @reduce_scatter_inner(
  // CHECK-SAME: %[[ARG:.*]]: memref<3x8xi32>) -> memref<3x2xi32>
  func.func @reduce_scatter_inner(%arg0: memref<3x8xi32>) -> memref<3x2xi32> {
    // CHECK: mpi.comm_split
    // CHECK: %[[T:.*]] = bufferization.to_tensor %[[ARG]] restrict : memref<3x8xi32> to tensor<3x8xi32>
    // CHECK: tensor.expand_shape %[[T]] {{\[\[}}0], [1, 2]] output_shape [3, 4, 2] : tensor<3x8xi32> into tensor<3x4x2xi32>
    // CHECK: linalg.transpose {{.*}} permutation = [1, 0, 2]
    // CHECK: %[[TMP:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<4x3x2xi32> to memref<4x3x2xi32>
    // CHECK: %[[SEND:.*]] = memref.alloc() : memref<4x3x2xi32>
    // CHECK: linalg.copy ins(%[[TMP]] : memref<4x3x2xi32>) outs(%[[SEND]] : memref<4x3x2xi32>)
    // CHECK: %[[OUT:.*]] = memref.alloc() : memref<3x2xi32>
    // CHECK: mpi.reduce_scatter_block(%[[SEND]], %[[OUT]], MPI_BXOR, %{{.*}}) : memref<4x3x2xi32>, memref<3x2xi32>
    // CHECK-NEXT: memref.dealloc %[[SEND]] : memref<4x3x2xi32>
    // CHECK-NEXT: return %[[OUT]] : memref<3x2xi32>
    %0 = shard.reduce_scatter %arg0 on @grid grid_axes = [2] reduction = bitwise_xor scatter_dim = 1 : memref<3x8xi32> -> memref<3x2xi32>
    return %0 : memref<3x2xi32>
  }

  // CHECK-LABEL: func.func @all_gather_leading(
  // CHECK-SAME: %[[ARG:.*]]: memref<2x5xf32>) -> memref<4x5xf32>
  func.func @all_gather_leading(%arg0: memref<2x5xf32>) -> memref<4x5xf32> {
    // CHECK: %[[COMM:.*]] = mpi.comm_split
    // CHECK: %[[SIZE:.*]] = mpi.comm_size(%[[COMM]]) : i32
    // CHECK: cf.assert
    // CHECK: %[[BUF:.*]] = memref.alloc() : memref<2x2x5xf32>
    // CHECK: mpi.allgather(%[[ARG]], %[[BUF]], %[[COMM]]) : memref<2x5xf32>, memref<2x2x5xf32>
    // CHECK: %[[OUT:.*]] = memref.collapse_shape %[[BUF]] {{\[\[}}0, 1], [2]] : memref<2x2x5xf32> into memref<4x5xf32>
    // CHECK-NEXT: return %[[OUT]] : memref<4x5xf32>
    %0 = shard.all_gather %arg0 on @grid grid_axes = [0] gather_axis = 0 : memref<2x5xf32> -> memref<4x5xf32>
    return %0 : memref<4x5xf32>
  }

  // A memref in, a tensor out: the gathered buffer becomes the tensor.
  // CHECK-LABEL: func.func @all_gather_to_tensor(
  func.func @all_gather_to_tensor(%arg0: memref<2x5xf32>) -> tensor<2x15xf32> {
    // CHECK: mpi.allgather(%{{.*}}, %[[BUF:.*]], %{{.*}}) : memref<2x5xf32>, memref<3x2x5xf32>
    // CHECK: bufferization.to_tensor %[[BUF]] restrict : memref<3x2x5xf32> to tensor<3x2x5xf32>
    // CHECK: linalg.transpose
    // CHECK: %[[OUT:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2]] : tensor<2x3x5xf32> into tensor<2x15xf32>
    // CHECK-NEXT: return %[[OUT]] : tensor<2x15xf32>
    %0 = shard.all_gather %arg0 on @grid grid_axes = [1] gather_axis = 1 : memref<2x5xf32> -> tensor<2x15xf32>
    return %0 : tensor<2x15xf32>
  }
}
