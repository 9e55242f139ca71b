// RUN: shardc-opt %s --expand-shapes-before-pads --split-input-file | filecheck %s

// A pad of the two image dimensions, then an expansion of the channels (a group
// dimension for a grouped convolution): the channels are expanded first, the pad
// follows with the same amounts on the same (renumbered) dimensions.
// CHECK-LABEL: func.func @channels_expanded
// CHECK-SAME: (%[[X:.*]]: tensor<2x6x5x5xf32>)
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[E:.*]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2], [3], [4]] output_shape [2, 2, 3, 5, 5] : tensor<2x6x5x5xf32> into tensor<2x2x3x5x5xf32>
// CHECK: %[[P:.*]] = tensor.pad %[[E]] low[0, 0, 0, 1, 1] high[0, 0, 0, 2, 1] {
// CHECK: tensor.yield %[[ZERO]] : f32
// CHECK: } : tensor<2x2x3x5x5xf32> to tensor<2x2x3x8x7xf32>
// CHECK-NOT: tensor.expand_shape
// CHECK: return %[[P]]
func.func @channels_expanded(%x: tensor<2x6x5x5xf32>) -> tensor<2x2x3x8x7xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 2, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<2x6x5x5xf32> to tensor<2x6x8x7xf32>
  %e = tensor.expand_shape %p [[0], [1, 2], [3], [4]] output_shape [2, 2, 3, 8, 7] : tensor<2x6x8x7xf32> into tensor<2x2x3x8x7xf32>
  return %e : tensor<2x2x3x8x7xf32>
}

// -----

// The expansion splits a padded dimension: the pad cannot move past it.
// CHECK-LABEL: func.func @padded_dimension_expanded
// CHECK: tensor.pad
// CHECK: tensor.expand_shape
func.func @padded_dimension_expanded(%x: tensor<4x6xf32>) -> tensor<4x2x4xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 1] high[0, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<4x6xf32> to tensor<4x8xf32>
  %e = tensor.expand_shape %p [[0], [1, 2]] output_shape [4, 2, 4] : tensor<4x8xf32> into tensor<4x2x4xf32>
  return %e : tensor<4x2x4xf32>
}

// -----

// The pad has another user, which needs the unexpanded padded tensor: left alone.
// CHECK-LABEL: func.func @pad_used_twice
// CHECK: %[[P:.*]] = tensor.pad
// CHECK: tensor.expand_shape %[[P]]
// CHECK: return
func.func @pad_used_twice(%x: tensor<6x4xf32>) -> (tensor<2x3x6xf32>, tensor<6x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 1] high[0, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<6x4xf32> to tensor<6x6xf32>
  %e = tensor.expand_shape %p [[0, 1], [2]] output_shape [2, 3, 6] : tensor<6x6xf32> into tensor<2x3x6xf32>
  return %e, %p : tensor<2x3x6xf32>, tensor<6x6xf32>
}

// -----

// A pad by a value computed inside its region (from the indices): left alone.
// CHECK-LABEL: func.func @pad_value_from_the_region
// CHECK: tensor.pad
// CHECK: tensor.expand_shape
func.func @pad_value_from_the_region(%x: tensor<6x4xi64>) -> tensor<2x3x6xi64> {
  %p = tensor.pad %x low[0, 1] high[0, 1] {
  ^bb0(%i: index, %j: index):
    %v = arith.index_cast %j : index to i64
    tensor.yield %v : i64
  } : tensor<6x4xi64> to tensor<6x6xi64>
  %e = tensor.expand_shape %p [[0, 1], [2]] output_shape [2, 3, 6] : tensor<6x6xi64> into tensor<2x3x6xi64>
  return %e : tensor<2x3x6xi64>
}
