// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s

// Casts and integer ops torch-mlir emits, and arith.remf / arith.index_castui (shardc's overlay).
// CHECK-LABEL: func.func @casts(%arg0: f32, %arg1: f16, %arg2: i1, %arg3: index, %arg4: i64, %arg5: i32) -> (f16, f32, i64, i64, bf16, i32, index, f32, f32, i64) {
// CHECK-NEXT: %0 = arith.truncf %arg0 : f32 to f16
// CHECK-NEXT: %1 = arith.extf %arg1 : f16 to f32
// CHECK-NEXT: %2 = arith.extui %arg2 : i1 to i64
// CHECK-NEXT: %3 = arith.index_cast %arg3 : index to i64
// CHECK-NEXT: %4 = arith.truncf %arg0 : f32 to bf16
// CHECK-NEXT: %5 = arith.trunci %arg4 : i64 to i32
// CHECK-NEXT: %6 = arith.index_cast %arg5 : i32 to index
// CHECK-NEXT: %7 = arith.sitofp %arg4 : i64 to f32
// CHECK-NEXT: %8 = arith.uitofp %2 : i64 to f32
// CHECK-NEXT: %9 = arith.index_castui %arg3 : index to i64
// CHECK-NEXT: return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : f16, f32, i64, i64, bf16, i32, index, f32, f32, i64
// CHECK-NEXT: }
func.func @casts(%x: f32, %h: f16, %b: i1, %n: index, %i: i64, %j: i32) -> (f16, f32, i64, i64, bf16, i32, index, f32, f32, i64) {
  %0 = arith.truncf %x : f32 to f16
  %1 = arith.extf %h : f16 to f32
  %2 = arith.extui %b : i1 to i64
  %3 = arith.index_cast %n : index to i64
  %4 = arith.truncf %x : f32 to bf16
  %5 = arith.trunci %i : i64 to i32
  %6 = arith.index_cast %j : i32 to index
  %7 = arith.sitofp %i : i64 to f32
  %8 = arith.uitofp %2 : i64 to f32
  %9 = arith.index_castui %n : index to i64
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : f16, f32, i64, i64, bf16, i32, index, f32, f32, i64
}

// -----

// CHECK-LABEL: func.func @integers(%arg0: i64, %arg1: i64, %arg2: i1, %arg3: i1) -> (i64, i64, i64, i1, i64) {
// CHECK-NEXT: %0 = arith.remsi %arg0, %arg1 : i64
// CHECK-NEXT: %1 = arith.minsi %arg0, %arg1 : i64
// CHECK-NEXT: %2 = arith.maxsi %0, %1 : i64
// CHECK-NEXT: %3 = arith.xori %arg2, %arg3 : i1
// CHECK-NEXT: %4 = arith.floordivsi %arg0, %arg1 : i64
// CHECK-NEXT: return %0, %1, %2, %3, %4 : i64, i64, i64, i1, i64
// CHECK-NEXT: }
func.func @integers(%a: i64, %b: i64, %p: i1, %q: i1) -> (i64, i64, i64, i1, i64) {
  %0 = arith.remsi %a, %b : i64
  %1 = arith.minsi %a, %b : i64
  %2 = arith.maxsi %0, %1 : i64
  %3 = arith.xori %p, %q : i1
  %4 = arith.floordivsi %a, %b : i64
  return %0, %1, %2, %3, %4 : i64, i64, i64, i1, i64
}

// -----

// CHECK-LABEL: func.func @floats(%arg0: f32, %arg1: f32) -> (f32, f32, f32) {
// CHECK-NEXT: %0 = arith.remf %arg0, %arg1 : f32
// CHECK-NEXT: %1 = arith.remf %0, %arg1 fastmath<fast> : f32
// CHECK-NEXT: %2 = arith.addf %1, %arg0 fastmath<contract> : f32
// CHECK-NEXT: return %0, %1, %2 : f32, f32, f32
// CHECK-NEXT: }
func.func @floats(%x: f32, %y: f32) -> (f32, f32, f32) {
  %0 = arith.remf %x, %y : f32
  %1 = arith.remf %0, %y fastmath<fast> : f32
  %2 = arith.addf %1, %x fastmath<contract> : f32
  return %0, %1, %2 : f32, f32, f32
}
