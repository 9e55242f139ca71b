// RUN: shardc-opt %s --convert-shard-to-mpi --canonicalize | filecheck %s

// Rank 7 on a 3x4x5 grid is the process (0, 1, 2): every communicator color/key,
// root and part offset below is a constant.
module attributes {dlti.map = #dlti.map<"MPI:comm_world_rank" = 7>} {
  shard.grid @grid(shape = 3x4x5)

  // CHECK-LABEL: func.func @all_reduce_sub_grid(
  // CHECK-SAME: %[[ARG:.*]]: tensor<3x4xf32>
  func.func @all_reduce_sub_grid(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
    // Constants are uniqued and hoisted to the function entry (as mlir-opt does).
    // CHECK-DAG: %[[COLOR:.*]] = arith.constant 2 : i32
    // CHECK-DAG: %[[KEY:.*]] = arith.constant 1 : i32
    // CHECK: %[[IN:.*]] = bufferization.to_buffer %[[ARG]] read_only : tensor<3x4xf32> to memref<3x4xf32>
    // CHECK: %[[BUF:.*]] = memref.alloc() : memref<3x4xf32>
    // CHECK: linalg.copy ins(%[[IN]] : memref<3x4xf32>) outs(%[[BUF]] : memref<3x4xf32>)
    // CHECK: %[[WORLD:.*]] = mpi.comm_world : !mpi.comm
    // CHECK: %[[COMM:.*]] = mpi.comm_split(%[[WORLD]], %[[COLOR]], %[[KEY]]) : !mpi.comm
    // CHECK: mpi.allreduce(%[[BUF]], %[[BUF]], MPI_MAX, %[[COMM]]) : memref<3x4xf32>, memref<3x4xf32>
    // CHECK: %[[OUT:.*]] = bufferization.to_tensor %[[BUF]] restrict : memref<3x4xf32> to tensor<3x4xf32>
    // CHECK: return %[[OUT]]
    %0 = shard.all_reduce %arg0 on @grid grid_axes = [0, 1] reduction = max : tensor<3x4xf32> -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }

  // All grid axes: MPI_COMM_WORLD, no split; memrefs stay memrefs, the result type's
  // element type is the buffer's.
  // CHECK-LABEL: func.func @all_reduce_world(
  func.func @all_reduce_world(%arg0: memref<3x4xi32>) -> memref<3x4xi64> {
    // CHECK: %[[BUF:.*]] = memref.alloc() : memref<3x4xi64>
    // CHECK: linalg.copy ins(%{{.*}} : memref<3x4xi32>) outs(%[[BUF]] : memref<3x4xi64>)
    // CHECK: %[[WORLD:.*]] = mpi.comm_world : !mpi.comm
    // CHECK-NOT: mpi.comm_split
    // CHECK: mpi.allreduce(%[[BUF]], %[[BUF]], MPI_BXOR, %[[WORLD]]) : memref<3x4xi64>, memref<3x4xi64>
    // CHECK: return %[[BUF]] : memref<3x4xi64>
    %0 = shard.all_reduce %arg0 on @grid grid_axes = [0, 1, 2] reduction = bitwise_xor : memref<3x4xi32> -> memref<3x4xi64>
    return %0 : memref<3x4xi64>
  }

  // CHECK-LABEL: func.func @all_reduce_kinds(
  func.func @all_reduce_kinds(%arg0: memref<4xi32>) -> (memref<4xi32>, memref<4xi32>, memref<4xi32>, memref<4xi32>, memref<4xi32>) {
    // CHECK: MPI_SUM
    // CHECK: MPI_PROD
    // CHECK: MPI_MIN
    // CHECK: MPI_BAND
    // CHECK: MPI_BOR
    %0 = shard.all_reduce %arg0 on @grid grid_axes = [2] : memref<4xi32> -> memref<4xi32>
    %1 = shard.all_reduce %arg0 on @grid grid_axes = [2] reduction = product : memref<4xi32> -> memref<4xi32>
    %2 = shard.all_reduce %arg0 on @grid grid_axes = [2] reduction = min : memref<4xi32> -> memref<4xi32>
    %3 = shard.all_reduce %arg0 on @grid grid_axes = [2] reduction = bitwise_and : memref<4xi32> -> memref<4xi32>
    %4 = shard.all_reduce %arg0 on @grid grid_axes = [2] reduction = bitwise_or : memref<4xi32> -> memref<4xi32>
    return %0, %1, %2, %3, %4 : memref<4xi32>, memref<4xi32>, memref<4xi32>, memref<4xi32>, memref<4xi32>
  }

  // average: a sum, then a division by the group size (4 along axis 1).
  // CHECK-LABEL: func.func @all_reduce_average(
  func.func @all_reduce_average(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
    // CHECK: %[[N:.*]] = arith.constant dense<4.000000e+00> : tensor<3x4xf32>
    // CHECK: mpi.allreduce(%[[BUF:.*]], %[[BUF]], MPI_SUM, %{{.*}})
    // CHECK: %[[SUM:.*]] = bufferization.to_tensor %[[BUF]] restrict
    // CHECK: %[[AVG:.*]] = arith.divf %[[SUM]], %[[N]] : tensor<3x4xf32>
    // CHECK: return %[[AVG]]
    %0 = shard.all_reduce %arg0 on @grid grid_axes = [1] reduction = average : tensor<3x4xf32> -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }

  // shard.reduce: an allreduce (the result on other processes than the root is undefined).
  // CHECK-LABEL: func.func @reduce(
  func.func @reduce(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
    // CHECK: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_MIN, %{{.*}}) : memref<3x4xf32>, memref<3x4xf32>
    %0 = shard.reduce %arg0 on @grid grid_axes = [1] reduction = min root = [0] : (tensor<3x4xf32>) -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }

  // CHECK-LABEL: func.func @all_gather_axis0(
  func.func @all_gather_axis0(%arg0: tensor<3x4xf32>) -> tensor<12x4xf32> {
    // CHECK: %[[IN:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<3x4xf32> to memref<3x4xf32>
    // CHECK: %[[COMM:.*]] = mpi.comm_split
    // CHECK: %[[SIZE:.*]] = mpi.comm_size(%[[COMM]]) : i32
    // CHECK: %[[SIZE_I:.*]] = arith.index_cast %[[SIZE]] : i32 to index
    // CHECK: %[[OK:.*]] = arith.cmpi eq, %[[SIZE_I]], %{{.*}} : index
    // CHECK: cf.assert %[[OK]]
    // CHECK: %[[ALL:.*]] = memref.alloc() : memref<4x3x4xf32>
    // CHECK: mpi.allgather(%[[IN]], %[[ALL]], %[[COMM]]) : memref<3x4xf32>, memref<4x3x4xf32>
    // CHECK: %[[FLAT:.*]] = memref.collapse_shape %[[ALL]] {{\[\[}}0, 1], [2]] : memref<4x3x4xf32> into memref<12x4xf32>
    // CHECK: bufferization.to_tensor %[[FLAT]] restrict : memref<12x4xf32> to tensor<12x4xf32>
    %0 = shard.all_gather %arg0 on @grid grid_axes = [1] gather_axis = 0 : tensor<3x4xf32> -> tensor<12x4xf32>
    return %0 : tensor<12x4xf32>
  }

  // CHECK-LABEL: func.func @all_gather_axis1(
  func.func @all_gather_axis1(%arg0: tensor<3x4xf32>) -> tensor<3x20xf32> {
    // CHECK: mpi.allgather(%{{.*}}, %[[ALL:.*]], %{{.*}}) : memref<3x4xf32>, memref<5x3x4xf32>
    // CHECK: %[[T:.*]] = bufferization.to_tensor %[[ALL]] restrict : memref<5x3x4xf32> to tensor<5x3x4xf32>
    // CHECK: %[[INIT:.*]] = tensor.empty() : tensor<3x5x4xf32>
    // CHECK: %[[TR:.*]] = linalg.transpose ins(%[[T]] : tensor<5x3x4xf32>) outs(%[[INIT]] : tensor<3x5x4xf32>) permutation = [1, 0, 2]
    // CHECK: tensor.collapse_shape %[[TR]] {{\[\[}}0], [1, 2]] : tensor<3x5x4xf32> into tensor<3x20xf32>
    %0 = shard.all_gather %arg0 on @grid grid_axes = [2] gather_axis = 1 : tensor<3x4xf32> -> tensor<3x20xf32>
    return %0 : tensor<3x20xf32>
  }

  // shard.gather: the root's result, computed on every process.
  // CHECK-LABEL: func.func @gather(
  func.func @gather(%arg0: tensor<2x4xf32>) -> tensor<6x4xf32> {
    // CHECK: mpi.allgather(%{{.*}}, %{{.*}}, %{{.*}}) : memref<2x4xf32>, memref<3x2x4xf32>
    // CHECK: memref.collapse_shape
    %0 = shard.gather %arg0 on @grid grid_axes = [0] gather_axis = 0 root = [0] : (tensor<2x4xf32>) -> tensor<6x4xf32>
    return %0 : tensor<6x4xf32>
  }

  // CHECK-LABEL: func.func @reduce_scatter_axis0(
  func.func @reduce_scatter_axis0(%arg0: tensor<3x4xf32>) -> tensor<1x4xf32> {
    // CHECK-DAG: %[[COLOR:.*]] = arith.constant 7 : i32
    // CHECK-DAG: %[[KEY:.*]] = arith.constant 0 : i32
    // CHECK: %[[COMM:.*]] = mpi.comm_split(%{{.*}}, %[[COLOR]], %[[KEY]])
    // CHECK: %[[OUT:.*]] = memref.alloc() : memref<1x4xf32>
    // CHECK: mpi.reduce_scatter_block(%{{.*}}, %[[OUT]], MPI_SUM, %[[COMM]]) : memref<3x4xf32>, memref<1x4xf32>
    // CHECK: bufferization.to_tensor %[[OUT]] restrict
    %0 = shard.reduce_scatter %arg0 on @grid grid_axes = [0] scatter_axis = 0 : tensor<3x4xf32> -> tensor<1x4xf32>
    return %0 : tensor<1x4xf32>
  }

  // CHECK-LABEL: func.func @reduce_scatter_axis1(
  func.func @reduce_scatter_axis1(%arg0: tensor<2x12xf32>) -> tensor<2x4xf32> {
    // CHECK: %[[EXP:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2]] output_shape [2, 3, 4] : tensor<2x12xf32> into tensor<2x3x4xf32>
    // CHECK: linalg.transpose ins(%[[EXP]] : tensor<2x3x4xf32>) outs(%{{.*}} : tensor<3x2x4xf32>) permutation = [1, 0, 2]
    // As trunk: the transpose is copied into a fresh send buffer (forward-send-copies drops the copy).
    // CHECK: %[[TMP:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<3x2x4xf32> to memref<3x2x4xf32>
    // CHECK: %[[SEND:.*]] = memref.alloc() : memref<3x2x4xf32>
    // CHECK: linalg.copy ins(%[[TMP]] : memref<3x2x4xf32>) outs(%[[SEND]] : memref<3x2x4xf32>)
    // CHECK: %[[OUT:.*]] = memref.alloc() : memref<2x4xf32>
    // CHECK: mpi.reduce_scatter_block(%[[SEND]], %[[OUT]], MPI_MAX, %{{.*}}) : memref<3x2x4xf32>, memref<2x4xf32>
    // CHECK-NOT: memref.dealloc
    // CHECK: bufferization.to_tensor %[[OUT]] restrict
    %0 = shard.reduce_scatter %arg0 on @grid grid_axes = [0] reduction = max scatter_axis = 1 : tensor<2x12xf32> -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }

  // broadcast: this process (index 1 in the group of axis 1) receives from the root (index 2).
  // CHECK-LABEL: func.func @broadcast(
  func.func @broadcast(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
    // CHECK-DAG: %[[TAG:.*]] = arith.constant 1 : i32
    // CHECK-DAG: %[[ROOT:.*]] = arith.constant 2 : i32
    // CHECK: %[[COMM:.*]] = mpi.comm_split
    // CHECK: %[[OUT:.*]] = memref.alloc() : memref<3x4xf32>
    // CHECK-NOT: mpi.isend
    // CHECK: mpi.recv(%[[OUT]], %[[TAG]], %[[ROOT]], %[[COMM]]) : memref<3x4xf32>, i32, i32
    // CHECK: bufferization.to_tensor %[[OUT]] restrict
    %0 = shard.broadcast %arg0 on @grid grid_axes = [1] root = [2] : (tensor<3x4xf32>) -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }

  // broadcast from this process: it sends its buffer to 2, 3 and 0 and keeps a copy.
  // CHECK-LABEL: func.func @broadcast_root(
  func.func @broadcast_root(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
    // CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i32
    // CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i32
    // CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i32
    // CHECK: %[[COMM:.*]] = mpi.comm_split
    // CHECK: %[[OUT:.*]] = memref.alloc() : memref<3x4xf32>
    // CHECK: %[[IN:.*]] = bufferization.to_buffer %arg0 read_only
    // CHECK: %[[R2:.*]] = mpi.isend(%[[IN]], %{{.*}}, %[[C2]], %[[COMM]]) : memref<3x4xf32>, i32, i32 -> !mpi.request
    // CHECK: %[[R3:.*]] = mpi.isend(%[[IN]], %{{.*}}, %[[C3]], %[[COMM]])
    // CHECK: %[[R0:.*]] = mpi.isend(%[[IN]], %{{.*}}, %[[C0]], %[[COMM]])
    // CHECK: memref.copy %[[IN]], %[[OUT]]
    // CHECK: mpi.wait(%[[R2]])
    // CHECK: mpi.wait(%[[R3]])
    // CHECK: mpi.wait(%[[R0]])
    // CHECK-NOT: mpi.recv
    %0 = shard.broadcast %arg0 on @grid grid_axes = [1] root = [1] : (tensor<3x4xf32>) -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }

  // scatter: this process (index 1 in the group) receives its rows from the root (index 3).
  // CHECK-LABEL: func.func @scatter(
  func.func @scatter(%arg0: tensor<8x4xf32>) -> tensor<2x4xf32> {
    // CHECK-DAG: %[[ROOT:.*]] = arith.constant 3 : i32
    // CHECK: %[[OUT:.*]] = memref.alloc() : memref<2x4xf32>
    // CHECK: mpi.recv(%[[OUT]], %{{.*}}, %[[ROOT]], %{{.*}}) : memref<2x4xf32>, i32, i32
    %0 = shard.scatter %arg0 on @grid grid_axes = [1] scatter_axis = 0 root = [3] : (tensor<8x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }

  // scatter from this process along axis 1: columns [2k, 2k + 2) go to process k through
  // a contiguous copy each; its own columns [2, 4) are its result.
  // CHECK-LABEL: func.func @scatter_root(
  func.func @scatter_root(%arg0: tensor<3x8xf32>) -> tensor<3x2xf32> {
    // CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i32
    // CHECK: %[[OUT:.*]] = memref.alloc() : memref<3x2xf32>
    // CHECK: %[[IN:.*]] = bufferization.to_buffer %arg0 read_only
    // CHECK: %[[PART:.*]] = memref.subview %[[IN]][0, 4] [3, 2] [1, 1] : memref<3x8xf32> to memref<3x2xf32, strided<[8, 1], offset: 4>>
    // CHECK: %[[STAGED:.*]] = memref.alloc() : memref<3x2xf32>
    // CHECK: memref.copy %[[PART]], %[[STAGED]]
    // CHECK: mpi.isend(%[[STAGED]], %{{.*}}, %[[C2]], %{{.*}}) : memref<3x2xf32>, i32, i32 -> !mpi.request
    // CHECK-COUNT-2: mpi.isend
    // CHECK: %[[MINE:.*]] = memref.subview %[[IN]][0, 2] [3, 2] [1, 1]
    // CHECK: memref.copy %[[MINE]], %[[OUT]]
    // CHECK-COUNT-3: mpi.wait
    %0 = shard.scatter %arg0 on @grid grid_axes = [1] scatter_axis = 1 root = [1] : (tensor<3x8xf32>) -> tensor<3x2xf32>
    return %0 : tensor<3x2xf32>
  }

  // all_to_all: part k (rows [2k, 2k + 2)) goes to process k, 2 then 3 then 0; the part
  // from process j lands in entry j of a 4x2x3 buffer, which becomes columns [3j, 3j + 3).
  // CHECK-LABEL: func.func @all_to_all(
  func.func @all_to_all(%arg0: tensor<8x3xf32>) -> tensor<2x12xf32> {
    // CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i32
    // CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i32
    // CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i32
    // CHECK: %[[COMM:.*]] = mpi.comm_split
    // CHECK: %[[IN:.*]] = bufferization.to_buffer %arg0 read_only
    // CHECK: %[[ALL:.*]] = memref.alloc() : memref<4x2x3xf32>
    // CHECK: %[[P2:.*]] = memref.subview %[[IN]][4, 0] [2, 3] [1, 1] : memref<8x3xf32> to memref<2x3xf32, strided<[3, 1], offset: 12>>
    // CHECK: %[[S2:.*]] = mpi.isend(%[[P2]], %{{.*}}, %[[C2]], %[[COMM]])
    // CHECK: %[[P3:.*]] = memref.subview %[[IN]][6, 0] [2, 3] [1, 1]
    // CHECK: %[[S3:.*]] = mpi.isend(%[[P3]], %{{.*}}, %[[C3]], %[[COMM]])
    // CHECK: %[[P0:.*]] = memref.subview %[[IN]][0, 0] [2, 3] [1, 1]
    // CHECK: %[[S0:.*]] = mpi.isend(%[[P0]], %{{.*}}, %[[C0]], %[[COMM]])
    // CHECK: %[[P1:.*]] = memref.subview %[[IN]][2, 0] [2, 3] [1, 1]
    // CHECK: %[[E1:.*]] = memref.subview %[[ALL]][1, 0, 0] [1, 2, 3] [1, 1, 1] : memref<4x2x3xf32> to memref<2x3xf32, strided<[3, 1], offset: 6>>
    // CHECK: memref.copy %[[P1]], %[[E1]]
    // CHECK: %[[E0:.*]] = memref.subview %[[ALL]][0, 0, 0] [1, 2, 3] [1, 1, 1]
    // CHECK: mpi.recv(%[[E0]], %{{.*}}, %[[C0]], %[[COMM]])
    // CHECK: %[[E3:.*]] = memref.subview %[[ALL]][3, 0, 0] [1, 2, 3] [1, 1, 1]
    // CHECK: mpi.recv(%[[E3]], %{{.*}}, %[[C3]], %[[COMM]])
    // CHECK: %[[E2:.*]] = memref.subview %[[ALL]][2, 0, 0] [1, 2, 3] [1, 1, 1]
    // CHECK: mpi.recv(%[[E2]], %{{.*}}, %[[C2]], %[[COMM]])
    // CHECK: mpi.wait(%[[S2]])
    // CHECK: mpi.wait(%[[S3]])
    // CHECK: mpi.wait(%[[S0]])
    // CHECK: linalg.transpose ins(%{{.*}} : tensor<4x2x3xf32>) outs(%{{.*}} : tensor<2x4x3xf32>) permutation = [1, 0, 2]
    // CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2]] : tensor<2x4x3xf32> into tensor<2x12xf32>
    // CHECK-NOT: mpi.allgather
    %0 = shard.all_to_all %arg0 on @grid grid_axes = [1] split_axis = 0 concat_axis = 1 : tensor<8x3xf32> -> tensor<2x12xf32>
    return %0 : tensor<2x12xf32>
  }

  // all_to_all along the leading axes: parts are received straight into the result.
  // CHECK-LABEL: func.func @all_to_all_rows(
  func.func @all_to_all_rows(%arg0: tensor<8x3xf32>) -> tensor<8x3xf32> {
    // CHECK: %[[OUT:.*]] = memref.alloc() : memref<8x3xf32>
    // CHECK-COUNT-3: mpi.isend
    // CHECK: memref.subview %[[OUT]][2, 0] [2, 3] [1, 1]
    // CHECK: memref.copy
    // CHECK: memref.subview %[[OUT]][0, 0] [2, 3] [1, 1]
    // CHECK-NEXT: mpi.recv
    // CHECK-COUNT-3: mpi.wait
    // CHECK: bufferization.to_tensor %[[OUT]] restrict
    // CHECK-NOT: linalg.transpose
    %0 = shard.all_to_all %arg0 on @grid grid_axes = [1] split_axis = 0 concat_axis = 0 : tensor<8x3xf32> -> tensor<8x3xf32>
    return %0 : tensor<8x3xf32>
  }

  // shift by 3 with rotation along axis 1 (size 4): coordinate 1 sends to 0, receives from 2.
  // CHECK-LABEL: func.func @shift(
  func.func @shift(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
    // CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i32
    // CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i32
    // CHECK: %[[COMM:.*]] = mpi.comm_split
    // CHECK: %[[IN:.*]] = bufferization.to_buffer %arg0 read_only
    // CHECK: %[[OUT:.*]] = memref.alloc() : memref<3x4xf32>
    // CHECK: %[[REQ:.*]] = mpi.isend(%[[IN]], %{{.*}}, %[[C0]], %[[COMM]])
    // CHECK: mpi.recv(%[[OUT]], %{{.*}}, %[[C2]], %[[COMM]])
    // CHECK: mpi.wait(%[[REQ]])
    %0 = shard.shift %arg0 on @grid grid_axes = [1] shift_axis = 1 offset = 3 rotate : tensor<3x4xf32> -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }

  // Without rotation, coordinate 1 shifted by 2 sends to 3 and has no source: it keeps
  // its buffer.
  // CHECK-LABEL: func.func @shift_no_rotate(
  func.func @shift_no_rotate(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
    // CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i32
    // CHECK: %[[IN:.*]] = bufferization.to_buffer %arg0 read_only
    // CHECK: %[[OUT:.*]] = memref.alloc() : memref<3x4xf32>
    // CHECK: %[[REQ:.*]] = mpi.isend(%[[IN]], %{{.*}}, %[[C3]], %{{.*}})
    // CHECK-NOT: mpi.recv
    // CHECK: memref.copy %[[IN]], %[[OUT]]
    // CHECK: mpi.wait(%[[REQ]])
    %0 = shard.shift %arg0 on @grid grid_axes = [1] shift_axis = 1 offset = 2 : tensor<3x4xf32> -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }

  // CHECK-LABEL: func.func @send_recv(
  func.func @send_recv(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
    // CHECK-DAG: %[[TAG:.*]] = arith.constant 0 : i32
    // CHECK-DAG: %[[DEST:.*]] = arith.constant 2 : i32
    // CHECK: mpi.send(%{{.*}}, %[[TAG]], %[[DEST]], %{{.*}}) : memref<3x4xf32>, i32, i32
    // CHECK: %[[BUF:.*]] = memref.alloc() : memref<3x4xf32>
    // CHECK: mpi.recv(%[[BUF]], %{{.*}}, %{{.*}}, %{{.*}}) : memref<3x4xf32>, i32, i32
    %0 = shard.send %arg0 on @grid grid_axes = [1] destination = [2] : (tensor<3x4xf32>) -> tensor<3x4xf32>
    %1 = shard.recv %0 on @grid grid_axes = [1] source = [0] : (tensor<3x4xf32>) -> tensor<3x4xf32>
    return %1 : tensor<3x4xf32>
  }
}
