func.func @allocs(%n: index) {
  %0 = memref.alloc() : memref<4x8xf32>
  %1 = memref.alloc(%n) {alignment = 64 : i64} : memref<?x8xf32>
  %2 = memref.alloca() : memref<4xf32>
  %c0 = arith.constant 0 : index
  %v = memref.load %0[%c0, %c0] : memref<4x8xf32>
  memref.store %v, %2[%c0] : memref<4xf32>
  %d = memref.dim %1, %c0 : memref<?x8xf32>
  memref.dealloc %0 : memref<4x8xf32>
  return
}
// -----
func.func @views(%m: memref<4x8xf32>, %i: index) {
  %0 = memref.subview %m[0, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1]>>
  %1 = memref.subview %m[%i, 0] [2, 4] [1, 1] : memref<4x8xf32> to memref<2x4xf32, strided<[8, 1], offset: ?>>
  %2 = memref.collapse_shape %m [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  %3 = memref.expand_shape %2 [[0, 1]] output_shape [4, 8] : memref<32xf32> into memref<4x8xf32>
  %4 = memref.cast %m : memref<4x8xf32> to memref<?x?xf32>
  memref.copy %m, %3 : memref<4x8xf32> to memref<4x8xf32>
  return
}
// -----
memref.global "private" constant @g : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
memref.global @h : memref<2xi32> = uninitialized
func.func @globals() -> memref<4xf32> {
  %0 = memref.get_global @g : memref<4xf32>
  return %0 : memref<4xf32>
}
// -----
func.func @layout(%m: memref<4x8xf32, affine_map<(d0, d1) -> (d1, d0)>>) -> memref<4x8xf32, affine_map<(d0, d1) -> (d1, d0)>> {
  return %m : memref<4x8xf32, affine_map<(d0, d1) -> (d1, d0)>>
}
