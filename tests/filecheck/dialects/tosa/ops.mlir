// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC

// Unary elementwise ops: one operand, same shape and element type out.

// CHECK-LABEL: func.func @unary
// CHECK: tosa.abs %{{.*}} : (tensor<4x?xf32>) -> tensor<4x?xf32>
// CHECK: tosa.ceil %{{.*}} : (tensor<4x?xf32>) -> tensor<4x?xf32>
// CHECK: tosa.floor %{{.*}} : (tensor<4x?xf32>) -> tensor<4x?xf32>
// CHECK: tosa.exp %{{.*}} : (tensor<4x?xf32>) -> tensor<4x?xf32>
// CHECK: tosa.log %{{.*}} : (tensor<4x?xf32>) -> tensor<4x?xf32>
// CHECK: tosa.rsqrt %{{.*}} : (tensor<4x?xf32>) -> tensor<4x?xf32>
// CHECK: tosa.erf %{{.*}} : (tensor<4x?xf32>) -> tensor<4x?xf32>
// CHECK: tosa.sigmoid %{{.*}} : (tensor<4x?xf32>) -> tensor<4x?xf32>
// CHECK: tosa.tanh %{{.*}} : (tensor<4x?xf32>) -> tensor<4x?xf32>
// CHECK: tosa.abs %{{.*}} : (tensor<4x?xf32>) -> tensor<*xf32>
// CHECK: tosa.bitwise_not %{{.*}} : (tensor<5xi16>) -> tensor<5xi16>
// CHECK: tosa.clz %{{.*}} : (tensor<5xi16>) -> tensor<5xi16>
// CHECK: tosa.logical_not %{{.*}} : (tensor<5xi1>) -> tensor<5xi1>
// GENERIC: "tosa.rsqrt"(%{{.*}}) : (tensor<4x?xf32>) -> tensor<4x?xf32>
func.func @unary(%x: tensor<4x?xf32>, %n: tensor<5xi16>, %p: tensor<5xi1>) {
  %0 = tosa.abs %x : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %1 = tosa.ceil %x : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %2 = tosa.floor %x : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %3 = tosa.exp %x : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %4 = tosa.log %x : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %5 = tosa.rsqrt %x : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %6 = tosa.erf %x : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %7 = tosa.sigmoid %x : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %8 = tosa.tanh %x : (tensor<4x?xf32>) -> tensor<4x?xf32>
  %9 = tosa.abs %x : (tensor<4x?xf32>) -> tensor<*xf32>
  %10 = tosa.bitwise_not %n : (tensor<5xi16>) -> tensor<5xi16>
  %11 = tosa.clz %n : (tensor<5xi16>) -> tensor<5xi16>
  %12 = tosa.logical_not %p : (tensor<5xi1>) -> tensor<5xi1>
  return
}

// -----

// negate takes its zero points as operands; cast changes only the element type.

// CHECK-LABEL: func.func @negate_and_cast
// CHECK: tosa.negate %{{.*}}, %[[ZP:.*]], %[[ZP]] : (tensor<3x7xbf16>, tensor<1xbf16>, tensor<1xbf16>) -> tensor<3x7xbf16>
// CHECK: tosa.negate %{{.*}}, %[[Z8:.*]], %[[Z8]] : (tensor<6xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<6xi8>
// CHECK: tosa.cast %{{.*}} : (tensor<3x7xbf16>) -> tensor<3x7xi32>
// GENERIC: "tosa.negate"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<3x7xbf16>, tensor<1xbf16>, tensor<1xbf16>) -> tensor<3x7xbf16>
func.func @negate_and_cast(%x: tensor<3x7xbf16>, %q: tensor<6xi8>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xbf16>}> : () -> tensor<1xbf16>
  %0 = tosa.negate %x, %zp, %zp : (tensor<3x7xbf16>, tensor<1xbf16>, tensor<1xbf16>) -> tensor<3x7xbf16>
  %z8 = "tosa.const"() <{values = dense<-3> : tensor<1xi8>}> : () -> tensor<1xi8>
  %1 = tosa.negate %q, %z8, %z8 : (tensor<6xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<6xi8>
  %2 = tosa.cast %x : (tensor<3x7xbf16>) -> tensor<3x7xi32>
  return
}

// -----

// Binary elementwise ops broadcast size-1 dimensions of operands of equal rank.

// CHECK-LABEL: func.func @binary
// CHECK: tosa.maximum %{{.*}}, %{{.*}} : (tensor<8x1xf32>, tensor<1x5xf32>) -> tensor<8x5xf32>
// CHECK: tosa.minimum %{{.*}}, %{{.*}} {nan_mode = IGNORE} : (tensor<8x1xf32>, tensor<1x5xf32>) -> tensor<8x5xf32>
// CHECK: tosa.pow %{{.*}}, %{{.*}} : (tensor<8x1xf32>, tensor<1x5xf32>) -> tensor<8x5xf32>
// CHECK: tosa.add %{{.*}}, %{{.*}} : (tensor<8x1xf32>, tensor<1x5xf32>) -> tensor<8x5xf32>
// CHECK: tosa.sub %{{.*}}, %{{.*}} : (tensor<8x1xf32>, tensor<?x5xf32>) -> tensor<?x5xf32>
// CHECK: tosa.mul %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x1xf32>, tensor<1x5xf32>, tensor<1xi8>) -> tensor<8x5xf32>
// CHECK: tosa.bitwise_and %{{.*}}, %{{.*}} : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
// CHECK: tosa.bitwise_or %{{.*}}, %{{.*}} : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
// CHECK: tosa.bitwise_xor %{{.*}}, %{{.*}} : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
// CHECK: tosa.intdiv %{{.*}}, %{{.*}} : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
// CHECK: tosa.logical_left_shift %{{.*}}, %{{.*}} : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
// CHECK: tosa.logical_right_shift %{{.*}}, %{{.*}} : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
// CHECK: tosa.logical_and %{{.*}}, %{{.*}} : (tensor<2x1xi1>, tensor<2x2xi1>) -> tensor<2x2xi1>
// CHECK: tosa.logical_or %{{.*}}, %{{.*}} : (tensor<2x1xi1>, tensor<2x2xi1>) -> tensor<2x2xi1>
// CHECK: tosa.logical_xor %{{.*}}, %{{.*}} : (tensor<2x1xi1>, tensor<2x2xi1>) -> tensor<2x2xi1>
// GENERIC: "tosa.maximum"(%{{.*}}, %{{.*}}) <{nan_mode = #tosa.nan_mode<PROPAGATE>}>
// GENERIC: "tosa.minimum"(%{{.*}}, %{{.*}}) <{nan_mode = #tosa.nan_mode<IGNORE>}>
func.func @binary(%a: tensor<8x1xf32>, %b: tensor<1x5xf32>, %d: tensor<?x5xf32>, %i: tensor<2x2xi32>, %p: tensor<2x1xi1>, %q: tensor<2x2xi1>) {
  %0 = tosa.maximum %a, %b : (tensor<8x1xf32>, tensor<1x5xf32>) -> tensor<8x5xf32>
  %1 = tosa.minimum %a, %b {nan_mode = IGNORE} : (tensor<8x1xf32>, tensor<1x5xf32>) -> tensor<8x5xf32>
  %2 = tosa.pow %a, %b : (tensor<8x1xf32>, tensor<1x5xf32>) -> tensor<8x5xf32>
  %3 = tosa.add %a, %b : (tensor<8x1xf32>, tensor<1x5xf32>) -> tensor<8x5xf32>
  %4 = tosa.sub %a, %d : (tensor<8x1xf32>, tensor<?x5xf32>) -> tensor<?x5xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %5 = tosa.mul %a, %b, %shift : (tensor<8x1xf32>, tensor<1x5xf32>, tensor<1xi8>) -> tensor<8x5xf32>
  %6 = tosa.bitwise_and %i, %i : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
  %7 = tosa.bitwise_or %i, %i : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
  %8 = tosa.bitwise_xor %i, %i : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
  %9 = tosa.intdiv %i, %i : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
  %10 = tosa.logical_left_shift %i, %i : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
  %11 = tosa.logical_right_shift %i, %i : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
  %12 = tosa.logical_and %p, %q : (tensor<2x1xi1>, tensor<2x2xi1>) -> tensor<2x2xi1>
  %13 = tosa.logical_or %p, %q : (tensor<2x1xi1>, tensor<2x2xi1>) -> tensor<2x2xi1>
  %14 = tosa.logical_xor %p, %q : (tensor<2x1xi1>, tensor<2x2xi1>) -> tensor<2x2xi1>
  return
}

// -----

// Comparisons give i1 tensors; select picks between two broadcast operands.

// CHECK-LABEL: func.func @compare_select
// CHECK: %[[GT:.*]] = tosa.greater %{{.*}}, %{{.*}} : (tensor<16xi64>, tensor<1xi64>) -> tensor<16xi1>
// CHECK: tosa.greater_equal %{{.*}}, %{{.*}} : (tensor<16xi64>, tensor<1xi64>) -> tensor<16xi1>
// CHECK: tosa.equal %{{.*}}, %{{.*}} : (tensor<16xi64>, tensor<1xi64>) -> tensor<16xi1>
// CHECK: tosa.select %[[GT]], %{{.*}}, %{{.*}} : (tensor<16xi1>, tensor<16xi64>, tensor<1xi64>) -> tensor<16xi64>
func.func @compare_select(%v: tensor<16xi64>, %t: tensor<1xi64>) -> tensor<16xi64> {
  %0 = tosa.greater %v, %t : (tensor<16xi64>, tensor<1xi64>) -> tensor<16xi1>
  %1 = tosa.greater_equal %v, %t : (tensor<16xi64>, tensor<1xi64>) -> tensor<16xi1>
  %2 = tosa.equal %v, %t : (tensor<16xi64>, tensor<1xi64>) -> tensor<16xi1>
  %3 = tosa.select %0, %v, %t : (tensor<16xi1>, tensor<16xi64>, tensor<1xi64>) -> tensor<16xi64>
  return %3 : tensor<16xi64>
}

// -----

// Layout ops: a shape value from const_shape feeds reshape; transpose permutes.

// CHECK-LABEL: func.func @layout
// CHECK: %[[S:.*]] = tosa.const_shape {values = dense<[4, -1, 3]> : tensor<3xindex>} : () -> !tosa.shape<3>
// CHECK: tosa.reshape %{{.*}}, %[[S]] : (tensor<2x6x5xf16>, !tosa.shape<3>) -> tensor<4x5x3xf16>
// CHECK: tosa.transpose %{{.*}} {perms = array<i32: 2, 0, 1>} : (tensor<2x6x5xf16>) -> tensor<5x2x6xf16>
// GENERIC: "tosa.const_shape"() <{values = dense<[4, -1, 3]> : tensor<3xindex>}> : () -> !tosa.shape<3>
// GENERIC: "tosa.transpose"(%{{.*}}) <{perms = array<i32: 2, 0, 1>}>
func.func @layout(%x: tensor<2x6x5xf16>) -> (tensor<4x5x3xf16>, tensor<5x2x6xf16>) {
  %shape = tosa.const_shape {values = dense<[4, -1, 3]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %0 = tosa.reshape %x, %shape : (tensor<2x6x5xf16>, !tosa.shape<3>) -> tensor<4x5x3xf16>
  %1 = tosa.transpose %x {perms = array<i32: 2, 0, 1>} : (tensor<2x6x5xf16>) -> tensor<5x2x6xf16>
  return %0, %1 : tensor<4x5x3xf16>, tensor<5x2x6xf16>
}

// -----

// matmul in its zero-point form with a batch, i8 x i8 -> i32; clamp and reductions with
// nan_mode.

// CHECK-LABEL: func.func @matmul_reduce
// CHECK: tosa.matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<3x4x8xi8>, tensor<3x8x2xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<3x4x2xi32>
// CHECK: tosa.clamp %{{.*}} {max_val = 6 : i32, min_val = 0 : i32, nan_mode = IGNORE} : (tensor<3x4x2xi32>) -> tensor<3x4x2xi32>
// CHECK: tosa.reduce_max %{{.*}} {axis = 2 : i32} : (tensor<3x4x2xi32>) -> tensor<3x4x1xi32>
// CHECK: tosa.reduce_min %{{.*}} {axis = 0 : i32, nan_mode = IGNORE} : (tensor<3x4x2xi32>) -> tensor<1x4x2xi32>
// CHECK: tosa.reduce_sum %{{.*}} {axis = 1 : i32} : (tensor<3x4x2xi32>) -> tensor<3x1x2xi32>
// CHECK: tosa.reduce_product %{{.*}} {axis = 1 : i32} : (tensor<3x4x2xi32>) -> tensor<3x?x2xi32>
// GENERIC: "tosa.reduce_max"(%{{.*}}) <{axis = 2 : i32, nan_mode = #tosa.nan_mode<PROPAGATE>}>
func.func @matmul_reduce(%a: tensor<3x4x8xi8>, %b: tensor<3x8x2xi8>) {
  %zp = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %0 = tosa.matmul %a, %b, %zp, %zp : (tensor<3x4x8xi8>, tensor<3x8x2xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<3x4x2xi32>
  %1 = tosa.clamp %0 {min_val = 0 : i32, max_val = 6 : i32, nan_mode = IGNORE} : (tensor<3x4x2xi32>) -> tensor<3x4x2xi32>
  %2 = tosa.reduce_max %0 {axis = 2 : i32} : (tensor<3x4x2xi32>) -> tensor<3x4x1xi32>
  %3 = tosa.reduce_min %0 {axis = 0 : i32, nan_mode = IGNORE} : (tensor<3x4x2xi32>) -> tensor<1x4x2xi32>
  %4 = tosa.reduce_sum %0 {axis = 1 : i32} : (tensor<3x4x2xi32>) -> tensor<3x1x2xi32>
  %5 = tosa.reduce_product %0 {axis = 1 : i32} : (tensor<3x4x2xi32>) -> tensor<3x?x2xi32>
  return
}
