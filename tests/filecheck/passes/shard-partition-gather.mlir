// RUN: shardc-opt %s --sharding-propagation | filecheck %s
// RUN: shardc-opt %s --sharding-propagation --shard-partition | filecheck %s --check-prefix=PART

// Gathers: a tensor a linalg body reads from outside with tensor.extract. Dimensions
// every extract indexes with `linalg.index d` of a loop of the same extent follow that
// loop's split (read locally); the others are read whole (gathered), at global indices.

shard.grid @g(shape = 2x2)

// An embedding table split on its columns, which the body reads at `linalg.index 2`:
// the lookup's loop 2 follows the table's split (the tokens' batch split kept), the
// table is read as it is, no all_gather; the extract takes the local column, the bounds
// check the global one.
// CHECK-LABEL: func.func @column_split
// CHECK: %[[T:.*]] = shard.shard %arg1 to %{{.*}} : tensor<32x16xf32>
// CHECK: shard.sharding @g split_axes = {{\[\[}}0], [], [1]]
// CHECK: %[[TS:.*]] = shard.sharding @g split_axes = {{\[\[}}], [1]]
// CHECK-NEXT: %[[TU:.*]] = shard.shard %[[T]] to %[[TS]] annotate_for_users : tensor<32x16xf32>
// CHECK: linalg.generic
// CHECK: tensor.extract %[[TU]][
// PART-LABEL: func.func @column_split
// PART-SAME: (%[[IDS:.*]]: tensor<2x8xi64>, %[[TAB:.*]]: tensor<32x8xf32>) -> tensor<2x8x8xf32>
// PART-NOT: shard.all_gather
// PART: %[[P:.*]] = shard.process_multi_index on @g axes = [1] : index
// PART: %[[OFF:.*]] = arith.muli %[[P]], %c8 : index
// PART: linalg.generic
// PART: %[[ROW:.*]] = arith.index_cast %in : i64 to index
// PART-NEXT: %[[COL:.*]] = linalg.index 2 : index
// PART-NEXT: %[[GCOL:.*]] = arith.addi %[[COL]], %[[OFF]] : index
// PART-NEXT: %[[OK:.*]] = arith.cmpi ult, %[[GCOL]], %c16 : index
// PART-NEXT: cf.assert %[[OK]], "column in range"
// PART-NEXT: tensor.extract %[[TAB]][%[[ROW]], %[[COL]]] : tensor<32x8xf32>
// PART: } -> tensor<2x8x8xf32>
func.func @column_split(%ids: tensor<4x8xi64>, %table: tensor<32x16xf32>) -> tensor<4x8x16xf32> {
  %s0 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %sc = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %i = shard.shard %ids to %s0 : tensor<4x8xi64>
  %t = shard.shard %table to %sc : tensor<32x16xf32>
  %c16 = arith.constant 16 : index
  %e = tensor.empty() : tensor<4x8x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%i : tensor<4x8xi64>) outs(%e : tensor<4x8x16xf32>) {
  ^bb0(%in: i64, %out: f32):
    %row = arith.index_cast %in : i64 to index
    %col = linalg.index 2 : index
    %ok = arith.cmpi ult, %col, %c16 : index
    cf.assert %ok, "column in range"
    %x = tensor.extract %t[%row, %col] : tensor<32x16xf32>
    linalg.yield %x : f32
  } -> tensor<4x8x16xf32>
  return %r : tensor<4x8x16xf32>
}

// Split on the rows, which token ids index: read whole, at global indices, as before.
// CHECK-LABEL: func.func @row_split
// CHECK: shard.sharding @g split_axes = {{\[\[}}]]
// CHECK-NEXT: %[[TU:.*]] = shard.shard %{{.*}} to %{{.*}} annotate_for_users : tensor<32x16xf32>
// CHECK: tensor.extract %[[TU]][
// PART-LABEL: func.func @row_split
// PART: %[[G:.*]] = shard.all_gather %arg1 on @g grid_axes = [1] gather_axis = 0 : tensor<16x16xf32> -> tensor<32x16xf32>
// PART: %[[C:.*]] = tensor.cast %[[G]]
// PART: tensor.extract %[[C]][
func.func @row_split(%ids: tensor<4x8xi64>, %table: tensor<32x16xf32>) -> tensor<4x8x16xf32> {
  %s0 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %sr = shard.sharding @g split_axes = [[1]] : !shard.sharding
  %i = shard.shard %ids to %s0 : tensor<4x8xi64>
  %t = shard.shard %table to %sr : tensor<32x16xf32>
  %e = tensor.empty() : tensor<4x8x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%i : tensor<4x8xi64>) outs(%e : tensor<4x8x16xf32>) {
  ^bb0(%in: i64, %out: f32):
    %row = arith.index_cast %in : i64 to index
    %col = linalg.index 2 : index
    %x = tensor.extract %t[%row, %col] : tensor<32x16xf32>
    linalg.yield %x : f32
  } -> tensor<4x8x16xf32>
  return %r : tensor<4x8x16xf32>
}

// A position table (GPT's wpe) read at (`linalg.index 1`, `linalg.index 2`), the row
// through index casts: both dimensions follow their loops; the extract reads the local
// indices (the casts cloned from the local index), the other use the global one.
// CHECK-LABEL: func.func @positions
// CHECK: shard.sharding @g split_axes = {{\[\[}}], [0], [1]]
// PART-LABEL: func.func @positions
// PART-SAME: (%[[POS:.*]]: tensor<4x8xf32>) -> tensor<4x4x8xf32>
// PART-NOT: shard.all_gather
// PART: %[[S:.*]] = linalg.index 1 : index
// PART-NEXT: %[[GS:.*]] = arith.addi %[[S]], %{{.*}} : index
// PART-NEXT: %[[GS64:.*]] = arith.index_cast %[[GS]] : index to i64
// PART: %[[E:.*]] = linalg.index 2 : index
// PART: %[[LS64:.*]] = arith.index_cast %[[S]] : index to i64
// PART-NEXT: %[[LS:.*]] = arith.index_cast %[[LS64]] : i64 to index
// PART-NEXT: tensor.extract %[[POS]][%[[LS]], %[[E]]] : tensor<4x8xf32>
// PART-NEXT: arith.sitofp %[[GS64]] : i64 to f32
func.func @positions(%pos: tensor<8x16xf32>) -> tensor<4x8x16xf32> {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %p = shard.shard %pos to %s : tensor<8x16xf32>
  %e = tensor.empty() : tensor<4x8x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} outs(%e : tensor<4x8x16xf32>) {
  ^bb0(%out: f32):
    %s1 = linalg.index 1 : index
    %s64 = arith.index_cast %s1 : index to i64
    %sc = arith.index_cast %s64 : i64 to index
    %col = linalg.index 2 : index
    %x = tensor.extract %p[%sc, %col] : tensor<8x16xf32>
    %f = arith.sitofp %s64 : i64 to f32
    %y = arith.addf %x, %f : f32
    linalg.yield %y : f32
  } -> tensor<4x8x16xf32>
  return %r : tensor<4x8x16xf32>
}
