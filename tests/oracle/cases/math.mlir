func.func @math(%x: f32, %t: tensor<4xf32>) -> tensor<4xf32> {
  %0 = math.exp %x : f32
  %1 = math.tanh %0 : f32
  %2 = math.rsqrt %1 fastmath<fast> : f32
  %3 = math.absf %t : tensor<4xf32>
  %4 = math.sqrt %3 : tensor<4xf32>
  %5 = math.log %4 : tensor<4xf32>
  %6 = math.powf %x, %x : f32
  %7 = math.erf %x : f32
  return %5 : tensor<4xf32>
}
