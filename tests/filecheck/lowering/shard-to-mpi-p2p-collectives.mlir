// RUN: shardc-opt %s --convert-shard-to-mpi --canonicalize --cse | filecheck %s

// broadcast, scatter, all_to_all and shift are point-to-point messages. Without a DLTI
// rank the process's own index is computed at run time: who sends and who receives is
// decided by scf.if, and the peers of a pairwise exchange are computed modulo the group.
shard.grid @grid(shape = 4)

// CHECK-LABEL: func.func @broadcast(
func.func @broadcast(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK-DAG: %[[TAG:.*]] = arith.constant 1 : i32
  // CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
  // CHECK: %[[WORLD:.*]] = mpi.comm_world : !mpi.comm
  // CHECK: %{{.*}}, %[[RANK:.*]] = mpi.comm_rank(%[[WORLD]]) : !mpi.retval, i32
  // CHECK: %[[ME:.*]] = arith.index_cast %[[RANK]] : i32 to index
  // CHECK: %[[OUT:.*]] = memref.alloc() : memref<2x3xf32>
  // CHECK: %[[ROOT:.*]] = arith.cmpi eq, %[[ME]], %[[C1]] : index
  // CHECK: scf.if %[[ROOT]] {
  // CHECK:   %[[IN:.*]] = bufferization.to_buffer %arg0 read_only
  // CHECK-COUNT-3: mpi.isend(%[[IN]], %[[TAG]], %{{.*}}, %[[WORLD]]) : memref<2x3xf32>, i32, i32 -> !mpi.request
  // CHECK:   memref.copy %[[IN]], %[[OUT]]
  // CHECK-COUNT-3: mpi.wait
  // CHECK: } else {
  // CHECK:   mpi.recv(%[[OUT]], %[[TAG]], %{{.*}}, %[[WORLD]]) : memref<2x3xf32>, i32, i32
  // CHECK: }
  // CHECK: bufferization.to_tensor %[[OUT]] restrict
  %0 = shard.broadcast %arg0 on @grid grid_axes = [0] root = [1] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @all_to_all(
func.func @all_to_all(%arg0: tensor<8x3xf32>) -> tensor<8x3xf32> {
  // CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
  // CHECK: %[[ME:.*]] = arith.index_cast
  // CHECK: %[[OUT:.*]] = memref.alloc() : memref<8x3xf32>
  // CHECK: %[[NEXT:.*]] = arith.addi %[[ME]], %{{.*}} : index
  // CHECK: %[[DEST:.*]] = arith.remsi %[[NEXT]], %[[C4]] : index
  // CHECK: %[[OFF:.*]] = arith.muli %[[DEST]], %{{.*}} : index
  // CHECK: %[[PART:.*]] = memref.subview %{{.*}}[%[[OFF]], 0] [2, 3] [1, 1] : memref<8x3xf32> to memref<2x3xf32, strided<[3, 1], offset: ?>>
  // CHECK: %[[D32:.*]] = arith.index_cast %[[DEST]] : index to i32
  // CHECK: mpi.isend(%[[PART]], %{{.*}}, %[[D32]], %{{.*}})
  // CHECK-COUNT-2: mpi.isend
  // CHECK: memref.copy
  // CHECK-COUNT-3: mpi.recv
  // CHECK-COUNT-3: mpi.wait
  // CHECK-NOT: mpi.allgather
  %0 = shard.all_to_all %arg0 on @grid grid_axes = [0] split_axis = 0 concat_axis = 0 : tensor<8x3xf32> -> tensor<8x3xf32>
  return %0 : tensor<8x3xf32>
}

// Without rotate: a process with a destination sends; one with a source receives, one
// without keeps its own buffer.
// CHECK-LABEL: func.func @shift(
func.func @shift(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK: %[[IN:.*]] = bufferization.to_buffer %arg0 read_only
  // CHECK: %[[OUT:.*]] = memref.alloc() : memref<2x3xf32>
  // CHECK: %[[HAS_SRC:.*]] = arith.andi
  // CHECK: %[[HAS_DEST:.*]] = arith.andi
  // CHECK: scf.if %[[HAS_DEST]] {
  // CHECK:   %[[REQ:.*]] = mpi.isend(%[[IN]],
  // CHECK:   scf.if %[[HAS_SRC]] {
  // CHECK:     mpi.recv(%[[OUT]],
  // CHECK:   } else {
  // CHECK:     memref.copy %[[IN]], %[[OUT]]
  // CHECK:   }
  // CHECK:   mpi.wait(%[[REQ]])
  // CHECK: } else {
  // CHECK-NOT: mpi.isend
  // CHECK:   scf.if %[[HAS_SRC]] {
  // CHECK:     mpi.recv(%[[OUT]],
  // CHECK:   } else {
  // CHECK:     memref.copy %[[IN]], %[[OUT]]
  // CHECK:   }
  // CHECK: }
  %0 = shard.shift %arg0 on @grid grid_axes = [0] shift_axis = 0 offset = 1 : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
