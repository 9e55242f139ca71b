// RUN: shardc-opt %s --test-grid-process-multi-index-op-lowering | filecheck %s

shard.grid @cube(shape = ?x?x?)
shard.grid @flat(shape = 6)

// CHECK-LABEL: func.func @every_axis
func.func @every_axis() -> (index, index, index) {
  // CHECK-NEXT: %[[LIN:.*]] = shard.process_linear_index on @cube : index
  // CHECK-NEXT: %[[SHAPE:.*]]:3 = shard.grid_shape @cube : index, index, index
  // CHECK-NEXT: %[[IDX:.*]]:3 = affine.delinearize_index %[[LIN]] into (%[[SHAPE]]#0, %[[SHAPE]]#1, %[[SHAPE]]#2) : index, index, index
  // CHECK-NEXT: return %[[IDX]]#0, %[[IDX]]#1, %[[IDX]]#2
  %0:3 = shard.process_multi_index on @cube : index, index, index
  return %0#0, %0#1, %0#2 : index, index, index
}

// CHECK-LABEL: func.func @chosen_axes
func.func @chosen_axes() -> (index, index) {
  // The whole grid is delinearized; the results pick the requested axes in order.
  // CHECK-NEXT: %[[LIN:.*]] = shard.process_linear_index on @cube : index
  // CHECK-NEXT: %[[SHAPE:.*]]:3 = shard.grid_shape @cube : index, index, index
  // CHECK-NEXT: %[[IDX:.*]]:3 = affine.delinearize_index %[[LIN]] into (%[[SHAPE]]#0, %[[SHAPE]]#1, %[[SHAPE]]#2) : index, index, index
  // CHECK-NEXT: return %[[IDX]]#2, %[[IDX]]#0
  %0:2 = shard.process_multi_index on @cube axes = [2, 0] : index, index
  return %0#0, %0#1 : index, index
}

// On a 1-d grid the delinearization folds away: the index is the linear index.
// CHECK-LABEL: func.func @one_axis
func.func @one_axis() -> index {
  // CHECK-NEXT: %[[LIN:.*]] = shard.process_linear_index on @flat : index
  // CHECK-NEXT: return %[[LIN]]
  %0 = shard.process_multi_index on @flat : index
  return %0 : index
}

// CHECK-LABEL: func.func @other_ops_untouched
func.func @other_ops_untouched() -> index {
  // CHECK-NEXT: shard.process_linear_index on @cube
  // CHECK-NEXT: return
  %0 = shard.process_linear_index on @cube : index
  return %0 : index
}
