// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s

// CHECK-LABEL: func.func @forall(
// CHECK: %0 = scf.forall (%arg2, %arg3) in (4, %arg1) shared_outs(%arg4 = %arg0) -> (tensor<4x8xf32>) {
// CHECK: scf.forall.in_parallel {
// CHECK-NEXT: tensor.parallel_insert_slice %extracted_slice into %arg4[%arg2, %arg3] [1, 1] [1, 1] : tensor<1x1xf32> into tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK: scf.forall (%arg2) = (%arg1) to (8) step (2) {
// CHECK-NEXT: %c0 = arith.constant 0 : index
// CHECK-NEXT: } {foo}
// CHECK: scf.forall (%arg2, %arg3) in (4, 8) {
// CHECK-NEXT: }
func.func @forall(%t: tensor<4x8xf32>, %n: index) -> tensor<4x8xf32> {
  %0 = scf.forall (%x, %y) in (4, %n) shared_outs(%o = %t) -> (tensor<4x8xf32>) {
    %s = tensor.extract_slice %o[%x, %y] [1, 1] [1, 1] : tensor<4x8xf32> to tensor<1x1xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %s into %o[%x, %y] [1, 1] [1, 1] : tensor<1x1xf32> into tensor<4x8xf32>
    }
  }
  scf.forall (%x) = (%n) to (8) step (2) {
    %c = arith.constant 0 : index
  } {foo}
  scf.forall (%x, %y) in (4, 8) {
  }
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @parallel(
// CHECK: scf.parallel (%arg3, %arg4) = (%arg0, %arg0) to (%arg1, %arg1) step (%arg1, %arg1) {
// CHECK-NEXT: scf.reduce {{$}}
// CHECK: %0 = scf.parallel (%arg3) = (%arg0) to (%arg1) step (%arg1) init (%arg2) -> f32 {
// CHECK: scf.reduce(%arg2 : f32) {
// CHECK: } {foo}
// CHECK: %1 = scf.execute_region -> index {
func.func @parallel(%lb: index, %ub: index, %f: f32) -> f32 {
  scf.parallel (%x, %y) = (%lb, %lb) to (%ub, %ub) step (%ub, %ub) {
  }
  %0 = scf.parallel (%x) = (%lb) to (%ub) step (%ub) init (%f) -> f32 {
    scf.reduce(%f : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  } {foo}
  %1 = scf.execute_region -> index {
    scf.yield %lb : index
  }
  return %0 : f32
}
