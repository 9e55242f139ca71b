// RUN: shardc-opt %s --sharding-propagation | filecheck %s
// RUN: shardc-opt %s --sharding-propagation --shard-partition | filecheck %s --check-prefix=PART

// The completion after upstream's traversals (see sharding_propagation.py): upstream
// leaves these programs partly annotated or fails on them.

shard.grid @g(shape = 2x2)

// Users that disagree (upstream asserts): one producer annotation (replicated: it moves
// nothing to either user), one annotation per use.
// CHECK-LABEL: func.func @two_users
// CHECK: %[[E:.*]] = tosa.exp
// CHECK-NEXT: %[[S:.*]] = shard.sharding @g split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-NEXT: %[[P:.*]] = shard.shard %[[E]] to %[[S]] : tensor<8x8xf32>
// CHECK-NEXT: shard.sharding @g split_axes = {{\[\[}}0]]
// CHECK-NEXT: shard.shard %[[P]] to %{{.*}} annotate_for_users
// CHECK-NEXT: shard.sharding @g split_axes = {{\[\[}}], [1]]
// CHECK-NEXT: shard.shard %[[P]] to %{{.*}} annotate_for_users
// PART-LABEL: func.func @two_users
// PART: shard.all_slice
// PART: shard.all_slice
func.func @two_users(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tosa.exp %x : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %s0 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %e to %s0 annotate_for_users : tensor<8x8xf32>
  %s1 = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %b = shard.shard %e to %s1 annotate_for_users : tensor<8x8xf32>
  %r0 = tosa.abs %a : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %r1 = tosa.abs %b : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r0, %r1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// An argument without annotation, read by two ops that both want [[0], [1]]: as in trunk
// (after cse), one annotation for users serves both, no producer annotation is added;
// partition and shardc-run read the argument's sharding from it.
// CHECK-LABEL: func.func @unannotated_argument
// CHECK-SAME: (%[[X:.*]]: tensor<8x6xf32>, %[[Y:.*]]: tensor<8x6xf32>)
// CHECK: %[[S:.*]] = shard.sharding @g split_axes = {{\[\[}}0], [1]]
// CHECK-NEXT: shard.shard %[[X]] to %[[S]] annotate_for_users
// CHECK-NEXT: %[[SY:.*]] = shard.sharding @g split_axes = {{\[\[}}0], [1]]
// CHECK-NEXT: %[[YA:.*]] = shard.shard %[[Y]] to %[[SY]] annotate_for_users : tensor<8x6xf32>
// CHECK-NOT: shard.shard %[[Y]]
// CHECK: tosa.exp %[[YA]]
// PART-LABEL: func.func @unannotated_argument
// PART-SAME: tensor<4x3xf32>, %{{.*}}: tensor<4x3xf32>) -> tensor<4x3xf32>
// PART-NOT: shard.all
// PART: return
func.func @unannotated_argument(%x: tensor<8x6xf32>, %y: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %r = tosa.add %x, %y : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %r to %s : tensor<8x6xf32>
  %e = tosa.exp %y : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %m = tosa.add %a, %e : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  return %m : tensor<8x6xf32>
}

// A split of a collapsed group follows its major dimension.
// CHECK-LABEL: func.func @reshape
// CHECK: tensor.collapse_shape
// CHECK-NEXT: shard.sharding @g split_axes = {{\[\[}}0]]
// PART-LABEL: func.func @reshape
// PART: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<2x8x6xf32> into tensor<16x6xf32>
func.func @reshape(%x: tensor<4x8x6xf32>) -> tensor<32x6xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4x8x6xf32>
  %c = tensor.collapse_shape %a [[0, 1], [2]] : tensor<4x8x6xf32> into tensor<32x6xf32>
  return %c : tensor<32x6xf32>
}
