// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(shard-partition))" %s -split-input-file -verify-diagnostics

// Scans annotated by hand with their scan dimension split where shardc cannot split it:
// a diagnostic at the scan, never a traceback.

shard.grid @g2(shape = 2)
func.func @no_neutral_element(%x: tensor<4x8xf32>, %o: tensor<4x8xf32>, %acc: tensor<4xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @g2 split_axes = [[], [0]] : !shard.sharding
  %r = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %x0 = shard.shard %x to %s : tensor<4x8xf32>
  %x1 = shard.shard %x0 to %s annotate_for_users : tensor<4x8xf32>
  %o0 = shard.shard %o to %s : tensor<4x8xf32>
  %o1 = shard.shard %o0 to %s annotate_for_users : tensor<4x8xf32>
  %a0 = shard.shard %acc to %r : tensor<4xf32>
  %a1 = shard.shard %a0 to %r annotate_for_users : tensor<4xf32>
  // expected-error @+1 {{'tm_tensor.scan' op cannot partition a scan along a split dimension: its region is not one combiner with a neutral element}}
  %y:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x1 : tensor<4x8xf32>) outs(%o1, %a1 : tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%p: f32, %c: f32):
    %d = arith.subf %p, %c : f32
    tm_tensor.yield %d : f32
  } -> tensor<4x8xf32>, tensor<4xf32>
  %y0 = shard.shard %y#0 to %s : tensor<4x8xf32>
  %y1 = shard.shard %y#1 to %r : tensor<4xf32>
  return %y0 : tensor<4x8xf32>
}

// -----

shard.grid @g2(shape = 2)
func.func @dynamic_scan_dimension(%x: tensor<4x?xf32>, %o: tensor<4x?xf32>, %acc: tensor<4xf32>) -> tensor<4x?xf32> {
  %s = shard.sharding @g2 split_axes = [[], [0]] : !shard.sharding
  %r = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %x0 = shard.shard %x to %s : tensor<4x?xf32>
  %x1 = shard.shard %x0 to %s annotate_for_users : tensor<4x?xf32>
  %o0 = shard.shard %o to %s : tensor<4x?xf32>
  %o1 = shard.shard %o0 to %s annotate_for_users : tensor<4x?xf32>
  %a0 = shard.shard %acc to %r : tensor<4xf32>
  %a1 = shard.shard %a0 to %r annotate_for_users : tensor<4xf32>
  // expected-error @+1 {{'tm_tensor.scan' op cannot partition a scan along a split dimension of dynamic size}}
  %y:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x1 : tensor<4x?xf32>) outs(%o1, %a1 : tensor<4x?xf32>, tensor<4xf32>) {
  ^bb0(%p: f32, %c: f32):
    %d = arith.addf %p, %c : f32
    tm_tensor.yield %d : f32
  } -> tensor<4x?xf32>, tensor<4xf32>
  %y0 = shard.shard %y#0 to %s : tensor<4x?xf32>
  %y1 = shard.shard %y#1 to %r : tensor<4xf32>
  return %y0 : tensor<4x?xf32>
}
