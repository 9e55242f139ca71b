// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s

// Integer tensors of i1 and i64, splats, hex float literals, and dense_resource
// constants with their blobs: MLIR prints the referenced blobs after the module, in
// first-use order, and drops unreferenced ones.
// CHECK-LABEL: func.func @constants() -> (tensor<4xi64>, tensor<3xi1>, tensor<2x2xf32>, tensor<i1>, tensor<f32>, tensor<2xf32>) {
// CHECK-NEXT: %cst = arith.constant dense<1> : tensor<4xi64>
// CHECK-NEXT: %cst_0 = arith.constant dense<[true, false, true]> : tensor<3xi1>
// CHECK-NEXT: %cst_1 = arith.constant dense<0.000000e+00> : tensor<2x2xf32>
// CHECK-NEXT: %cst_2 = arith.constant dense<true> : tensor<i1>
// CHECK-NEXT: %cst_3 = arith.constant dense<0xFF800000> : tensor<f32>
// CHECK-NEXT: %cst_4 = arith.constant dense<[0x7F800000, -1.500000e+00]> : tensor<2xf32>
// CHECK-NEXT: %cst_5 = arith.constant dense<[1, -2, 9223372036854775807]> : tensor<3xi64>
// CHECK-NEXT: %c-9223372036854775808_i64 = arith.constant -9223372036854775808 : i64
// CHECK-NEXT: return %cst, %cst_0, %cst_1, %cst_2, %cst_3, %cst_4 : tensor<4xi64>, tensor<3xi1>, tensor<2x2xf32>, tensor<i1>, tensor<f32>, tensor<2xf32>
// CHECK-NEXT: }
func.func @constants() -> (tensor<4xi64>, tensor<3xi1>, tensor<2x2xf32>, tensor<i1>, tensor<f32>, tensor<2xf32>) {
  %0 = arith.constant dense<1> : tensor<4xi64>
  %1 = arith.constant dense<[true, false, true]> : tensor<3xi1>
  %2 = arith.constant dense<0.000000e+00> : tensor<2x2xf32>
  %3 = arith.constant dense<true> : tensor<i1>
  %4 = arith.constant dense<0xFF800000> : tensor<f32>
  %5 = arith.constant dense<[0x7F800000, -1.5]> : tensor<2xf32>
  %6 = arith.constant dense<[1, -2, 9223372036854775807]> : tensor<3xi64>
  %7 = arith.constant -9223372036854775808 : i64
  return %0, %1, %2, %3, %4, %5 : tensor<4xi64>, tensor<3xi1>, tensor<2x2xf32>, tensor<i1>, tensor<f32>, tensor<2xf32>
}

// -----

// Blobs follow the module in the order the IR first uses them; `lit_unused` is dropped
// and `lit_undefined` (no blob) prints as a bare key, as mlir-opt does.
// CHECK-LABEL: func.func @baked() -> (tensor<2xf32>, tensor<3xi64>, tensor<3xi1>, tensor<2xf32>) {
// CHECK-NEXT: %cst = arith.constant dense_resource<lit_weights.f32> : tensor<2xf32>
// CHECK-NEXT: %cst_0 = arith.constant dense_resource<lit_ids> : tensor<3xi64>
// CHECK-NEXT: %cst_1 = arith.constant dense_resource<lit_mask> : tensor<3xi1>
// CHECK-NEXT: %cst_2 = arith.constant dense_resource<lit_undefined> : tensor<2xf32>
// CHECK-NEXT: return %cst, %cst_0, %cst_1, %cst_2 : tensor<2xf32>, tensor<3xi64>, tensor<3xi1>, tensor<2xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-EMPTY:
// CHECK-NEXT: {-#
// CHECK-NEXT: dialect_resources: {
// CHECK-NEXT: builtin: {
// CHECK-NEXT: lit_weights.f32: "0x040000000000803F00000040",
// CHECK-NEXT: lit_ids: "0x08000000010000000000000002000000000000000300000000000000",
// CHECK-NEXT: lit_mask: "0x01000000010001"
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: #-}
func.func @baked() -> (tensor<2xf32>, tensor<3xi64>, tensor<3xi1>, tensor<2xf32>) {
  %0 = arith.constant dense_resource<lit_weights.f32> : tensor<2xf32>
  %1 = arith.constant dense_resource<lit_ids> : tensor<3xi64>
  %2 = arith.constant dense_resource<lit_mask> : tensor<3xi1>
  %3 = arith.constant dense_resource<lit_undefined> : tensor<2xf32>
  return %0, %1, %2, %3 : tensor<2xf32>, tensor<3xi64>, tensor<3xi1>, tensor<2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      lit_mask: "0x01000000010001",
      lit_unused: "0x040000000000803F",
      lit_weights.f32: "0x040000000000803F00000040",
      lit_ids: "0x08000000010000000000000002000000000000000300000000000000"
    }
  }
#-}

// -----

// `external_resources` (no IR refers to them) are kept on the module and printed back
// after the dialect resources, as mlir-opt does.
// CHECK-LABEL: func.func @external() -> tensor<1xf32> {
// CHECK-NEXT: %cst = arith.constant dense_resource<lit_one> : tensor<1xf32>
// CHECK-NEXT: return %cst : tensor<1xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-EMPTY:
// CHECK-NEXT: {-#
// CHECK-NEXT: dialect_resources: {
// CHECK-NEXT: builtin: {
// CHECK-NEXT: lit_one: "0x040000000000803F"
// CHECK-NEXT: }
// CHECK-NEXT: },
// CHECK-NEXT: external_resources: {
// CHECK-NEXT: mlir_reproducer: {
// CHECK-NEXT: pipeline: "builtin.module(canonicalize)",
// CHECK-NEXT: disable_threading: true
// CHECK-NEXT: },
// CHECK-NEXT: tool: {
// CHECK-NEXT: note: "a \22quoted\22 note",
// CHECK-NEXT: blob: "0x0400000001000000"
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: #-}
func.func @external() -> tensor<1xf32> {
  %0 = arith.constant dense_resource<lit_one> : tensor<1xf32>
  return %0 : tensor<1xf32>
}
{-#
  dialect_resources: {
    builtin: {
      lit_one: "0x040000000000803F"
    }
  },
  external_resources: {
    mlir_reproducer: {
      pipeline: "builtin.module(canonicalize)",
      disable_threading: true
    },
    tool: {
      note: "a \"quoted\" note",
      blob: "0x0400000001000000"
    }
  }
#-}
