// RUN: shardc-opt %s --canonicalize --split-input-file | filecheck %s

// tensor.extract folds as in MLIR: an element of a constant at constant indices, any
// element of a splat, an operand of tensor.from_elements at constant indices.

// CHECK-LABEL: func.func @dense_constant
func.func @dense_constant() -> (index, i32) {
  // CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
  // CHECK-DAG: %[[C20:.*]] = arith.constant 20 : i32
  // CHECK-NOT: tensor.extract
  // CHECK: return %[[C3]], %[[C20]] : index, i32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = arith.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xindex>
  %x = tensor.extract %t[%c1, %c0] : tensor<2x2xindex>
  %u = arith.constant dense<[10, 20, 30]> : tensor<3xi32>
  %y = tensor.extract %u[%c1] : tensor<3xi32>
  return %x, %y : index, i32
}

// -----

// CHECK-LABEL: func.func @splat_any_index
// CHECK-SAME: (%{{.*}}: index)
func.func @splat_any_index(%i: index) -> f32 {
  // CHECK: %[[C:.*]] = arith.constant 2.500000e+00 : f32
  // CHECK-NEXT: return %[[C]] : f32
  %s = arith.constant dense<2.5> : tensor<4xf32>
  %z = tensor.extract %s[%i] : tensor<4xf32>
  return %z : f32
}

// -----

// CHECK-LABEL: func.func @from_elements
// CHECK-SAME: (%[[I:.*]]: index, %[[A:.*]]: index, %[[B:.*]]: index)
func.func @from_elements(%i: index, %a: index, %b: index) -> (index, index, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %fe = tensor.from_elements %a, %b, %c1, %b, %a, %c0 : tensor<2x3xindex>
  // Row 1, column 1 of [[a, b, 1], [b, a, 0]].
  %u = tensor.extract %fe[%c1, %c1] : tensor<2x3xindex>
  // CHECK: %[[T:.*]] = tensor.from_elements
  // CHECK: %[[V:.*]] = tensor.extract %[[T]][%[[I]], %{{.*}}] : tensor<2x3xindex>
  %v = tensor.extract %fe[%i, %c1] : tensor<2x3xindex>
  // An index out of bounds does not fold.
  // CHECK: %[[W:.*]] = tensor.extract %[[T]][%{{.*}}, %{{.*}}] : tensor<2x3xindex>
  %c5 = arith.constant 5 : index
  %w = tensor.extract %fe[%c1, %c5] : tensor<2x3xindex>
  // CHECK: return %[[A]], %[[V]], %[[W]] : index, index, index
  return %u, %v, %w : index, index, index
}

// -----

// tensor.from_elements of constants folds to a dense constant (MLIR's
// FromElementsOp::fold); an extract at an index the fold cannot see reads that constant.
// CHECK-LABEL: func.func @from_constant_elements
// CHECK-SAME: (%[[I:.*]]: index)
func.func @from_constant_elements(%i: index) -> (tensor<2x2xi32>, i32) {
  // CHECK: %[[T:.*]] = arith.constant dense<{{\[\[}}7, 5], [5, 9]]> : tensor<2x2xi32>
  // CHECK-NOT: tensor.from_elements
  // CHECK: %[[X:.*]] = tensor.extract %[[T]][%[[I]], %[[I]]] : tensor<2x2xi32>
  // CHECK: return %[[T]], %[[X]] : tensor<2x2xi32>, i32
  %a = arith.constant 7 : i32
  %b = arith.constant 5 : i32
  %c = arith.constant 9 : i32
  %t = tensor.from_elements %a, %b, %b, %c : tensor<2x2xi32>
  %x = tensor.extract %t[%i, %i] : tensor<2x2xi32>
  return %t, %x : tensor<2x2xi32>, i32
}

// -----

// CHECK-LABEL: func.func @from_float_elements
func.func @from_float_elements() -> tensor<3xf32> {
  // CHECK: %[[T:.*]] = arith.constant dense<[1.500000e+00, 0.000000e+00, -2.000000e+00]> : tensor<3xf32>
  // CHECK-NEXT: return %[[T]] : tensor<3xf32>
  %a = arith.constant 1.5 : f32
  %z = arith.constant 0.0 : f32
  %n = arith.constant -2.0 : f32
  %t = tensor.from_elements %a, %z, %n : tensor<3xf32>
  return %t : tensor<3xf32>
}
