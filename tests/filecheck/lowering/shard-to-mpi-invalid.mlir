// RUN: shardc-opt %s --convert-shard-to-mpi --split-input-file --verify-diagnostics

shard.grid @grid(shape = 2x2)
func.func @generic_reduction(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{Reduction kind 'generic' cannot be lowered to MPI: it has no MPI predefined operation.}}
  %0 = shard.all_reduce %arg0 on @grid grid_axes = [0] reduction = generic : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @grid(shape = 2x?)
func.func @dynamic_grid(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{Dynamic grid shape not supported.}}
  %0 = shard.all_reduce %arg0 on @grid grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @grid(shape = 2x2)
func.func @dynamic_shape(%arg0: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{Expected static shaped memref in contiguous row-major layout.}}
  %0 = shard.all_reduce %arg0 on @grid grid_axes = [0] : tensor<?xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

shard.grid @grid(shape = 2x2)
func.func @annotation_left(%arg0: tensor<4xf32>) -> !shard.sharding {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{failed to legalize operation 'shard.shard' that was explicitly marked illegal}}
  %0 = shard.shard %arg0 to %s : tensor<4xf32>
  %1 = shard.get_sharding %0 : tensor<4xf32> -> !shard.sharding
  return %1 : !shard.sharding
}

// -----

shard.grid @grid(shape = 4)
func.func @recv_any_source(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{shard.recv without a source cannot be lowered: the mpi dialect has no MPI_ANY_SOURCE.}}
  %0 = shard.recv %arg0 on @grid grid_axes = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Trunk's messages for the memref forms of all_gather and reduce_scatter.
shard.grid @grid(shape = 2x2)
func.func @all_gather_dynamic_memref(%arg0: memref<?x4xf32>) -> memref<?x4xf32> {
  // expected-error @+1 {{Input/result must be statically shaped memrefs in contiguous row-major layout.}}
  %0 = shard.all_gather %arg0 on @grid grid_axes = [0] gather_axis = 0 : memref<?x4xf32> -> memref<?x4xf32>
  return %0 : memref<?x4xf32>
}

// -----

shard.grid @grid(shape = 2x2)
func.func @reduce_scatter_dynamic_result(%arg0: memref<4x3xf32>) -> memref<?x3xf32> {
  // expected-error @+1 {{Result must be a statically shaped memref in contiguous row-major layout.}}
  %0 = shard.reduce_scatter %arg0 on @grid grid_axes = [1] scatter_dim = 0 : memref<4x3xf32> -> memref<?x3xf32>
  return %0 : memref<?x3xf32>
}
