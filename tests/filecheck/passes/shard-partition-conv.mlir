// RUN: shardc-opt --sharding-propagation --shard-partition %s | filecheck %s
//
// Convolution and pooling (interfaces/conv.py): batch, channels, and image dimensions
// split with halos; the only annotation is the split of the first argument.

#in = affine_map<(d0, d1) -> (d0 * 2 + d1)>
#k = affine_map<(d0, d1) -> (d1)>
#out = affine_map<(d0, d1) -> (d0)>

shard.grid @g2(shape = 2)
shard.grid @g22(shape = 2x2)
shard.grid @g4(shape = 4)

// Batch split: the same conv on the local images, no communication.
// CHECK-LABEL: func.func @batch
// CHECK-SAME: tensor<2x3x8x8xf32>, %{{.*}}: tensor<4x3x3x3xf32>, %{{.*}}: tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NOT: shard.
// CHECK: linalg.conv_2d_nchw_fchw {{.*}} ins(%arg0, %arg1 : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) outs(%arg2 : tensor<2x4x6x6xf32>)
// CHECK-NOT: shard.
// CHECK: return
func.func @batch(%x: tensor<4x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %o: tensor<4x4x6x6xf32>) -> tensor<4x4x6x6xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x3x8x8xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%xs, %w : tensor<4x3x8x8xf32>, tensor<4x3x3x3xf32>) outs(%o : tensor<4x4x6x6xf32>) -> tensor<4x4x6x6xf32>
  return %y : tensor<4x4x6x6xf32>
}

// Output channels split (tensor parallel): the weight split by output channel, the
// input whole, no communication.
// CHECK-LABEL: func.func @out_channels
// CHECK-SAME: tensor<4x3x8x8xf32>, %{{.*}}: tensor<2x3x3x3xf32>, %{{.*}}: tensor<4x2x6x6xf32>) -> tensor<4x2x6x6xf32>
// CHECK-NOT: shard.
// CHECK: linalg.conv_2d_nchw_fchw
// CHECK-NOT: shard.
// CHECK: return
func.func @out_channels(%x: tensor<4x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %o: tensor<4x4x6x6xf32>) -> tensor<4x4x6x6xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<4x3x3x3xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %ws : tensor<4x3x8x8xf32>, tensor<4x3x3x3xf32>) outs(%o : tensor<4x4x6x6xf32>) -> tensor<4x4x6x6xf32>
  return %y : tensor<4x4x6x6xf32>
}

// Input channels split: a reduction loop, partial sums (the init on the lead process,
// zeros elsewhere) combined by an all_reduce.
// CHECK-LABEL: func.func @in_channels
// CHECK-SAME: tensor<4x2x8x8xf32>, %{{.*}}: tensor<4x2x3x3xf32>, %{{.*}}: tensor<4x4x6x6xf32>)
// CHECK: scf.if
// CHECK: [[C:%\w+]] = linalg.conv_2d_nchw_fchw {{.*}} -> tensor<4x4x6x6xf32>
// CHECK-NEXT: shard.all_reduce [[C]] on @g2 grid_axes = [0] : tensor<4x4x6x6xf32> -> tensor<4x4x6x6xf32>
func.func @in_channels(%x: tensor<4x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %o: tensor<4x4x6x6xf32>) -> tensor<4x4x6x6xf32> {
  %s = shard.sharding @g2 split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x4x8x8xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%xs, %w : tensor<4x4x8x8xf32>, tensor<4x4x3x3xf32>) outs(%o : tensor<4x4x6x6xf32>) -> tensor<4x4x6x6xf32>
  return %y : tensor<4x4x6x6xf32>
}

// Height split, 3x3 stride 2 pad 1: each rank pads its 4 rows to 6 (halo rows = the pad
// value), update_halo overwrites the interior halos, the conv gives its 2 output rows.
// CHECK-LABEL: func.func @stride2
// CHECK-SAME: tensor<1x3x4x8xf32>, %{{.*}}: tensor<4x3x3x3xf32>) -> tensor<1x4x2x4xf32>
// CHECK: [[P:%\w+]] = tensor.pad %arg0 low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK: tensor<1x3x4x8xf32> to tensor<1x3x6x10xf32>
// CHECK-NEXT: [[H:%\w+]] = shard.update_halo [[P]] on @g2 split_axes = {{\[\[}}], [], [0]] halo_sizes = [1, 1] : tensor<1x3x6x10xf32>
// CHECK-NOT: all_gather
// CHECK: linalg.conv_2d_nchw_fchw {{.*}} strides = dense<2> {{.*}} ins([[H]], %arg1 : tensor<1x3x6x10xf32>, tensor<4x3x3x3xf32>) outs(%{{.*}} : tensor<1x4x2x4xf32>)
func.func @stride2(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32> {
  %s = shard.sharding @g2 split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<1x3x8x8xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %p = tensor.pad %xs low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %cst : f32
  } : tensor<1x3x8x8xf32> to tensor<1x3x10x10xf32>
  %e = tensor.empty() : tensor<1x4x4x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%p, %w : tensor<1x3x10x10xf32>, tensor<4x3x3x3xf32>) outs(%f : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %y : tensor<1x4x4x4xf32>
}

// Max pooling 2x2 stride 2 on a height split: the windows do not cross shards, no halo.
// CHECK-LABEL: func.func @maxpool
// CHECK-SAME: tensor<1x3x4x8xf32>) -> tensor<1x3x2x4xf32>
// CHECK-NOT: shard.
// CHECK: linalg.pooling_nchw_max {{.*}} ins(%arg0, %{{.*}} : tensor<1x3x4x8xf32>, tensor<2x2xf32>) outs(%{{.*}} : tensor<1x3x2x4xf32>)
func.func @maxpool(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  %s = shard.sharding @g2 split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<1x3x8x8xf32>
  %cst = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<1x3x4x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %k = tensor.empty() : tensor<2x2xf32>
  %y = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%xs, %k : tensor<1x3x8x8xf32>, tensor<2x2xf32>) outs(%f : tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  return %y : tensor<1x3x4x4xf32>
}

// Height and width split on a 2x2 grid: halos on both, one update_halo.
// CHECK-LABEL: func.func @hw
// CHECK-SAME: tensor<1x3x4x4xf32>, %{{.*}}: tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
// CHECK: tensor<1x3x4x4xf32> to tensor<1x3x6x6xf32>
// CHECK-NEXT: [[H:%\w+]] = shard.update_halo %{{.*}} on @g22 split_axes = {{\[\[}}], [], [0], [1]] halo_sizes = [1, 1, 1, 1] : tensor<1x3x6x6xf32>
// CHECK: linalg.conv_2d_nchw_fchw {{.*}} ins([[H]], %arg1 : {{.*}}) outs(%{{.*}} : tensor<1x4x4x4xf32>)
func.func @hw(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  %s = shard.sharding @g22 split_axes = [[], [], [0], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<1x3x8x8xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %p = tensor.pad %xs low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %cst : f32
  } : tensor<1x3x8x8xf32> to tensor<1x3x10x10xf32>
  %e = tensor.empty() : tensor<1x4x8x8xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%p, %w : tensor<1x3x10x10xf32>, tensor<4x3x3x3xf32>) outs(%f : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return %y : tensor<1x4x8x8xf32>
}

// A conv without padding shrinks the image (8 rows -> 6): output shards would not start
// where input shards start, so the fallback gathers the rows.
// CHECK-LABEL: func.func @valid_conv_h
// CHECK: shard.all_gather %arg0 on @g2 grid_axes = [0] gather_axis = 2 : tensor<1x3x4x8xf32> -> tensor<1x3x8x8xf32>
func.func @valid_conv_h(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %o: tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> {
  %s = shard.sharding @g2 split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<1x3x8x8xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%xs, %w : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) outs(%o : tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  return %y : tensor<1x4x6x6xf32>
}

// A linalg.generic with a window map (d0 * 2 + d1), kernel 2 stride 2: split without halos.
// CHECK-LABEL: func.func @generic_1d
// CHECK-SAME: (%arg0: tensor<4xf32>, %arg1: tensor<2xf32>, %arg2: tensor<2xf32>) -> tensor<2xf32>
// CHECK-NOT: shard.
// CHECK: return
func.func @generic_1d(%x: tensor<16xf32>, %w: tensor<2xf32>, %o: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @g4 split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<16xf32>
  %y = linalg.generic {indexing_maps = [#in, #k, #out], iterator_types = ["parallel", "reduction"]} ins(%xs, %w : tensor<16xf32>, tensor<2xf32>) outs(%o : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %m, %c : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// nhwc: the height is dimension 1.
// CHECK-LABEL: func.func @nhwc
// CHECK: tensor<2x2x8x3xf32> to tensor<2x4x10x3xf32>
// CHECK-NEXT: shard.update_halo %{{.*}} on @g4 split_axes = {{\[\[}}], [0]] halo_sizes = [1, 1] : tensor<2x4x10x3xf32>
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} outs(%{{.*}} : tensor<2x2x8x4xf32>)
func.func @nhwc(%x: tensor<2x8x8x3xf32>, %w: tensor<3x3x3x4xf32>) -> tensor<2x8x8x4xf32> {
  %s = shard.sharding @g4 split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<2x8x8x3xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %p = tensor.pad %xs low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %cst : f32
  } : tensor<2x8x8x3xf32> to tensor<2x10x10x3xf32>
  %e = tensor.empty() : tensor<2x8x8x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%p, %w : tensor<2x10x10x3xf32>, tensor<3x3x3x4xf32>) outs(%f : tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
  return %y : tensor<2x8x8x4xf32>
}

// Dilation 2 with padding 2: halos of 2 rows.
// CHECK-LABEL: func.func @dilated
// CHECK: shard.update_halo %{{.*}} on @g4 split_axes = {{\[\[}}], [], [0]] halo_sizes = [2, 2] : tensor<1x1x8x8xf32>
// CHECK: linalg.conv_2d_nchw_fchw {{.*}} -> tensor<1x1x4x4xf32>
func.func @dilated(%x: tensor<1x1x16x4xf32>, %w: tensor<1x1x3x3xf32>) -> tensor<1x1x16x4xf32> {
  %s = shard.sharding @g4 split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<1x1x16x4xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %p = tensor.pad %xs low[0, 0, 2, 2] high[0, 0, 2, 2] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %cst : f32
  } : tensor<1x1x16x4xf32> to tensor<1x1x20x8xf32>
  %e = tensor.empty() : tensor<1x1x16x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x1x16x4xf32>) -> tensor<1x1x16x4xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<2> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%p, %w : tensor<1x1x20x8xf32>, tensor<1x1x3x3xf32>) outs(%f : tensor<1x1x16x4xf32>) -> tensor<1x1x16x4xf32>
  return %y : tensor<1x1x16x4xf32>
}

// 12 rows on 4 ranks are 3 per rank, not a multiple of the stride 2: gathered instead.
// CHECK-LABEL: func.func @odd_rows
// CHECK: shard.all_gather %arg0 on @g4 grid_axes = [0] gather_axis = 2 : tensor<1x3x3x8xf32> -> tensor<1x3x12x8xf32>
// CHECK-NOT: update_halo
func.func @odd_rows(%x: tensor<1x3x12x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x4xf32> {
  %s = shard.sharding @g4 split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<1x3x12x8xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %p = tensor.pad %xs low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %cst : f32
  } : tensor<1x3x12x8xf32> to tensor<1x3x14x10xf32>
  %e = tensor.empty() : tensor<1x4x6x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x4x6x4xf32>) -> tensor<1x4x6x4xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%p, %w : tensor<1x3x14x10xf32>, tensor<4x3x3x3xf32>) outs(%f : tensor<1x4x6x4xf32>) -> tensor<1x4x6x4xf32>
  return %y : tensor<1x4x6x4xf32>
}

// A weight gradient (the training import's form): the output gradient is the "kernel",
// its rows the kernel loop, a reduction. Split by height, each rank sums its rows (its
// padded input rows plus one halo row on each side), then an all_reduce of the gradient.
// CHECK-LABEL: func.func @weight_gradient
// CHECK-SAME: (%arg0: tensor<3x2x8x16xf32>, %arg1: tensor<8x2x8x16xf32>) -> tensor<3x8x3x3xf32>
// CHECK: tensor<3x2x8x16xf32> to tensor<3x2x10x18xf32>
// CHECK-NEXT: [[H:%\w+]] = shard.update_halo %{{.*}} on @g2 split_axes = {{\[\[}}], [], [0]] halo_sizes = [1, 1] : tensor<3x2x10x18xf32>
// CHECK: scf.if
// CHECK: [[G:%\w+]] = linalg.conv_2d_nchw_fchw {{.*}} ins([[H]], %arg1 : tensor<3x2x10x18xf32>, tensor<8x2x8x16xf32>) outs(%{{.*}} : tensor<3x8x3x3xf32>)
// CHECK-NEXT: shard.all_reduce [[G]] on @g2 grid_axes = [0] : tensor<3x8x3x3xf32> -> tensor<3x8x3x3xf32>
// CHECK-NOT: all_gather
func.func @weight_gradient(%xt: tensor<3x2x16x16xf32>, %gt: tensor<8x2x16x16xf32>) -> tensor<3x8x3x3xf32> {
  %s = shard.sharding @g2 split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %xt to %s : tensor<3x2x16x16xf32>
  %gs = shard.shard %gt to %s : tensor<8x2x16x16xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %p = tensor.pad %xs low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %cst : f32
  } : tensor<3x2x16x16xf32> to tensor<3x2x18x18xf32>
  %e = tensor.empty() : tensor<3x8x3x3xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<3x8x3x3xf32>) -> tensor<3x8x3x3xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%p, %gs : tensor<3x2x18x18xf32>, tensor<8x2x16x16xf32>) outs(%f : tensor<3x8x3x3xf32>) -> tensor<3x8x3x3xf32>
  return %y : tensor<3x8x3x3xf32>
}

// torch-mlir pads a gradient by inserting it into a filled tensor: a pad like tensor.pad.
// The filled tensor is read whole on every rank (a fill: nothing moves); each rank pads
// its own rows and exchanges halos.
// CHECK-LABEL: func.func @insert_slice_pad
// CHECK-SAME: (%arg0: tensor<1x4x2x4xf32>, %arg1: tensor<8x4x3x3xf32>) -> tensor<1x8x2x4xf32>
// CHECK: [[F:%\w+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x4x4x6xf32>)
// CHECK-NEXT: [[I:%\w+]] = tensor.insert_slice %arg0 into [[F]][0, 0, 1, 1] [1, 4, 2, 4] [1, 1, 1, 1] : tensor<1x4x2x4xf32> into tensor<1x4x4x6xf32>
// CHECK-NEXT: [[H:%\w+]] = shard.update_halo [[I]] on @g2 split_axes = {{\[\[}}], [], [0]] halo_sizes = [1, 1] : tensor<1x4x4x6xf32>
// CHECK: linalg.conv_2d_nchw_fchw {{.*}} ins([[H]], %arg1 : tensor<1x4x4x6xf32>, tensor<8x4x3x3xf32>) outs(%{{.*}} : tensor<1x8x2x4xf32>)
// CHECK-NOT: all_gather
func.func @insert_slice_pad(%g: tensor<1x4x4x4xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x4x4xf32> {
  %s = shard.sharding @g2 split_axes = [[], [], [0]] : !shard.sharding
  %gs = shard.shard %g to %s : tensor<1x4x4x4xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %z = tensor.empty() : tensor<1x4x6x6xf32>
  %zf = linalg.fill ins(%cst : f32) outs(%z : tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %p = tensor.insert_slice %gs into %zf[0, 0, 1, 1] [1, 4, 4, 4] [1, 1, 1, 1] : tensor<1x4x4x4xf32> into tensor<1x4x6x6xf32>
  %e = tensor.empty() : tensor<1x8x4x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%p, %w : tensor<1x4x6x6xf32>, tensor<8x4x3x3xf32>) outs(%f : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  return %y : tensor<1x8x4x4xf32>
}
