// RUN: shardc-opt %s --split-input-file --verify-diagnostics

// Conv and pooling ops rejected with mlir-opt's diagnostics: an unsigned pooling on
// floats, strides or dilations of the wrong shape or type (at parse time, as MLIR
// checks properties), an operand of the wrong rank, an image smaller than the window
// reaches.

func.func @unsigned_float(%i: tensor<2x6x7x2xf32>, %k: tensor<2x3xf32>, %o: tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32> {
  // expected-error @+1 {{custom op 'linalg.pooling_nhwc_max_unsigned' unsupported operation: unsigned max not on uint}}
  %0 = linalg.pooling_nhwc_max_unsigned {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%i, %k : tensor<2x6x7x2xf32>, tensor<2x3xf32>) outs(%o : tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
  return %0 : tensor<2x3x3x2xf32>
}

// -----

func.func @strides_length(%x: tensor<2x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %o: tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32> {
  // expected-error @+1 {{custom op 'linalg.conv_2d_nchw_fchw' 'linalg.conv_2d_nchw_fchw' op attribute 'strides' failed to satisfy constraint: 64-bit signless int elements attribute of shape [2]}}
  %0 = linalg.conv_2d_nchw_fchw {strides = dense<1> : vector<3xi64>} ins(%x, %w : tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>) outs(%o : tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32>
  return %0 : tensor<2x6x6x6xf32>
}

// -----

func.func @dilations_type(%x: tensor<2x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %o: tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32> {
  // expected-error @+1 {{custom op 'linalg.conv_2d_nchw_fchw' 'linalg.conv_2d_nchw_fchw' op attribute 'dilations' failed to satisfy constraint: 64-bit signless int elements attribute of shape [2]}}
  %0 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi32>} ins(%x, %w : tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>) outs(%o : tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32>
  return %0 : tensor<2x6x6x6xf32>
}

// -----

func.func @rank(%x: tensor<2x4x8xf32>, %w: tensor<6x4x3x3xf32>, %o: tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32> {
  // expected-error @+1 {{'linalg.conv_2d_nchw_fchw' op expected operand #0 rank (3) to match the result rank of indexing_map (4)}}
  %0 = linalg.conv_2d_nchw_fchw ins(%x, %w : tensor<2x4x8xf32>, tensor<6x4x3x3xf32>) outs(%o : tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32>
  return %0 : tensor<2x6x6x6xf32>
}

// -----

func.func @too_small(%x: tensor<2x4x7x8xf32>, %w: tensor<6x4x3x3xf32>, %o: tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32> {
  // expected-error @+1 {{'linalg.conv_2d_nchw_fchw' op inferred input/output operand #0 has shape's dimension #2 to be greater than or equal to 8, but found 7}}
  %0 = linalg.conv_2d_nchw_fchw ins(%x, %w : tensor<2x4x7x8xf32>, tensor<6x4x3x3xf32>) outs(%o : tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32>
  return %0 : tensor<2x6x6x6xf32>
}
