// RUN: shardc-opt %s --pass-pipeline="builtin.module(inline{default-pipeline=},func.func(cse))" | filecheck %s
// RUN: shardc-opt %s --pass-pipeline='builtin.module( inline{ default-pipeline="" max-iterations=2 } , func.func( cse ) )' | filecheck %s
// RUN: shardc-opt %s -pass-pipeline="any(inline{default-pipeline=cse})" | filecheck %s
// RUN: shardc-opt %s -p "builtin.module(inline{default-pipeline=},func.func(cse))" | filecheck %s
// RUN: shardc-opt %s --pass-pipeline="builtin.module()" | filecheck %s --check-prefix=NONE

// Anchors (builtin.module, func.func, any) are flattened; options go in braces,
// separated by spaces, with quoted or empty values.

func.func private @square(%x: i32) -> i32 {
  %0 = arith.muli %x, %x : i32
  return %0 : i32
}

// CHECK-LABEL: func.func @twice
// CHECK-NEXT:    %[[A:.*]] = arith.muli %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    %[[B:.*]] = arith.addi %[[A]], %[[A]] : i32
// CHECK-NEXT:    return %[[B]] : i32
// CHECK-NOT: @square

// NONE: func.func private @square
// NONE: call @square
func.func @twice(%x: i32) -> i32 {
  %0 = func.call @square(%x) : (i32) -> i32
  %1 = func.call @square(%x) : (i32) -> i32
  %2 = arith.addi %0, %1 : i32
  return %2 : i32
}
