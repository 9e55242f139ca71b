// RUN: shardc-opt %s --canonicalize --split-input-file | filecheck %s

// MLIR's folders and patterns that xDSL's dialects lack (shardc.passes.fold_registry).
// Every expectation below is mlir-opt 22.1.8's output for the same input.

// Constants are reassociated (AddIAddConstant, SubIRHSSubConstantRHS, SubILHSAddConstant,
// MulIMulIConstant); `subi x, c` itself stays a subi.
// CHECK-LABEL: func.func @reassoc(
// CHECK-NEXT:    %[[C10:.*]] = arith.constant 10 : i32
// CHECK-NEXT:    %[[C3:.*]] = arith.constant 3 : i32
// CHECK-NEXT:    %[[C2:.*]] = arith.constant 2 : i32
// CHECK-NEXT:    %[[C7:.*]] = arith.constant 7 : i32
// CHECK-NEXT:    %[[B:.*]] = arith.addi %arg0, %[[C7]] : i32
// CHECK-NEXT:    %[[S:.*]] = arith.subi %arg0, %[[C2]] : i32
// CHECK-NEXT:    %[[T:.*]] = arith.subi %arg0, %[[C7]] : i32
// CHECK-NEXT:    %[[U:.*]] = arith.subi %[[C3]], %arg0 : i32
// CHECK-NEXT:    %[[N:.*]] = arith.muli %arg0, %[[C10]] : i32
// CHECK-NEXT:    return %[[B]], %[[T]], %[[U]], %[[N]], %[[S]]
func.func @reassoc(%x: i32) -> (i32, i32, i32, i32, i32) {
  %c2 = arith.constant 2 : i32
  %c5 = arith.constant 5 : i32
  %a = arith.addi %x, %c2 : i32
  %b = arith.addi %a, %c5 : i32
  %s = arith.subi %x, %c2 : i32
  %t = arith.subi %s, %c5 : i32
  %u = arith.subi %c5, %a : i32
  %m = arith.muli %x, %c2 : i32
  %n = arith.muli %m, %c5 : i32
  return %b, %t, %u, %n, %s : i32, i32, i32, i32, i32
}

// maxsi(x, x), xori(xori(x, y), y), select of equal values or on cmpi eq, index_cast of
// a constant, cmpi of equal operands, (x + y) - y; a constant left of a cmpi moves right.
// CHECK-LABEL: func.func @folds(
// CHECK-NEXT:    %[[TRUE:.*]] = arith.constant true
// CHECK-NEXT:    %[[C3:.*]] = arith.constant 3 : i32
// CHECK-NEXT:    %[[C7:.*]] = arith.constant 7 : i64
// CHECK-NEXT:    %[[LT:.*]] = arith.cmpi sgt, %arg0, %[[C3]] : i32
// CHECK-NEXT:    return %arg0, %arg0, %arg0, %[[C7]], %[[LT]], %[[TRUE]], %arg1, %arg0
func.func @folds(%x: i32, %y: i32, %c: i1) -> (i32, i32, i32, i64, i1, i1, i32, i32) {
  %m = arith.maxsi %x, %x : i32
  %x1 = arith.xori %x, %y : i32
  %x2 = arith.xori %x1, %y : i32
  %c7 = arith.constant 7 : index
  %i = arith.index_cast %c7 : index to i64
  %c3 = arith.constant 3 : i32
  %lt = arith.cmpi slt, %c3, %x : i32
  %eq = arith.cmpi sge, %y, %y : i32
  %s = arith.select %c, %x, %x : i32
  %e = arith.cmpi eq, %x, %y : i32
  %s2 = arith.select %e, %x, %y : i32
  %d = arith.addi %x, %y : i32
  %back = arith.subi %d, %y : i32
  return %m, %x2, %s, %i, %lt, %eq, %s2, %back : i32, i32, i32, i64, i1, i1, i32, i32
}

// -----

// scf.if on a constant is its taken branch; yields of outside values become
// arith.select, the rest stays in a smaller scf.if; loop-invariant iter_args and
// zero-trip loops go.
// CHECK-LABEL: func.func @if_const(
// CHECK-NEXT:    %[[A:.*]] = arith.addi %arg0, %arg1 : i32
// CHECK-NEXT:    return %[[A]] : i32
func.func @if_const(%x: i32, %y: i32) -> i32 {
  %true = arith.constant true
  %r = scf.if %true -> (i32) {
    %a = arith.addi %x, %y : i32
    scf.yield %a : i32
  } else {
    scf.yield %y : i32
  }
  return %r : i32
}

// CHECK-LABEL: func.func @if_select(
// CHECK-NEXT:    %[[SEL:.*]] = arith.select %arg0, %arg1, %arg2 : i32
// CHECK-NEXT:    %[[IF:.*]] = scf.if %arg0 -> (i32) {
// CHECK-NEXT:      %[[M:.*]] = arith.muli %arg1, %arg2 : i32
// CHECK-NEXT:      scf.yield %[[M]] : i32
// CHECK-NEXT:    } else {
// CHECK-NEXT:      scf.yield %arg2 : i32
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[SEL]], %[[IF]] : i32, i32
func.func @if_select(%c: i1, %x: i32, %y: i32) -> (i32, i32) {
  %r:2 = scf.if %c -> (i32, i32) {
    %a = arith.muli %x, %y : i32
    scf.yield %x, %a : i32, i32
  } else {
    scf.yield %y, %y : i32, i32
  }
  return %r#0, %r#1 : i32, i32
}

// CHECK-LABEL: func.func @loops(
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[R:.*]] = scf.for %{{.*}} = %arg0 to %arg1 step %[[C1]] iter_args(%[[A:.*]] = %arg2) -> (i32) {
// CHECK-NEXT:      %[[S:.*]] = arith.addi %[[A]], %arg3 : i32
// CHECK-NEXT:      scf.yield %[[S]] : i32
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[R]], %arg3, %arg2 : i32, i32, i32
func.func @loops(%lb: index, %ub: index, %x: i32, %y: i32) -> (i32, i32, i32) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r:2 = scf.for %i = %lb to %ub step %c1 iter_args(%a = %x, %b = %y) -> (i32, i32) {
    %s = arith.addi %a, %y : i32
    scf.yield %s, %b : i32, i32
  }
  %z = scf.for %i = %c4 to %c1 step %c1 iter_args(%a = %x) -> (i32) {
    %s = arith.addi %a, %a : i32
    scf.yield %s : i32
  }
  return %r#0, %r#1, %z : i32, i32, i32
}

// -----

// tensor.dim of a static size, a cast chain back to the source type, a slice of a
// whole static tensor; constant slice operands move into the static lists (a slice
// with a dynamic size stays).
// CHECK-LABEL: func.func @tensors(
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[DIM:.*]] = tensor.dim %arg0, %[[C1]] : tensor<4x?xf32>
// CHECK-NEXT:    %[[S:.*]] = tensor.extract_slice %arg0[0, 0] [4, %[[DIM]]] [1, 1] : tensor<4x?xf32> to tensor<4x?xf32>
// CHECK-NEXT:    return %[[C4]], %arg0, %[[S]]
func.func @tensors(%t: tensor<4x?xf32>) -> (index, tensor<4x?xf32>, tensor<4x?xf32>) {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %t, %c0 : tensor<4x?xf32>
  %a = tensor.cast %t : tensor<4x?xf32> to tensor<?x?xf32>
  %b = tensor.cast %a : tensor<?x?xf32> to tensor<4x?xf32>
  %c1 = arith.constant 1 : index
  %n = tensor.dim %t, %c1 : tensor<4x?xf32>
  %s = tensor.extract_slice %t[0, 0] [4, %n] [1, 1] : tensor<4x?xf32> to tensor<4x?xf32>
  return %d, %b, %s : index, tensor<4x?xf32>, tensor<4x?xf32>
}

// CHECK-LABEL: func.func @slices(
// CHECK-NEXT:    %[[S:.*]] = tensor.extract_slice %arg0[2, 0] [4, 4] [1, 1] : tensor<8x8xf32> to tensor<4x4xf32>
// CHECK-NEXT:    return %[[S]] : tensor<4x4xf32>
func.func @slices(%t: tensor<8x8xf32>) -> tensor<4x4xf32> {
  %t2 = tensor.extract_slice %t[0, 0] [8, 8] [1, 1] : tensor<8x8xf32> to tensor<8x8xf32>
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %s = tensor.extract_slice %t2[%c2, 0] [%c4, 4] [1, 1] : tensor<8x8xf32> to tensor<?x4xf32>
  %r = tensor.cast %s : tensor<?x4xf32> to tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

// affine.apply: constant operands are folded into the map, unused ones dropped, a
// function argument becomes a symbol.
// CHECK: #[[MAP:.*]] = affine_map<()[s0] -> (s0 * 2 + 8)>
// CHECK-LABEL: func.func @apply(
// CHECK-NEXT:    %[[A:.*]] = affine.apply #[[MAP]]()[%arg0]
// CHECK-NEXT:    return %[[A]] : index
func.func @apply(%i: index, %j: index) -> index {
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %a = affine.apply affine_map<(d0, d1)[s0] -> (d0 * 2 + d1 + s0)>(%i, %c5)[%c3]
  return %a : index
}

// -----

// tosa.const has no effects: identical ones merge, unused ones go; add/sub of zero
// fold to the other operand.
// CHECK-LABEL: func.func @tosa(
// CHECK-NEXT:    %[[ONE:.*]] = "tosa.const"() <{values = dense<1.000000e+00> : tensor<2x3xf32>}> : () -> tensor<2x3xf32>
// CHECK-NEXT:    %[[U:.*]] = tosa.add %arg0, %[[ONE]]
// CHECK-NEXT:    %[[V:.*]] = tosa.sub %[[U]], %[[ONE]]
// CHECK-NEXT:    return %arg0, %[[V]]
func.func @tosa(%a: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<2x3xf32>}> : () -> tensor<2x3xf32>
  %one = "tosa.const"() <{values = dense<1.0> : tensor<2x3xf32>}> : () -> tensor<2x3xf32>
  %s = tosa.add %z, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %z2 = "tosa.const"() <{values = dense<0.0> : tensor<2x3xf32>}> : () -> tensor<2x3xf32>
  %t = tosa.sub %s, %z2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %one2 = "tosa.const"() <{values = dense<1.0> : tensor<2x3xf32>}> : () -> tensor<2x3xf32>
  %u = tosa.add %t, %one : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %v = tosa.sub %u, %one2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %t, %v : tensor<2x3xf32>, tensor<2x3xf32>
}
