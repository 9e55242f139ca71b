// RUN: shardc-opt %s --cse --split-input-file | filecheck %s

// Linalg ops on tensors have no memory effects: identical ones merge, dead ones go.
// CHECK-LABEL: func.func @tensors
// CHECK: %[[M:.*]] = linalg.matmul
// CHECK-NOT: linalg.matmul
// CHECK: return %[[M]], %[[M]]
func.func @tensors(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %e = tensor.empty() : tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = linalg.matmul ins(%a, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0, %1 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// On memrefs they write their outputs: both stay.
// CHECK-LABEL: func.func @memrefs
// CHECK-COUNT-2: linalg.matmul
func.func @memrefs(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  return
}
