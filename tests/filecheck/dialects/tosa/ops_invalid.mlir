// RUN: shardc-opt %s --split-input-file --verify-diagnostics

func.func @max_not_broadcastable(%a: tensor<4x6xf32>, %b: tensor<5x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'tosa.maximum' op operands don't have broadcast-compatible shapes}}
  %0 = tosa.maximum %a, %b : (tensor<4x6xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

func.func @pow_rank_mismatch(%a: tensor<4x6xf32>, %b: tensor<6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'tosa.pow' op operands don't have matching ranks}}
  %0 = tosa.pow %a, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

func.func @add_bad_result(%a: tensor<4x1xf32>, %b: tensor<1x6xf32>) -> tensor<4x7xf32> {
  // expected-error @+1 {{'tosa.add' op result type '4x7' not broadcast compatible with broadcasted operands's shapes '4x6'}}
  %0 = tosa.add %a, %b : (tensor<4x1xf32>, tensor<1x6xf32>) -> tensor<4x7xf32>
  return %0 : tensor<4x7xf32>
}

// -----

func.func @minimum_mixed_types(%a: tensor<3xi32>, %b: tensor<3xi16>) -> tensor<3xi32> {
  // expected-error @+1 {{'tosa.minimum' op requires the same element type for all operands and results}}
  %0 = tosa.minimum %a, %b : (tensor<3xi32>, tensor<3xi16>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

func.func @greater_mixed_types(%a: tensor<3xf32>, %b: tensor<3xf16>) -> tensor<3xi1> {
  // expected-error @+1 {{'tosa.greater' op requires the same element type for all operands}}
  %0 = tosa.greater %a, %b : (tensor<3xf32>, tensor<3xf16>) -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

func.func @equal_not_i1(%a: tensor<3xf32>) -> tensor<3xi8> {
  // expected-error @+1 {{'tosa.equal' op result #0 must be tosa-conformant tensor of 1-bit signless integer values, but got 'tensor<3xi8>'}}
  %0 = tosa.equal %a, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi8>
  return %0 : tensor<3xi8>
}

// -----

func.func @logical_or_not_i1(%a: tensor<3xi8>) -> tensor<3xi1> {
  // expected-error @+1 {{'tosa.logical_or' op operand #0 must be tosa-conformant tensor of 1-bit signless integer values, but got 'tensor<3xi8>'}}
  %0 = tosa.logical_or %a, %a : (tensor<3xi8>, tensor<3xi8>) -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

func.func @tanh_shape(%a: tensor<3x2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'tosa.tanh' op requires the same shape for all operands and results}}
  %0 = tosa.tanh %a : (tensor<3x2xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @sigmoid_type(%a: tensor<3xf32>) -> tensor<3xbf16> {
  // expected-error @+1 {{'tosa.sigmoid' op requires the same element type for all operands and results}}
  %0 = tosa.sigmoid %a : (tensor<3xf32>) -> tensor<3xbf16>
  return %0 : tensor<3xbf16>
}

// -----

func.func @cast_shape(%a: tensor<3xf32>) -> tensor<4xi32> {
  // expected-error @+1 {{'tosa.cast' op requires the same shape for all operands and results}}
  %0 = tosa.cast %a : (tensor<3xf32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @negate_zp_type(%a: tensor<3xf32>, %zp: tensor<1xf16>) -> tensor<3xf32> {
  // expected-error @+1 {{'tosa.negate' op expect both input1 and its zero point are the same element type, got 'f32' and 'f16'}}
  %0 = tosa.negate %a, %zp, %zp : (tensor<3xf32>, tensor<1xf16>, tensor<1xf16>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @negate_float_zp(%a: tensor<3xf32>) -> tensor<3xf32> {
  %zp = "tosa.const"() <{values = dense<0.5> : tensor<1xf32>}> : () -> tensor<1xf32>
  // expected-error @+1 {{'tosa.negate' op input1 zero point must be zero for non-int8 integer types}}
  %0 = tosa.negate %a, %zp, %zp : (tensor<3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @negate_zp_rank(%a: tensor<3xf32>, %zp: tensor<f32>) -> tensor<3xf32> {
  // expected-error @+1 {{'tosa.negate' op operand #1 must be tosa-conformant unranked tensor of unsigned integer or signless integer or floating-point values or tosa-conformant scalar tensor of unsigned integer or signless integer or floating-point values, but got 'tensor<f32>'}}
  %0 = tosa.negate %a, %zp, %zp : (tensor<3xf32>, tensor<f32>, tensor<f32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @negate_output_type(%a: tensor<3xf32>, %zp: tensor<1xf32>) -> tensor<3xf16> {
  // expected-error @+1 {{'tosa.negate' op expect input and output to have same element type, got 'f32' and 'f16'}}
  %0 = tosa.negate %a, %zp, %zp : (tensor<3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3xf16>
  return %0 : tensor<3xf16>
}

// -----

func.func @select_pred(%c: tensor<3xi8>, %a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'tosa.select' op operand #0 must be tosa-conformant tensor of 1-bit signless integer values, but got 'tensor<3xi8>'}}
  %0 = tosa.select %c, %a, %a : (tensor<3xi8>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @select_types(%c: tensor<3xi1>, %a: tensor<3xf32>, %b: tensor<3xf16>) -> tensor<3xf32> {
  // expected-error @+1 {{'tosa.select' op expect input and output to have same element type, got 'f16' and 'f32'}}
  %0 = tosa.select %c, %a, %b : (tensor<3xi1>, tensor<3xf32>, tensor<3xf16>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @transpose_repeat(%a: tensor<2x3x4xf32>) -> tensor<3x3x4xf32> {
  // expected-error @+1 {{'tosa.transpose' op expected valid permutation indices}}
  %0 = tosa.transpose %a {perms = array<i32: 1, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<3x3x4xf32>
  return %0 : tensor<3x3x4xf32>
}

// -----

func.func @transpose_perms_size(%a: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  // expected-error @+1 {{'tosa.transpose' op expected perms attribute to have size 3 (input rank) but got size 2}}
  %0 = tosa.transpose %a {perms = array<i32: 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  return %0 : tensor<3x2x4xf32>
}

// -----

func.func @transpose_dims(%a: tensor<2x3x4xf32>) -> tensor<4x3x2xf32> {
  // expected-error @+1 {{'tosa.transpose' op expected output tensor dim 0 to match input dim 1 with value of 3}}
  %0 = tosa.transpose %a {perms = array<i32: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  return %0 : tensor<4x3x2xf32>
}

// -----

func.func @const_shape_rank() {
  // expected-error @+1 {{'tosa.const_shape' op expect number of elements in attribute values (3) to be equal to the rank (2) for the result shape type}}
  %0 = tosa.const_shape {values = dense<[1, 2, 3]> : tensor<3xindex>} : () -> !tosa.shape<2>
  return
}

// -----

func.func @reshape_count(%a: tensor<4x5xf32>) -> tensor<3x7xf32> {
  %s = tosa.const_shape {values = dense<[3, 7]> : tensor<2xindex>} : () -> !tosa.shape<2>
  // expected-error @+1 {{'tosa.reshape' op cannot reshape 20 elements into 21}}
  %0 = tosa.reshape %a, %s : (tensor<4x5xf32>, !tosa.shape<2>) -> tensor<3x7xf32>
  return %0 : tensor<3x7xf32>
}

// -----

func.func @reshape_rank(%a: tensor<4x5xf32>) -> tensor<20xf32> {
  %s = tosa.const_shape {values = dense<[20, 1]> : tensor<2xindex>} : () -> !tosa.shape<2>
  // expected-error @+1 {{'tosa.reshape' op new shape does not match result rank}}
  %0 = tosa.reshape %a, %s : (tensor<4x5xf32>, !tosa.shape<2>) -> tensor<20xf32>
  return %0 : tensor<20xf32>
}

// -----

func.func @reshape_two_inferred(%a: tensor<4x5xf32>) -> tensor<10x2xf32> {
  %s = tosa.const_shape {values = dense<[-1, -1]> : tensor<2xindex>} : () -> !tosa.shape<2>
  // expected-error @+1 {{'tosa.reshape' op expected at most one target dimension to be -1}}
  %0 = tosa.reshape %a, %s : (tensor<4x5xf32>, !tosa.shape<2>) -> tensor<10x2xf32>
  return %0 : tensor<10x2xf32>
}

// -----

func.func @reshape_dynamic_shape(%a: tensor<4x5xf32>, %s: !tosa.shape<2>) -> tensor<10x2xf32> {
  // expected-error @+1 {{'tosa.reshape' op shape operand is not compile time resolvable}}
  %0 = tosa.reshape %a, %s : (tensor<4x5xf32>, !tosa.shape<2>) -> tensor<10x2xf32>
  return %0 : tensor<10x2xf32>
}

// -----

func.func @matmul_zp_type(%a: tensor<1x2x3xf32>, %b: tensor<1x3x4xf32>, %za: tensor<1xf32>, %zb: tensor<1xbf16>) -> tensor<1x2x4xf32> {
  // expected-error @+1 {{'tosa.matmul' op expect input b and b_zp have the same element type, got 'f32' and 'bf16'}}
  %0 = tosa.matmul %a, %b, %za, %zb : (tensor<1x2x3xf32>, tensor<1x3x4xf32>, tensor<1xf32>, tensor<1xbf16>) -> tensor<1x2x4xf32>
  return %0 : tensor<1x2x4xf32>
}

// -----

func.func @reduce_axis(%a: tensor<4x5xf32>) -> tensor<4x1xf32> {
  // expected-error @+1 {{'tosa.reduce_sum' op expect input tensor rank (2) to be larger than reduce axis (3)}}
  %0 = tosa.reduce_sum %a {axis = 3 : i32} : (tensor<4x5xf32>) -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

func.func @reduce_dim(%a: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'tosa.reduce_max' op expect reduced dimension size to be 1, got 5}}
  %0 = tosa.reduce_max %a {axis = 1 : i32} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}
