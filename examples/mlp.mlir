// A two-layer MLP written with global shapes. Only the inputs and the output are
// annotated; sharding-propagation infers the rest, shard-partition makes it SPMD.
//
//   shardc-opt examples/mlp.mlir --sharding-propagation --shard-partition --canonicalize
shard.grid @grid(shape = 4)

func.func @mlp(%x: tensor<16x32xf32>, %w1: tensor<32x64xf32>, %w2: tensor<64x32xf32>)
    -> tensor<16x32xf32> {
  // Tensor parallelism: w1 split by columns, w2 by rows (Megatron style).
  %s_cols = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %s_rows = shard.sharding @grid split_axes = [[0], []] : !shard.sharding
  %s_repl = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %w1_s = shard.shard %w1 to %s_cols : tensor<32x64xf32>
  %w2_s = shard.shard %w2 to %s_rows : tensor<64x32xf32>

  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x64xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %h = linalg.matmul ins(%x, %w1_s : tensor<16x32xf32>, tensor<32x64xf32>)
                     outs(%f1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %relu = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<16x64xf32>) outs(%e2 : tensor<16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<16x64xf32>
  %e3 = tensor.empty() : tensor<16x32xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%relu, %w2_s : tensor<16x64xf32>, tensor<64x32xf32>)
                     outs(%f3 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y_s = shard.shard %y to %s_repl : tensor<16x32xf32>
  return %y_s : tensor<16x32xf32>
}
