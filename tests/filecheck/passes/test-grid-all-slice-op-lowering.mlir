// RUN: shardc-opt %s --split-input-file --test-grid-all-slice-op-lowering | filecheck %s
// RUN: shardc-opt %s --split-input-file --test-grid-all-slice-op-lowering --test-grid-simplifications --cse | filecheck %s --check-prefix=SIMPLE

shard.grid @ring(shape = ?)

// CHECK-LABEL: func.func @dynamic_ring
// CHECK-SAME: (%[[X:.*]]: tensor<?x7xi32>)
func.func @dynamic_ring(%x: tensor<?x7xi32>) -> tensor<?x7xi32> {
  // CHECK-NEXT: %[[C7:.*]] = arith.constant 7 : index
  // CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
  // CHECK-NEXT: %[[IDX:.*]] = shard.process_multi_index on @ring axes = [0] : index
  // CHECK-NEXT: %[[N:.*]] = shard.grid_shape @ring axes = [0] : index
  // CHECK-NEXT: %[[DIM:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?x7xi32>
  // CHECK-NEXT: %[[REM:.*]] = arith.remui %[[DIM]], %[[N]] : index
  // CHECK-NEXT: %[[OK:.*]] = arith.cmpi eq, %[[REM]], %[[C0]] : index
  // CHECK-NEXT: cf.assert %[[OK]], "Slicing a tensor with axis size that is not exactly divisible by the grid process group size is not supported."
  // CHECK-NEXT: %[[PART:.*]] = arith.divui %[[DIM]], %[[N]] : index
  // CHECK-NEXT: %[[OFF:.*]] = arith.muli %[[IDX]], %[[PART]] : index
  // CHECK-NEXT: %[[SLICE:.*]] = tensor.extract_slice %[[X]][%[[OFF]], 0] [%[[PART]], %[[C7]]] [1, 1] : tensor<?x7xi32> to tensor<?x?xi32>
  // CHECK-NEXT: %[[CAST:.*]] = tensor.cast %[[SLICE]] : tensor<?x?xi32> to tensor<?x7xi32>
  // CHECK-NEXT: return %[[CAST]]
  %0 = shard.all_slice %x on @ring grid_axes = [0] slice_axis = 0 : tensor<?x7xi32> -> tensor<?x7xi32>
  return %0 : tensor<?x7xi32>
}

// -----

shard.grid @ring(shape = 4)

// With the grid shape folded (SIMPLE), the sizes and checks become constants.
// CHECK-LABEL: func.func @static_ring
// SIMPLE-LABEL: func.func @static_ring
// SIMPLE-SAME: (%[[X:.*]]: tensor<12xf16>)
func.func @static_ring(%x: tensor<12xf16>) -> tensor<3xf16> {
  // CHECK: shard.grid_shape @ring axes = [0]
  // CHECK: arith.remui %c12
  // SIMPLE-DAG: %[[C3:.*]] = arith.constant 3 : index
  // SIMPLE-DAG: %[[TRUE:.*]] = arith.constant true
  // SIMPLE: %[[IDX:.*]] = shard.process_multi_index on @ring axes = [0] : index
  // SIMPLE-NEXT: cf.assert %[[TRUE]]
  // SIMPLE-NEXT: %[[OFF:.*]] = arith.muli %[[IDX]], %[[C3]] : index
  // SIMPLE-NEXT: %[[SLICE:.*]] = tensor.extract_slice %[[X]][%[[OFF]]] [%[[C3]]] [1] : tensor<12xf16> to tensor<?xf16>
  // SIMPLE-NEXT: %[[CAST:.*]] = tensor.cast %[[SLICE]] : tensor<?xf16> to tensor<3xf16>
  // SIMPLE-NEXT: return %[[CAST]]
  %0 = shard.all_slice %x on @ring grid_axes = [0] slice_axis = 0 : tensor<12xf16> -> tensor<3xf16>
  return %0 : tensor<3xf16>
}

// -----

// Two grid axes: the in-group linear index is an affine.apply over the in-group shape.
// CHECK: #[[MAP:.*]] = affine_map<()[s0, s1, s2] -> (s0 * s1 + s2)>
shard.grid @grid3(shape = ?x?x?)

// CHECK-LABEL: func.func @two_axes
// CHECK-SAME: (%[[X:.*]]: tensor<5x?xf32>)
func.func @two_axes(%x: tensor<5x?xf32>) -> tensor<5x?xf32> {
  // CHECK-NEXT: %[[C5:.*]] = arith.constant 5 : index
  // CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : index
  // CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
  // CHECK-NEXT: %[[IDX:.*]]:2 = shard.process_multi_index on @grid3 axes = [2, 0] : index, index
  // CHECK-NEXT: %[[SHAPE:.*]]:2 = shard.grid_shape @grid3 axes = [2, 0] : index, index
  // CHECK-NEXT: %[[SHAPE2:.*]]:2 = shard.grid_shape @grid3 axes = [2, 0] : index, index
  // CHECK-NEXT: %[[N:.*]] = arith.muli %[[SHAPE2]]#0, %[[SHAPE2]]#1 : index
  // CHECK-NEXT: %[[DIM:.*]] = tensor.dim %[[X]], %[[C1]] : tensor<5x?xf32>
  // CHECK-NEXT: %[[REM:.*]] = arith.remui %[[DIM]], %[[N]] : index
  // CHECK-NEXT: %[[OK:.*]] = arith.cmpi eq, %[[REM]], %[[C0]] : index
  // CHECK-NEXT: cf.assert %[[OK]]
  // CHECK-NEXT: %[[PART:.*]] = arith.divui %[[DIM]], %[[N]] : index
  // CHECK-NEXT: %[[LIN:.*]] = affine.apply #[[MAP]]()[%[[IDX]]#0, %[[SHAPE]]#1, %[[IDX]]#1]
  // CHECK-NEXT: %[[OFF:.*]] = arith.muli %[[LIN]], %[[PART]] : index
  // CHECK-NEXT: %[[SLICE:.*]] = tensor.extract_slice %[[X]][0, %[[OFF]]] [%[[C5]], %[[PART]]] [1, 1] : tensor<5x?xf32> to tensor<?x?xf32>
  // CHECK-NEXT: %[[CAST:.*]] = tensor.cast %[[SLICE]] : tensor<?x?xf32> to tensor<5x?xf32>
  // CHECK-NEXT: return %[[CAST]]
  %0 = shard.all_slice %x on @grid3 grid_axes = [2, 0] slice_axis = 1 : tensor<5x?xf32> -> tensor<5x?xf32>
  return %0 : tensor<5x?xf32>
}

// -----

// Three grid axes: the leading stride is a product of the trailing group sizes.
// CHECK-DAG: #[[PROD:.*]] = affine_map<()[s0, s1] -> (s0 * s1)>
// CHECK-DAG: #[[LIN3:.*]] = affine_map<()[s0, s1, s2, s3, s4] -> (s0 * s1 + s2 * s3 + s4)>
shard.grid @grid3(shape = ?x?x?)

// CHECK-LABEL: func.func @three_axes
func.func @three_axes(%x: tensor<?xf32>) -> tensor<?xf32> {
  // CHECK: %[[IDX:.*]]:3 = shard.process_multi_index on @grid3 axes = [0, 1, 2]
  // CHECK-NEXT: %[[SHAPE:.*]]:3 = shard.grid_shape @grid3 axes = [0, 1, 2]
  // CHECK: %[[STRIDE:.*]] = affine.apply #[[PROD]]()[%[[SHAPE]]#1, %[[SHAPE]]#2]
  // CHECK-NEXT: %[[LIN:.*]] = affine.apply #[[LIN3]]()[%[[IDX]]#0, %[[STRIDE]], %[[IDX]]#1, %[[SHAPE]]#2, %[[IDX]]#2]
  // CHECK-NEXT: arith.muli %[[LIN]]
  %0 = shard.all_slice %x on @grid3 grid_axes = [0, 1, 2] slice_axis = 0 : tensor<?xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
