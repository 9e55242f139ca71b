// RUN: shardc-opt %s --test-grid-resharding-partition --split-input-file --verify-diagnostics
// Layouts no sequence of shard collectives reaches: a located error naming the value,
// its shape and both shardings.

shard.grid @line(shape = 4)
func.func @indivisible(%x: tensor<10x12xf32>) -> tensor<10x12xf32> {
  %a = shard.sharding @line split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<10x12xf32>
  %b = shard.sharding @line split_axes = [[], [0]] : !shard.sharding
  // expected-error @+1 {{cannot reshard %x of shape 10x12 from @line split_axes = [[0]] to @line split_axes = [[], [0]]: dimension 0 of size 10 does not split evenly into 4 shards (grid axes [0]) and @line split_axes = [[0]] gives no sharded_dims_offsets}}
  %1 = shard.shard %0 to %b annotate_for_users : tensor<10x12xf32>
  return %1 : tensor<10x12xf32>
}

// -----

shard.grid @line(shape = 4)
func.func @indivisible_target(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %a = shard.sharding @line split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<8x6xf32>
  %b = shard.sharding @line split_axes = [[], [0]] : !shard.sharding
  // expected-error @+1 {{dimension 1 of size 6 does not split evenly into 4 shards}}
  %1 = shard.shard %0 to %b annotate_for_users : tensor<8x6xf32>
  return %1 : tensor<8x6xf32>
}

// -----

shard.grid @pair(shape = 2)
func.func @uneven_changed(%x: tensor<10xf32>) -> tensor<10xf32> {
  %a = shard.sharding @pair split_axes = [[0]] sharded_dims_offsets = [0, 3, 10] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<10xf32>
  %b = shard.sharding @pair split_axes = [[0]] sharded_dims_offsets = [0, 4, 10] : !shard.sharding
  // expected-error @+1 {{dimension 0 has uneven shards (sharded_dims_offsets) that differ between the shardings; the shard collectives move equal shards only}}
  %1 = shard.shard %0 to %b annotate_for_users : tensor<10xf32>
  return %1 : tensor<10xf32>
}

// -----

shard.grid @pair(shape = 2)
func.func @uneven_gathered(%x: tensor<10xf32>) -> tensor<10xf32> {
  %a = shard.sharding @pair split_axes = [[0]] sharded_dims_offsets = [0, 3, 10] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<10xf32>
  %b = shard.sharding @pair split_axes = [[]] : !shard.sharding
  // expected-error @+1 {{dimension 0 has uneven shards}}
  %1 = shard.shard %0 to %b annotate_for_users : tensor<10xf32>
  return %1 : tensor<10xf32>
}

// -----

shard.grid @line(shape = 4)
func.func @halo_on_dynamic_dim(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %a = shard.sharding @line split_axes = [[0]] halo_sizes = [1, 1] : !shard.sharding
  %0 = shard.shard %x to %a : tensor<?x4xf32>
  %b = shard.sharding @line split_axes = [[0]] halo_sizes = [2, 2] : !shard.sharding
  // expected-error @+1 {{halo updates need static local shapes}}
  %1 = shard.shard %0 to %b annotate_for_users : tensor<?x4xf32>
  return %1 : tensor<?x4xf32>
}
