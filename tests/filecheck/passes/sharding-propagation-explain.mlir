// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation{traversal=forward explain=true}))" %s 2>&1 >/dev/null | filecheck %s

shard.grid @g(shape = 4)

func.func @chain(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x8xf32>
  %0 = tosa.abs %a : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = tosa.exp %0 : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}

// The result of tosa.abs, for its producer, then its operand, for tosa.abs.
// CHECK: 8:8: remark: sharding @g split_axes = {{\[\[}}0]] derived from annotation #1 (@g split_axes = {{\[\[}}0]], for its producer, at {{.*}}:7:8) through tosa.abs{{$}}
// CHECK: 7:8: remark: sharding @g split_axes = {{\[\[}}0]] derived from annotation #1 {{.*}} through tosa.abs{{$}}
// Then tosa.exp, reached through tosa.abs.
// CHECK: 9:8: remark: {{.*}} derived from annotation #1 {{.*}} through tosa.abs -> tosa.exp{{$}}
// CHECK: 8:8: remark: {{.*}} through tosa.abs -> tosa.exp{{$}}
// CHECK-NOT: remark
