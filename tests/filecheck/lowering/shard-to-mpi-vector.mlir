// RUN: shardc-opt %s --convert-shard-to-mpi | filecheck %s
// RUN: shardc-opt %s --convert-shard-to-mpi --mlir-print-op-generic | shardc-opt | filecheck %s

// Vector ops beside shard ops reach convert-shard-to-mpi (vectorized local code): they
// parse, print and pass through unchanged while the shard ops around them lower.

shard.grid @grid(shape = 4)

// CHECK-LABEL: func.func @halo_and_vectors(
// CHECK-SAME: %[[X:.*]]: f32, %[[SRC:.*]]: vector<1x4x1xf32>, %[[ACC:.*]]: vector<1x4xf32>, %[[M:.*]]: vector<1x4x1xi1>
func.func @halo_and_vectors(%x: f32, %src: vector<1x4x1xf32>, %acc: vector<1x4xf32>, %m: vector<1x4x1xi1>) -> (index, vector<4x8xi1>, vector<8xf32>, vector<1x4xf32>) {
  // CHECK-NOT: shard.
  // CHECK: %[[MASK:.*]] = vector.constant_mask [2, 3] : vector<4x8xi1>
  %mask = vector.constant_mask [2, 3] : vector<4x8xi1>
  // CHECK: mpi.comm_rank
  %rank = shard.process_linear_index on @grid : index
  // CHECK: %[[B:.*]] = vector.broadcast %[[X]] : f32 to vector<8xf32>
  %b = vector.broadcast %x : f32 to vector<8xf32>
  // CHECK: %[[R:.*]] = vector.mask %[[M]] { vector.multi_reduction <add>, %[[SRC]], %[[ACC]] [2] : vector<1x4x1xf32> to vector<1x4xf32> } : vector<1x4x1xi1> -> vector<1x4xf32>
  %r = vector.mask %m { vector.multi_reduction <add>, %src, %acc [2] : vector<1x4x1xf32> to vector<1x4xf32> } : vector<1x4x1xi1> -> vector<1x4xf32>
  // CHECK: return %{{.*}}, %[[MASK]], %[[B]], %[[R]] : index, vector<4x8xi1>, vector<8xf32>, vector<1x4xf32>
  return %rank, %mask, %b, %r : index, vector<4x8xi1>, vector<8xf32>, vector<1x4xf32>
}
