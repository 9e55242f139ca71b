// RUN: shardc-opt %s --split-input-file --verify-diagnostics

func.func @copy_types(%a: memref<3xi32>, %b: memref<3xi64>) {
  // expected-error @+1 {{'memref.copy' op requires the same element type for all operands}}
  memref.copy %a, %b : memref<3xi32> to memref<3xi64>
  return
}

// -----

func.func @copy_shapes(%a: memref<3x2xi32>, %b: memref<2x3xi32>) {
  // expected-error @+1 {{'memref.copy' op requires the same shape for all operands}}
  memref.copy %a, %b : memref<3x2xi32> to memref<2x3xi32>
  return
}

// -----

func.func @cast_rank(%a: memref<3x2xi32>) {
  // expected-error @+1 {{'memref.cast' op operand type 'memref<3x2xi32>' and result type 'memref<6xi32>' are cast incompatible}}
  %0 = memref.cast %a : memref<3x2xi32> to memref<6xi32>
  return
}

// -----

func.func @cast_unranked_both(%a: memref<*xi32>) {
  // expected-error @+1 {{'memref.cast' op operand type 'memref<*xi32>' and result type 'memref<*xi32>' are cast incompatible}}
  %0 = memref.cast %a : memref<*xi32> to memref<*xi32>
  return
}

// -----

func.func @cast_strides(%a: memref<3x2xi32>) {
  // expected-error @+1 {{'memref.cast' op operand type 'memref<3x2xi32>' and result type 'memref<3x2xi32, strided<[4, 1]>>' are cast incompatible}}
  %0 = memref.cast %a : memref<3x2xi32> to memref<3x2xi32, strided<[4, 1]>>
  return
}

// -----

memref.global "private" @k : memref<2xi32>
func.func @f() {
  // expected-error @+1 {{'memref.get_global' op result type 'memref<3xi32>' does not match type 'memref<2xi32>' of the global memref @k}}
  %0 = memref.get_global @k : memref<3xi32>
  return
}

// -----

// expected-error @+1 {{'memref.global' op attribute 'alignment' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive and whose value is a power of two > 0}}
memref.global "private" @k : memref<2xi32> {alignment = 3}
