// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation{complete=false}))" %s | filecheck %s

shard.grid @g1(shape = 4)
shard.grid @g2(shape = 2x4)
shard.grid @g3(shape = 2x2x2)

// A value without annotations is left alone.
// CHECK-LABEL: func.func @no_annotation
// CHECK-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<6x10xf32>) -> tensor<6x10xf32> {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.exp %[[ARG0]] : (tensor<6x10xf32>) -> tensor<6x10xf32>
// CHECK-NEXT: return %[[V0]] : tensor<6x10xf32>
// CHECK-NEXT: }
func.func @no_annotation(%x: tensor<6x10xf32>) -> tensor<6x10xf32> {
  %r = tosa.exp %x : (tensor<6x10xf32>) -> tensor<6x10xf32>
  return %r : tensor<6x10xf32>
}

// Elementwise tosa: the result annotation flows back to both operands.
// CHECK-LABEL: func.func @tosa_binary_from_result
// CHECK-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<6x10xf32>, %[[ARG1:[A-Za-z0-9_]+]]: tensor<6x10xf32>) -> tensor<6x10xf32> {
// CHECK-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}1], [0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] annotate_for_users : tensor<6x10xf32>
// CHECK-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}1], [0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[ARG1]] to %[[SHARDING_0]] annotate_for_users : tensor<6x10xf32>
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.sub %[[SHARDING_ANNOTATED]], %[[SHARDING_ANNOTATED_1]] : (tensor<6x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32>
// CHECK-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}1], [0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_2]] : tensor<6x10xf32>
// CHECK-NEXT: return %[[SHARDING_ANNOTATED_3]] : tensor<6x10xf32>
// CHECK-NEXT: }
func.func @tosa_binary_from_result(%x: tensor<6x10xf32>, %y: tensor<6x10xf32>) -> tensor<6x10xf32> {
  %r = tosa.sub %x, %y : (tensor<6x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32>
  %s = shard.sharding @g2 split_axes = [[1], [0]] : !shard.sharding
  %a = shard.shard %r to %s : tensor<6x10xf32>
  return %a : tensor<6x10xf32>
}

// Broadcast operand (size one in dim 0) gets the same identity-mapped sharding.
// CHECK-LABEL: func.func @tosa_broadcast
// CHECK-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<6x10xf32>, %[[ARG1:[A-Za-z0-9_]+]]: tensor<1x10xf32>) -> tensor<6x10xf32> {
// CHECK-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] : tensor<6x10xf32>
// CHECK-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED]] to %[[SHARDING_0]] annotate_for_users : tensor<6x10xf32>
// CHECK-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[ARG1]] to %[[SHARDING_2]] annotate_for_users : tensor<1x10xf32>
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.maximum %[[SHARDING_ANNOTATED_1]], %[[SHARDING_ANNOTATED_3]] : (tensor<6x10xf32>, tensor<1x10xf32>) -> tensor<6x10xf32>
// CHECK-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_4]] : tensor<6x10xf32>
// CHECK-NEXT: return %[[SHARDING_ANNOTATED_5]] : tensor<6x10xf32>
// CHECK-NEXT: }
func.func @tosa_broadcast(%x: tensor<6x10xf32>, %y: tensor<1x10xf32>) -> tensor<6x10xf32> {
  %s = shard.sharding @g2 split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<6x10xf32>
  %r = tosa.maximum %a, %y : (tensor<6x10xf32>, tensor<1x10xf32>) -> tensor<6x10xf32>
  return %r : tensor<6x10xf32>
}

// Reduction over a split axis: the result is not split on it.
// CHECK-LABEL: func.func @generic_reduction
// CHECK-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<6x10xf32>) -> tensor<6xf32> {
// CHECK-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] : tensor<6x10xf32>
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = tensor.empty() : tensor<6xf32>
// CHECK-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_0]] : tensor<6xf32>
// CHECK-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED]] to %[[SHARDING_2]] annotate_for_users : tensor<6x10xf32>
// CHECK-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_1]] to %[[SHARDING_4]] annotate_for_users : tensor<6xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_]+]] = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%[[SHARDING_ANNOTATED_3]] : tensor<6x10xf32>) outs(%[[SHARDING_ANNOTATED_5]] : tensor<6xf32>) {
// CHECK-NEXT: ^bb0(%[[IN:[A-Za-z0-9_]+]]: f32, %[[OUT:[A-Za-z0-9_]+]]: f32):
// CHECK-NEXT: %[[V2:[A-Za-z0-9_]+]] = arith.maximumf %[[IN]], %[[OUT]] : f32
// CHECK-NEXT: linalg.yield %[[V2]] : f32
// CHECK-NEXT: } -> tensor<6xf32>
// CHECK-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_6]] : tensor<6xf32>
// CHECK-NEXT: return %[[SHARDING_ANNOTATED_7]] : tensor<6xf32>
// CHECK-NEXT: }
func.func @generic_reduction(%x: tensor<6x10xf32>) -> tensor<6xf32> {
  %s = shard.sharding @g2 split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<6x10xf32>
  %e = tensor.empty() : tensor<6xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<6x10xf32>) outs(%e : tensor<6xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<6xf32>
  return %r : tensor<6xf32>
}

// linalg.matmul on a 3-D grid, the contraction loop split.
// CHECK-LABEL: func.func @matmul_3d_grid
// CHECK-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<4x8xf32>, %[[ARG1:[A-Za-z0-9_]+]]: tensor<8x6xf32>) -> tensor<4x6xf32> {
// CHECK-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g3 split_axes = {{\[\[}}0], [1, 2]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] annotate_for_users : tensor<4x8xf32>
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = tensor.empty() : tensor<4x6xf32>
// CHECK-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g3 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_0]] : tensor<4x6xf32>
// CHECK-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g3 split_axes = {{\[\[}}1, 2]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[ARG1]] to %[[SHARDING_2]] annotate_for_users : tensor<8x6xf32>
// CHECK-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g3 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_1]] to %[[SHARDING_4]] annotate_for_users : tensor<4x6xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_]+]] = linalg.matmul ins(%[[SHARDING_ANNOTATED]], %[[SHARDING_ANNOTATED_3]] : tensor<4x8xf32>, tensor<8x6xf32>) outs(%[[SHARDING_ANNOTATED_5]] : tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g3 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_6]] : tensor<4x6xf32>
// CHECK-NEXT: return %[[SHARDING_ANNOTATED_7]] : tensor<4x6xf32>
// CHECK-NEXT: }
func.func @matmul_3d_grid(%x: tensor<4x8xf32>, %y: tensor<8x6xf32>) -> tensor<4x6xf32> {
  %s = shard.sharding @g3 split_axes = [[0], [1, 2]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x6xf32>
  %r = linalg.matmul ins(%a, %y : tensor<4x8xf32>, tensor<8x6xf32>) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}

// A value with several users: one annotation after the producer serves all.
// CHECK-LABEL: func.func @several_users
// CHECK-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
// CHECK-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] : tensor<8x8xf32>
// CHECK-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED]] to %[[SHARDING_0]] annotate_for_users : tensor<8x8xf32>
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.tanh %[[SHARDING_ANNOTATED_1]] : (tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_2]] : tensor<8x8xf32>
// CHECK-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_3]] to %[[SHARDING_4]] annotate_for_users : tensor<8x8xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_]+]] = tosa.floor %[[SHARDING_ANNOTATED_5]] : (tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_6]] : tensor<8x8xf32>
// CHECK-NEXT: %[[SHARDING_8:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_9:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_3]] to %[[SHARDING_8]] annotate_for_users : tensor<8x8xf32>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_]+]] = tosa.ceil %[[SHARDING_ANNOTATED_9]] : (tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[SHARDING_10:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_11:[A-Za-z0-9_]+]] = shard.shard %[[V2]] to %[[SHARDING_10]] : tensor<8x8xf32>
// CHECK-NEXT: return %[[SHARDING_ANNOTATED_7]], %[[SHARDING_ANNOTATED_11]] : tensor<8x8xf32>, tensor<8x8xf32>
// CHECK-NEXT: }
func.func @several_users(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %s = shard.sharding @g1 split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x8xf32>
  %t = tosa.tanh %a : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %u = tosa.floor %t : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %v = tosa.ceil %t : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %u, %v : tensor<8x8xf32>, tensor<8x8xf32>
}

// linalg.transpose and tensor.splat / arith.constant operands.
// CHECK-LABEL: func.func @transpose_and_creators
// CHECK-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: f32) -> (tensor<4x6xf32>, tensor<6x4xf32>) {
// CHECK-NEXT: %[[CST:[A-Za-z0-9_]+]] = arith.constant dense<2.000000e+00> : tensor<4x6xf32>
// CHECK-NEXT: %[[SPLAT:[A-Za-z0-9_]+]] = tensor.splat %[[ARG0]] : tensor<6x4xf32>
// CHECK-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[CST]] to %[[SHARDING]] : tensor<4x6xf32>
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = tensor.empty() : tensor<6x4xf32>
// CHECK-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_0]] : tensor<6x4xf32>
// CHECK-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED]] to %[[SHARDING_2]] annotate_for_users : tensor<4x6xf32>
// CHECK-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_1]] to %[[SHARDING_4]] annotate_for_users : tensor<6x4xf32>
// CHECK-NEXT: %[[TRANSPOSED:[A-Za-z0-9_]+]] = linalg.transpose ins(%[[SHARDING_ANNOTATED_3]] : tensor<4x6xf32>) outs(%[[SHARDING_ANNOTATED_5]] : tensor<6x4xf32>) permutation = [1, 0]
// CHECK-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[TRANSPOSED]] to %[[SHARDING_6]] : tensor<6x4xf32>
// CHECK-NEXT: %[[SHARDING_8:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_9:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_7]] to %[[SHARDING_8]] annotate_for_users : tensor<6x4xf32>
// CHECK-NEXT: %[[SHARDING_10:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_11:[A-Za-z0-9_]+]] = shard.shard %[[SPLAT]] to %[[SHARDING_10]] annotate_for_users : tensor<6x4xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_]+]] = tosa.add %[[SHARDING_ANNOTATED_9]], %[[SHARDING_ANNOTATED_11]] : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[SHARDING_12:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_13:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_12]] : tensor<6x4xf32>
// CHECK-NEXT: return %[[SHARDING_ANNOTATED]], %[[SHARDING_ANNOTATED_13]] : tensor<4x6xf32>, tensor<6x4xf32>
// CHECK-NEXT: }
func.func @transpose_and_creators(%f: f32) -> (tensor<4x6xf32>, tensor<6x4xf32>) {
  %c = arith.constant dense<2.000000e+00> : tensor<4x6xf32>
  %sp = tensor.splat %f : tensor<6x4xf32>
  %s = shard.sharding @g2 split_axes = [[1]] : !shard.sharding
  %a = shard.shard %c to %s : tensor<4x6xf32>
  %e = tensor.empty() : tensor<6x4xf32>
  %t = linalg.transpose ins(%a : tensor<4x6xf32>) outs(%e : tensor<6x4xf32>) permutation = [1, 0]
  %r = tosa.add %t, %sp : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  return %a, %r : tensor<4x6xf32>, tensor<6x4xf32>
}

// tosa.matmul: batch and rows split; zero points replicated.
// CHECK-LABEL: func.func @tosa_matmul
// CHECK-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<2x4x8xf32>, %[[ARG1:[A-Za-z0-9_]+]]: tensor<2x8x6xf32>) -> tensor<2x4x6xf32> {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = "tosa.const"() <{values = dense<0.000000e+00> : tensor<1xf32>}> : () -> tensor<1xf32>
// CHECK-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] annotate_for_users : tensor<2x4x8xf32>
// CHECK-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[ARG1]] to %[[SHARDING_0]] annotate_for_users : tensor<2x8x6xf32>
// CHECK-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_2]] annotate_for_users : tensor<1xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_]+]] = tosa.matmul %[[SHARDING_ANNOTATED]], %[[SHARDING_ANNOTATED_1]], %[[SHARDING_ANNOTATED_3]], %[[SHARDING_ANNOTATED_3]] : (tensor<2x4x8xf32>, tensor<2x8x6xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x6xf32>
// CHECK-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_4]] : tensor<2x4x6xf32>
// CHECK-NEXT: return %[[SHARDING_ANNOTATED_5]] : tensor<2x4x6xf32>
// CHECK-NEXT: }
func.func @tosa_matmul(%x: tensor<2x4x8xf32>, %y: tensor<2x8x6xf32>) -> tensor<2x4x6xf32> {
  %zp = "tosa.const"() <{values = dense<0.000000e+00> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.matmul %x, %y, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x6xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x6xf32>
  %s = shard.sharding @g2 split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %r to %s : tensor<2x4x6xf32>
  return %a : tensor<2x4x6xf32>
}

// Halo sizes are not propagated: the producer keeps them, the consumer reshards.
// CHECK-LABEL: func.func @halos
// CHECK-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<8x8xf32>) -> tensor<8x8xf32> {
// CHECK-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}0]] halo_sizes = [1, 2] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] : tensor<8x8xf32>
// CHECK-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED]] to %[[SHARDING_0]] annotate_for_users : tensor<8x8xf32>
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.abs %[[SHARDING_ANNOTATED_1]] : (tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_2]] : tensor<8x8xf32>
// CHECK-NEXT: return %[[SHARDING_ANNOTATED_3]] : tensor<8x8xf32>
// CHECK-NEXT: }
func.func @halos(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s = shard.sharding @g1 split_axes = [[0]] halo_sizes = [1, 2] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x8xf32>
  %r = tosa.abs %a : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// Likewise for explicit shard offsets.
// CHECK-LABEL: func.func @sharded_dims_offsets
// CHECK-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<8xf32>) -> tensor<8xf32> {
// CHECK-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}0]] sharded_dims_offsets = [0, 1, 3, 6, 8] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] : tensor<8xf32>
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = "tosa.const"() <{values = dense<0.000000e+00> : tensor<1xf32>}> : () -> tensor<1xf32>
// CHECK-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED]] to %[[SHARDING_0]] annotate_for_users : tensor<8xf32>
// CHECK-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_2]] annotate_for_users : tensor<1xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_]+]] = tosa.negate %[[SHARDING_ANNOTATED_1]], %[[SHARDING_ANNOTATED_3]], %[[SHARDING_ANNOTATED_3]] : (tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g1 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_4]] : tensor<8xf32>
// CHECK-NEXT: return %[[SHARDING_ANNOTATED_5]] : tensor<8xf32>
// CHECK-NEXT: }
func.func @sharded_dims_offsets(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @g1 split_axes = [[0]] sharded_dims_offsets = [0, 1, 3, 6, 8] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8xf32>
  %zp = "tosa.const"() <{values = dense<0.000000e+00> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.negate %a, %zp, %zp : (tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// An annotation for users wins over the producer's: the operand is resharded.
// CHECK-LABEL: func.func @for_users_wins
// CHECK-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<8x8xf32>) -> tensor<8x8xf32> {
// CHECK-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] : tensor<8x8xf32>
// CHECK-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED]] to %[[SHARDING_0]] annotate_for_users : tensor<8x8xf32>
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.sigmoid %[[SHARDING_ANNOTATED_1]] : (tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_2]] : tensor<8x8xf32>
// CHECK-NEXT: return %[[SHARDING_ANNOTATED_3]] : tensor<8x8xf32>
// CHECK-NEXT: }
func.func @for_users_wins(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s0 = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s0 : tensor<8x8xf32>
  %s1 = shard.sharding @g2 split_axes = [[], [1]] : !shard.sharding
  %b = shard.shard %a to %s1 annotate_for_users : tensor<8x8xf32>
  %r = tosa.sigmoid %b : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// linalg.fill from a scalar constant and linalg.broadcast.
// CHECK-LABEL: func.func @fill_and_broadcast
// CHECK-SAME: () -> tensor<4x6xf32> {
// CHECK-NEXT: %[[CST:[A-Za-z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[V0:[A-Za-z0-9_]+]] = tensor.empty() : tensor<6xf32>
// CHECK-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING]] : tensor<6xf32>
// CHECK-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED]] to %[[SHARDING_0]] annotate_for_users : tensor<6xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_]+]] = linalg.fill ins(%[[CST]] : f32) outs(%[[SHARDING_ANNOTATED_1]] : tensor<6xf32>) -> tensor<6xf32>
// CHECK-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_2]] : tensor<6xf32>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_]+]] = tensor.empty() : tensor<4x6xf32>
// CHECK-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[V2]] to %[[SHARDING_4]] : tensor<4x6xf32>
// CHECK-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_3]] to %[[SHARDING_6]] annotate_for_users : tensor<6xf32>
// CHECK-NEXT: %[[SHARDING_8:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_9:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_5]] to %[[SHARDING_8]] annotate_for_users : tensor<4x6xf32>
// CHECK-NEXT: %[[BROADCASTED:[A-Za-z0-9_]+]] = linalg.broadcast ins(%[[SHARDING_ANNOTATED_7]] : tensor<6xf32>) outs(%[[SHARDING_ANNOTATED_9]] : tensor<4x6xf32>) dimensions = [0]
// CHECK-NEXT: %[[SHARDING_10:[A-Za-z0-9_]+]] = shard.sharding @g2 split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-NEXT: %[[SHARDING_ANNOTATED_11:[A-Za-z0-9_]+]] = shard.shard %[[BROADCASTED]] to %[[SHARDING_10]] : tensor<4x6xf32>
// CHECK-NEXT: return %[[SHARDING_ANNOTATED_11]] : tensor<4x6xf32>
// CHECK-NEXT: }
func.func @fill_and_broadcast() -> tensor<4x6xf32> {
  %cst = arith.constant 1.000000e+00 : f32
  %e = tensor.empty() : tensor<6xf32>
  %fill = linalg.fill ins(%cst : f32) outs(%e : tensor<6xf32>) -> tensor<6xf32>
  %e2 = tensor.empty() : tensor<4x6xf32>
  %b = linalg.broadcast ins(%fill : tensor<6xf32>) outs(%e2 : tensor<4x6xf32>) dimensions = [0]
  %s = shard.sharding @g2 split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %b to %s : tensor<4x6xf32>
  return %a : tensor<4x6xf32>
}
