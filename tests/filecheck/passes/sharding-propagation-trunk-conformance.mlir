// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation,cse))" %s --split-input-file | filecheck %s
// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation{traversal=forward complete=false}))" %s --split-input-file | filecheck %s --check-prefix=FWD

// Trunk's results on the cases its propagation tests cover, on IR of our own.

// Weight-stationary layers on a 1-D grid of unknown size, split along the last dim.
// The first matmul contracts the split dim: its result is replicated (trunk's choice,
// resharded later), the second weight is read split along its last dim. The zero point,
// read four times and never annotated, gets one annotation for users (after cse) and no
// producer annotation. Results of shard.shard are named `%sharded`, as trunk prints.
shard.grid @line(shape = ?)
// CHECK-LABEL: func.func @two_layer_weight_stationary(
// CHECK-SAME: %[[X:arg0]]: tensor<3x6x10xf32>, %[[W1:arg1]]: tensor<3x10x12xf32>, %[[W2:arg2]]: tensor<3x12x10xf32>, %[[ZP:arg3]]: tensor<1xf32>
// CHECK-NEXT: %[[LAST:sharding]] = shard.sharding @line split_axes = {{\[\[}}], [], [0]] : !shard.sharding
// CHECK-NEXT: %[[XS:sharded]] = shard.shard %[[X]] to %[[LAST]] : tensor<3x6x10xf32>
// CHECK-NEXT: %[[W1S:sharded_0]] = shard.shard %[[W1]] to %[[LAST]] : tensor<3x10x12xf32>
// CHECK-NEXT: %[[XU:.*]] = shard.shard %[[XS]] to %[[LAST]] annotate_for_users : tensor<3x6x10xf32>
// CHECK-NEXT: %[[MID:.*]] = shard.sharding @line split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[W1U:.*]] = shard.shard %[[W1S]] to %[[MID]] annotate_for_users : tensor<3x10x12xf32>
// CHECK-NEXT: %[[REP:.*]] = shard.sharding @line split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-NEXT: %[[ZPU:.*]] = shard.shard %[[ZP]] to %[[REP]] annotate_for_users : tensor<1xf32>
// CHECK-NEXT: %[[H:.*]] = tosa.matmul %[[XU]], %[[W1U]], %[[ZPU]], %[[ZPU]]
// CHECK-NEXT: %[[HS:.*]] = shard.shard %[[H]] to %[[REP]] : tensor<3x6x12xf32>
// CHECK-NEXT: %[[HU:.*]] = shard.shard %[[HS]] to %[[REP]] annotate_for_users : tensor<3x6x12xf32>
// CHECK-NEXT: %[[A:.*]] = tosa.tanh %[[HU]]
// CHECK-NEXT: %[[AS:.*]] = shard.shard %[[A]] to %[[REP]] : tensor<3x6x12xf32>
// CHECK-NEXT: %[[W2S:.*]] = shard.shard %[[W2]] to %[[MID]] : tensor<3x12x10xf32>
// CHECK-NEXT: %[[AU:.*]] = shard.shard %[[AS]] to %[[REP]] annotate_for_users : tensor<3x6x12xf32>
// CHECK-NEXT: %[[W2U:.*]] = shard.shard %[[W2S]] to %[[LAST]] annotate_for_users : tensor<3x12x10xf32>
// CHECK-NEXT: %[[Y:.*]] = tosa.matmul %[[AU]], %[[W2U]], %[[ZPU]], %[[ZPU]]
// CHECK-NEXT: %[[YS:.*]] = shard.shard %[[Y]] to %[[LAST]] : tensor<3x6x10xf32>
// CHECK-NEXT: return %[[YS]]
// CHECK-NOT: shard.shard %[[ZP]]
func.func @two_layer_weight_stationary(%x: tensor<3x6x10xf32>, %w1: tensor<3x10x12xf32>, %w2: tensor<3x12x10xf32>, %zp: tensor<1xf32>) -> tensor<3x6x10xf32> {
  %last = shard.sharding @line split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %last : tensor<3x6x10xf32>
  %w1s = shard.shard %w1 to %last : tensor<3x10x12xf32>
  %h = tosa.matmul %xs, %w1s, %zp, %zp : (tensor<3x6x10xf32>, tensor<3x10x12xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3x6x12xf32>
  %a = tosa.tanh %h : (tensor<3x6x12xf32>) -> tensor<3x6x12xf32>
  %mid = shard.sharding @line split_axes = [[], [0]] : !shard.sharding
  %w2s = shard.shard %w2 to %mid : tensor<3x12x10xf32>
  %y = tosa.matmul %a, %w2s, %zp, %zp : (tensor<3x6x12xf32>, tensor<3x12x10xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3x6x10xf32>
  %ys = shard.shard %y to %last : tensor<3x6x10xf32>
  return %ys : tensor<3x6x10xf32>
}

// -----

// Forward only, upstream's algorithm alone: a sum of a split tensor down to a 0-d one.
// The 0-d init and result are annotated `split_axes = []` (no dimension to name), as
// trunk prints them; the user's `[[]]` for the result's user stays as written.
shard.grid @pair(shape = 2)
// FWD-LABEL: func.func @sum_to_scalar(
// FWD: %[[E:.*]] = tensor.empty() : tensor<f32>
// FWD: %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<f32>) -> tensor<f32>
// FWD: %[[S0:.*]] = shard.sharding @pair split_axes = [] : !shard.sharding
// FWD-NEXT: %[[INITU:.*]] = shard.shard %[[INIT]] to %[[S0]] annotate_for_users : tensor<f32>
// FWD-NEXT: %[[R:.*]] = linalg.reduce ins(%{{.*}} : tensor<4x6xf32>) outs(%[[INITU]] : tensor<f32>)
// FWD: %[[S1:.*]] = shard.sharding @pair split_axes = [] : !shard.sharding
// FWD-NEXT: %[[RS:.*]] = shard.shard %[[R]] to %[[S1]] : tensor<f32>
// FWD-NEXT: %[[S2:.*]] = shard.sharding @pair split_axes = {{\[\[}}]] : !shard.sharding
// FWD-NEXT: %[[RU:.*]] = shard.shard %[[RS]] to %[[S2]] annotate_for_users : tensor<f32>
// FWD-NEXT: return %[[RU]]
func.func @sum_to_scalar(%x: tensor<4x6xf32>) -> tensor<f32> {
  %s = shard.sharding @pair split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x6xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.reduce ins(%xs : tensor<4x6xf32>) outs(%init : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %t = arith.addf %in, %acc : f32
      linalg.yield %t : f32
    }
  %rep = shard.sharding @pair split_axes = [[]] : !shard.sharding
  %ru = shard.shard %r to %rep annotate_for_users : tensor<f32>
  return %ru : tensor<f32>
}
