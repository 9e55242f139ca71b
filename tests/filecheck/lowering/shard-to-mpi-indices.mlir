// RUN: shardc-opt %s --convert-shard-to-mpi --canonicalize --split-input-file | filecheck %s

// Without DLTI: the rank comes from mpi.comm_rank at run time.
shard.grid @grid(shape = 3x4x5)

// CHECK-LABEL: func.func @linear_index(
func.func @linear_index() -> index {
  // CHECK: %[[WORLD:.*]] = mpi.comm_world : !mpi.comm
  // CHECK: %{{.*}}, %[[RANK:.*]] = mpi.comm_rank(%[[WORLD]]) : !mpi.retval, i32
  // CHECK: %[[IDX:.*]] = arith.index_cast %[[RANK]] : i32 to index
  // CHECK: return %[[IDX]] : index
  %0 = shard.process_linear_index on @grid : index
  return %0 : index
}

// CHECK-LABEL: func.func @multi_index(
func.func @multi_index() -> (index, index) {
  // CHECK: %[[IDX:.*]] = arith.index_cast
  // CHECK: %[[M:.*]]:3 = affine.delinearize_index %[[IDX]] into ({{.*}}) : index, index, index
  // CHECK: return %[[M]]#2, %[[M]]#0 : index, index
  %0:2 = shard.process_multi_index on @grid axes = [2, 0] : index, index
  return %0#0, %0#1 : index, index
}

// A tensor dimension split over axes 1 and 2 (a group of 20): the neighbours step
// through that group's linear order.
// CHECK-LABEL: func.func @neighbors_two_axes(
func.func @neighbors_two_axes(%d: index) -> (index, index) {
  // CHECK: %[[POS:.*]] = affine.linearize_index disjoint [%{{.*}}, %{{.*}}] by (4, 5) : index
  // CHECK: arith.cmpi sle, %[[POS]]
  // CHECK: scf.if
  // CHECK: affine.delinearize_index %{{.*}} into (4, 5)
  // CHECK: arith.cmpi sge, %[[POS]]
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %0:2 = shard.neighbors_linear_indices on @grid[%c1, %d, %c4] split_axes = [1, 2] : index, index
  return %0#0, %0#1 : index, index
}

// CHECK-LABEL: func.func @halo_dynamic_rank(
func.func @halo_dynamic_rank(%arg0: memref<12x12xi8>) -> memref<12x12xi8> {
  // CHECK: mpi.comm_rank
  // CHECK: %[[DOWN:.*]] = scf.if
  // CHECK: %[[UP:.*]] = scf.if
  // CHECK: memref.alloc() : memref<2x12xi8>
  // CHECK: scf.if
  // CHECK: memref.subview %{{.*}}[7, 0] [2, 12] [1, 1]
  // CHECK: mpi.send
  // CHECK: scf.if
  // CHECK: mpi.recv
  // CHECK: memref.subview %{{.*}}[0, 0] [2, 12] [1, 1]
  %0 = shard.update_halo %arg0 on @grid split_axes = [[1]] halo_sizes = [2, 3] : memref<12x12xi8>
  return %0 : memref<12x12xi8>
}

// -----

// DLTI rank specialisation: rank 24 of 3x4x5 is the process (1, 0, 4).
module attributes {dlti.map = #dlti.map<"MPI:comm_world_rank" = 24>} {
  shard.grid @grid(shape = 3x4x5)

  // CHECK-LABEL: func.func @multi_index(
  func.func @multi_index() -> (index, index, index) {
    // CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
    // CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
    // CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
    // CHECK: return %[[C1]], %[[C0]], %[[C4]]
    %0:3 = shard.process_multi_index on @grid : index, index, index
    return %0#0, %0#1, %0#2 : index, index, index
  }

  // CHECK-LABEL: func.func @neighbors(
  func.func @neighbors() -> (index, index) {
    // CHECK-DAG: %[[DOWN:.*]] = arith.constant 4 : index
    // CHECK-DAG: %[[UP:.*]] = arith.constant 44 : index
    // CHECK: return %[[DOWN]], %[[UP]]
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %0:2 = shard.neighbors_linear_indices on @grid[%c1, %c0, %c4] split_axes = [0] : index, index
    return %0#0, %0#1 : index, index
  }

  // Halos along tensor dim 1 (grid axis 2, this process is last along it): it only
  // sends its lower interior rows down and receives its lower halo.
  // CHECK-LABEL: func.func @halo(
  func.func @halo(%arg0: tensor<6x10xf32>) -> tensor<6x10xf32> {
    // CHECK: %[[BUF:.*]] = bufferization.to_buffer %{{.*}} : tensor<6x10xf32> to memref<6x10xf32>
    // CHECK: %[[TMP:.*]] = memref.alloc() : memref<6x1xf32>
    // CHECK-NOT: mpi.send
    // CHECK: mpi.recv(%[[TMP]], %{{.*}}, %{{.*}}, %{{.*}}) : memref<6x1xf32>, i32, i32
    // CHECK: memref.subview %[[BUF]][0, 0] [6, 1] [1, 1]
    // CHECK: memref.dealloc %[[TMP]]
    // CHECK: %[[TMP2:.*]] = memref.alloc() : memref<6x2xf32>
    // CHECK: memref.subview %[[BUF]][0, 1] [6, 2] [1, 1]
    // CHECK: mpi.send(%[[TMP2]]
    // CHECK-NOT: mpi.recv
    // CHECK: bufferization.to_tensor %[[BUF]] restrict writable
    %0 = shard.update_halo %arg0 on @grid split_axes = [[], [2]] halo_sizes = [1, 2] : tensor<6x10xf32>
    return %0 : tensor<6x10xf32>
  }

  // CHECK-LABEL: func.func @shard_shape(
  func.func @shard_shape() -> (index, index) {
    // 7 rows over 3 shards: 2, 2, 3 (process 1 -> 2); 10 columns over 5: 2.
    // CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
    // CHECK: return %[[C2]], %[[C2]]
    %s = shard.sharding @grid split_axes = [[0], [2]] : !shard.sharding
    %0:2 = shard.shard_shape dims = [7, 10] sharding = %s device = [1, 0, 4] : index, index
    return %0#0, %0#1 : index, index
  }
}

// -----

shard.grid @grid(shape = 2x2x4)

// A sharding becomes three tensors: split axes, halo sizes, sharded dims offsets. The
// static halo sizes fold to a dense constant (tensor.from_elements folds, as in trunk).
// CHECK-LABEL: func.func @return_sharding(
// CHECK-SAME: -> (tensor<2x4xf32>, tensor<?x?xi16>, tensor<?x?xi64>, tensor<?x?xi64>)
func.func @return_sharding(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>, !shard.sharding) {
  // CHECK: %[[H:.*]] = arith.constant dense<{{\[\[}}0, 4], [3, 1]]> : tensor<2x2xi64>
  // CHECK: %[[E:.*]] = tensor.empty() : tensor<2x2xi16>
  // CHECK: %[[F:.*]] = linalg.fill ins(%{{.*}} : i16) outs(%[[E]] : tensor<2x2xi16>) -> tensor<2x2xi16>
  // CHECK: %[[R0:.*]] = tensor.insert_slice %{{.*}} into %[[F]][0, 0] [1, 2] [1, 1] : tensor<2xi16> into tensor<2x2xi16>
  // CHECK: %[[R1:.*]] = tensor.insert_slice %{{.*}} into %[[R0]][1, 0] [1, 1] [1, 1] : tensor<1xi16> into tensor<2x2xi16>
  // CHECK-NOT: tensor.from_elements
  // CHECK: %[[O:.*]] = tensor.empty() : tensor<0x0xi64>
  // CHECK: %[[A:.*]] = tensor.cast %[[R1]] : tensor<2x2xi16> to tensor<?x?xi16>
  // CHECK: %[[B:.*]] = tensor.cast %[[H]] : tensor<2x2xi64> to tensor<?x?xi64>
  // CHECK: %[[C:.*]] = tensor.cast %[[O]] : tensor<0x0xi64> to tensor<?x?xi64>
  // CHECK: return %{{.*}}, %[[A]], %[[B]], %[[C]]
  %s = shard.sharding @grid split_axes = [[0, 1], [2]] halo_sizes = [0, 4, 3, 1] : !shard.sharding
  return %arg0, %s : tensor<2x4xf32>, !shard.sharding
}

// Shardings passed through calls are expanded too.
// CHECK-LABEL: func.func @pass_through(
// CHECK-SAME: %{{.*}}: tensor<?x?xi16>, %{{.*}}: tensor<?x?xi64>, %{{.*}}: tensor<?x?xi64>) -> (tensor<?x?xi16>, tensor<?x?xi64>, tensor<?x?xi64>)
func.func @pass_through(%s: !shard.sharding) -> !shard.sharding {
  return %s : !shard.sharding
}
// CHECK-LABEL: func.func @caller(
func.func @caller() -> !shard.sharding {
  // CHECK: %[[R:.*]]:3 = call @pass_through(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<?x?xi16>, tensor<?x?xi64>, tensor<?x?xi64>) -> (tensor<?x?xi16>, tensor<?x?xi64>, tensor<?x?xi64>)
  // CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %r = func.call @pass_through(%s) : (!shard.sharding) -> !shard.sharding
  return %r : !shard.sharding
}
