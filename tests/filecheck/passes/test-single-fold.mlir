// RUN: shardc-opt %s --test-single-fold | filecheck %s

// Every op is folded once, from the last to the first; constants end up uniqued at
// the function entry, and unused ones are erased. `muli(dim, 2)` is visited before
// `dim` folds to 4, so it stays a muli of constants.

// CHECK-LABEL: func.func @fold_once
// CHECK-SAME: (%[[X:.*]]: index, %[[T:.*]]: tensor<4x?xf32>)
func.func @fold_once(%x: index, %t: tensor<4x?xf32>) -> (index, index, index, index, i1) {
  // CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : index
  // CHECK-NEXT: %[[C2:.*]] = arith.constant 2 : index
  // CHECK-NEXT: %[[C4:.*]] = arith.constant 4 : index
  // CHECK-NEXT: %[[TRUE:.*]] = arith.constant true
  // CHECK-NEXT: %[[M:.*]] = arith.muli %[[C4]], %[[C2]] : index
  // CHECK-NEXT: %[[D:.*]] = tensor.dim %[[T]], %[[C1]]
  // CHECK-NEXT: return %[[X]], %[[C4]], %[[M]], %[[D]], %[[TRUE]]
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %unused = arith.constant 42 : index
  %a = arith.muli %x, %c1 : index
  %b = tensor.dim %t, %c0 : tensor<4x?xf32>
  %c = arith.muli %b, %c2 : index
  %d = tensor.dim %t, %c1 : tensor<4x?xf32>
  %e = arith.cmpi ule, %x, %x : index
  return %a, %b, %c, %d, %e : index, index, index, index, i1
}

// A single fold: `muli(dim, 2)` is folded before `dim` becomes a constant, so it stays.
// CHECK-LABEL: func.func @one_step
func.func @one_step(%t: tensor<3xf32>) -> index {
  // CHECK-NEXT: %[[C2:.*]] = arith.constant 2 : index
  // CHECK-NEXT: %[[C3:.*]] = arith.constant 3 : index
  // CHECK-NEXT: %[[M:.*]] = arith.muli %[[C3]], %[[C2]] : index
  // CHECK-NEXT: return %[[M]]
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %d = tensor.dim %t, %c0 : tensor<3xf32>
  %m = arith.muli %d, %c2 : index
  return %m : index
}
