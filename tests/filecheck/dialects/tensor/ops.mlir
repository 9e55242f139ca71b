// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s

// CHECK-LABEL: func.func @gen_rank(
// CHECK: %generated = tensor.generate %arg2 {
// CHECK-NEXT: ^bb0(%arg4: index, %arg5: index):
// CHECK-NEXT: tensor.yield %arg1 : f32
// CHECK-NEXT: } : tensor<?x3xf32>
// CHECK: %rank = tensor.rank %arg0 : tensor<4x8xf32>
// CHECK: %rank_0 = tensor.rank %arg3 : tensor<*xf32>
func.func @gen_rank(%t: tensor<4x8xf32>, %s: f32, %i: index, %u: tensor<*xf32>) -> tensor<?x3xf32> {
  %0 = tensor.generate %i {
  ^bb0(%x: index, %y: index):
    tensor.yield %s : f32
  } : tensor<?x3xf32>
  %r = tensor.rank %t : tensor<4x8xf32>
  %r2 = tensor.rank %u : tensor<*xf32>
  return %0 : tensor<?x3xf32>
}
