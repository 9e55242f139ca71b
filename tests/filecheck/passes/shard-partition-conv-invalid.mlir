// RUN: shardc-opt --shard-partition %s -split-input-file -verify-diagnostics

// Splits of convolution windows that shard-partition cannot emit (interfaces/conv.py):
// one located error each.

shard.grid @g2(shape = 2)
// A conv without padding shrinks the image: output shards would not start where the
// input's start.
func.func @valid_conv_forced(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %o: tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> {
  %s = shard.sharding @g2 split_axes = [[], [], [0]] : !shard.sharding
  %r = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %x0 = shard.shard %x to %s : tensor<1x3x8x8xf32>
  %x1 = shard.shard %x0 to %s annotate_for_users : tensor<1x3x8x8xf32>
  %w0 = shard.shard %w to %r : tensor<4x3x3x3xf32>
  %w1 = shard.shard %w0 to %r annotate_for_users : tensor<4x3x3x3xf32>
  %o0 = shard.shard %o to %s : tensor<1x4x6x6xf32>
  %o1 = shard.shard %o0 to %s annotate_for_users : tensor<1x4x6x6xf32>
  // expected-error @+1 {{Cannot partition: dimension 2 of operand #0 of type tensor<1x3x8x8xf32> cannot be split over grid axes [0] with halos: the output's 6 rows are not the input's 8 rows divided by the stride 1}}
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x1, %w1 : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) outs(%o1 : tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %y0 = shard.shard %y to %s : tensor<1x4x6x6xf32>
  return %y0 : tensor<1x4x6x6xf32>
}

// -----

shard.grid @g22(shape = 2x2)
// The input's rows split over one grid axis, the output's over another.
func.func @axes_differ(%x: tensor<1x3x8x8xf32>, %k: tensor<2x2xf32>, %o: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = shard.sharding @g22 split_axes = [[], [], [0]] : !shard.sharding
  %t = shard.sharding @g22 split_axes = [[], [], [1]] : !shard.sharding
  %r = shard.sharding @g22 split_axes = [[]] : !shard.sharding
  %x0 = shard.shard %x to %s : tensor<1x3x8x8xf32>
  %x1 = shard.shard %x0 to %s annotate_for_users : tensor<1x3x8x8xf32>
  %k0 = shard.shard %k to %r : tensor<2x2xf32>
  %k1 = shard.shard %k0 to %r annotate_for_users : tensor<2x2xf32>
  %o0 = shard.shard %o to %t : tensor<1x3x4x4xf32>
  %o1 = shard.shard %o0 to %t annotate_for_users : tensor<1x3x4x4xf32>
  // expected-error @+1 {{Cannot partition: dimension 2 of operand #0 (a window: stride 2, dilation 1) is split over grid axes [0] but its output loop 2 over [1]}}
  %y = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x1, %k1 : tensor<1x3x8x8xf32>, tensor<2x2xf32>) outs(%o1 : tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y0 = shard.shard %y to %t : tensor<1x3x4x4xf32>
  return %y0 : tensor<1x3x4x4xf32>
}

// -----

shard.grid @g2(shape = 2)
// Halos on an input that no tensor.pad produces: a 2x2 stride 2 window needs none.
func.func @halos_without_pad(%x: tensor<1x3x8x8xf32>, %k: tensor<2x2xf32>, %o: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %s = shard.sharding @g2 split_axes = [[], [], [0]] : !shard.sharding
  %h = shard.sharding @g2 split_axes = [[], [], [0]] halo_sizes = [1, 1] : !shard.sharding
  %r = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %x0 = shard.shard %x to %s : tensor<1x3x8x8xf32>
  %x1 = shard.shard %x0 to %h annotate_for_users : tensor<1x3x8x8xf32>
  %k0 = shard.shard %k to %r : tensor<2x2xf32>
  %k1 = shard.shard %k0 to %r annotate_for_users : tensor<2x2xf32>
  %o0 = shard.shard %o to %s : tensor<1x3x4x4xf32>
  %o1 = shard.shard %o0 to %s annotate_for_users : tensor<1x3x4x4xf32>
  // expected-error @+1 {{its window needs halo sizes (0, 0) there (the padding of the pad that produces it, or none)}}
  %y = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x1, %k1 : tensor<1x3x8x8xf32>, tensor<2x2xf32>) outs(%o1 : tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y0 = shard.shard %y to %s : tensor<1x3x4x4xf32>
  return %y0 : tensor<1x3x4x4xf32>
}

// -----

shard.grid @g2(shape = 2)
// A pad split along a padded dimension without the halos the padding asks for.
func.func @missing_halos(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %o: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %s = shard.sharding @g2 split_axes = [[], [], [0]] : !shard.sharding
  %r = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %x0 = shard.shard %x to %s : tensor<1x3x8x8xf32>
  %x1 = shard.shard %x0 to %s annotate_for_users : tensor<1x3x8x8xf32>
  %cst = arith.constant 0.000000e+00 : f32
  // expected-error @+1 {{Cannot partition: the result's sharding @g2 split_axes = [[], [], [0]] splits padded dimension 2; it needs halo sizes (1, 1) there, the padding}}
  %p = tensor.pad %x1 low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %cst : f32
  } : tensor<1x3x8x8xf32> to tensor<1x3x10x10xf32>
  %p0 = shard.shard %p to %s : tensor<1x3x10x10xf32>
  %p1 = shard.shard %p0 to %s annotate_for_users : tensor<1x3x10x10xf32>
  %w0 = shard.shard %w to %r : tensor<4x3x3x3xf32>
  %w1 = shard.shard %w0 to %r annotate_for_users : tensor<4x3x3x3xf32>
  %o0 = shard.shard %o to %s : tensor<1x4x8x8xf32>
  %o1 = shard.shard %o0 to %s annotate_for_users : tensor<1x4x8x8xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%p1, %w1 : tensor<1x3x10x10xf32>, tensor<4x3x3x3xf32>) outs(%o1 : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y0 = shard.shard %y to %s : tensor<1x4x8x8xf32>
  return %y0 : tensor<1x4x8x8xf32>
}
