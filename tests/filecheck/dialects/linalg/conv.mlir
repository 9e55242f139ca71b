// RUN: shardc-opt %s --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s

// Every conv and pooling named op round-trips as mlir-opt prints it: strides and
// dilations in the leading dictionary, sorted; none printed where none were given.


// CHECK-LABEL: func.func @conv_1d(
// CHECK-NEXT: %0 = linalg.conv_1d ins(%arg0, %arg1 : tensor<5xf32>, tensor<3xf32>) outs(%arg2 : tensor<3xf32>) -> tensor<3xf32>
func.func @conv_1d(%i: tensor<5xf32>, %k: tensor<3xf32>, %o: tensor<3xf32>) -> tensor<3xf32> {
  %0 = linalg.conv_1d ins(%i, %k : tensor<5xf32>, tensor<3xf32>) outs(%o : tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_2d(
// CHECK-NEXT: %0 = linalg.conv_2d ins(%arg0, %arg1 : tensor<4x5xf32>, tensor<2x3xf32>) outs(%arg2 : tensor<3x3xf32>) -> tensor<3x3xf32>
func.func @conv_2d(%i: tensor<4x5xf32>, %k: tensor<2x3xf32>, %o: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0 = linalg.conv_2d ins(%i, %k : tensor<4x5xf32>, tensor<2x3xf32>) outs(%o : tensor<3x3xf32>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_3d(
// CHECK-NEXT: %0 = linalg.conv_3d ins(%arg0, %arg1 : tensor<3x4x5xf32>, tensor<2x2x3xf32>) outs(%arg2 : tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
func.func @conv_3d(%i: tensor<3x4x5xf32>, %k: tensor<2x2x3xf32>, %o: tensor<2x3x3xf32>) -> tensor<2x3x3xf32> {
  %0 = linalg.conv_3d ins(%i, %k : tensor<3x4x5xf32>, tensor<2x2x3xf32>) outs(%o : tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  return %0 : tensor<2x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_1d_nwc_wcf(
// CHECK-NEXT: %0 = linalg.conv_1d_nwc_wcf {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x7x2xf32>, tensor<3x2x3xf32>) outs(%arg2 : tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
func.func @conv_1d_nwc_wcf(%i: tensor<2x7x2xf32>, %k: tensor<3x2x3xf32>, %o: tensor<2x3x3xf32>) -> tensor<2x3x3xf32> {
  %0 = linalg.conv_1d_nwc_wcf {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x7x2xf32>, tensor<3x2x3xf32>) outs(%o : tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  return %0 : tensor<2x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_1d_ncw_fcw(
// CHECK-NEXT: %0 = linalg.conv_1d_ncw_fcw {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x2x7xf32>, tensor<3x2x3xf32>) outs(%arg2 : tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
func.func @conv_1d_ncw_fcw(%i: tensor<2x2x7xf32>, %k: tensor<3x2x3xf32>, %o: tensor<2x3x3xf32>) -> tensor<2x3x3xf32> {
  %0 = linalg.conv_1d_ncw_fcw {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x2x7xf32>, tensor<3x2x3xf32>) outs(%o : tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  return %0 : tensor<2x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_2d_nhwc_hwcf(
// CHECK-NEXT: %0 = linalg.conv_2d_nhwc_hwcf {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x6x7x2xf32>, tensor<2x3x2x3xf32>) outs(%arg2 : tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32>
func.func @conv_2d_nhwc_hwcf(%i: tensor<2x6x7x2xf32>, %k: tensor<2x3x2x3xf32>, %o: tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32> {
  %0 = linalg.conv_2d_nhwc_hwcf {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x6x7x2xf32>, tensor<2x3x2x3xf32>) outs(%o : tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32>
  return %0 : tensor<2x3x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_2d_nhwc_fhwc(
// CHECK-NEXT: %0 = linalg.conv_2d_nhwc_fhwc {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x6x7x2xf32>, tensor<3x2x3x2xf32>) outs(%arg2 : tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32>
func.func @conv_2d_nhwc_fhwc(%i: tensor<2x6x7x2xf32>, %k: tensor<3x2x3x2xf32>, %o: tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32> {
  %0 = linalg.conv_2d_nhwc_fhwc {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x6x7x2xf32>, tensor<3x2x3x2xf32>) outs(%o : tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32>
  return %0 : tensor<2x3x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_2d_nchw_fchw(
// CHECK-NEXT: %0 = linalg.conv_2d_nchw_fchw {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x2x6x7xf32>, tensor<3x2x2x3xf32>) outs(%arg2 : tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32>
func.func @conv_2d_nchw_fchw(%i: tensor<2x2x6x7xf32>, %k: tensor<3x2x2x3xf32>, %o: tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32> {
  %0 = linalg.conv_2d_nchw_fchw {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x2x6x7xf32>, tensor<3x2x2x3xf32>) outs(%o : tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32>
  return %0 : tensor<2x3x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_2d_ngchw_fgchw(
// CHECK-NEXT: %0 = linalg.conv_2d_ngchw_fgchw {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x2x2x6x7xf32>, tensor<3x2x2x2x3xf32>) outs(%arg2 : tensor<2x2x3x3x3xf32>) -> tensor<2x2x3x3x3xf32>
func.func @conv_2d_ngchw_fgchw(%i: tensor<2x2x2x6x7xf32>, %k: tensor<3x2x2x2x3xf32>, %o: tensor<2x2x3x3x3xf32>) -> tensor<2x2x3x3x3xf32> {
  %0 = linalg.conv_2d_ngchw_fgchw {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x2x2x6x7xf32>, tensor<3x2x2x2x3xf32>) outs(%o : tensor<2x2x3x3x3xf32>) -> tensor<2x2x3x3x3xf32>
  return %0 : tensor<2x2x3x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_2d_ngchw_gfchw(
// CHECK-NEXT: %0 = linalg.conv_2d_ngchw_gfchw {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x2x2x6x7xf32>, tensor<2x3x2x2x3xf32>) outs(%arg2 : tensor<2x2x3x3x3xf32>) -> tensor<2x2x3x3x3xf32>
func.func @conv_2d_ngchw_gfchw(%i: tensor<2x2x2x6x7xf32>, %k: tensor<2x3x2x2x3xf32>, %o: tensor<2x2x3x3x3xf32>) -> tensor<2x2x3x3x3xf32> {
  %0 = linalg.conv_2d_ngchw_gfchw {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x2x2x6x7xf32>, tensor<2x3x2x2x3xf32>) outs(%o : tensor<2x2x3x3x3xf32>) -> tensor<2x2x3x3x3xf32>
  return %0 : tensor<2x2x3x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_2d_nhwgc_gfhwc(
// CHECK-NEXT: %0 = linalg.conv_2d_nhwgc_gfhwc {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x6x7x2x2xf32>, tensor<2x3x2x3x2xf32>) outs(%arg2 : tensor<2x3x3x2x3xf32>) -> tensor<2x3x3x2x3xf32>
func.func @conv_2d_nhwgc_gfhwc(%i: tensor<2x6x7x2x2xf32>, %k: tensor<2x3x2x3x2xf32>, %o: tensor<2x3x3x2x3xf32>) -> tensor<2x3x3x2x3xf32> {
  %0 = linalg.conv_2d_nhwgc_gfhwc {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x6x7x2x2xf32>, tensor<2x3x2x3x2xf32>) outs(%o : tensor<2x3x3x2x3xf32>) -> tensor<2x3x3x2x3xf32>
  return %0 : tensor<2x3x3x2x3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_3d_ndhwc_dhwcf(
// CHECK-NEXT: %0 = linalg.conv_3d_ndhwc_dhwcf {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%arg0, %arg1 : tensor<2x4x5x11x2xf32>, tensor<2x2x3x2x3xf32>) outs(%arg2 : tensor<2x2x3x3x3xf32>) -> tensor<2x2x3x3x3xf32>
func.func @conv_3d_ndhwc_dhwcf(%i: tensor<2x4x5x11x2xf32>, %k: tensor<2x2x3x2x3xf32>, %o: tensor<2x2x3x3x3xf32>) -> tensor<2x2x3x3x3xf32> {
  %0 = linalg.conv_3d_ndhwc_dhwcf {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%i, %k : tensor<2x4x5x11x2xf32>, tensor<2x2x3x2x3xf32>) outs(%o : tensor<2x2x3x3x3xf32>) -> tensor<2x2x3x3x3xf32>
  return %0 : tensor<2x2x3x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @conv_3d_ncdhw_fcdhw(
// CHECK-NEXT: %0 = linalg.conv_3d_ncdhw_fcdhw {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%arg0, %arg1 : tensor<2x2x4x5x11xf32>, tensor<3x2x2x2x3xf32>) outs(%arg2 : tensor<2x3x2x3x3xf32>) -> tensor<2x3x2x3x3xf32>
func.func @conv_3d_ncdhw_fcdhw(%i: tensor<2x2x4x5x11xf32>, %k: tensor<3x2x2x2x3xf32>, %o: tensor<2x3x2x3x3xf32>) -> tensor<2x3x2x3x3xf32> {
  %0 = linalg.conv_3d_ncdhw_fcdhw {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%i, %k : tensor<2x2x4x5x11xf32>, tensor<3x2x2x2x3xf32>) outs(%o : tensor<2x3x2x3x3xf32>) -> tensor<2x3x2x3x3xf32>
  return %0 : tensor<2x3x2x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @depthwise_conv_1d_nwc_wc(
// CHECK-NEXT: %0 = linalg.depthwise_conv_1d_nwc_wc {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x7x2xf32>, tensor<3x2xf32>) outs(%arg2 : tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
func.func @depthwise_conv_1d_nwc_wc(%i: tensor<2x7x2xf32>, %k: tensor<3x2xf32>, %o: tensor<2x3x2xf32>) -> tensor<2x3x2xf32> {
  %0 = linalg.depthwise_conv_1d_nwc_wc {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x7x2xf32>, tensor<3x2xf32>) outs(%o : tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
  return %0 : tensor<2x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @depthwise_conv_1d_ncw_cw(
// CHECK-NEXT: %0 = linalg.depthwise_conv_1d_ncw_cw {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x2x7xf32>, tensor<2x3xf32>) outs(%arg2 : tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
func.func @depthwise_conv_1d_ncw_cw(%i: tensor<2x2x7xf32>, %k: tensor<2x3xf32>, %o: tensor<2x2x3xf32>) -> tensor<2x2x3xf32> {
  %0 = linalg.depthwise_conv_1d_ncw_cw {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x2x7xf32>, tensor<2x3xf32>) outs(%o : tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
  return %0 : tensor<2x2x3xf32>
}
// -----

// CHECK-LABEL: func.func @depthwise_conv_1d_nwc_wcm(
// CHECK-NEXT: %0 = linalg.depthwise_conv_1d_nwc_wcm {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x7x2xf32>, tensor<3x2x2xf32>) outs(%arg2 : tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32>
func.func @depthwise_conv_1d_nwc_wcm(%i: tensor<2x7x2xf32>, %k: tensor<3x2x2xf32>, %o: tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32> {
  %0 = linalg.depthwise_conv_1d_nwc_wcm {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x7x2xf32>, tensor<3x2x2xf32>) outs(%o : tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32>
  return %0 : tensor<2x3x2x2xf32>
}
// -----

// CHECK-LABEL: func.func @depthwise_conv_2d_nchw_chw(
// CHECK-NEXT: %0 = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x2x6x7xf32>, tensor<2x2x3xf32>) outs(%arg2 : tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32>
func.func @depthwise_conv_2d_nchw_chw(%i: tensor<2x2x6x7xf32>, %k: tensor<2x2x3xf32>, %o: tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32> {
  %0 = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x2x6x7xf32>, tensor<2x2x3xf32>) outs(%o : tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32>
  return %0 : tensor<2x2x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @depthwise_conv_2d_nhwc_hwc(
// CHECK-NEXT: %0 = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x6x7x2xf32>, tensor<2x3x2xf32>) outs(%arg2 : tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
func.func @depthwise_conv_2d_nhwc_hwc(%i: tensor<2x6x7x2xf32>, %k: tensor<2x3x2xf32>, %o: tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32> {
  %0 = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x6x7x2xf32>, tensor<2x3x2xf32>) outs(%o : tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
  return %0 : tensor<2x3x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @depthwise_conv_2d_nhwc_hwcm(
// CHECK-NEXT: %0 = linalg.depthwise_conv_2d_nhwc_hwcm {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x6x7x2xf32>, tensor<2x3x2x2xf32>) outs(%arg2 : tensor<2x3x3x2x2xf32>) -> tensor<2x3x3x2x2xf32>
func.func @depthwise_conv_2d_nhwc_hwcm(%i: tensor<2x6x7x2xf32>, %k: tensor<2x3x2x2xf32>, %o: tensor<2x3x3x2x2xf32>) -> tensor<2x3x3x2x2xf32> {
  %0 = linalg.depthwise_conv_2d_nhwc_hwcm {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x6x7x2xf32>, tensor<2x3x2x2xf32>) outs(%o : tensor<2x3x3x2x2xf32>) -> tensor<2x3x3x2x2xf32>
  return %0 : tensor<2x3x3x2x2xf32>
}
// -----

// CHECK-LABEL: func.func @depthwise_conv_3d_ndhwc_dhwc(
// CHECK-NEXT: %0 = linalg.depthwise_conv_3d_ndhwc_dhwc {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%arg0, %arg1 : tensor<2x4x5x11x2xf32>, tensor<2x2x3x2xf32>) outs(%arg2 : tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32>
func.func @depthwise_conv_3d_ndhwc_dhwc(%i: tensor<2x4x5x11x2xf32>, %k: tensor<2x2x3x2xf32>, %o: tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32> {
  %0 = linalg.depthwise_conv_3d_ndhwc_dhwc {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%i, %k : tensor<2x4x5x11x2xf32>, tensor<2x2x3x2xf32>) outs(%o : tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32>
  return %0 : tensor<2x2x3x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @depthwise_conv_3d_ncdhw_cdhw(
// CHECK-NEXT: %0 = linalg.depthwise_conv_3d_ncdhw_cdhw {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%arg0, %arg1 : tensor<2x2x4x5x11xf32>, tensor<2x2x2x3xf32>) outs(%arg2 : tensor<2x2x2x3x3xf32>) -> tensor<2x2x2x3x3xf32>
func.func @depthwise_conv_3d_ncdhw_cdhw(%i: tensor<2x2x4x5x11xf32>, %k: tensor<2x2x2x3xf32>, %o: tensor<2x2x2x3x3xf32>) -> tensor<2x2x2x3x3xf32> {
  %0 = linalg.depthwise_conv_3d_ncdhw_cdhw {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%i, %k : tensor<2x2x4x5x11xf32>, tensor<2x2x2x3xf32>) outs(%o : tensor<2x2x2x3x3xf32>) -> tensor<2x2x2x3x3xf32>
  return %0 : tensor<2x2x2x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @depthwise_conv_3d_ndhwc_dhwcm(
// CHECK-NEXT: %0 = linalg.depthwise_conv_3d_ndhwc_dhwcm {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%arg0, %arg1 : tensor<2x4x5x11x2xf32>, tensor<2x2x3x2x2xf32>) outs(%arg2 : tensor<2x2x3x3x2x2xf32>) -> tensor<2x2x3x3x2x2xf32>
func.func @depthwise_conv_3d_ndhwc_dhwcm(%i: tensor<2x4x5x11x2xf32>, %k: tensor<2x2x3x2x2xf32>, %o: tensor<2x2x3x3x2x2xf32>) -> tensor<2x2x3x3x2x2xf32> {
  %0 = linalg.depthwise_conv_3d_ndhwc_dhwcm {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%i, %k : tensor<2x4x5x11x2xf32>, tensor<2x2x3x2x2xf32>) outs(%o : tensor<2x2x3x3x2x2xf32>) -> tensor<2x2x3x3x2x2xf32>
  return %0 : tensor<2x2x3x3x2x2xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_nhwc_sum(
// CHECK-NEXT: %0 = linalg.pooling_nhwc_sum {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x6x7x2xf32>, tensor<2x3xf32>) outs(%arg2 : tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
func.func @pooling_nhwc_sum(%i: tensor<2x6x7x2xf32>, %k: tensor<2x3xf32>, %o: tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32> {
  %0 = linalg.pooling_nhwc_sum {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x6x7x2xf32>, tensor<2x3xf32>) outs(%o : tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
  return %0 : tensor<2x3x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_nhwc_max(
// CHECK-NEXT: %0 = linalg.pooling_nhwc_max {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x6x7x2xf32>, tensor<2x3xf32>) outs(%arg2 : tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
func.func @pooling_nhwc_max(%i: tensor<2x6x7x2xf32>, %k: tensor<2x3xf32>, %o: tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32> {
  %0 = linalg.pooling_nhwc_max {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x6x7x2xf32>, tensor<2x3xf32>) outs(%o : tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
  return %0 : tensor<2x3x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_nhwc_max_unsigned(
// CHECK-NEXT: %0 = linalg.pooling_nhwc_max_unsigned {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x6x7x2xi32>, tensor<2x3xi32>) outs(%arg2 : tensor<2x3x3x2xi32>) -> tensor<2x3x3x2xi32>
func.func @pooling_nhwc_max_unsigned(%i: tensor<2x6x7x2xi32>, %k: tensor<2x3xi32>, %o: tensor<2x3x3x2xi32>) -> tensor<2x3x3x2xi32> {
  %0 = linalg.pooling_nhwc_max_unsigned {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x6x7x2xi32>, tensor<2x3xi32>) outs(%o : tensor<2x3x3x2xi32>) -> tensor<2x3x3x2xi32>
  return %0 : tensor<2x3x3x2xi32>
}
// -----

// CHECK-LABEL: func.func @pooling_nhwc_min(
// CHECK-NEXT: %0 = linalg.pooling_nhwc_min {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x6x7x2xf32>, tensor<2x3xf32>) outs(%arg2 : tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
func.func @pooling_nhwc_min(%i: tensor<2x6x7x2xf32>, %k: tensor<2x3xf32>, %o: tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32> {
  %0 = linalg.pooling_nhwc_min {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x6x7x2xf32>, tensor<2x3xf32>) outs(%o : tensor<2x3x3x2xf32>) -> tensor<2x3x3x2xf32>
  return %0 : tensor<2x3x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_nhwc_min_unsigned(
// CHECK-NEXT: %0 = linalg.pooling_nhwc_min_unsigned {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x6x7x2xi32>, tensor<2x3xi32>) outs(%arg2 : tensor<2x3x3x2xi32>) -> tensor<2x3x3x2xi32>
func.func @pooling_nhwc_min_unsigned(%i: tensor<2x6x7x2xi32>, %k: tensor<2x3xi32>, %o: tensor<2x3x3x2xi32>) -> tensor<2x3x3x2xi32> {
  %0 = linalg.pooling_nhwc_min_unsigned {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x6x7x2xi32>, tensor<2x3xi32>) outs(%o : tensor<2x3x3x2xi32>) -> tensor<2x3x3x2xi32>
  return %0 : tensor<2x3x3x2xi32>
}
// -----

// CHECK-LABEL: func.func @pooling_nchw_sum(
// CHECK-NEXT: %0 = linalg.pooling_nchw_sum {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x2x6x7xf32>, tensor<2x3xf32>) outs(%arg2 : tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32>
func.func @pooling_nchw_sum(%i: tensor<2x2x6x7xf32>, %k: tensor<2x3xf32>, %o: tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32> {
  %0 = linalg.pooling_nchw_sum {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x2x6x7xf32>, tensor<2x3xf32>) outs(%o : tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32>
  return %0 : tensor<2x2x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_nchw_max(
// CHECK-NEXT: %0 = linalg.pooling_nchw_max {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%arg0, %arg1 : tensor<2x2x6x7xf32>, tensor<2x3xf32>) outs(%arg2 : tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32>
func.func @pooling_nchw_max(%i: tensor<2x2x6x7xf32>, %k: tensor<2x3xf32>, %o: tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32> {
  %0 = linalg.pooling_nchw_max {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%i, %k : tensor<2x2x6x7xf32>, tensor<2x3xf32>) outs(%o : tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32>
  return %0 : tensor<2x2x3x3xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_nwc_sum(
// CHECK-NEXT: %0 = linalg.pooling_nwc_sum {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x7x2xf32>, tensor<3xf32>) outs(%arg2 : tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
func.func @pooling_nwc_sum(%i: tensor<2x7x2xf32>, %k: tensor<3xf32>, %o: tensor<2x3x2xf32>) -> tensor<2x3x2xf32> {
  %0 = linalg.pooling_nwc_sum {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x7x2xf32>, tensor<3xf32>) outs(%o : tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
  return %0 : tensor<2x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_nwc_max(
// CHECK-NEXT: %0 = linalg.pooling_nwc_max {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x7x2xf32>, tensor<3xf32>) outs(%arg2 : tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
func.func @pooling_nwc_max(%i: tensor<2x7x2xf32>, %k: tensor<3xf32>, %o: tensor<2x3x2xf32>) -> tensor<2x3x2xf32> {
  %0 = linalg.pooling_nwc_max {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x7x2xf32>, tensor<3xf32>) outs(%o : tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
  return %0 : tensor<2x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_nwc_max_unsigned(
// CHECK-NEXT: %0 = linalg.pooling_nwc_max_unsigned {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x7x2xi32>, tensor<3xi32>) outs(%arg2 : tensor<2x3x2xi32>) -> tensor<2x3x2xi32>
func.func @pooling_nwc_max_unsigned(%i: tensor<2x7x2xi32>, %k: tensor<3xi32>, %o: tensor<2x3x2xi32>) -> tensor<2x3x2xi32> {
  %0 = linalg.pooling_nwc_max_unsigned {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x7x2xi32>, tensor<3xi32>) outs(%o : tensor<2x3x2xi32>) -> tensor<2x3x2xi32>
  return %0 : tensor<2x3x2xi32>
}
// -----

// CHECK-LABEL: func.func @pooling_nwc_min(
// CHECK-NEXT: %0 = linalg.pooling_nwc_min {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x7x2xf32>, tensor<3xf32>) outs(%arg2 : tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
func.func @pooling_nwc_min(%i: tensor<2x7x2xf32>, %k: tensor<3xf32>, %o: tensor<2x3x2xf32>) -> tensor<2x3x2xf32> {
  %0 = linalg.pooling_nwc_min {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x7x2xf32>, tensor<3xf32>) outs(%o : tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
  return %0 : tensor<2x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_nwc_min_unsigned(
// CHECK-NEXT: %0 = linalg.pooling_nwc_min_unsigned {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x7x2xi32>, tensor<3xi32>) outs(%arg2 : tensor<2x3x2xi32>) -> tensor<2x3x2xi32>
func.func @pooling_nwc_min_unsigned(%i: tensor<2x7x2xi32>, %k: tensor<3xi32>, %o: tensor<2x3x2xi32>) -> tensor<2x3x2xi32> {
  %0 = linalg.pooling_nwc_min_unsigned {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x7x2xi32>, tensor<3xi32>) outs(%o : tensor<2x3x2xi32>) -> tensor<2x3x2xi32>
  return %0 : tensor<2x3x2xi32>
}
// -----

// CHECK-LABEL: func.func @pooling_ncw_sum(
// CHECK-NEXT: %0 = linalg.pooling_ncw_sum {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x2x7xf32>, tensor<3xf32>) outs(%arg2 : tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
func.func @pooling_ncw_sum(%i: tensor<2x2x7xf32>, %k: tensor<3xf32>, %o: tensor<2x2x3xf32>) -> tensor<2x2x3xf32> {
  %0 = linalg.pooling_ncw_sum {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x2x7xf32>, tensor<3xf32>) outs(%o : tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
  return %0 : tensor<2x2x3xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_ncw_max(
// CHECK-NEXT: %0 = linalg.pooling_ncw_max {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<2x2x7xf32>, tensor<3xf32>) outs(%arg2 : tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
func.func @pooling_ncw_max(%i: tensor<2x2x7xf32>, %k: tensor<3xf32>, %o: tensor<2x2x3xf32>) -> tensor<2x2x3xf32> {
  %0 = linalg.pooling_ncw_max {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<2x2x7xf32>, tensor<3xf32>) outs(%o : tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
  return %0 : tensor<2x2x3xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_ndhwc_sum(
// CHECK-NEXT: %0 = linalg.pooling_ndhwc_sum {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%arg0, %arg1 : tensor<2x4x5x11x2xf32>, tensor<2x2x3xf32>) outs(%arg2 : tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32>
func.func @pooling_ndhwc_sum(%i: tensor<2x4x5x11x2xf32>, %k: tensor<2x2x3xf32>, %o: tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32> {
  %0 = linalg.pooling_ndhwc_sum {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%i, %k : tensor<2x4x5x11x2xf32>, tensor<2x2x3xf32>) outs(%o : tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32>
  return %0 : tensor<2x2x3x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_ndhwc_max(
// CHECK-NEXT: %0 = linalg.pooling_ndhwc_max {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%arg0, %arg1 : tensor<2x4x5x11x2xf32>, tensor<2x2x3xf32>) outs(%arg2 : tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32>
func.func @pooling_ndhwc_max(%i: tensor<2x4x5x11x2xf32>, %k: tensor<2x2x3xf32>, %o: tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32> {
  %0 = linalg.pooling_ndhwc_max {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%i, %k : tensor<2x4x5x11x2xf32>, tensor<2x2x3xf32>) outs(%o : tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32>
  return %0 : tensor<2x2x3x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @pooling_ndhwc_min(
// CHECK-NEXT: %0 = linalg.pooling_ndhwc_min {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%arg0, %arg1 : tensor<2x4x5x11x2xf32>, tensor<2x2x3xf32>) outs(%arg2 : tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32>
func.func @pooling_ndhwc_min(%i: tensor<2x4x5x11x2xf32>, %k: tensor<2x2x3xf32>, %o: tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32> {
  %0 = linalg.pooling_ndhwc_min {dilations = dense<[1, 2, 2]> : vector<3xi64>, strides = dense<[2, 1, 3]> : vector<3xi64>} ins(%i, %k : tensor<2x4x5x11x2xf32>, tensor<2x2x3xf32>) outs(%o : tensor<2x2x3x3x2xf32>) -> tensor<2x2x3x3x2xf32>
  return %0 : tensor<2x2x3x3x2xf32>
}
// -----

// CHECK-LABEL: func.func @no_attributes(
// CHECK-NEXT: %0 = linalg.conv_2d_nchw_fchw ins(%arg0, %arg1 : tensor<2x2x4x5xf32>, tensor<3x2x2x3xf32>) outs(%arg2 : tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32>
func.func @no_attributes(%i: tensor<2x2x4x5xf32>, %k: tensor<3x2x2x3xf32>, %o: tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32> {
  %0 = linalg.conv_2d_nchw_fchw ins(%i, %k : tensor<2x2x4x5xf32>, tensor<3x2x2x3xf32>) outs(%o : tensor<2x3x3x3xf32>) -> tensor<2x3x3x3xf32>
  return %0 : tensor<2x3x3x3xf32>
}
// -----

// conv_1d/2d/3d have no strides: one given is an ordinary attribute, printed and ignored.
// CHECK-LABEL: func.func @unbatched_strides(
// CHECK-NEXT: %0 = linalg.conv_1d {strides = dense<2> : vector<1xi64>} ins(%arg0, %arg1 : tensor<5xf32>, tensor<3xf32>) outs(%arg2 : tensor<3xf32>) -> tensor<3xf32>
func.func @unbatched_strides(%i: tensor<5xf32>, %k: tensor<3xf32>, %o: tensor<3xf32>) -> tensor<3xf32> {
  %0 = linalg.conv_1d {strides = dense<2> : vector<1xi64>} ins(%i, %k : tensor<5xf32>, tensor<3xf32>) outs(%o : tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
