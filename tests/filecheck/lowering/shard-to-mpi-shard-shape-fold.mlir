// RUN: shardc-opt %s --convert-shard-to-mpi -canonicalize --split-input-file | filecheck %s

// With the rank fixed by DLTI, shard_shape lowers to index arithmetic over a table of
// sharded_dims_offsets (tensor.from_elements + tensor.extract) on the process index
// (mpi.comm_rank, delinearized), and canonicalize folds it to constants, as trunk does:
// the rank folds there, so the constants come out in trunk's order (checked with plain
// CHECK lines). Rank 24 is multi-index [1, 0, 4] on a 3x4x5 grid.

module attributes { dlti = #dlti.map<"MPI:comm_world_rank" = 24> } {
  shard.grid @grid0(shape = 3x4x5)

  // Shard 1 of [0, 1, 4, 9] has 3 rows, shard 0 of [0, 2, 6, 12, 12] 2 columns, shard 4
  // of [0, 3, 6, 9, 12, 15] 3 planes.
  // The first size computed comes first.
  // CHECK-LABEL: func.func @from_offsets() -> (index, index, index) {
  // CHECK-NEXT: %[[C3:.*]] = arith.constant 3 : index
  // CHECK-NEXT: %[[C2:.*]] = arith.constant 2 : index
  // CHECK-NEXT: return %[[C3]], %[[C2]], %[[C3]] : index, index, index
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

// -----

// Rank 4 of a 2x3 grid is (1, 1). The constants the function had before come first (the
// lowering's folding hoists them, the last one first; the 4 is also the position of the
// second dimension's offsets), then the sizes canonicalize computes, in order: 8 - 3,
// 12 - 12; the unsplit dimension keeps its 12.
module attributes { dlti = #dlti.map<"MPI:comm_world_rank" = 4> } {
  shard.grid @plane(shape = 2x3)
  // CHECK-LABEL: func.func @with_other_constants() -> (index, index, index, index, index) {
  // CHECK-NEXT: %[[C12:.*]] = arith.constant 12 : index
  // CHECK-NEXT: %[[C4:.*]] = arith.constant 4 : index
  // CHECK-NEXT: %[[C3:.*]] = arith.constant 3 : index
  // CHECK-NEXT: %[[C5:.*]] = arith.constant 5 : index
  // CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
  // CHECK-NEXT: return %[[C5]], %[[C0]], %[[C12]], %[[C3]], %[[C4]] : index, index, index, index, index
  func.func @with_other_constants() -> (index, index, index, index, index) {
    %s = shard.sharding @plane split_axes = [[1], [0], []] sharded_dims_offsets = [0, 3, 8, 12, 0, 12, 12] : !shard.sharding
    %p:2 = shard.process_multi_index on @plane : index, index
    %three = arith.constant 3 : index
    %four = arith.constant 4 : index
    %r:3 = shard.shard_shape dims = [12, 12, 12] sharding = %s device = [%p#0, %p#1] : index, index, index
    return %r#0, %r#1, %r#2, %three, %four : index, index, index, index, index
  }
}

// -----

// Rank 2 of a 3x3x2 grid is (0, 1, 0): sizes 12 - 2, 8 - 1, 1 - 0, after the constant
// the function had.
module attributes { dlti = #dlti.map<"MPI:comm_world_rank" = 2> } {
  shard.grid @cube(shape = 3x3x2)
  // CHECK-LABEL: func.func @descending_sizes() -> (index, index, index, index) {
  // CHECK-NEXT: %[[C5:.*]] = arith.constant 5 : index
  // CHECK-NEXT: %[[C10:.*]] = arith.constant 10 : index
  // CHECK-NEXT: %[[C7:.*]] = arith.constant 7 : index
  // CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : index
  // CHECK-NEXT: return %[[C10]], %[[C7]], %[[C1]], %[[C5]] : index, index, index, index
  func.func @descending_sizes() -> (index, index, index, index) {
    %s = shard.sharding @cube split_axes = [[1], [0], [2]] sharded_dims_offsets = [0, 2, 12, 12, 0, 7, 8, 12, 0, 1, 12] : !shard.sharding
    %p:3 = shard.process_multi_index on @cube : index, index, index
    %five = arith.constant 5 : index
    %r:3 = shard.shard_shape dims = [12, 12, 12] sharding = %s device = [%p#0, %p#1, %p#2] : index, index, index
    return %r#0, %r#1, %r#2, %five : index, index, index, index
  }
}
