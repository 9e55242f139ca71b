// RUN: shardc-opt %s --split-input-file --canonicalize | filecheck %s

// Constant folds of delinearize_index and linearize_index (as MLIR's folders do).

// CHECK-LABEL: func.func @fold_delinearize
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG: %[[C5:.*]] = arith.constant 5 : index
// CHECK: return %[[C1]], %[[C3]], %[[C5]], %{{.*}}
func.func @fold_delinearize(%x: index) -> (index, index, index, index) {
  %c = arith.constant 61 : index
  %0:3 = affine.delinearize_index %c into (5, 7) : index, index, index
  %1 = affine.delinearize_index %x into () : index
  return %0#0, %0#1, %0#2, %1 : index, index, index, index
}

// -----

// CHECK-LABEL: func.func @fold_linearize
// CHECK-DAG: %[[C23:.*]] = arith.constant 23 : index
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK: return %[[C23]], %[[C0]], %{{.*}} : index, index, index
func.func @fold_linearize(%x: index) -> (index, index, index) {
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c10 = arith.constant 10 : index
  %0 = affine.linearize_index [%c2, %c3] by (%c10) : index
  %1 = affine.linearize_index [] by () : index
  %2 = affine.linearize_index [%x] by (6) : index
  return %0, %1, %2 : index, index, index
}
