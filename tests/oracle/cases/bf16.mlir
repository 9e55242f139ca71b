// bf16 element types: scalars, splats, lists, hex blobs, special values, every shaped type.

func.func @bf16_constants() -> (bf16, bf16, bf16, bf16, bf16, bf16) {
  %nan = arith.constant 0x7FC0 : bf16
  %inf = arith.constant 0x7F80 : bf16
  %ninf = arith.constant 0xFF80 : bf16
  %denormal = arith.constant 1.0e-40 : bf16
  %big = arith.constant 3.0e+38 : bf16
  %tie = arith.constant 1.00390625 : bf16
  return %nan, %inf, %ninf, %denormal, %big, %tie : bf16, bf16, bf16, bf16, bf16, bf16
}

// -----

func.func @bf16_dense() -> (tensor<2x2xbf16>, tensor<3xbf16>, tensor<2xbf16>, vector<2xbf16>, memref<4xbf16>) {
  %splat = arith.constant dense<0.333333> : tensor<2x2xbf16>
  %list = arith.constant dense<[0x7FC0, -0.0, 0x0001]> : tensor<3xbf16>
  %hex = arith.constant dense<"0x803F0040"> : tensor<2xbf16>
  %vec = arith.constant dense<[1.0, 2.5]> : vector<2xbf16>
  %alloc = memref.alloc() : memref<4xbf16>
  return %splat, %list, %hex, %vec, %alloc : tensor<2x2xbf16>, tensor<3xbf16>, tensor<2xbf16>, vector<2xbf16>, memref<4xbf16>
}

// -----

func.func @bf16_large() -> tensor<2x75xbf16> {
  %c = arith.constant dense<[[-20.0000, -19.6300, -19.2600, -18.8900, -18.5200, -18.1500, -17.7800, -17.4100, -17.0400, -16.6700, -16.3000, -15.9300, -15.5600, -15.1900, -14.8200, -14.4500, -14.0800, -13.7100, -13.3400, -12.9700, -12.6000, -12.2300, -11.8600, -11.4900, -11.1200, -10.7500, -10.3800, -10.0100, -9.6400, -9.2700, -8.9000, -8.5300, -8.1600, -7.7900, -7.4200, -7.0500, -6.6800, -6.3100, -5.9400, -5.5700, -5.2000, -4.8300, -4.4600, -4.0900, -3.7200, -3.3500, -2.9800, -2.6100, -2.2400, -1.8700, -1.5000, -1.1300, -0.7600, -0.3900, -0.0200, 0.3500, 0.7200, 1.0900, 1.4600, 1.8300, 2.2000, 2.5700, 2.9400, 3.3100, 3.6800, 4.0500, 4.4200, 4.7900, 5.1600, 5.5300, 5.9000, 6.2700, 6.6400, 7.0100, 7.3800], [7.7500, 8.1200, 8.4900, 8.8600, 9.2300, 9.6000, 9.9700, 10.3400, 10.7100, 11.0800, 11.4500, 11.8200, 12.1900, 12.5600, 12.9300, 13.3000, 13.6700, 14.0400, 14.4100, 14.7800, 15.1500, 15.5200, 15.8900, 16.2600, 16.6300, 17.0000, 17.3700, 17.7400, 18.1100, 18.4800, 18.8500, 19.2200, 19.5900, 19.9600, 20.3300, 20.7000, 21.0700, 21.4400, 21.8100, 22.1800, 22.5500, 22.9200, 23.2900, 23.6600, 24.0300, 24.4000, 24.7700, 25.1400, 25.5100, 25.8800, 26.2500, 26.6200, 26.9900, 27.3600, 27.7300, 28.1000, 28.4700, 28.8400, 29.2100, 29.5800, 29.9500, 30.3200, 30.6900, 31.0600, 31.4300, 31.8000, 32.1700, 32.5400, 32.9100, 33.2800, 33.6500, 34.0200, 34.3900, 34.7600, 35.1300]]> : tensor<2x75xbf16>
  return %c : tensor<2x75xbf16>
}

// -----

func.func @bf16_compute(%a: tensor<4x8xf32>, %b: tensor<8x3xbf16>, %s: bf16) -> tensor<4x3xf32> {
  %t = arith.truncf %a : tensor<4x8xf32> to tensor<4x8xbf16>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %m = linalg.matmul ins(%t, %b : tensor<4x8xbf16>, tensor<8x3xbf16>) outs(%acc : tensor<4x3xf32>) -> tensor<4x3xf32>
  %h = arith.truncf %m : tensor<4x3xf32> to tensor<4x3xbf16>
  %sq = arith.mulf %s, %s : bf16
  %x = arith.extf %h : tensor<4x3xbf16> to tensor<4x3xf32>
  %sf = arith.extf %sq : bf16 to f32
  return %x : tensor<4x3xf32>
}
