// RUN: shardc-opt %s --test-grid-resharding-partition | filecheck %s
// Single-pattern reshardings: each is one collective, as mlir-opt emits it.

shard.grid @line(shape = 4)
shard.grid @plane(shape = 2x3)
shard.grid @unknown(shape = ?)

// CHECK-LABEL: func.func @unchanged
// CHECK-SAME: (%[[X:.*]]: tensor<6x8xf16>)
// CHECK-NEXT: return %[[X]] : tensor<6x8xf16>
func.func @unchanged(%x: tensor<6x8xf16>) -> tensor<6x8xf16> {
  %a = shard.sharding @line split_axes = [[], [0]] : !shard.sharding
  %b = shard.sharding @line split_axes = [[], [0]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<6x8xf16>
  %1 = shard.shard %0 to %b annotate_for_users : tensor<6x8xf16>
  return %1 : tensor<6x8xf16>
}

// CHECK-LABEL: func.func @replicated_both_ways
// CHECK-SAME: (%[[X:.*]]: tensor<5xi32>)
// CHECK-NEXT: return %[[X]]
func.func @replicated_both_ways(%x: tensor<5xi32>) -> tensor<5xi32> {
  %a = shard.sharding @line split_axes = [[]] : !shard.sharding
  %b = shard.sharding @line split_axes = [[], []] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<5xi32>
  %1 = shard.shard %0 to %b annotate_for_users : tensor<5xi32>
  return %1 : tensor<5xi32>
}

// Split: all_slice, no cast after it; the identity source cast is folded away.
// CHECK-LABEL: func.func @slice_columns
// CHECK-SAME: (%[[X:.*]]: tensor<6x8xf32>)
// CHECK-NEXT: %[[S:.*]] = shard.all_slice %[[X]] on @line grid_axes = [0] slice_axis = 1 : tensor<6x8xf32> -> tensor<6x2xf32>
// CHECK-NEXT: %[[R:.*]] = builtin.unrealized_conversion_cast %[[S]] : tensor<6x2xf32> to tensor<6x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @slice_columns(%x: tensor<6x8xf32>) -> tensor<6x8xf32> {
  %a = shard.sharding @line split_axes = [[]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<6x8xf32>
  %b = shard.sharding @line split_axes = [[], [0]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<6x8xf32>
  return %1 : tensor<6x8xf32>
}

// Split a split dimension further along a second grid axis.
// CHECK-LABEL: func.func @slice_minor_axis
// CHECK: %[[L:.*]] = builtin.unrealized_conversion_cast %{{.*}} : tensor<12x5xf32> to tensor<6x5xf32>
// CHECK-NEXT: %[[S:.*]] = shard.all_slice %[[L]] on @plane grid_axes = [1] slice_axis = 0 : tensor<6x5xf32> -> tensor<2x5xf32>
// CHECK-NEXT: builtin.unrealized_conversion_cast %[[S]] : tensor<2x5xf32> to tensor<12x5xf32>
func.func @slice_minor_axis(%x: tensor<12x5xf32>) -> tensor<12x5xf32> {
  %a = shard.sharding @plane split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<12x5xf32>
  %b = shard.sharding @plane split_axes = [[0, 1]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<12x5xf32>
  return %1 : tensor<12x5xf32>
}

// Unsplit: all_gather; the identity tensor.cast and result cast fold away.
// CHECK-LABEL: func.func @gather_rows
// CHECK: %[[L:.*]] = builtin.unrealized_conversion_cast %{{.*}} : tensor<12x5xf32> to tensor<2x5xf32>
// CHECK-NEXT: %[[G:.*]] = shard.all_gather %[[L]] on @plane grid_axes = [1] gather_axis = 0 : tensor<2x5xf32> -> tensor<6x5xf32>
// CHECK-NEXT: %[[R:.*]] = builtin.unrealized_conversion_cast %[[G]] : tensor<6x5xf32> to tensor<12x5xf32>
// CHECK-NEXT: return %[[R]]
func.func @gather_rows(%x: tensor<12x5xf32>) -> tensor<12x5xf32> {
  %a = shard.sharding @plane split_axes = [[0, 1]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<12x5xf32>
  %b = shard.sharding @plane split_axes = [[0]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<12x5xf32>
  return %1 : tensor<12x5xf32>
}

// CHECK-LABEL: func.func @gather_to_replicated
// CHECK: %[[G:.*]] = shard.all_gather %{{.*}} on @line grid_axes = [0] gather_axis = 1 : tensor<3x2xf32> -> tensor<3x8xf32>
// CHECK-NEXT: return %[[G]] : tensor<3x8xf32>
func.func @gather_to_replicated(%x: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %a = shard.sharding @line split_axes = [[], [0]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<3x8xf32>
  %b = shard.sharding @line split_axes = [[]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<3x8xf32>
  return %1 : tensor<3x8xf32>
}

// Move the last split axis: all_to_all, split_axis is the dim that gains it.
// CHECK-LABEL: func.func @move_axis
// CHECK: %[[L:.*]] = builtin.unrealized_conversion_cast %{{.*}} : tensor<12x6xf32> to tensor<4x6xf32>
// CHECK-NEXT: %[[A:.*]] = shard.all_to_all %[[L]] on @plane grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<4x6xf32> -> tensor<12x2xf32>
// CHECK-NEXT: builtin.unrealized_conversion_cast %[[A]] : tensor<12x2xf32> to tensor<12x6xf32>
func.func @move_axis(%x: tensor<12x6xf32>) -> tensor<12x6xf32> {
  %a = shard.sharding @plane split_axes = [[1]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<12x6xf32>
  %b = shard.sharding @plane split_axes = [[], [1]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<12x6xf32>
  return %1 : tensor<12x6xf32>
}

// On a dynamic grid the all_to_all type is dynamic and a tensor.cast restores what is known.
// CHECK-LABEL: func.func @move_axis_unknown_grid
// CHECK: %[[L:.*]] = builtin.unrealized_conversion_cast %{{.*}} : tensor<6x9xf32> to tensor<?x9xf32>
// CHECK-NEXT: %[[A:.*]] = shard.all_to_all %[[L]] on @unknown grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<?x9xf32> -> tensor<?x?xf32>
// CHECK-NEXT: %[[C:.*]] = tensor.cast %[[A]] : tensor<?x?xf32> to tensor<6x?xf32>
// CHECK-NEXT: builtin.unrealized_conversion_cast %[[C]] : tensor<6x?xf32> to tensor<6x9xf32>
func.func @move_axis_unknown_grid(%x: tensor<6x9xf32>) -> tensor<6x9xf32> {
  %a = shard.sharding @unknown split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<6x9xf32>
  %b = shard.sharding @unknown split_axes = [[], [0]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<6x9xf32>
  return %1 : tensor<6x9xf32>
}

// A dynamic dimension stays dynamic.
// CHECK-LABEL: func.func @gather_dynamic_dim
// CHECK: shard.all_gather %{{.*}} on @line grid_axes = [0] gather_axis = 1 : tensor<?x2xf32> -> tensor<?x8xf32>
func.func @gather_dynamic_dim(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %a = shard.sharding @line split_axes = [[], [0]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<?x8xf32>
  %b = shard.sharding @line split_axes = [[]] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<?x8xf32>
  return %1 : tensor<?x8xf32>
}

// Halo sizes change only: the core goes into a tensor with the new halos, update_halo fills them.
// CHECK-LABEL: func.func @new_halos
// CHECK: %[[L:.*]] = builtin.unrealized_conversion_cast %{{.*}} : tensor<16x4xf32> to tensor<6x4xf32>
// CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<7x4xf32>
// CHECK-NEXT: %[[C:.*]] = tensor.extract_slice %[[L]][2, 0] [4, 4] [1, 1] : tensor<6x4xf32> to tensor<4x4xf32>
// CHECK-NEXT: %[[I:.*]] = tensor.insert_slice %[[C]] into %[[E]][0, 0] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<7x4xf32>
// CHECK-NEXT: %[[H:.*]] = shard.update_halo %[[I]] on @line split_axes = [[0]] halo_sizes = [0, 3] : tensor<7x4xf32>
// CHECK-NEXT: builtin.unrealized_conversion_cast %[[H]] : tensor<7x4xf32> to tensor<16x4xf32>
func.func @new_halos(%x: tensor<16x4xf32>) -> tensor<16x4xf32> {
  %a = shard.sharding @line split_axes = [[0]] halo_sizes = [2, 0] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<16x4xf32>
  %b = shard.sharding @line split_axes = [[0]] halo_sizes = [0, 3] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<16x4xf32>
  return %1 : tensor<16x4xf32>
}

// From no halos: the identity extract_slice folds away.
// CHECK-LABEL: func.func @first_halos
// CHECK: %[[L:.*]] = builtin.unrealized_conversion_cast %{{.*}} : tensor<6x12xf32> to tensor<3x4xf32>
// CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<5x6xf32>
// CHECK-NEXT: %[[I:.*]] = tensor.insert_slice %[[L]] into %[[E]][1, 1] [3, 4] [1, 1] : tensor<3x4xf32> into tensor<5x6xf32>
// CHECK-NEXT: shard.update_halo %[[I]] on @plane split_axes = [[0], [1]] halo_sizes = [1, 1, 1, 1] : tensor<5x6xf32>
func.func @first_halos(%x: tensor<6x12xf32>) -> tensor<6x12xf32> {
  %a = shard.sharding @plane split_axes = [[0], [1]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<6x12xf32>
  %b = shard.sharding @plane split_axes = [[0], [1]] halo_sizes = [1, 1, 1, 1] : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<6x12xf32>
  return %1 : tensor<6x12xf32>
}

// Each user annotation gets its own resharding; a shard.shard without one is left alone.
// CHECK-LABEL: func.func @two_users
// CHECK-SAME: (%[[X:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT: %[[L:.*]] = shard.sharding @line split_axes = [[]]
// CHECK-NEXT: %[[S:.*]] = shard.all_slice %[[X]] on @line grid_axes = [0] slice_axis = 0 : tensor<8xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[R:.*]] = builtin.unrealized_conversion_cast %[[S]]
// CHECK-NEXT: %[[K:.*]] = shard.shard %[[X]] to %[[L]] : tensor<8xf32>
// CHECK-NEXT: return %[[R]], %[[X]], %[[K]]
func.func @two_users(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %r = shard.sharding @line split_axes = [[]] : !shard.sharding
  %s = shard.sharding @line split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %x to %r : tensor<8xf32>
  %1 = shard.shard %0 to %s annotate_for_users : tensor<8xf32>
  %2 = shard.shard %0 to %r annotate_for_users : tensor<8xf32>
  return %1, %2, %0 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
