// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(shard-partition))" %s -verify-diagnostics
// RUN: not shardc-opt --shard-partition %s 2>&1 | filecheck %s

// shard-partition runs per function, as trunk's function pass does: every function that
// is not fully annotated reports its own error (in function order), not only the first,
// and the pass still fails.

// CHECK: :[[# @LINE + 9]]:1: error: Cannot partition: expected a single use for block argument 0 in block 0
// CHECK: :[[# @LINE + 29]]:8: error: Cannot partition: tensor operand 0 must be defined by a shard.shard operation.
// CHECK: :[[# @LINE + 37]]:8: error: Cannot partition: user of result 0 must be shard.shard operation.
// CHECK: :[[# @LINE + 45]]:8: error: Cannot partition: result 0 must have exactly one use.
// CHECK: :[[# @LINE + 55]]:8: error: Cannot partition: shard.shard for result 0 must not set 'annotate_for_users'.
// CHECK-NOT: error:

shard.grid @g2(shape = 2)
// expected-error @+1 {{Cannot partition: expected a single use for block argument 0 in block 0}}
func.func @argument_used_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4xf32>
  %b = tosa.abs %x : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

func.func @fully_annotated(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4xf32>
  %b = shard.shard %a to %s annotate_for_users : tensor<4xf32>
  %r = tosa.abs %b : (tensor<4xf32>) -> tensor<4xf32>
  %c = shard.shard %r to %s : tensor<4xf32>
  return %c : tensor<4xf32>
}

func.func @operand_not_annotated(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4xf32>
  %c = "tosa.const"() <{values = dense<1.000000e+00> : tensor<4xf32>}> : () -> tensor<4xf32>
  // expected-error @+1 {{Cannot partition: tensor operand 0 must be defined by a shard.shard operation.}}
  %r = tosa.abs %c : (tensor<4xf32>) -> tensor<4xf32>
  %r0 = shard.shard %r to %s : tensor<4xf32>
  return %r0 : tensor<4xf32>
}

func.func @result_not_annotated(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<4xf32>
  // expected-error @+1 {{Cannot partition: user of result 0 must be shard.shard operation.}}
  %r = tosa.abs %a : (tensor<4xf32>) -> tensor<4xf32>
  %n = tosa.abs %r : (tensor<4xf32>) -> tensor<4xf32>
  return %n : tensor<4xf32>
}

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

func.func @result_annotated_for_users(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<4xf32>
  // expected-error @+1 {{Cannot partition: shard.shard for result 0 must not set 'annotate_for_users'.}}
  %r = tosa.abs %a : (tensor<4xf32>) -> tensor<4xf32>
  %b = shard.shard %r to %s annotate_for_users : tensor<4xf32>
  return %b : tensor<4xf32>
}
