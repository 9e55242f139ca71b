// RUN: shardc-opt %s --sharding-propagation | filecheck %s
// RUN: shardc-opt %s --sharding-propagation --shard-partition | filecheck %s --check-prefix=PART

// The token-type embedding's gradient in BERT's training step: a scatter-add of the
// batch's rows (split over the batch axis) through replicated int64 indices into a
// constant zero init, the result (the gradient) replicated; every annotation a
// producer's. The indices disagree with the rows' split, so propagation also tries the
// result's sharding alone, whose map has a fixed index on the indexed dimension: that
// option must still carry the grid (it used to have none and fail an assertion).

shard.grid @grid(shape = 2)

// CHECK-LABEL: func.func @token_type_grad
// CHECK: shard.sharding @grid split_axes = {{\[\[}}0]]
// CHECK: tm_tensor.scatter
// CHECK: shard.sharding @grid split_axes = {{\[\[}}]]
// PART-LABEL: func.func @token_type_grad
// PART-SAME: tensor<8x1x32xf32>
// PART: %[[IDS:.*]] = shard.all_slice %{{.*}} on @grid grid_axes = [0] slice_axis = 0 : tensor<16x1xi64> -> tensor<8x1xi64>
// PART: tm_tensor.scatter {{.*}} ins(%{{.*}}, %[[IDS]] : tensor<8x1x32xf32>, tensor<8x1xi64>) outs(%{{.*}} : tensor<2x32xf32>)
// PART: shard.all_reduce %{{.*}} on @grid grid_axes = [0] : tensor<2x32xf32> -> tensor<2x32xf32>
// PART-NOT: shard.all_gather
func.func @token_type_grad(%rows: tensor<16x1x32xf32>, %ids: tensor<16x1xi64>) -> tensor<2x32xf32> {
  %s0 = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %u = shard.shard %rows to %s0 : tensor<16x1x32xf32>
  %si = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %i = shard.shard %ids to %si : tensor<16x1xi64>
  %cst = arith.constant dense<0.000000e+00> : tensor<2x32xf32>
  %g = tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(false) ins(%u, %i : tensor<16x1x32xf32>, tensor<16x1xi64>) outs(%cst : tensor<2x32xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %b, %a : f32
    tm_tensor.yield %s : f32
  } -> tensor<2x32xf32>
  %sr = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %r = shard.shard %g to %sr : tensor<2x32xf32>
  return %r : tensor<2x32xf32>
}
