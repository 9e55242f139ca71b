// RUN: shardc-opt %s --test-grid-resharding-partition | filecheck %s
// Pairs no single upstream pattern reaches: the planner's cheapest sequences.

shard.grid @plane(shape = 2x3)
shard.grid @cube(shape = 2x2x2)
shard.grid @line(shape = 4)

// Swap the grid axes of two dims: three all_to_alls move less than gathering.
// CHECK-LABEL: func.func @swap_dims
// CHECK: %[[L:.*]] = builtin.unrealized_conversion_cast %{{.*}} : tensor<12x18xf32> to tensor<6x6xf32>
// CHECK-NEXT: %[[A:.*]] = shard.all_to_all %[[L]] on @plane grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<6x6xf32> -> tensor<12x3xf32>
// CHECK-NEXT: %[[B:.*]] = shard.all_to_all %[[A]] on @plane grid_axes = [1, 0] split_axis = 0 concat_axis = 1 : tensor<12x3xf32> -> tensor<2x18xf32>
// CHECK-NEXT: %[[C:.*]] = shard.all_to_all %[[B]] on @plane grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<2x18xf32> -> tensor<4x9xf32>
// CHECK-NEXT: builtin.unrealized_conversion_cast %[[C]] : tensor<4x9xf32> to tensor<12x18xf32>
func.func @swap_dims(%x: tensor<12x18xf32>) -> tensor<12x18xf32> {
  %a = shard.sharding @plane split_axes = [[0], [1]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<12x18xf32>
  %b = shard.sharding @plane split_axes = [[1], [0]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<12x18xf32>
  return %1 : tensor<12x18xf32>
}

// Reorder the axes of one dim ([[0], [1, 2]] -> [[0], [2, 1]]): the axes travel
// through dim 0 and come back together, in the new order.
// CHECK-LABEL: func.func @reorder_axes
// CHECK: shard.all_to_all %{{.*}} on @cube grid_axes = [2] split_axis = 0 concat_axis = 1 : tensor<4x2xf32> -> tensor<2x4xf32>
// CHECK-NEXT: shard.all_to_all %{{.*}} on @cube grid_axes = [1] split_axis = 0 concat_axis = 1 : tensor<2x4xf32> -> tensor<1x8xf32>
// CHECK-NEXT: shard.all_to_all %{{.*}} on @cube grid_axes = [2, 1] split_axis = 1 concat_axis = 0 : tensor<1x8xf32> -> tensor<4x2xf32>
// CHECK-NOT: shard.all_
func.func @reorder_axes(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %a = shard.sharding @cube split_axes = [[0], [1, 2]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<8x8xf32>
  %b = shard.sharding @cube split_axes = [[0], [2, 1]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}

// Too small a tensor for that route: one all_gather is needed.
// CHECK-LABEL: func.func @reorder_axes_small
// CHECK: shard.all_gather %{{.*}} on @cube grid_axes = [2] gather_axis = 1 : tensor<2x2xf32> -> tensor<2x4xf32>
func.func @reorder_axes_small(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = shard.sharding @cube split_axes = [[0], [1, 2]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<4x8xf32>
  %b = shard.sharding @cube split_axes = [[0], [2, 1]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// Replicated to a dim split on two axes: one all_slice over both.
// CHECK-LABEL: func.func @slice_two_axes
// CHECK: shard.all_slice %{{.*}} on @plane grid_axes = [1, 0] slice_axis = 1 : tensor<4x12xf32> -> tensor<4x2xf32>
// CHECK-NOT: shard.all_
func.func @slice_two_axes(%x: tensor<4x12xf32>) -> tensor<4x12xf32> {
  %a = shard.sharding @plane split_axes = [[]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<4x12xf32>
  %b = shard.sharding @plane split_axes = [[], [1, 0]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<4x12xf32>
  return %1 : tensor<4x12xf32>
}

// Gather two axes at once.
// CHECK-LABEL: func.func @gather_two_axes
// CHECK: %[[G:.*]] = shard.all_gather %{{.*}} on @plane grid_axes = [0, 1] gather_axis = 0 : tensor<2x4xf32> -> tensor<12x4xf32>
// CHECK-NEXT: return %[[G]]
func.func @gather_two_axes(%x: tensor<12x4xf32>) -> tensor<12x4xf32> {
  %a = shard.sharding @plane split_axes = [[0, 1]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<12x4xf32>
  %b = shard.sharding @plane split_axes = [[]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<12x4xf32>
  return %1 : tensor<12x4xf32>
}

// Halos and a moved split axis: drop the halo, move, add the new halo.
// CHECK-LABEL: func.func @halo_and_move
// CHECK: %[[L:.*]] = builtin.unrealized_conversion_cast %{{.*}} : tensor<8x12xf32> to tensor<4x12xf32>
// CHECK-NEXT: %[[C:.*]] = tensor.extract_slice %[[L]][1, 0] [2, 12] [1, 1] : tensor<4x12xf32> to tensor<2x12xf32>
// CHECK-NEXT: %[[A:.*]] = shard.all_to_all %[[C]] on @line grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<2x12xf32> -> tensor<8x3xf32>
// CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<8x5xf32>
// CHECK-NEXT: %[[I:.*]] = tensor.insert_slice %[[A]] into %[[E]][0, 2] [8, 3] [1, 1]
// CHECK-NEXT: shard.update_halo %[[I]] on @line split_axes = [[], [0]] halo_sizes = [2, 0] : tensor<8x5xf32>
func.func @halo_and_move(%x: tensor<8x12xf32>) -> tensor<8x12xf32> {
  %a = shard.sharding @line split_axes = [[0]] halo_sizes = [1, 1] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<8x12xf32>
  %b = shard.sharding @line split_axes = [[], [0]] halo_sizes = [2, 0] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<8x12xf32>
  return %1 : tensor<8x12xf32>
}

// Halos dropped: only the core is kept.
// CHECK-LABEL: func.func @drop_halos
// CHECK: %[[L:.*]] = builtin.unrealized_conversion_cast %{{.*}} : tensor<8x12xf32> to tensor<5x12xf32>
// CHECK-NEXT: %[[C:.*]] = tensor.extract_slice %[[L]][2, 0] [2, 12] [1, 1] : tensor<5x12xf32> to tensor<2x12xf32>
// CHECK-NEXT: builtin.unrealized_conversion_cast %[[C]] : tensor<2x12xf32> to tensor<8x12xf32>
func.func @drop_halos(%x: tensor<8x12xf32>) -> tensor<8x12xf32> {
  %a = shard.sharding @line split_axes = [[0]] halo_sizes = [2, 1] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<8x12xf32>
  %b = shard.sharding @line split_axes = [[0]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<8x12xf32>
  return %1 : tensor<8x12xf32>
}

// Uneven shards along dim 0 stay where they are while dim 1 is split.
// CHECK-LABEL: func.func @uneven_kept
// CHECK: %[[L:.*]] = builtin.unrealized_conversion_cast %{{.*}} : tensor<10x9xf32> to tensor<?x9xf32>
// CHECK-NEXT: %[[S:.*]] = shard.all_slice %[[L]] on @plane grid_axes = [1] slice_axis = 1 : tensor<?x9xf32> -> tensor<?x3xf32>
// CHECK-NOT: shard.all_
func.func @uneven_kept(%x: tensor<10x9xf32>) -> tensor<10x9xf32> {
  %a = shard.sharding @plane split_axes = [[0]] sharded_dims_offsets = [0, 3, 10] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<10x9xf32>
  %b = shard.sharding @plane split_axes = [[0], [1]] sharded_dims_offsets = [0, 3, 10, 0, 3, 6, 9] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<10x9xf32>
  return %1 : tensor<10x9xf32>
}

// Offsets that split evenly are ordinary shards.
// CHECK-LABEL: func.func @even_offsets
// CHECK: shard.all_to_all %{{.*}} on @line grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
func.func @even_offsets(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %a = shard.sharding @line split_axes = [[0]] sharded_dims_offsets = [0, 2, 4, 6, 8] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<8x8xf32>
  %b = shard.sharding @line split_axes = [[], [0]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}

// A chain: the second resharding starts from the first one's cast, which folds.
// CHECK-LABEL: func.func @chain
// CHECK: %[[S:.*]] = shard.all_slice %{{.*}} on @line grid_axes = [0] slice_axis = 0 : tensor<8x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = shard.all_to_all %[[S]] on @line grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<2x4xf32> -> tensor<8x1xf32>
// CHECK-NEXT: %[[R:.*]] = builtin.unrealized_conversion_cast %[[A]] : tensor<8x1xf32> to tensor<8x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @chain(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %r = shard.sharding @line split_axes = [[]] : !shard.sharding
  %s = shard.sharding @line split_axes = [[0]] : !shard.sharding
  %t = shard.sharding @line split_axes = [[], [0]] : !shard.sharding
  %0 = shard.shard %x to %r : tensor<8x4xf32>
  %1 = shard.shard %0 to %s annotate_for_users : tensor<8x4xf32>
  %2 = shard.shard %1 to %s : tensor<8x4xf32>
  %3 = shard.shard %2 to %t annotate_for_users : tensor<8x4xf32>
  return %3 : tensor<8x4xf32>
}
