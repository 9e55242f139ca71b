#map = affine_map<(d0, d1, d2) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map2 = affine_map<(d0) -> (d0)>
#map3 = affine_map<(d0, d1) -> (d0)>
#map4 = affine_map<(d0, d1) -> (d0, d1)>
#map5 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map6 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map7 = affine_map<(d0, d1, d2) -> (d2)>
#map8 = affine_map<(d0, d1) -> (d1)>
#map9 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map10 = affine_map<(d0, d1) -> (0, d1)>
#map11 = affine_map<(d0, d1) -> (d0, 0)>
#map12 = affine_map<(d0, d1) -> ()>
#map13 = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#map14 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map15 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
module {
  func.func @gpt(%arg0: tensor<4x8xi64>, %arg1: tensor<32x16xf32>, %arg2: tensor<8x16xf32>, %arg3: tensor<16xf32>, %arg4: tensor<16xf32>, %arg5: tensor<48x16xf32>, %arg6: tensor<48xf32>, %arg7: tensor<16x16xf32>, %arg8: tensor<16xf32>, %arg9: tensor<16xf32>, %arg10: tensor<16xf32>, %arg11: tensor<64x16xf32>, %arg12: tensor<64xf32>, %arg13: tensor<16x64xf32>, %arg14: tensor<16xf32>, %arg15: tensor<16xf32>, %arg16: tensor<16xf32>) -> tensor<4x8x32xf32> {
    %c0_i64 = arith.constant 0 : i64
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    %cst = arith.constant 0.000000e+00 : f64
    %cst_0 = arith.constant 0.000000e+00 : f32
    %cst_1 = arith.constant 0xFF800000 : f32
    %true = arith.constant true
    %cst_2 = arith.constant 1.000000e+00 : f32
    %cst_3 = arith.constant 5.000000e-01 : f32
    %cst_4 = arith.constant dense<0.000000e+00> : tensor<4x2x8x8xf32>
    %cst_5 = arith.constant dense<0.000000e+00> : tensor<f32>
    %cst_6 = arith.constant dense<0xFF800000> : tensor<f32>
    %cst_7 = arith.constant dense<true> : tensor<8x8xi1>
    %cst_8 = arith.constant 0xFFF0000000000000 : f64
    %cst_9 = arith.constant 0.59460355750136051 : f64
    %cst_10 = arith.constant 1.000000e-05 : f64
    %cst_11 = arith.constant 1.600000e+01 : f64
    %cst_12 = arith.constant 1.600000e+01 : f32
    %cst_13 = arith.constant 1.41421354 : f32
    %0 = tensor.empty() : tensor<4x8x16xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<4x8xi64>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: i64, %out: f32):
      %122 = arith.index_cast %in : i64 to index
      %123 = linalg.index 2 : index
      %124 = arith.cmpi slt, %122, %c32 : index
      cf.assert %124, "index must be smaller than dim size"
      %125 = arith.cmpi sge, %in, %c0_i64 : i64
      cf.assert %125, "index must be larger or equal to 0"
      %extracted = tensor.extract %arg1[%122, %123] : tensor<32x16xf32>
      linalg.yield %extracted : f32
    } -> tensor<4x8x16xf32>
    %2 = tensor.empty() : tensor<8xi64>
    %3 = linalg.generic {indexing_maps = [#map2], iterator_types = ["parallel"]} outs(%2 : tensor<8xi64>) {
    ^bb0(%out: i64):
      %122 = linalg.index 0 : index
      %123 = arith.index_cast %122 : index to i64
      linalg.yield %123 : i64
    } -> tensor<8xi64>
    %4 = tensor.empty() : tensor<8x16xf32>
    %5 = linalg.generic {indexing_maps = [#map3, #map4], iterator_types = ["parallel", "parallel"]} ins(%3 : tensor<8xi64>) outs(%4 : tensor<8x16xf32>) {
    ^bb0(%in: i64, %out: f32):
      %122 = arith.index_cast %in : i64 to index
      %123 = linalg.index 1 : index
      %124 = arith.cmpi slt, %122, %c8 : index
      cf.assert %124, "index must be smaller than dim size"
      %125 = arith.cmpi sge, %in, %c0_i64 : i64
      cf.assert %125, "index must be larger or equal to 0"
      %extracted = tensor.extract %arg2[%122, %123] : tensor<8x16xf32>
      linalg.yield %extracted : f32
    } -> tensor<8x16xf32>
    %6 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%1, %5 : tensor<4x8x16xf32>, tensor<8x16xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.addf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %7 = tensor.empty() : tensor<4x8x16xf64>
    %8 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6 : tensor<4x8x16xf32>) outs(%7 : tensor<4x8x16xf64>) {
    ^bb0(%in: f32, %out: f64):
      %122 = arith.extf %in : f32 to f64
      linalg.yield %122 : f64
    } -> tensor<4x8x16xf64>
    %9 = tensor.empty() : tensor<4x8x1xf64>
    %10 = linalg.fill ins(%cst : f64) outs(%9 : tensor<4x8x1xf64>) -> tensor<4x8x1xf64>
    %11 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%8 : tensor<4x8x16xf64>) outs(%10 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.addf %in, %out : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %12 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%11 : tensor<4x8x1xf64>) outs(%9 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.divf %in, %cst_11 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %13 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%8, %12 : tensor<4x8x16xf64>, tensor<4x8x1xf64>) outs(%7 : tensor<4x8x16xf64>) {
    ^bb0(%in: f64, %in_43: f64, %out: f64):
      %122 = arith.subf %in, %in_43 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x16xf64>
    %14 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%13, %13 : tensor<4x8x16xf64>, tensor<4x8x16xf64>) outs(%7 : tensor<4x8x16xf64>) {
    ^bb0(%in: f64, %in_43: f64, %out: f64):
      %122 = arith.mulf %in, %in_43 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x16xf64>
    %15 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%14 : tensor<4x8x16xf64>) outs(%10 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.addf %in, %out : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %16 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%15 : tensor<4x8x1xf64>) outs(%9 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.divf %in, %cst_11 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %17 = tensor.empty() : tensor<4x8x1xf32>
    %18 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%16 : tensor<4x8x1xf64>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f64, %out: f32):
      %122 = arith.truncf %in : f64 to f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %19 = linalg.fill ins(%cst_0 : f32) outs(%17 : tensor<4x8x1xf32>) -> tensor<4x8x1xf32>
    %20 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%6 : tensor<4x8x16xf32>) outs(%19 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.addf %in, %out : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %21 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%20 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.divf %in, %cst_12 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %22 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%18 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.truncf %cst_10 : f64 to f32
      %123 = arith.addf %in, %122 : f32
      linalg.yield %123 : f32
    } -> tensor<4x8x1xf32>
    %23 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%22 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = math.rsqrt %in : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %24 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6, %21 : tensor<4x8x16xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.subf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %25 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%24, %23 : tensor<4x8x16xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.mulf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %26 = linalg.generic {indexing_maps = [#map1, #map7, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%25, %arg3 : tensor<4x8x16xf32>, tensor<16xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.mulf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %27 = linalg.generic {indexing_maps = [#map1, #map7, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%26, %arg4 : tensor<4x8x16xf32>, tensor<16xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.addf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %collapsed = tensor.collapse_shape %27 [[0, 1], [2]] : tensor<4x8x16xf32> into tensor<32x16xf32>
    %28 = tensor.empty() : tensor<16x48xf32>
    %transposed = linalg.transpose ins(%arg5 : tensor<48x16xf32>) outs(%28 : tensor<16x48xf32>) permutation = [1, 0] 
    %29 = tensor.empty() : tensor<32x48xf32>
    %30 = linalg.fill ins(%cst_0 : f32) outs(%29 : tensor<32x48xf32>) -> tensor<32x48xf32>
    %31 = linalg.matmul ins(%collapsed, %transposed : tensor<32x16xf32>, tensor<16x48xf32>) outs(%30 : tensor<32x48xf32>) -> tensor<32x48xf32>
    %32 = linalg.generic {indexing_maps = [#map4, #map8, #map4], iterator_types = ["parallel", "parallel"]} ins(%31, %arg6 : tensor<32x48xf32>, tensor<48xf32>) outs(%29 : tensor<32x48xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.addf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<32x48xf32>
    %expanded = tensor.expand_shape %32 [[0, 1], [2]] output_shape [4, 8, 48] : tensor<32x48xf32> into tensor<4x8x48xf32>
    %extracted_slice = tensor.extract_slice %expanded[0, 0, 0] [4, 8, 16] [1, 1, 1] : tensor<4x8x48xf32> to tensor<4x8x16xf32>
    %extracted_slice_14 = tensor.extract_slice %expanded[0, 0, 16] [4, 8, 16] [1, 1, 1] : tensor<4x8x48xf32> to tensor<4x8x16xf32>
    %extracted_slice_15 = tensor.extract_slice %expanded[0, 0, 32] [4, 8, 16] [1, 1, 1] : tensor<4x8x48xf32> to tensor<4x8x16xf32>
    %expanded_16 = tensor.expand_shape %extracted_slice [[0], [1], [2, 3]] output_shape [4, 8, 2, 8] : tensor<4x8x16xf32> into tensor<4x8x2x8xf32>
    %33 = tensor.empty() : tensor<4x2x8x8xf32>
    %transposed_17 = linalg.transpose ins(%expanded_16 : tensor<4x8x2x8xf32>) outs(%33 : tensor<4x2x8x8xf32>) permutation = [0, 2, 1, 3] 
    %expanded_18 = tensor.expand_shape %extracted_slice_14 [[0], [1], [2, 3]] output_shape [4, 8, 2, 8] : tensor<4x8x16xf32> into tensor<4x8x2x8xf32>
    %expanded_19 = tensor.expand_shape %extracted_slice_15 [[0], [1], [2, 3]] output_shape [4, 8, 2, 8] : tensor<4x8x16xf32> into tensor<4x8x2x8xf32>
    %transposed_20 = linalg.transpose ins(%expanded_19 : tensor<4x8x2x8xf32>) outs(%33 : tensor<4x2x8x8xf32>) permutation = [0, 2, 1, 3] 
    %34 = linalg.generic {indexing_maps = [#map9, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed_17 : tensor<4x2x8x8xf32>) outs(%33 : tensor<4x2x8x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.truncf %cst_9 : f64 to f32
      %123 = arith.mulf %in, %122 : f32
      linalg.yield %123 : f32
    } -> tensor<4x2x8x8xf32>
    %expanded_21 = tensor.expand_shape %3 [[0, 1]] output_shape [1, 8] : tensor<8xi64> into tensor<1x8xi64>
    %expanded_22 = tensor.expand_shape %3 [[0, 1]] output_shape [8, 1] : tensor<8xi64> into tensor<8x1xi64>
    %35 = tensor.empty() : tensor<8x8xi64>
    %36 = linalg.generic {indexing_maps = [#map10, #map11, #map4], iterator_types = ["parallel", "parallel"]} ins(%expanded_21, %expanded_22 : tensor<1x8xi64>, tensor<8x1xi64>) outs(%35 : tensor<8x8xi64>) {
    ^bb0(%in: i64, %in_43: i64, %out: i64):
      %122 = arith.subi %in, %in_43 : i64
      linalg.yield %122 : i64
    } -> tensor<8x8xi64>
    %37 = tensor.empty() : tensor<8x8xi1>
    %38 = linalg.generic {indexing_maps = [#map4, #map4], iterator_types = ["parallel", "parallel"]} ins(%36 : tensor<8x8xi64>) outs(%37 : tensor<8x8xi1>) {
    ^bb0(%in: i64, %out: i1):
      %122 = arith.cmpi sle, %in, %c0_i64 : i64
      linalg.yield %122 : i1
    } -> tensor<8x8xi1>
    %39 = linalg.generic {indexing_maps = [#map4, #map4, #map4], iterator_types = ["parallel", "parallel"]} ins(%38, %cst_7 : tensor<8x8xi1>, tensor<8x8xi1>) outs(%37 : tensor<8x8xi1>) {
    ^bb0(%in: i1, %in_43: i1, %out: i1):
      %122 = arith.andi %in, %in_43 : i1
      linalg.yield %122 : i1
    } -> tensor<8x8xi1>
    %40 = tensor.empty() : tensor<8x8xf32>
    %41 = linalg.generic {indexing_maps = [#map4, #map12, #map12, #map4], iterator_types = ["parallel", "parallel"]} ins(%39, %cst_5, %cst_6 : tensor<8x8xi1>, tensor<f32>, tensor<f32>) outs(%40 : tensor<8x8xf32>) {
    ^bb0(%in: i1, %in_43: f32, %in_44: f32, %out: f32):
      %122 = arith.select %in, %in_43, %in_44 : f32
      linalg.yield %122 : f32
    } -> tensor<8x8xf32>
    %transposed_23 = linalg.transpose ins(%expanded_18 : tensor<4x8x2x8xf32>) outs(%33 : tensor<4x2x8x8xf32>) permutation = [0, 2, 3, 1] 
    %42 = linalg.generic {indexing_maps = [#map9, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed_23 : tensor<4x2x8x8xf32>) outs(%33 : tensor<4x2x8x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.truncf %cst_9 : f64 to f32
      %123 = arith.mulf %in, %122 : f32
      linalg.yield %123 : f32
    } -> tensor<4x2x8x8xf32>
    %collapsed_24 = tensor.collapse_shape %34 [[0, 1], [2], [3]] : tensor<4x2x8x8xf32> into tensor<8x8x8xf32>
    %collapsed_25 = tensor.collapse_shape %42 [[0, 1], [2], [3]] : tensor<4x2x8x8xf32> into tensor<8x8x8xf32>
    %43 = tensor.empty() : tensor<8x8x8xf32>
    %44 = linalg.fill ins(%cst_0 : f32) outs(%43 : tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
    %45 = linalg.batch_matmul ins(%collapsed_24, %collapsed_25 : tensor<8x8x8xf32>, tensor<8x8x8xf32>) outs(%44 : tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
    %expanded_26 = tensor.expand_shape %45 [[0, 1], [2], [3]] output_shape [4, 2, 8, 8] : tensor<8x8x8xf32> into tensor<4x2x8x8xf32>
    %46 = linalg.generic {indexing_maps = [#map9, #map13, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded_26, %41 : tensor<4x2x8x8xf32>, tensor<8x8xf32>) outs(%33 : tensor<4x2x8x8xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.addf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x2x8x8xf32>
    %47 = tensor.empty() : tensor<4x2x8xi64>
    %48 = linalg.fill ins(%c0_i64 : i64) outs(%47 : tensor<4x2x8xi64>) -> tensor<4x2x8xi64>
    %49 = tensor.empty() : tensor<4x2x8xf32>
    %50 = linalg.fill ins(%cst_1 : f32) outs(%49 : tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
    %51:2 = linalg.generic {indexing_maps = [#map9, #map14, #map14], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%46 : tensor<4x2x8x8xf32>) outs(%50, %48 : tensor<4x2x8xf32>, tensor<4x2x8xi64>) {
    ^bb0(%in: f32, %out: f32, %out_43: i64):
      %122 = linalg.index 3 : index
      %123 = arith.index_cast %122 : index to i64
      %124 = arith.maximumf %in, %out : f32
      %125 = arith.cmpf ogt, %in, %out : f32
      %126 = arith.select %125, %123, %out_43 : i64
      linalg.yield %124, %126 : f32, i64
    } -> (tensor<4x2x8xf32>, tensor<4x2x8xi64>)
    %expanded_27 = tensor.expand_shape %51#0 [[0], [1], [2, 3]] output_shape [4, 2, 8, 1] : tensor<4x2x8xf32> into tensor<4x2x8x1xf32>
    %52 = linalg.generic {indexing_maps = [#map9, #map15, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%46, %expanded_27 : tensor<4x2x8x8xf32>, tensor<4x2x8x1xf32>) outs(%33 : tensor<4x2x8x8xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.subf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x2x8x8xf32>
    %53 = linalg.generic {indexing_maps = [#map9, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%52 : tensor<4x2x8x8xf32>) outs(%33 : tensor<4x2x8x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = math.exp %in : f32
      linalg.yield %122 : f32
    } -> tensor<4x2x8x8xf32>
    %54 = tensor.empty() : tensor<4x2x8x1xf32>
    %55 = linalg.fill ins(%cst_0 : f32) outs(%54 : tensor<4x2x8x1xf32>) -> tensor<4x2x8x1xf32>
    %56 = linalg.generic {indexing_maps = [#map9, #map15], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%53 : tensor<4x2x8x8xf32>) outs(%55 : tensor<4x2x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.addf %in, %out : f32
      linalg.yield %122 : f32
    } -> tensor<4x2x8x1xf32>
    %57 = linalg.generic {indexing_maps = [#map9, #map15, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%53, %56 : tensor<4x2x8x8xf32>, tensor<4x2x8x1xf32>) outs(%33 : tensor<4x2x8x8xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.divf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x2x8x8xf32>
    %58 = tensor.empty() : tensor<4x2x8x8xi1>
    %59 = linalg.generic {indexing_maps = [#map9, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%46 : tensor<4x2x8x8xf32>) outs(%58 : tensor<4x2x8x8xi1>) {
    ^bb0(%in: f32, %out: i1):
      %122 = arith.extf %in : f32 to f64
      %123 = arith.cmpf oeq, %122, %cst_8 : f64
      linalg.yield %123 : i1
    } -> tensor<4x2x8x8xi1>
    %60 = tensor.empty() : tensor<4x2x8x1xi1>
    %61 = linalg.fill ins(%true : i1) outs(%60 : tensor<4x2x8x1xi1>) -> tensor<4x2x8x1xi1>
    %62 = linalg.generic {indexing_maps = [#map9, #map15], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%59 : tensor<4x2x8x8xi1>) outs(%61 : tensor<4x2x8x1xi1>) {
    ^bb0(%in: i1, %out: i1):
      %122 = arith.andi %in, %out : i1
      linalg.yield %122 : i1
    } -> tensor<4x2x8x1xi1>
    %63 = linalg.generic {indexing_maps = [#map15, #map9, #map9, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%62, %cst_4, %57 : tensor<4x2x8x1xi1>, tensor<4x2x8x8xf32>, tensor<4x2x8x8xf32>) outs(%33 : tensor<4x2x8x8xf32>) {
    ^bb0(%in: i1, %in_43: f32, %in_44: f32, %out: f32):
      %122 = arith.select %in, %in_43, %in_44 : f32
      linalg.yield %122 : f32
    } -> tensor<4x2x8x8xf32>
    %collapsed_28 = tensor.collapse_shape %63 [[0, 1], [2], [3]] : tensor<4x2x8x8xf32> into tensor<8x8x8xf32>
    %collapsed_29 = tensor.collapse_shape %transposed_20 [[0, 1], [2], [3]] : tensor<4x2x8x8xf32> into tensor<8x8x8xf32>
    %64 = linalg.batch_matmul ins(%collapsed_28, %collapsed_29 : tensor<8x8x8xf32>, tensor<8x8x8xf32>) outs(%44 : tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
    %expanded_30 = tensor.expand_shape %64 [[0, 1], [2], [3]] output_shape [4, 2, 8, 8] : tensor<8x8x8xf32> into tensor<4x2x8x8xf32>
    %65 = tensor.empty() : tensor<4x8x2x8xf32>
    %transposed_31 = linalg.transpose ins(%expanded_30 : tensor<4x2x8x8xf32>) outs(%65 : tensor<4x8x2x8xf32>) permutation = [0, 2, 1, 3] 
    %collapsed_32 = tensor.collapse_shape %transposed_31 [[0], [1], [2, 3]] : tensor<4x8x2x8xf32> into tensor<4x8x16xf32>
    %66 = tensor.empty() : tensor<16x16xf32>
    %transposed_33 = linalg.transpose ins(%arg7 : tensor<16x16xf32>) outs(%66 : tensor<16x16xf32>) permutation = [1, 0] 
    %67 = tensor.empty() : tensor<4x16x16xf32>
    %68 = linalg.generic {indexing_maps = [#map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%transposed_33 : tensor<16x16xf32>) outs(%67 : tensor<4x16x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<4x16x16xf32>
    %69 = linalg.fill ins(%cst_0 : f32) outs(%0 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
    %70 = linalg.batch_matmul ins(%collapsed_32, %68 : tensor<4x8x16xf32>, tensor<4x16x16xf32>) outs(%69 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
    %71 = linalg.generic {indexing_maps = [#map1, #map7, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%70, %arg8 : tensor<4x8x16xf32>, tensor<16xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.addf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %72 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6, %71 : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.addf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %73 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%72 : tensor<4x8x16xf32>) outs(%7 : tensor<4x8x16xf64>) {
    ^bb0(%in: f32, %out: f64):
      %122 = arith.extf %in : f32 to f64
      linalg.yield %122 : f64
    } -> tensor<4x8x16xf64>
    %74 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%73 : tensor<4x8x16xf64>) outs(%10 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.addf %in, %out : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %75 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%74 : tensor<4x8x1xf64>) outs(%9 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.divf %in, %cst_11 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %76 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%73, %75 : tensor<4x8x16xf64>, tensor<4x8x1xf64>) outs(%7 : tensor<4x8x16xf64>) {
    ^bb0(%in: f64, %in_43: f64, %out: f64):
      %122 = arith.subf %in, %in_43 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x16xf64>
    %77 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%76, %76 : tensor<4x8x16xf64>, tensor<4x8x16xf64>) outs(%7 : tensor<4x8x16xf64>) {
    ^bb0(%in: f64, %in_43: f64, %out: f64):
      %122 = arith.mulf %in, %in_43 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x16xf64>
    %78 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%77 : tensor<4x8x16xf64>) outs(%10 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.addf %in, %out : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %79 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%78 : tensor<4x8x1xf64>) outs(%9 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.divf %in, %cst_11 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %80 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%79 : tensor<4x8x1xf64>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f64, %out: f32):
      %122 = arith.truncf %in : f64 to f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %81 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%72 : tensor<4x8x16xf32>) outs(%19 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.addf %in, %out : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %82 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%81 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.divf %in, %cst_12 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %83 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%80 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.truncf %cst_10 : f64 to f32
      %123 = arith.addf %in, %122 : f32
      linalg.yield %123 : f32
    } -> tensor<4x8x1xf32>
    %84 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%83 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = math.rsqrt %in : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %85 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%72, %82 : tensor<4x8x16xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.subf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %86 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%85, %84 : tensor<4x8x16xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.mulf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %87 = linalg.generic {indexing_maps = [#map1, #map7, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%86, %arg9 : tensor<4x8x16xf32>, tensor<16xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.mulf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %88 = linalg.generic {indexing_maps = [#map1, #map7, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%87, %arg10 : tensor<4x8x16xf32>, tensor<16xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.addf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %collapsed_34 = tensor.collapse_shape %88 [[0, 1], [2]] : tensor<4x8x16xf32> into tensor<32x16xf32>
    %89 = tensor.empty() : tensor<16x64xf32>
    %transposed_35 = linalg.transpose ins(%arg11 : tensor<64x16xf32>) outs(%89 : tensor<16x64xf32>) permutation = [1, 0] 
    %90 = tensor.empty() : tensor<32x64xf32>
    %91 = linalg.fill ins(%cst_0 : f32) outs(%90 : tensor<32x64xf32>) -> tensor<32x64xf32>
    %92 = linalg.matmul ins(%collapsed_34, %transposed_35 : tensor<32x16xf32>, tensor<16x64xf32>) outs(%91 : tensor<32x64xf32>) -> tensor<32x64xf32>
    %93 = linalg.generic {indexing_maps = [#map4, #map8, #map4], iterator_types = ["parallel", "parallel"]} ins(%92, %arg12 : tensor<32x64xf32>, tensor<64xf32>) outs(%90 : tensor<32x64xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.addf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<32x64xf32>
    %expanded_36 = tensor.expand_shape %93 [[0, 1], [2]] output_shape [4, 8, 64] : tensor<32x64xf32> into tensor<4x8x64xf32>
    %94 = tensor.empty() : tensor<4x8x64xf32>
    %95 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_36 : tensor<4x8x64xf32>) outs(%94 : tensor<4x8x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.divf %in, %cst_13 : f32
      %123 = math.erf %122 : f32
      %124 = arith.addf %123, %cst_2 : f32
      %125 = arith.mulf %124, %cst_3 : f32
      %126 = arith.mulf %in, %125 : f32
      linalg.yield %126 : f32
    } -> tensor<4x8x64xf32>
    %collapsed_37 = tensor.collapse_shape %95 [[0, 1], [2]] : tensor<4x8x64xf32> into tensor<32x64xf32>
    %96 = tensor.empty() : tensor<64x16xf32>
    %transposed_38 = linalg.transpose ins(%arg13 : tensor<16x64xf32>) outs(%96 : tensor<64x16xf32>) permutation = [1, 0] 
    %97 = tensor.empty() : tensor<32x16xf32>
    %98 = linalg.fill ins(%cst_0 : f32) outs(%97 : tensor<32x16xf32>) -> tensor<32x16xf32>
    %99 = linalg.matmul ins(%collapsed_37, %transposed_38 : tensor<32x64xf32>, tensor<64x16xf32>) outs(%98 : tensor<32x16xf32>) -> tensor<32x16xf32>
    %100 = linalg.generic {indexing_maps = [#map4, #map8, #map4], iterator_types = ["parallel", "parallel"]} ins(%99, %arg14 : tensor<32x16xf32>, tensor<16xf32>) outs(%97 : tensor<32x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.addf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<32x16xf32>
    %expanded_39 = tensor.expand_shape %100 [[0, 1], [2]] output_shape [4, 8, 16] : tensor<32x16xf32> into tensor<4x8x16xf32>
    %101 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%72, %expanded_39 : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.addf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %102 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%101 : tensor<4x8x16xf32>) outs(%7 : tensor<4x8x16xf64>) {
    ^bb0(%in: f32, %out: f64):
      %122 = arith.extf %in : f32 to f64
      linalg.yield %122 : f64
    } -> tensor<4x8x16xf64>
    %103 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%102 : tensor<4x8x16xf64>) outs(%10 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.addf %in, %out : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %104 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%103 : tensor<4x8x1xf64>) outs(%9 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.divf %in, %cst_11 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %105 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%102, %104 : tensor<4x8x16xf64>, tensor<4x8x1xf64>) outs(%7 : tensor<4x8x16xf64>) {
    ^bb0(%in: f64, %in_43: f64, %out: f64):
      %122 = arith.subf %in, %in_43 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x16xf64>
    %106 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%105, %105 : tensor<4x8x16xf64>, tensor<4x8x16xf64>) outs(%7 : tensor<4x8x16xf64>) {
    ^bb0(%in: f64, %in_43: f64, %out: f64):
      %122 = arith.mulf %in, %in_43 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x16xf64>
    %107 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%106 : tensor<4x8x16xf64>) outs(%10 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.addf %in, %out : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %108 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%107 : tensor<4x8x1xf64>) outs(%9 : tensor<4x8x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %122 = arith.divf %in, %cst_11 : f64
      linalg.yield %122 : f64
    } -> tensor<4x8x1xf64>
    %109 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%108 : tensor<4x8x1xf64>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f64, %out: f32):
      %122 = arith.truncf %in : f64 to f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %110 = linalg.generic {indexing_maps = [#map1, #map6], iterator_types = ["parallel", "parallel", "reduction"]} ins(%101 : tensor<4x8x16xf32>) outs(%19 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.addf %in, %out : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %111 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%110 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.divf %in, %cst_12 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %112 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%109 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = arith.truncf %cst_10 : f64 to f32
      %123 = arith.addf %in, %122 : f32
      linalg.yield %123 : f32
    } -> tensor<4x8x1xf32>
    %113 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%112 : tensor<4x8x1xf32>) outs(%17 : tensor<4x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %122 = math.rsqrt %in : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x1xf32>
    %114 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%101, %111 : tensor<4x8x16xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.subf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %115 = linalg.generic {indexing_maps = [#map1, #map6, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%114, %113 : tensor<4x8x16xf32>, tensor<4x8x1xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.mulf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %116 = linalg.generic {indexing_maps = [#map1, #map7, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%115, %arg15 : tensor<4x8x16xf32>, tensor<16xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.mulf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %117 = linalg.generic {indexing_maps = [#map1, #map7, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%116, %arg16 : tensor<4x8x16xf32>, tensor<16xf32>) outs(%0 : tensor<4x8x16xf32>) {
    ^bb0(%in: f32, %in_43: f32, %out: f32):
      %122 = arith.addf %in, %in_43 : f32
      linalg.yield %122 : f32
    } -> tensor<4x8x16xf32>
    %118 = tensor.empty() : tensor<16x32xf32>
    %transposed_40 = linalg.transpose ins(%arg1 : tensor<32x16xf32>) outs(%118 : tensor<16x32xf32>) permutation = [1, 0] 
    %collapsed_41 = tensor.collapse_shape %117 [[0, 1], [2]] : tensor<4x8x16xf32> into tensor<32x16xf32>
    %119 = tensor.empty() : tensor<32x32xf32>
    %120 = linalg.fill ins(%cst_0 : f32) outs(%119 : tensor<32x32xf32>) -> tensor<32x32xf32>
    %121 = linalg.matmul ins(%collapsed_41, %transposed_40 : tensor<32x16xf32>, tensor<16x32xf32>) outs(%120 : tensor<32x32xf32>) -> tensor<32x32xf32>
    %expanded_42 = tensor.expand_shape %121 [[0, 1], [2]] output_shape [4, 8, 32] : tensor<32x32xf32> into tensor<4x8x32xf32>
    return %expanded_42 : tensor<4x8x32xf32>
  }
}
