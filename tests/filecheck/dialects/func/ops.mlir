// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s

// Declarations print no `-> ()`; argument and result attributes survive.

// CHECK: func.func private @none(){{$}}
func.func private @none()
// CHECK: func.func private @attrs(i32 {a.b}, f32) -> (i32 {a.r = 1 : i64})
func.func private @attrs(i32 {a.b}, f32) -> (i32 {a.r = 1 : i64})
// CHECK: func.func private @fres() -> ((i32) -> i32) attributes {x}
func.func private @fres() -> ((i32) -> i32) attributes {x}
// CHECK: func.func nested @n() attributes {sym.z = 1 : i64} {
func.func nested @n() -> () attributes {sym.z = 1} {
  return
}
// CHECK: func.func @named(%arg0: i32 {a.b}, %arg1: f32) -> (i32 {a.c}, f32) attributes {a = 2 : i64, z = 1 : i64} {
func.func @named(%x: i32 {a.b}, %y: f32) -> (i32 {a.c}, f32) attributes {z = 1, a = 2} {
  return %x, %y : i32, f32
}

// -----

// CHECK-LABEL: func.func @indirect(
// CHECK: %0 = call_indirect %arg1(%arg0) : (i32) -> i32
// CHECK: %f = constant @indirect : (i32, (i32) -> i32) -> i32
func.func @indirect(%a: i32, %f: (i32) -> i32) -> i32 {
  %0 = call_indirect %f(%a) : (i32) -> i32
  %g = func.constant @indirect : (i32, (i32) -> i32) -> i32
  return %0 : i32
}
