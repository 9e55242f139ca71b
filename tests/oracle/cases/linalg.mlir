#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @generic(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.mulf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %r = tensor.empty() : tensor<4xf32>
  %1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%0 : tensor<4x8xf32>) outs(%r : tensor<4xf32>) attrs = {foo = 1 : i64} {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4xf32>
}
// -----
func.func @named(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %s: f32) -> tensor<4x4xf32> {
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%s : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = linalg.add ins(%0, %0 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = linalg.exp ins(%1 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %3 = linalg.copy ins(%2 : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %4 = linalg.mul ins(%2, %3 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %4 : tensor<4x4xf32>
}
// -----
func.func @dims(%a: tensor<4x8xf32>, %v: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<8x4xf32>
  %0 = linalg.transpose ins(%a : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<4x8xf32>
  %1 = linalg.broadcast ins(%v : tensor<4xf32>) outs(%e2 : tensor<4x8xf32>) dimensions = [1]
  %e3 = tensor.empty() : tensor<4xf32>
  %2 = linalg.reduce ins(%1 : tensor<4x8xf32>) outs(%e3 : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  return %2 : tensor<4xf32>
}
// -----
func.func @memrefs(%a: memref<4x8xf32>, %b: memref<8x4xf32>, %c: memref<4x4xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x4xf32>) outs(%c : memref<4x4xf32>)
  %s = arith.constant 0.0 : f32
  linalg.fill ins(%s : f32) outs(%c : memref<4x4xf32>)
  return
}
// -----
#m0 = affine_map<(d0, d1, d2) -> (d0, d2)>
#m1 = affine_map<(d0, d1, d2) -> (d2, d1)>
#m2 = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @contract(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = linalg.generic {indexing_maps = [#m0, #m1, #m2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>) outs(%c : tensor<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1, d0)>], iterator_types = ["parallel", "parallel"]} ins(%0 : tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 0 : index
    linalg.yield %x : f32
  } -> tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}
// -----
func.func @map_reduce_batch(%a: tensor<2x4x8xf32>, %b: tensor<2x8x16xf32>, %c: tensor<2x4x16xf32>, %x: tensor<8xf32>, %y: tensor<8xf32>, %r: tensor<2x4xf32>) -> tensor<8xf32> {
  %0 = linalg.batch_matmul ins(%a, %b : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%c : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %1 = linalg.map { arith.addf } ins(%x, %y : tensor<8xf32>, tensor<8xf32>) outs(%x : tensor<8xf32>)
  %2 = linalg.map ins(%x : tensor<8xf32>) outs(%y : tensor<8xf32>)
    (%in: f32, %out: f32) {
      %e = math.exp %in : f32
      linalg.yield %e : f32
    }
  %3 = linalg.map ins(%x : tensor<8xf32>) outs(%y : tensor<8xf32>)
    (%in: f32, %out: f32) {
      %e = arith.addf %in, %out : f32
      linalg.yield %e : f32
    }
  %4 = linalg.reduce { arith.maximumf } ins(%a : tensor<2x4x8xf32>) outs(%r : tensor<2x4xf32>) dimensions = [2]
  %5 = linalg.reduce ins(%a : tensor<2x4x8xf32>) outs(%r : tensor<2x4xf32>) dimensions = [2]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  return %1 : tensor<8xf32>
}
