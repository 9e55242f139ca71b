// RUN: not shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation{complete=false}))" %s 2>&1 | filecheck %s
// RUN: not shardc-opt --pass-pipeline="builtin.module(func.func(sharding-propagation))" %s 2>&1 | filecheck %s --check-prefix=OPEN

// Upstream's errors (complete=false). With the completion (the default) shardc does
// better on one of them: an op without a sharding interface runs replicated with a
// warning. A function of several blocks, or of none (a declaration), stays an error, as
// in trunk (whose default run refuses a declaration).

shard.grid @g(shape = 4)

// CHECK: error: 'func.func' op only one block is supported!
func.func private @external(tensor<8xf32>) -> tensor<8xf32>

// CHECK: error: 'func.func' op only one block is supported!
func.func @branches(%x: tensor<8xf32>) -> tensor<8xf32> {
  cf.br ^next
^next:
  return %x : tensor<8xf32>
}

// The default traversal walks twice: the error comes once per walk.
// CHECK: error: 'func.call' op sharding interface is not implemented.
// CHECK: error: 'func.call' op sharding interface is not implemented.
// OPEN-NOT: sharding interface is not implemented
// OPEN: warning: 'func.call' has no sharding interface: it runs fully replicated
// OPEN: sharding-propagation-failed.mlir:12:1: error: 'func.func' op only one block is supported!
// OPEN: sharding-propagation-failed.mlir:15:1: error: 'func.func' op only one block is supported!
// OPEN-NOT: only one block is supported
func.func @no_model(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8xf32>
  %r = func.call @external(%a) : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
