func.func @apply(%i: index, %j: index) -> index {
  %0 = affine.apply affine_map<(d0)[s0] -> (d0 * 2 + s0 - 1)>(%i)[%j]
  %1 = affine.apply affine_map<(d0, d1) -> (d0 floordiv 4 + d1 mod 3)>(%0, %j)
  %2 = affine.min affine_map<(d0) -> (d0, 4)>(%1)
  %3 = affine.max affine_map<(d0) -> (d0, 4)>(%2)
  %4 = affine.apply affine_map<(d0) -> (-d0 + 8)>(%3)
  %5 = affine.apply affine_map<(d0, d1) -> (d0 - d1 * 3)>(%4, %i)
  %7 = affine.apply affine_map<(d0, d1) -> (d0 ceildiv 2 - d1 * 2 + 1)>(%4, %i)
  %8 = affine.apply affine_map<(d0, d1)[s0] -> ((d0 + s0) mod 4 + d1)>(%4, %i)[%j]
  %9 = affine.min affine_map<(d0, d1)[s0] -> ((d0 + s0) mod 4, d1, 0)>(%4, %i)[%j]
  %6 = affine.apply affine_map<()[s0] -> (s0 * 4)>()[%5]
  return %5 : index
}
// -----
func.func @index(%i: index) -> index {
  %0:2 = affine.delinearize_index %i into (4, 8) : index, index
  %1 = affine.linearize_index [%0#0, %0#1] by (4, 8) : index
  return %1 : index
}
// -----
func.func @loops(%m: memref<4x8xf32>) {
  affine.for %k = 0 to 4 {
    affine.for %l = 0 to 8 step 2 {
      %v = affine.load %m[%k, %l] : memref<4x8xf32>
      affine.store %v, %m[%k, %l + 1] : memref<4x8xf32>
    }
  }
  return
}
// -----
func.func @symbols_and_ifs(%m: memref<4x8xf32>, %i: index, %j: index, %x: f32) -> f32 {
  affine.for %k = 0 to 4 {
    %v = affine.load %m[%k + symbol(%i), (%k + %j) * 2] : memref<4x8xf32>
    affine.store %v, %m[symbol(%i), %k floordiv 2 - 1] : memref<4x8xf32>
  }
  %0 = affine.if affine_set<(d0)[s0] : (d0 - s0 >= 0)>(%i)[%j] -> f32 {
    affine.yield %x : f32
  } else {
    affine.yield %x : f32
  }
  return %0 : f32
}
