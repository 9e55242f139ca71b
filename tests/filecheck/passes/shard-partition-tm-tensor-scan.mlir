// RUN: shardc-opt %s --split-input-file --sharding-propagation --shard-partition | filecheck %s

// tm_tensor.scan partitioned. Along a split dimension: the local scan, the last slice
// of each rank's part gathered (the totals, one slice per rank: the only collective),
// an exclusive scan of the totals, the entry at this rank's position combined into the
// local part. The data itself is never gathered.

shard.grid @grid(shape = 2)

// CHECK-LABEL: func.func @cumsum_split_along_scan
// CHECK-SAME: (%[[X:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NOT: shard.all_gather
// CHECK: %[[LOCAL:.*]]:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%[[X]] : tensor<4x4xf32>)
// CHECK: %[[TOTAL:.*]] = tensor.extract_slice %[[LOCAL]]#0[0, 3] [4, 1] [1, 1] : tensor<4x4xf32> to tensor<4x1xf32>
// CHECK: %[[TOTALS:.*]] = shard.all_gather %[[TOTAL]] on @grid grid_axes = [0] gather_axis = 1 : tensor<4x1xf32> -> tensor<4x2xf32>
// CHECK: %[[BEFORE:.*]]:2 = tm_tensor.scan dimension(1) inclusive(false) ins(%[[TOTALS]] : tensor<4x2xf32>)
// CHECK: %[[RANK:.*]] = shard.process_multi_index on @grid axes = [0] : index
// CHECK: %[[OFFSET:.*]] = tensor.extract_slice %[[BEFORE]]#0[0, %[[RANK]]] [4, 1] [1, 1] : tensor<4x2xf32> to tensor<4xf32>
// CHECK: %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[OFFSET]], %[[LOCAL]]#0 : tensor<4xf32>, tensor<4x4xf32>)
// CHECK: arith.addf
// CHECK-NOT: shard.all_gather
// CHECK: return %[[OUT]] : tensor<4x4xf32>
func.func @cumsum_split_along_scan(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<4x8xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<4x8xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = tensor.empty() : tensor<4xf32>
  %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<4xf32>) -> tensor<4xf32>
  %4:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%1, %3 : tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%arg1: f32, %arg2: f32):
    %5 = arith.addf %arg1, %arg2 : f32
    tm_tensor.yield %5 : f32
  } -> tensor<4x8xf32>, tensor<4xf32>
  return %4#0 : tensor<4x8xf32>
}

// -----

// Rows split: each rank scans its own rows, nothing moves.

shard.grid @grid(shape = 2)

// CHECK-LABEL: func.func @cumsum_split_rows
// CHECK-NOT: shard.all_
// CHECK: tm_tensor.scan dimension(1) inclusive(true) ins(%{{.*}} : tensor<2x8xf32>) outs(%{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<2xf32>)
// CHECK-NOT: shard.all_
// CHECK: return
func.func @cumsum_split_rows(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<4x8xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<4x8xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = tensor.empty() : tensor<4xf32>
  %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<4xf32>) -> tensor<4xf32>
  %4:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%1, %3 : tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%arg1: f32, %arg2: f32):
    %5 = arith.addf %arg1, %arg2 : f32
    tm_tensor.yield %5 : f32
  } -> tensor<4x8xf32>, tensor<4xf32>
  %r = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %y = shard.shard %4#0 to %r : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Exclusive, over a 2x2 grid's both axes, with the accumulator result used: the local
// scans start from the neutral element (a fill of the most negative i64 for maxsi),
// each rank's total is its last output combined with its last input, the totals'
// exclusive scan starts from the initial accumulator, and the accumulator result (the
// last rank's last slice) is gathered the same way: two collectives of one slice each.

shard.grid @grid2(shape = 2x2)

// CHECK-LABEL: func.func @exclusive_max_two_axes
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xi64>, %[[ACC:.*]]: tensor<3xi64>)
// CHECK-NOT: shard.all_gather
// CHECK: %[[MIN:.*]] = arith.constant -9223372036854775808 : i64
// CHECK: %[[NEUTRAL:.*]] = linalg.fill ins(%[[MIN]] : i64) outs(%{{.*}} : tensor<3xi64>) -> tensor<3xi64>
// CHECK: %[[LOCAL:.*]]:2 = tm_tensor.scan dimension(0) inclusive(false) ins(%[[X]] : tensor<2x3xi64>) outs(%{{.*}}, %[[NEUTRAL]] : tensor<2x3xi64>, tensor<3xi64>)
// CHECK: %[[LAST_OUT:.*]] = tensor.extract_slice %[[LOCAL]]#0[1, 0] [1, 3] [1, 1] : tensor<2x3xi64> to tensor<1x3xi64>
// CHECK: %[[LAST_IN:.*]] = tensor.extract_slice %[[X]][1, 0] [1, 3] [1, 1] : tensor<2x3xi64> to tensor<1x3xi64>
// CHECK: %[[TOTAL:.*]] = linalg.generic {{.*}} ins(%[[LAST_OUT]], %[[LAST_IN]] : tensor<1x3xi64>, tensor<1x3xi64>)
// CHECK: %[[TOTALS:.*]] = shard.all_gather %[[TOTAL]] on @grid2 grid_axes = [0, 1] gather_axis = 0 : tensor<1x3xi64> -> tensor<4x3xi64>
// CHECK: tm_tensor.scan dimension(0) inclusive(false) ins(%[[TOTALS]] : tensor<4x3xi64>) outs(%{{.*}}, %[[ACC]] : tensor<4x3xi64>, tensor<3xi64>)
// CHECK: shard.process_multi_index on @grid2 axes = [0, 1] : index, index
// CHECK: shard.grid_shape @grid2 axes = [0, 1] : index, index
// CHECK: arith.muli
// CHECK: arith.addi
// CHECK: %[[OUT:.*]] = linalg.generic
// CHECK: %[[END:.*]] = tensor.extract_slice %[[OUT]][1, 0] [1, 3] [1, 1] : tensor<2x3xi64> to tensor<1x3xi64>
// CHECK: %[[ENDS:.*]] = shard.all_gather %[[END]] on @grid2 grid_axes = [0, 1] gather_axis = 0 : tensor<1x3xi64> -> tensor<4x3xi64>
// CHECK: %[[LAST:.*]] = tensor.extract_slice %[[ENDS]][3, 0] [1, 3] [1, 1] : tensor<4x3xi64> to tensor<3xi64>
// CHECK-NOT: shard.all_gather
// CHECK: return %[[OUT]], %[[LAST]] : tensor<2x3xi64>, tensor<3xi64>
func.func @exclusive_max_two_axes(%arg0: tensor<8x3xi64>, %acc: tensor<3xi64>) -> (tensor<8x3xi64>, tensor<3xi64>) {
  %s = shard.sharding @grid2 split_axes = [[0, 1]] : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<8x3xi64>
  %0 = tensor.empty() : tensor<8x3xi64>
  %4:2 = tm_tensor.scan dimension(0) inclusive(false) ins(%x : tensor<8x3xi64>) outs(%0, %acc : tensor<8x3xi64>, tensor<3xi64>) {
  ^bb0(%arg1: i64, %arg2: i64):
    %5 = arith.maxsi %arg2, %arg1 : i64
    tm_tensor.yield %5 : i64
  } -> tensor<8x3xi64>, tensor<3xi64>
  return %4#0, %4#1 : tensor<8x3xi64>, tensor<3xi64>
}

// -----

// A region with no neutral element (previous - current) cannot split its scan
// dimension: the scan runs whole, its input gathered at the boundary.

shard.grid @grid(shape = 2)

// CHECK-LABEL: func.func @subtraction_runs_whole
// CHECK: shard.all_gather %{{.*}} on @grid grid_axes = [0] gather_axis = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK: tm_tensor.scan dimension(1) inclusive(true) ins(%{{.*}} : tensor<4x8xf32>)
func.func @subtraction_runs_whole(%arg0: tensor<4x8xf32>, %acc: tensor<4xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<4x8xf32>
  %0 = tensor.empty() : tensor<4x8xf32>
  %4:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%0, %acc : tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%arg1: f32, %arg2: f32):
    %5 = arith.subf %arg1, %arg2 : f32
    tm_tensor.yield %5 : f32
  } -> tensor<4x8xf32>, tensor<4xf32>
  return %4#0 : tensor<4x8xf32>
}
