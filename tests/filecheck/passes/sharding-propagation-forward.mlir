// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation{traversal=forward}))" %s | filecheck %s --check-prefix=FWD
// RUN: shardc-opt --sharding-propagation --shard-partition %s | filecheck %s --check-prefix=PART
// RUN: shardc-opt %s --pass-pipeline="builtin.module(shard-to-mpi-pipeline{traversal=forward keep-shardings=false})" | filecheck %s --check-prefix=PIPE

// `traversal=forward` (trunk's forward test passes nothing else) prints trunk's result
// where the forward traversal annotates every value but init tensors: an init tensor
// (tensor.empty, linalg.fill) that trunk annotates for its users alone keeps just that
// annotation, one that trunk leaves bare stays bare. Where the traversal leaves more to
// do, the completion still runs; the default traversal completes as before, and
// shard-partition reads its output. shard-to-mpi-pipeline completes after any traversal,
// forward included, so that its partition reads what it gets.

#id = affine_map<(i, j) -> (i, j)>
shard.grid @row(shape = 2)

// FWD-LABEL: func.func @square_then_row_sums(
// FWD-SAME: %[[X:.*]]: tensor<8x4xf32>
// FWD: %[[XS:.*]] = shard.shard %[[X]] to %{{.*}} : tensor<8x4xf32>
// FWD-NEXT: %[[E:.*]] = tensor.empty() : tensor<8x4xf32>
// FWD-NEXT: %[[S0:.*]] = shard.sharding @row split_axes = {{\[\[}}0]] : !shard.sharding
// FWD-NEXT: %[[XU:.*]] = shard.shard %[[XS]] to %[[S0]] annotate_for_users : tensor<8x4xf32>
// FWD-NEXT: %[[S1:.*]] = shard.sharding @row split_axes = {{\[\[}}0]] : !shard.sharding
// FWD-NEXT: %[[EU:.*]] = shard.shard %[[E]] to %[[S1]] annotate_for_users : tensor<8x4xf32>
// FWD-NEXT: %[[SQ:.*]] = linalg.generic
// FWD-SAME: ins(%[[XU]] : tensor<8x4xf32>) outs(%[[EU]] : tensor<8x4xf32>)
// FWD: %[[S2:.*]] = shard.sharding @row split_axes = {{\[\[}}0]] : !shard.sharding
// FWD-NEXT: %[[SQS:.*]] = shard.shard %[[SQ]] to %[[S2]] : tensor<8x4xf32>
// The row-sum init: bare tensor.empty, fill annotated for the reduction only.
// FWD-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// FWD-NEXT: %[[E1:.*]] = tensor.empty() : tensor<8xf32>
// FWD-NEXT: %[[ACC:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E1]] : tensor<8xf32>) -> tensor<8xf32>
// FWD-NEXT: %[[S3:.*]] = shard.sharding @row split_axes = {{\[\[}}0]] : !shard.sharding
// FWD-NEXT: %[[SQU:.*]] = shard.shard %[[SQS]] to %[[S3]] annotate_for_users : tensor<8x4xf32>
// FWD-NEXT: %[[S4:.*]] = shard.sharding @row split_axes = {{\[\[}}0]] : !shard.sharding
// FWD-NEXT: %[[ACCU:.*]] = shard.shard %[[ACC]] to %[[S4]] annotate_for_users : tensor<8xf32>
// FWD-NEXT: %[[SUMS:.*]] = linalg.reduce ins(%[[SQU]] : tensor<8x4xf32>) outs(%[[ACCU]] : tensor<8xf32>) dimensions = [1]
// FWD: %[[S5:.*]] = shard.sharding @row split_axes = {{\[\[}}0]] : !shard.sharding
// FWD-NEXT: %[[SUMSS:.*]] = shard.shard %[[SUMS]] to %[[S5]] : tensor<8xf32>
// FWD-NEXT: return %[[SQS]], %[[SUMSS]] : tensor<8x4xf32>, tensor<8xf32>

// PART-LABEL: func.func @square_then_row_sums(
// PART-SAME: %{{.*}}: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>)
// PART: linalg.reduce ins(%{{.*}} : tensor<4x4xf32>) outs(%{{.*}} : tensor<4xf32>) dimensions = [1]

// PIPE-LABEL: func.func @square_then_row_sums(
// PIPE-SAME: %{{.*}}: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>)
// PIPE: linalg.reduce ins(%{{.*}} : tensor<4x4xf32>) outs(%{{.*}} : tensor<4xf32>) dimensions = [1]
func.func @square_then_row_sums(%x: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8xf32>) {
  %s = shard.sharding @row split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x4xf32>
  %e = tensor.empty() : tensor<8x4xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%xs : tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %in : f32
    linalg.yield %m : f32
  } -> tensor<8x4xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %sums = linalg.reduce ins(%sq : tensor<8x4xf32>) outs(%acc : tensor<8xf32>) dimensions = [1]
    (%a: f32, %b: f32) {
      %t = arith.addf %a, %b : f32
      linalg.yield %t : f32
    }
  return %sq, %sums : tensor<8x4xf32>, tensor<8xf32>
}

// An unannotated argument, which the forward traversal annotates for its user only: the
// completion runs, and the init tensor gets its producer annotation.
// FWD-LABEL: func.func @scaled_by_unannotated(
// FWD: %[[E:.*]] = tensor.empty() : tensor<8x4xf32>
// FWD-NEXT: %[[S:.*]] = shard.sharding @row split_axes = {{\[\[}}0]] : !shard.sharding
// FWD-NEXT: %[[ES:.*]] = shard.shard %[[E]] to %[[S]] : tensor<8x4xf32>
// FWD: shard.shard %[[ES]] to %{{.*}} annotate_for_users : tensor<8x4xf32>

// PART-LABEL: func.func @scaled_by_unannotated(
// PART-SAME: %{{.*}}: tensor<4x4xf32>, %{{.*}}: tensor<4x4xf32>) -> tensor<4x4xf32>
func.func @scaled_by_unannotated(%x: tensor<8x4xf32>, %w: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @row split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x4xf32>
  %e = tensor.empty() : tensor<8x4xf32>
  %p = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%xs, %w : tensor<8x4xf32>, tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<8x4xf32>
  return %p : tensor<8x4xf32>
}
