// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s

// A one-op body applied to the arguments in order prints in the short form, whichever
// form it was written in.

// CHECK-LABEL: func.func @forms(
// CHECK: %0 = linalg.batch_matmul ins(%arg0, %arg1 : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%arg2 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
// CHECK: %mapped = linalg.map { arith.addf } ins(%arg3, %arg4 : tensor<8xf32>, tensor<8xf32>) outs(%arg3 : tensor<8xf32>)
// CHECK: %mapped_0 = linalg.map { math.exp } ins(%arg3 : tensor<8xf32>) outs(%arg4 : tensor<8xf32>)
// CHECK: %mapped_1 = linalg.map ins(%arg3 : tensor<8xf32>) outs(%arg4 : tensor<8xf32>)
// CHECK-NEXT: (%in: f32, %init: f32) {
// CHECK-NEXT: %1 = arith.addf %in, %init : f32
// CHECK: %reduced = linalg.reduce { arith.maximumf } ins(%arg0 : tensor<2x4x8xf32>) outs(%arg5 : tensor<2x4xf32>) dimensions = [2]
// CHECK: %reduced_2 = linalg.reduce ins(%arg0 : tensor<2x4x8xf32>) outs(%arg5 : tensor<2x4xf32>) dimensions = [2]
// CHECK-NEXT: (%in: f32, %init: f32) {
func.func @forms(%a: tensor<2x4x8xf32>, %b: tensor<2x8x16xf32>, %c: tensor<2x4x16xf32>, %x: tensor<8xf32>, %y: tensor<8xf32>, %r: tensor<2x4xf32>) -> tensor<8xf32> {
  %0 = linalg.batch_matmul ins(%a, %b : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%c : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %1 = linalg.map { arith.addf } ins(%x, %y : tensor<8xf32>, tensor<8xf32>) outs(%x : tensor<8xf32>)
  %2 = linalg.map ins(%x : tensor<8xf32>) outs(%y : tensor<8xf32>)
    (%in: f32, %out: f32) {
      %e = math.exp %in : f32
      linalg.yield %e : f32
    }
  %3 = linalg.map ins(%x : tensor<8xf32>) outs(%y : tensor<8xf32>)
    (%in: f32, %out: f32) {
      %e = arith.addf %in, %out : f32
      linalg.yield %e : f32
    }
  %4 = linalg.reduce { arith.maximumf } ins(%a : tensor<2x4x8xf32>) outs(%r : tensor<2x4xf32>) dimensions = [2]
  %5 = linalg.reduce ins(%a : tensor<2x4x8xf32>) outs(%r : tensor<2x4xf32>) dimensions = [2]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  return %1 : tensor<8xf32>
}
