// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s

// tensor.expand_shape with `output_shape`, static and dynamic; collapse_shape; concat.
// CHECK-LABEL: func.func @reshapes(%arg0: tensor<4x6xf32>, %arg1: tensor<?x6xf32>, %arg2: index, %arg3: tensor<f32>) -> (tensor<4x2x3xf32>, tensor<24xf32>, tensor<?x2x3xf32>, tensor<1x1xf32>, tensor<f32>) {
// CHECK-NEXT: %expanded = tensor.expand_shape %arg0 {{\[\[}}0], [1, 2]] output_shape [4, 2, 3] : tensor<4x6xf32> into tensor<4x2x3xf32>
// CHECK-NEXT: %collapsed = tensor.collapse_shape %arg0 {{\[\[}}0, 1]] : tensor<4x6xf32> into tensor<24xf32>
// CHECK-NEXT: %expanded_0 = tensor.expand_shape %arg1 {{\[\[}}0], [1, 2]] output_shape [%arg2, 2, 3] : tensor<?x6xf32> into tensor<?x2x3xf32>
// CHECK-NEXT: %expanded_1 = tensor.expand_shape %arg3 [] output_shape [1, 1] : tensor<f32> into tensor<1x1xf32>
// CHECK-NEXT: %collapsed_2 = tensor.collapse_shape %expanded_1 [] : tensor<1x1xf32> into tensor<f32>
// CHECK-NEXT: return %expanded, %collapsed, %expanded_0, %expanded_1, %collapsed_2 : tensor<4x2x3xf32>, tensor<24xf32>, tensor<?x2x3xf32>, tensor<1x1xf32>, tensor<f32>
// CHECK-NEXT: }
func.func @reshapes(%a: tensor<4x6xf32>, %b: tensor<?x6xf32>, %d: index, %s: tensor<f32>) -> (tensor<4x2x3xf32>, tensor<24xf32>, tensor<?x2x3xf32>, tensor<1x1xf32>, tensor<f32>) {
  %e = tensor.expand_shape %a [[0], [1, 2]] output_shape [4, 2, 3] : tensor<4x6xf32> into tensor<4x2x3xf32>
  %c = tensor.collapse_shape %a [[0, 1]] : tensor<4x6xf32> into tensor<24xf32>
  %f = tensor.expand_shape %b [[0], [1, 2]] output_shape [%d, 2, 3] : tensor<?x6xf32> into tensor<?x2x3xf32>
  %g = tensor.expand_shape %s [] output_shape [1, 1] : tensor<f32> into tensor<1x1xf32>
  %h = tensor.collapse_shape %g [] : tensor<1x1xf32> into tensor<f32>
  return %e, %c, %f, %g, %h : tensor<4x2x3xf32>, tensor<24xf32>, tensor<?x2x3xf32>, tensor<1x1xf32>, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @concat(%arg0: tensor<2x3xf32>, %arg1: tensor<2x5xf32>, %arg2: tensor<?x3xi64>, %arg3: tensor<4x3xi64>) -> (tensor<2x8xf32>, tensor<?x3xi64>) {
// CHECK-NEXT: %concat = tensor.concat dim(1) %arg0, %arg1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %concat_0 = tensor.concat dim(0) %arg2, %arg3 : (tensor<?x3xi64>, tensor<4x3xi64>) -> tensor<?x3xi64>
// CHECK-NEXT: return %concat, %concat_0 : tensor<2x8xf32>, tensor<?x3xi64>
// CHECK-NEXT: }
func.func @concat(%x: tensor<2x3xf32>, %y: tensor<2x5xf32>, %z: tensor<?x3xi64>, %w: tensor<4x3xi64>) -> (tensor<2x8xf32>, tensor<?x3xi64>) {
  %0 = tensor.concat dim(1) %x, %y : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %1 = tensor.concat dim(0) %z, %w : (tensor<?x3xi64>, tensor<4x3xi64>) -> tensor<?x3xi64>
  return %0, %1 : tensor<2x8xf32>, tensor<?x3xi64>
}

// -----

// CHECK-LABEL: func.func @extract(%arg0: tensor<4x3xi64>, %arg1: tensor<f32>, %arg2: tensor<2xi1>) -> (i64, f32, i1) {
// CHECK-NEXT: %c0 = arith.constant 0 : index
// CHECK-NEXT: %c2 = arith.constant 2 : index
// CHECK-NEXT: %extracted = tensor.extract %arg0[%c2, %c0] : tensor<4x3xi64>
// CHECK-NEXT: %extracted_0 = tensor.extract %arg1[] : tensor<f32>
// CHECK-NEXT: %extracted_1 = tensor.extract %arg2[%c0] : tensor<2xi1>
// CHECK-NEXT: return %extracted, %extracted_0, %extracted_1 : i64, f32, i1
// CHECK-NEXT: }
func.func @extract(%t: tensor<4x3xi64>, %s: tensor<f32>, %m: tensor<2xi1>) -> (i64, f32, i1) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %0 = tensor.extract %t[%c2, %c0] : tensor<4x3xi64>
  %1 = tensor.extract %s[] : tensor<f32>
  %2 = tensor.extract %m[%c0] : tensor<2xi1>
  return %0, %1, %2 : i64, f32, i1
}
