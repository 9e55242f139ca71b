memref.global "private" constant @cst : memref<3xf32> = dense<[1.0, 2.0, 3.0]>
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>, %A: tensor<2x3x4xf32>, %B: tensor<2x4x5xf32>, %n: index) -> (tensor<4xf32>, tensor<2x3x5xf32>, index, tensor<?x3xindex>, tensor<8xf32>, index, memref<3xf32>) {
  %init = tensor.empty() : tensor<4xf32>
  %m = linalg.map ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%init : tensor<4xf32>)
    (%x: f32, %y: f32, %z: f32) {
      %s = arith.mulf %x, %y : f32
      linalg.yield %s : f32
    }
  %e = tensor.empty() : tensor<2x3x5xf32>
  %c0 = arith.constant 0.0 : f32
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %bm = linalg.batch_matmul ins(%A, %B : tensor<2x3x4xf32>, tensor<2x4x5xf32>) outs(%z : tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %r = tensor.rank %A : tensor<2x3x4xf32>
  %g = tensor.generate %n {
  ^bb0(%i: index, %j: index):
    %c3 = arith.constant 3 : index
    %p = arith.muli %i, %c3 : index
    %q = arith.addi %p, %j : index
    tensor.yield %q : index
  } : tensor<?x3xindex>
  %out = tensor.empty() : tensor<8xf32>
  %fa = scf.forall (%i) in (2) shared_outs(%o = %out) -> (tensor<8xf32>) {
    %c4 = arith.constant 4 : index
    %off = arith.muli %i, %c4 : index
    %w = tensor.extract_slice %a[0] [4] [1] : tensor<4xf32> to tensor<4xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %w into %o[%off] [4] [1] : tensor<4xf32> into tensor<8xf32>
    }
  }
  %c0i = arith.constant 0 : index
  %c1i = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %sum = scf.parallel (%k) = (%c0i) to (%c5) step (%c1i) init (%c0i) -> index {
    scf.reduce(%k : index) {
    ^bb0(%l: index, %rr: index):
      %t = arith.addi %l, %rr : index
      scf.reduce.return %t : index
    }
  }
  %gm = memref.get_global @cst : memref<3xf32>
  return %m, %bm, %r, %g, %fa, %sum, %gm : tensor<4xf32>, tensor<2x3x5xf32>, index, tensor<?x3xindex>, tensor<8xf32>, index, memref<3xf32>
}
