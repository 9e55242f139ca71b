func.func @casts(%t: tensor<4x8xf32>, %s: f32, %i: index) -> tensor<?x8xf32> {
  %0 = tensor.cast %t : tensor<4x8xf32> to tensor<?x8xf32>
  %1 = tensor.splat %s : tensor<4xf32>
  %2 = tensor.from_elements %s, %s : tensor<2xf32>
  %4 = tensor.insert %s into %t[%i, %i] : tensor<4x8xf32>
  %5 = tensor.extract %4[%i, %i] : tensor<4x8xf32>
  return %0 : tensor<?x8xf32>
}
// -----
func.func @regions(%t: tensor<4x8xf32>, %s: f32, %i: index) -> (tensor<?x3xf32>, tensor<5x9xf32>) {
  %0 = tensor.generate %i {
  ^bb0(%x: index, %y: index):
    tensor.yield %s : f32
  } : tensor<?x3xf32>
  %1 = tensor.pad %t low[0, 1] high[1, 0] {
  ^bb0(%x: index, %y: index):
    tensor.yield %s : f32
  } : tensor<4x8xf32> to tensor<5x9xf32>
  return %0, %1 : tensor<?x3xf32>, tensor<5x9xf32>
}
// -----
func.func @slices(%t: tensor<4x8xf32>, %i: index) -> tensor<4x8xf32> {
  %0 = tensor.extract_slice %t[0, %i] [2, 4] [1, 1] : tensor<4x8xf32> to tensor<2x4xf32>
  %1 = tensor.insert_slice %0 into %t[%i, 0] [2, 4] [1, 2] : tensor<2x4xf32> into tensor<4x8xf32>
  %2 = tensor.extract_slice %t[0, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
  %d = tensor.dim %t, %i : tensor<4x8xf32>
  %e = tensor.empty(%d) : tensor<?x8xf32>
  return %1 : tensor<4x8xf32>
}
// -----
func.func @reshapes(%t: tensor<4x8xf32>, %n: index) -> tensor<2x2x8xf32> {
  %0 = tensor.collapse_shape %t [[0, 1]] : tensor<4x8xf32> into tensor<32xf32>
  %1 = tensor.expand_shape %0 [[0, 1, 2]] output_shape [2, 2, 8] : tensor<32xf32> into tensor<2x2x8xf32>
  %c = tensor.cast %t : tensor<4x8xf32> to tensor<?x8xf32>
  %2 = tensor.expand_shape %c [[0, 1], [2]] output_shape [%n, 2, 8] : tensor<?x8xf32> into tensor<?x2x8xf32>
  %3 = tensor.concat dim(0) %t, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<2x2x8xf32>
}
// -----
func.func @rank(%t: tensor<4x8xf32>) -> index {
  %0 = tensor.rank %t : tensor<4x8xf32>
  return %0 : index
}
// -----
func.func @pad(%t: tensor<4x8xf32>, %s: f32) -> tensor<5x9xf32> {
  %0 = tensor.pad %t low[0, 1] high[1, 0] {
  ^bb0(%x: index, %y: index):
    tensor.yield %s : f32
  } : tensor<4x8xf32> to tensor<5x9xf32>
  return %0 : tensor<5x9xf32>
}
// -----
func.func @rank_unranked(%u: tensor<*xf32>) -> index {
  %0 = tensor.rank %u : tensor<*xf32>
  return %0 : index
}
