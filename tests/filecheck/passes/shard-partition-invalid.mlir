// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(shard-partition))" %s -split-input-file -verify-diagnostics

// Trunk's checks that the function is fully annotated, then what upstream asserts on.

shard.grid @g2(shape = 2)
// expected-error @+1 {{Cannot partition: expected a single use for block argument 0 in block 0}}
func.func @argument_used_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4xf32>
  %b = tosa.abs %x : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

shard.grid @g2(shape = 2)
func.func @result_not_annotated(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4xf32>
  %b = shard.shard %a to %s annotate_for_users : tensor<4xf32>
  // expected-error @+1 {{Cannot partition: user of result 0 must be shard.shard operation.}}
  %e = tensor.empty() : tensor<4xf32>
  %r = tosa.add %b, %e : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

shard.grid @g2(shape = 2)
func.func @operand_not_annotated(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<4xf32>
  %c = "tosa.const"() <{values = dense<1.000000e+00> : tensor<4xf32>}> : () -> tensor<4xf32>
  // expected-error @+1 {{Cannot partition: tensor operand 1 must be defined by a shard.shard operation.}}
  %r = tosa.add %a, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r0 = shard.shard %r to %s : tensor<4xf32>
  %r1 = shard.shard %r0 to %s annotate_for_users : tensor<4xf32>
  return %r1 : tensor<4xf32>
}

// -----

shard.grid @g2(shape = 2)
func.func @result_used_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<4xf32>
  // expected-error @+1 {{Cannot partition: result 0 must have exactly one use.}}
  %r = tosa.abs %a : (tensor<4xf32>) -> tensor<4xf32>
  %b = shard.shard %r to %s : tensor<4xf32>
  %c = shard.shard %r to %s : tensor<4xf32>
  %d = shard.shard %b to %s annotate_for_users : tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

shard.grid @g2(shape = 2)
func.func @result_annotated_for_users(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<4xf32>
  // expected-error @+1 {{Cannot partition: shard.shard for result 0 must not set 'annotate_for_users'.}}
  %r = tosa.abs %a : (tensor<4xf32>) -> tensor<4xf32>
  %b = shard.shard %r to %s annotate_for_users : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

shard.grid @g4(shape = 4)
// expected-error @+1 {{Cannot partition: block argument 0 of type tensor<6x8xf32> with sharding @g4 split_axes = [[0]]: dimension 0 of size 6 does not split evenly into 4 shards (uneven shards need sharded_dims_offsets)}}
func.func @does_not_divide(%x: tensor<6x8xf32>) -> tensor<6x8xf32> {
  %s = shard.sharding @g4 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<6x8xf32>
  return %a : tensor<6x8xf32>
}

// -----

shard.grid @g2(shape = 2)
func.func @sharded_without_partitioning(%a: tensor<1x4x6xf32>, %b: tensor<1x6x8xf32>, %z: tensor<1xf32>) -> tensor<1x4x8xf32> {
  %k = shard.sharding @g2 split_axes = [[], [], [0]] : !shard.sharding
  %k2 = shard.sharding @g2 split_axes = [[], [0]] : !shard.sharding
  %rep = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %a0 = shard.shard %a to %k annotate_for_users : tensor<1x4x6xf32>
  %b0 = shard.shard %b to %k2 annotate_for_users : tensor<1x6x8xf32>
  %z0 = shard.shard %z to %rep annotate_for_users : tensor<1xf32>
  // expected-error @+1 {{'tosa.matmul' op has no partitioning for sharded tensors and must be fully replicated, but operand #0 has sharding @g2 split_axes = [[], [], [0]]}}
  %r = tosa.matmul %a0, %b0, %z0, %z0 : (tensor<1x4x6xf32>, tensor<1x6x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x8xf32>
  %r0 = shard.shard %r to %rep : tensor<1x4x8xf32>
  %r1 = shard.shard %r0 to %rep annotate_for_users : tensor<1x4x8xf32>
  return %r1 : tensor<1x4x8xf32>
}

// -----

shard.grid @g2(shape = 2)
func.func @no_neutral_element(%x: tensor<4x8xf32>, %i: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %rep = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<4x8xf32>
  %b = shard.shard %i to %rep annotate_for_users : tensor<8xf32>
  // expected-error @+1 {{'linalg.generic' op cannot partition a reduction over split grid axes: its combiner has no neutral element}}
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%b : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.subf %in, %out : f32
    linalg.yield %d : f32
  } -> tensor<8xf32>
  %r0 = shard.shard %r to %rep : tensor<8xf32>
  %r1 = shard.shard %r0 to %rep annotate_for_users : tensor<8xf32>
  return %r1 : tensor<8xf32>
}

// -----

shard.grid @g2(shape = 2)
func.func @loops_split_differently(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %rows = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %cols = shard.sharding @g2 split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %x to %rows annotate_for_users : tensor<4x8xf32>
  %b = shard.shard %y to %cols annotate_for_users : tensor<4x8xf32>
  // expected-error @+1 {{Cannot partition: the operand shardings split loop 0 along different grid axes ([0] and [])}}
  %r = linalg.add ins(%a, %a : tensor<4x8xf32>, tensor<4x8xf32>) outs(%b : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r0 = shard.shard %r to %cols : tensor<4x8xf32>
  %r1 = shard.shard %r0 to %cols annotate_for_users : tensor<4x8xf32>
  return %r1 : tensor<4x8xf32>
}

// -----

shard.grid @g2(shape = 2)
func.func @elementwise_split_differently(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %rows = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %cols = shard.sharding @g2 split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %x to %rows annotate_for_users : tensor<4x8xf32>
  %b = shard.shard %y to %cols annotate_for_users : tensor<4x8xf32>
  // expected-error @+1 {{Cannot partition: the partitioned op does not verify}}
  %r = tosa.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r0 = shard.shard %r to %rows : tensor<4x8xf32>
  %r1 = shard.shard %r0 to %rows annotate_for_users : tensor<4x8xf32>
  return %r1 : tensor<4x8xf32>
}

// -----

shard.grid @g2(shape = 2)
func.func @reshard_impossible(%x: tensor<5xf32>) -> tensor<5xf32> {
  %rep = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %split = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %rep : tensor<5xf32>
  // expected-error @+1 {{Cannot partition: cannot reshard}}
  %b = shard.shard %a to %split annotate_for_users : tensor<5xf32>
  %r = tosa.abs %b : (tensor<5xf32>) -> tensor<5xf32>
  %r0 = shard.shard %r to %rep : tensor<5xf32>
  %r1 = shard.shard %r0 to %rep annotate_for_users : tensor<5xf32>
  return %r1 : tensor<5xf32>
}
