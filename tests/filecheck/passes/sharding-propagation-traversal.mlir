// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation{traversal=forward complete=false}))" %s | filecheck %s --check-prefix=FWD
// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation{traversal=backward complete=false}))" %s | filecheck %s --check-prefix=BWD
// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation{traversal=forward-backward complete=false}))" %s | filecheck %s --check-prefix=FB
// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation{traversal=backward-forward complete=false}))" %s | filecheck %s --check-prefix=BF

shard.grid @g(shape = 2x2)

// The first op is annotated on its operand, the last on its result: what reaches the
// middle depends on the order(s) of the walk.
// FWD-LABEL: func.func @both_ends
// FWD-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<4x8xf32>) -> tensor<4x8xf32> {
// FWD-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// FWD-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] annotate_for_users : tensor<4x8xf32>
// FWD-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.abs %[[SHARDING_ANNOTATED]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// FWD-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// FWD-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_0]] : tensor<4x8xf32>
// FWD-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// FWD-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_1]] to %[[SHARDING_2]] annotate_for_users : tensor<4x8xf32>
// FWD-NEXT: %[[V1:[A-Za-z0-9_]+]] = tosa.exp %[[SHARDING_ANNOTATED_3]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// FWD-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// FWD-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_4]] : tensor<4x8xf32>
// FWD-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// FWD-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_5]] to %[[SHARDING_6]] annotate_for_users : tensor<4x8xf32>
// FWD-NEXT: %[[V2:[A-Za-z0-9_]+]] = tosa.floor %[[SHARDING_ANNOTATED_7]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// FWD-NEXT: %[[SHARDING_8:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// FWD-NEXT: %[[SHARDING_ANNOTATED_9:[A-Za-z0-9_]+]] = shard.shard %[[V2]] to %[[SHARDING_8]] : tensor<4x8xf32>
// FWD-NEXT: return %[[SHARDING_ANNOTATED_9]] : tensor<4x8xf32>
// FWD-NEXT: }
// BWD-LABEL: func.func @both_ends
// BWD-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<4x8xf32>) -> tensor<4x8xf32> {
// BWD-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] annotate_for_users : tensor<4x8xf32>
// BWD-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.abs %[[SHARDING_ANNOTATED]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// BWD-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_0]] : tensor<4x8xf32>
// BWD-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_1]] to %[[SHARDING_2]] annotate_for_users : tensor<4x8xf32>
// BWD-NEXT: %[[V1:[A-Za-z0-9_]+]] = tosa.exp %[[SHARDING_ANNOTATED_3]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// BWD-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_4]] : tensor<4x8xf32>
// BWD-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_5]] to %[[SHARDING_6]] annotate_for_users : tensor<4x8xf32>
// BWD-NEXT: %[[V2:[A-Za-z0-9_]+]] = tosa.floor %[[SHARDING_ANNOTATED_7]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// BWD-NEXT: %[[SHARDING_8:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED_9:[A-Za-z0-9_]+]] = shard.shard %[[V2]] to %[[SHARDING_8]] : tensor<4x8xf32>
// BWD-NEXT: return %[[SHARDING_ANNOTATED_9]] : tensor<4x8xf32>
// BWD-NEXT: }
// FB-LABEL: func.func @both_ends
// FB-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<4x8xf32>) -> tensor<4x8xf32> {
// FB-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] annotate_for_users : tensor<4x8xf32>
// FB-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.abs %[[SHARDING_ANNOTATED]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// FB-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_0]] : tensor<4x8xf32>
// FB-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_1]] to %[[SHARDING_2]] annotate_for_users : tensor<4x8xf32>
// FB-NEXT: %[[V1:[A-Za-z0-9_]+]] = tosa.exp %[[SHARDING_ANNOTATED_3]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// FB-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_4]] : tensor<4x8xf32>
// FB-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_5]] to %[[SHARDING_6]] annotate_for_users : tensor<4x8xf32>
// FB-NEXT: %[[V2:[A-Za-z0-9_]+]] = tosa.floor %[[SHARDING_ANNOTATED_7]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// FB-NEXT: %[[SHARDING_8:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED_9:[A-Za-z0-9_]+]] = shard.shard %[[V2]] to %[[SHARDING_8]] : tensor<4x8xf32>
// FB-NEXT: return %[[SHARDING_ANNOTATED_9]] : tensor<4x8xf32>
// FB-NEXT: }
// BF-LABEL: func.func @both_ends
// BF-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<4x8xf32>) -> tensor<4x8xf32> {
// BF-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] annotate_for_users : tensor<4x8xf32>
// BF-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.abs %[[SHARDING_ANNOTATED]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// BF-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_0]] : tensor<4x8xf32>
// BF-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_1]] to %[[SHARDING_2]] annotate_for_users : tensor<4x8xf32>
// BF-NEXT: %[[V1:[A-Za-z0-9_]+]] = tosa.exp %[[SHARDING_ANNOTATED_3]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// BF-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_4]] : tensor<4x8xf32>
// BF-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_5]] to %[[SHARDING_6]] annotate_for_users : tensor<4x8xf32>
// BF-NEXT: %[[V2:[A-Za-z0-9_]+]] = tosa.floor %[[SHARDING_ANNOTATED_7]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// BF-NEXT: %[[SHARDING_8:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}], [1]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED_9:[A-Za-z0-9_]+]] = shard.shard %[[V2]] to %[[SHARDING_8]] : tensor<4x8xf32>
// BF-NEXT: return %[[SHARDING_ANNOTATED_9]] : tensor<4x8xf32>
// BF-NEXT: }
func.func @both_ends(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s0 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s0 annotate_for_users : tensor<4x8xf32>
  %0 = tosa.abs %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = tosa.exp %0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = tosa.floor %1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s1 = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %b = shard.shard %2 to %s1 : tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// A reduction fed by a chain: backward reaches the chain only through the init.
// FWD-LABEL: func.func @into_reduction
// FWD-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<4x8xf32>) -> tensor<4xf32> {
// FWD-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.tanh %[[ARG0]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// FWD-NEXT: %[[V1:[A-Za-z0-9_]+]] = tensor.empty() : tensor<4xf32>
// FWD-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// FWD-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING]] annotate_for_users : tensor<4x8xf32>
// FWD-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// FWD-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_0]] annotate_for_users : tensor<4xf32>
// FWD-NEXT: %[[V2:[A-Za-z0-9_]+]] = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%[[SHARDING_ANNOTATED]] : tensor<4x8xf32>) outs(%[[SHARDING_ANNOTATED_1]] : tensor<4xf32>) {
// FWD-NEXT: ^bb0(%[[IN:[A-Za-z0-9_]+]]: f32, %[[OUT:[A-Za-z0-9_]+]]: f32):
// FWD-NEXT: %[[V3:[A-Za-z0-9_]+]] = arith.addf %[[IN]], %[[OUT]] : f32
// FWD-NEXT: linalg.yield %[[V3]] : f32
// FWD-NEXT: } -> tensor<4xf32>
// FWD-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// FWD-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[V2]] to %[[SHARDING_2]] : tensor<4xf32>
// FWD-NEXT: return %[[SHARDING_ANNOTATED_3]] : tensor<4xf32>
// FWD-NEXT: }
// BWD-LABEL: func.func @into_reduction
// BWD-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<4x8xf32>) -> tensor<4xf32> {
// BWD-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] annotate_for_users : tensor<4x8xf32>
// BWD-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.tanh %[[SHARDING_ANNOTATED]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// BWD-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_0]] : tensor<4x8xf32>
// BWD-NEXT: %[[V1:[A-Za-z0-9_]+]] = tensor.empty() : tensor<4xf32>
// BWD-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_2]] : tensor<4xf32>
// BWD-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_1]] to %[[SHARDING_4]] annotate_for_users : tensor<4x8xf32>
// BWD-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_3]] to %[[SHARDING_6]] annotate_for_users : tensor<4xf32>
// BWD-NEXT: %[[V2:[A-Za-z0-9_]+]] = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%[[SHARDING_ANNOTATED_5]] : tensor<4x8xf32>) outs(%[[SHARDING_ANNOTATED_7]] : tensor<4xf32>) {
// BWD-NEXT: ^bb0(%[[IN:[A-Za-z0-9_]+]]: f32, %[[OUT:[A-Za-z0-9_]+]]: f32):
// BWD-NEXT: %[[V3:[A-Za-z0-9_]+]] = arith.addf %[[IN]], %[[OUT]] : f32
// BWD-NEXT: linalg.yield %[[V3]] : f32
// BWD-NEXT: } -> tensor<4xf32>
// BWD-NEXT: %[[SHARDING_8:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BWD-NEXT: %[[SHARDING_ANNOTATED_9:[A-Za-z0-9_]+]] = shard.shard %[[V2]] to %[[SHARDING_8]] : tensor<4xf32>
// BWD-NEXT: return %[[SHARDING_ANNOTATED_9]] : tensor<4xf32>
// BWD-NEXT: }
// FB-LABEL: func.func @into_reduction
// FB-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<4x8xf32>) -> tensor<4xf32> {
// FB-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] annotate_for_users : tensor<4x8xf32>
// FB-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.tanh %[[SHARDING_ANNOTATED]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// FB-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_0]] : tensor<4x8xf32>
// FB-NEXT: %[[V1:[A-Za-z0-9_]+]] = tensor.empty() : tensor<4xf32>
// FB-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_2]] : tensor<4xf32>
// FB-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_1]] to %[[SHARDING_4]] annotate_for_users : tensor<4x8xf32>
// FB-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_3]] to %[[SHARDING_6]] annotate_for_users : tensor<4xf32>
// FB-NEXT: %[[V2:[A-Za-z0-9_]+]] = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%[[SHARDING_ANNOTATED_5]] : tensor<4x8xf32>) outs(%[[SHARDING_ANNOTATED_7]] : tensor<4xf32>) {
// FB-NEXT: ^bb0(%[[IN:[A-Za-z0-9_]+]]: f32, %[[OUT:[A-Za-z0-9_]+]]: f32):
// FB-NEXT: %[[V3:[A-Za-z0-9_]+]] = arith.addf %[[IN]], %[[OUT]] : f32
// FB-NEXT: linalg.yield %[[V3]] : f32
// FB-NEXT: } -> tensor<4xf32>
// FB-NEXT: %[[SHARDING_8:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// FB-NEXT: %[[SHARDING_ANNOTATED_9:[A-Za-z0-9_]+]] = shard.shard %[[V2]] to %[[SHARDING_8]] : tensor<4xf32>
// FB-NEXT: return %[[SHARDING_ANNOTATED_9]] : tensor<4xf32>
// FB-NEXT: }
// BF-LABEL: func.func @into_reduction
// BF-SAME: (%[[ARG0:[A-Za-z0-9_]+]]: tensor<4x8xf32>) -> tensor<4xf32> {
// BF-NEXT: %[[SHARDING:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED:[A-Za-z0-9_]+]] = shard.shard %[[ARG0]] to %[[SHARDING]] annotate_for_users : tensor<4x8xf32>
// BF-NEXT: %[[V0:[A-Za-z0-9_]+]] = tosa.tanh %[[SHARDING_ANNOTATED]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// BF-NEXT: %[[SHARDING_0:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED_1:[A-Za-z0-9_]+]] = shard.shard %[[V0]] to %[[SHARDING_0]] : tensor<4x8xf32>
// BF-NEXT: %[[V1:[A-Za-z0-9_]+]] = tensor.empty() : tensor<4xf32>
// BF-NEXT: %[[SHARDING_2:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED_3:[A-Za-z0-9_]+]] = shard.shard %[[V1]] to %[[SHARDING_2]] : tensor<4xf32>
// BF-NEXT: %[[SHARDING_4:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED_5:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_1]] to %[[SHARDING_4]] annotate_for_users : tensor<4x8xf32>
// BF-NEXT: %[[SHARDING_6:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED_7:[A-Za-z0-9_]+]] = shard.shard %[[SHARDING_ANNOTATED_3]] to %[[SHARDING_6]] annotate_for_users : tensor<4xf32>
// BF-NEXT: %[[V2:[A-Za-z0-9_]+]] = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%[[SHARDING_ANNOTATED_5]] : tensor<4x8xf32>) outs(%[[SHARDING_ANNOTATED_7]] : tensor<4xf32>) {
// BF-NEXT: ^bb0(%[[IN:[A-Za-z0-9_]+]]: f32, %[[OUT:[A-Za-z0-9_]+]]: f32):
// BF-NEXT: %[[V3:[A-Za-z0-9_]+]] = arith.addf %[[IN]], %[[OUT]] : f32
// BF-NEXT: linalg.yield %[[V3]] : f32
// BF-NEXT: } -> tensor<4xf32>
// BF-NEXT: %[[SHARDING_8:[A-Za-z0-9_]+]] = shard.sharding @g split_axes = {{\[\[}}1]] : !shard.sharding
// BF-NEXT: %[[SHARDING_ANNOTATED_9:[A-Za-z0-9_]+]] = shard.shard %[[V2]] to %[[SHARDING_8]] : tensor<4xf32>
// BF-NEXT: return %[[SHARDING_ANNOTATED_9]] : tensor<4xf32>
// BF-NEXT: }
func.func @into_reduction(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = tosa.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%0 : tensor<4x8xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.addf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %s = shard.sharding @g split_axes = [[1]] : !shard.sharding
  %b = shard.shard %r to %s : tensor<4xf32>
  return %b : tensor<4xf32>
}
