// RUN: shardc-opt %s -inline | filecheck %s
// RUN: shardc-opt %s -inline --mlir-print-debuginfo | filecheck %s --check-prefix=LOC

// -inline: calls to single-block functions of the module are replaced by their body;
// private functions left without uses go away; declarations, recursive functions and
// multi-block bodies stay called.

// CHECK-NOT: @unused
func.func private @unused(%a: i32) -> i32 {
  return %a : i32
}

// CHECK: func.func private @decl(i32) -> i32
func.func private @decl(i32) -> i32

// CHECK-NOT: func.func private @add
func.func private @add(%a: i32, %b: i32) -> i32 {
  %0 = arith.addi %a, %b : i32
  return %0 : i32
}

// CHECK-LABEL: func.func @twice
// CHECK-NEXT:    %[[A:.*]] = arith.addi %arg0, %arg0 : i32
// CHECK-NEXT:    %[[B:.*]] = arith.addi %[[A]], %arg0 : i32
// CHECK-NEXT:    %[[C:.*]] = call @decl(%[[B]]) : (i32) -> i32
// CHECK-NEXT:    return %[[C]] : i32
func.func @twice(%a: i32) -> i32 {
  %0 = call @add(%a, %a) : (i32, i32) -> i32
  %1 = func.call @add(%0, %a) : (i32, i32) -> i32
  %2 = call @decl(%1) : (i32) -> i32
  return %2 : i32
}

// CHECK-LABEL: func.func @rec
// CHECK-NEXT:    call @rec
func.func @rec(%a: i32) -> i32 {
  %0 = call @rec(%a) : (i32) -> i32
  return %0 : i32
}

// Inlining is transitive: @user gets @twice, which had @add inlined.
// CHECK-LABEL: func.func @user
// CHECK-NEXT:    arith.addi
// CHECK-NEXT:    arith.addi
// CHECK-NEXT:    call @decl
// CHECK-NEXT:    return
func.func @user(%b: i32) -> i32 {
  %1 = call @twice(%b) : (i32) -> i32
  return %1 : i32
}

// Inlined ops are located at callsite(<where they were> at <the call>).
// LOC: arith.addi {{.*}} loc(#[[L:loc[0-9]+]])
// LOC: #[[L]] = loc(callsite(
