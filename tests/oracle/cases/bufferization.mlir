func.func @convert(%t: tensor<4xf32>, %m: memref<4xf32>) -> tensor<4xf32> {
  %0 = bufferization.to_buffer %t read_only : tensor<4xf32> to memref<4xf32>
  %1 = bufferization.to_tensor %m restrict writable : memref<4xf32> to tensor<4xf32>
  %2 = bufferization.alloc_tensor() : tensor<4xf32>
  %3 = bufferization.clone %m : memref<4xf32> to memref<4xf32>
  %4 = bufferization.materialize_in_destination %t in %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
