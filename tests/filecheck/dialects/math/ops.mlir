// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s

// The math ops of torch-mlir's GELU, softmax, layernorm, pow and log.
// CHECK-LABEL: func.func @math(%arg0: f32, %arg1: i32) -> f32 {
// CHECK-NEXT: %0 = math.fpowi %arg0, %arg1 : f32, i32
// CHECK-NEXT: %1 = math.rsqrt %0 : f32
// CHECK-NEXT: %2 = math.exp %1 : f32
// CHECK-NEXT: %3 = math.log %2 : f32
// CHECK-NEXT: %4 = math.tanh %3 : f32
// CHECK-NEXT: %5 = math.erf %4 : f32
// CHECK-NEXT: %6 = math.sqrt %5 fastmath<fast> : f32
// CHECK-NEXT: %7 = math.absf %6 : f32
// CHECK-NEXT: %8 = math.powf %7, %arg0 : f32
// CHECK-NEXT: return %8 : f32
// CHECK-NEXT: }
func.func @math(%x: f32, %n: i32) -> f32 {
  %0 = math.fpowi %x, %n : f32, i32
  %1 = math.rsqrt %0 : f32
  %2 = math.exp %1 : f32
  %3 = math.log %2 : f32
  %4 = math.tanh %3 : f32
  %5 = math.erf %4 : f32
  %6 = math.sqrt %5 fastmath<fast> : f32
  %7 = math.absf %6 : f32
  %8 = math.powf %7, %x : f32
  return %8 : f32
}
