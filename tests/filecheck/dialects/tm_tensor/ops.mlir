// RUN: shardc-opt %s --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC

// tm_tensor.scan as torch-mlir writes it for torch.cumsum (tensors, an accumulator of
// the input's rank minus one, two results), exclusive with another combiner and an
// extra attribute, and on memrefs (no results).

// ORACLE-SKIP: mlir-opt has no tm_tensor dialect; tests/oracle/test_tm_tensor_oracle.py checks
// the generic form against mlir-opt and this form against torch-mlir's own printer.

// CHECK-LABEL: func.func @cumsum
// CHECK: %[[R:.*]]:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%{{.*}} : tensor<4x8xf32>) outs(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK-NEXT: tm_tensor.yield %[[S]] : f32
// CHECK-NEXT: } -> tensor<4x8xf32>, tensor<4xf32>
// CHECK-NEXT: return %[[R]]#0 : tensor<4x8xf32>
// GENERIC-LABEL: sym_name = "cumsum"
// GENERIC: "tm_tensor.scan"(%{{.*}}, %{{.*}}, %{{.*}}) <{dimension = 1 : i64, inclusive = true, operandSegmentSizes = array<i32: 1, 2>}> ({
// GENERIC: "tm_tensor.yield"(%{{.*}}) : (f32) -> ()
// GENERIC: }) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
func.func @cumsum(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<4x8xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = tensor.empty() : tensor<4xf32>
  %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<4xf32>) -> tensor<4xf32>
  %4:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%arg0 : tensor<4x8xf32>) outs(%1, %3 : tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%arg1: f32, %arg2: f32):
    %5 = arith.addf %arg1, %arg2 : f32
    tm_tensor.yield %5 : f32
  } -> tensor<4x8xf32>, tensor<4xf32>
  return %4#0 : tensor<4x8xf32>
}

// -----

// ORACLE-SKIP: mlir-opt has no tm_tensor dialect; tests/oracle/test_tm_tensor_oracle.py checks
// the generic form against mlir-opt and this form against torch-mlir's own printer.
// CHECK-LABEL: func.func @exclusive_max
// CHECK: tm_tensor.scan dimension(0) inclusive(false) {note = "kept"} ins(%{{.*}} : tensor<5x3xi64>) outs(%{{.*}}, %{{.*}} : tensor<5x3xi64>, tensor<3xi64>) {
// CHECK: arith.maxsi
// CHECK: } -> tensor<5x3xi64>, tensor<3xi64>
// GENERIC: <{dimension = 0 : i64, inclusive = false, operandSegmentSizes = array<i32: 1, 2>}> ({
// GENERIC: }) {note = "kept"} : (tensor<5x3xi64>, tensor<5x3xi64>, tensor<3xi64>) -> (tensor<5x3xi64>, tensor<3xi64>)
func.func @exclusive_max(%x: tensor<5x3xi64>, %out: tensor<5x3xi64>, %acc: tensor<3xi64>) -> (tensor<5x3xi64>, tensor<3xi64>) {
  %r:2 = tm_tensor.scan dimension(0) inclusive(false) {note = "kept"} ins(%x : tensor<5x3xi64>) outs(%out, %acc : tensor<5x3xi64>, tensor<3xi64>) {
  ^bb0(%a: i64, %b: i64):
    %m = arith.maxsi %a, %b : i64
    tm_tensor.yield %m : i64
  } -> tensor<5x3xi64>, tensor<3xi64>
  return %r#0, %r#1 : tensor<5x3xi64>, tensor<3xi64>
}

// -----

// ORACLE-SKIP: mlir-opt has no tm_tensor dialect; tests/oracle/test_tm_tensor_oracle.py checks
// the generic form against mlir-opt and this form against torch-mlir's own printer.
// CHECK-LABEL: func.func @on_memrefs
// CHECK: tm_tensor.scan dimension(0) inclusive(true) ins(%{{.*}} : memref<6xf32>) outs(%{{.*}}, %{{.*}} : memref<6xf32>, memref<f32>) {
// CHECK: tm_tensor.yield
// CHECK-NEXT: }{{$}}
// GENERIC: }) : (memref<6xf32>, memref<6xf32>, memref<f32>) -> ()
func.func @on_memrefs(%x: memref<6xf32>, %out: memref<6xf32>, %acc: memref<f32>) {
  tm_tensor.scan dimension(0) inclusive(true) ins(%x : memref<6xf32>) outs(%out, %acc : memref<6xf32>, memref<f32>) {
  ^bb0(%a: f32, %b: f32):
    %p = arith.mulf %a, %b : f32
    tm_tensor.yield %p : f32
  }
  return
}
