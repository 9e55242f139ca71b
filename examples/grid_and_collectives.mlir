// A 2x4 process grid, an annotated input and a few collectives. Every stage of shardc
// reads and prints this textual form, as mlir-opt does.
shard.grid @grid(shape = 2x4)

func.func @row_sums(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // Rows split over grid axis 0, columns over grid axis 1.
  %s = shard.sharding @grid split_axes = [[0], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  return %xs : tensor<8x16xf32>
}

func.func @local_step(%local: tensor<4x4xf32>) -> (tensor<4x16xf32>, tensor<4x4xf32>) {
  // Gather the column pieces along grid axis 1, then sum partial results over axis 0.
  %full = shard.all_gather %local on @grid grid_axes = [1] gather_axis = 1
    : tensor<4x4xf32> -> tensor<4x16xf32>
  %sum = shard.all_reduce %local on @grid grid_axes = [0] reduction = sum
    : tensor<4x4xf32> -> tensor<4x4xf32>
  return %full, %sum : tensor<4x16xf32>, tensor<4x4xf32>
}

func.func @where_am_i() -> (index, index, index) {
  %i, %j = shard.process_multi_index on @grid axes = [0, 1] : index, index
  %lin = shard.process_linear_index on @grid : index
  return %i, %j, %lin : index, index, index
}
