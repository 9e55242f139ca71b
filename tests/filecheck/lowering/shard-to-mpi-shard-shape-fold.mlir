// RUN: shardc-opt %s --convert-shard-to-mpi -canonicalize | filecheck %s

// With the rank fixed by DLTI, shard_shape lowers to index arithmetic over a table of
// sharded_dims_offsets (tensor.from_elements + tensor.extract), and canonicalize folds it
// to constants, as trunk does. Rank 24 is multi-index [1, 0, 4] on a 3x4x5 grid.

module attributes { dlti = #dlti.map<"MPI:comm_world_rank" = 24> } {
  shard.grid @grid0(shape = 3x4x5)

  // Shard 1 of [0, 1, 4, 9] has 3 rows, shard 0 of [0, 2, 6, 12, 12] 2 columns, shard 4
  // of [0, 3, 6, 9, 12, 15] 3 planes.
  // CHECK-LABEL: func.func @from_offsets() -> (index, index, index) {
  // CHECK-NOT: tensor.
  // CHECK-NOT: arith.subi
  // CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
  // CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
  // CHECK: return %[[C3]], %[[C2]], %[[C3]] : index, index, index
  func.func @from_offsets() -> (index, index, index) {
    %sharding = shard.sharding @grid0 split_axes = [[0], [1], [2]]
        sharded_dims_offsets = [0, 1, 4, 9, 0, 2, 6, 12, 12, 0, 3, 6, 9, 12, 15] : !shard.sharding
    %0:3 = shard.process_multi_index on @grid0 : index, index, index
    %c9 = arith.constant 9 : index
    %c12 = arith.constant 12 : index
    %1:3 = shard.shard_shape dims = [%c9, %c12, 15] sharding = %sharding device = [%0#0, %0#1, %0#2] : index, index, index
    return %1#0, %1#1, %1#2 : index, index, index
  }

  // The last shard of a dimension gets the remainder (8 over 3: [2, 3, 3]).
  // CHECK-LABEL: func.func @even_split() -> (index, index) {
  // CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
  // CHECK-DAG: %[[C5:.*]] = arith.constant 5 : index
  // CHECK: return %[[C3]], %[[C5]] : index, index
  func.func @even_split() -> (index, index) {
    %sharding = shard.sharding @grid0 split_axes = [[0], [2]] : !shard.sharding
    %0:3 = shard.process_multi_index on @grid0 : index, index, index
    %1:2 = shard.shard_shape dims = [8, 25] sharding = %sharding device = [%0#0, %0#1, %0#2] : index, index
    return %1#0, %1#1 : index, index
  }

  // Offsets given as values: the table stays, an extract at a constant index folds to
  // the value itself.
  // CHECK-LABEL: func.func @dynamic_offsets(
  // CHECK-SAME: %[[A:.*]]: i64, %[[B:.*]]: i64
  // CHECK-NOT: tensor.extract
  // CHECK: %[[IA:.*]] = arith.index_cast %[[A]] : i64 to index
  // CHECK: %[[IB:.*]] = arith.index_cast %[[B]] : i64 to index
  // CHECK: %[[D:.*]] = arith.subi %[[IB]], %[[IA]] : index
  // CHECK: return %[[D]] : index
  func.func @dynamic_offsets(%a: i64, %b: i64) -> index {
    %sharding = shard.sharding @grid0 split_axes = [[0]] sharded_dims_offsets = [0, %a, %b, 20] : !shard.sharding
    %0:3 = shard.process_multi_index on @grid0 : index, index, index
    %1 = shard.shard_shape dims = [20] sharding = %sharding device = [%0#0, %0#1, %0#2] : index
    return %1 : index
  }
}
