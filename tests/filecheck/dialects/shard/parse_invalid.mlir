// RUN: shardc-opt %s --split-input-file --verify-diagnostics
// Parse errors of shard syntax, with mlir-opt's texts (some failures are a chain of errors).

shard.grid @g(shape = 2x3)
func.func @i16_axes_overflow() -> index {
  // expected-error @+1 {{custom op 'shard.grid_shape' integer value too large}}
  %0 = shard.grid_shape @g axes = [40000] : index
  return %0 : index
}

// -----

shard.grid @g(shape = 2x3)
func.func @i16_axes_negative_overflow() -> index {
  // expected-error @+1 {{custom op 'shard.process_multi_index' integer value too large}}
  %0 = shard.process_multi_index on @g axes = [-32769] : index
  return %0 : index
}

// -----

shard.grid @g(shape = 2x3)
func.func @i16_grid_axes_overflow_then_more(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{custom op 'shard.all_reduce' integer value too large}}
  // expected-error @+1 {{expected ']'}}
  %0 = shard.all_reduce %a on @g grid_axes = [32768, 0] : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @i16_neighbors_split_axes(%i: index) -> index {
  // expected-error @+1 {{custom op 'shard.neighbors_linear_indices' integer value too large}}
  %0:2 = shard.neighbors_linear_indices on @g[%i] split_axes = [70000] : index, index
  return %0#0 : index
}

// -----

shard.grid @g(shape = 2x3)
func.func @grid_axes_not_integer(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{custom op 'shard.all_reduce' expected integer value}}
  // expected-error @+1 {{expected ']'}}
  %0 = shard.all_reduce %a on @g grid_axes = [0, x] : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @split_axes_overflow() {
  // expected-error @+2 {{custom op 'shard.sharding' integer value too large}}
  // expected-error @+1 {{custom op 'shard.sharding' failed to parse Shard_GridAxesArrayAttr parameter 'axes' which is to be a `::llvm::ArrayRef<GridAxesAttr>`}}
  %s = shard.sharding @g split_axes = [[0], [40000]] : !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @split_axes_overflow_generic() {
  // expected-error @+2 {{integer value too large}}
  // expected-error @+1 {{failed to parse Shard_GridAxesArrayAttr parameter 'axes' which is to be a `::llvm::ArrayRef<GridAxesAttr>`}}
  %s = "shard.sharding"() <{grid = @g, operandSegmentSizes = array<i32: 0, 0>, split_axes = #shard<axisarray[[40000]]>}> : () -> !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @root_overflow(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{custom op 'shard.broadcast' integer value too large}}
  // expected-error @+1 {{custom op 'shard.broadcast' expected SSA value or integer}}
  %0 = shard.broadcast %a on @g grid_axes = [0] root = [99999999999999999999] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @halo_list_unclosed() {
  // expected-error @+2 {{expected ']' in dynamic index list}}
  // expected-error @+1 {{custom op 'shard.sharding' expected SSA value or integer}}
  %s = shard.sharding @g split_axes = [[0]] halo_sizes = [1, 2 : !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @gather_axis_overflow(%a: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{integer constant out of range for attribute}}
  %0 = shard.all_gather %a on @g grid_axes = [0] gather_axis = 99999999999999999999 : tensor<4xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// expected-error @+2 {{invalid dimension}}
// expected-error @+1 {{custom op 'shard.grid' Failed parsing dimension list.}}
shard.grid @g(shape = 2x-3)

// -----

// expected-error @+1 {{custom op 'shard.grid' Failed parsing dimension list. Did you mean an empty list? It must be denoted by "[]".}}
shard.grid @g(shape = x2)

// -----

// expected-error @+2 {{invalid dimension}}
// expected-error @+1 {{custom op 'shard.grid' Failed parsing dimension list.}}
shard.grid @g(shape = 4x99999999999999999999)

// -----

shard.grid @g(shape = 2x3)
func.func @shard_memref(%a: memref<4xf32>, %s: !shard.sharding) {
  // expected-error @+1 {{custom op 'shard.shard' invalid kind of type specified: expected builtin.tensor, but found 'memref<4xf32>'}}
  %0 = shard.shard %a to %s : memref<4xf32>
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @linear_index_i64() {
  // expected-error @+1 {{custom op 'shard.process_linear_index' invalid kind of type specified: expected builtin.index, but found 'i64'}}
  %0 = shard.process_linear_index on @g : i64
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @update_halo_rank0(%a: memref<f32>) {
  // expected-error @+1 {{custom op 'shard.update_halo' 'result' must be non-0-ranked.memref of any type values or non-0-ranked.tensor of any type values, but got 'memref<f32>'}}
  %0 = shard.update_halo %a on @g split_axes = [[0]] : memref<f32>
  return
}

// -----

// A nested symbol is no grid: rejected where it is written, as trunk does.
shard.grid @a(shape = 2)
func.func @sharding_nested_grid_symbol() {
  // expected-error @+1 {{custom op 'shard.sharding' invalid kind of attribute specified}}
  %s = shard.sharding @a::@b split_axes = [[0]] : !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2)
func.func @collective_nested_grid_symbol(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{custom op 'shard.all_reduce' invalid kind of attribute specified}}
  %0 = shard.all_reduce %a on @g::@h grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// ORACLE-SKIP: MLIR 22.1.8 asks for its own spelling, 'scatter_axis'.
shard.grid @g(shape = 2)
func.func @reduce_scatter_without_scatter_dim(%a: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{custom op 'shard.reduce_scatter' expected 'scatter_dim'}}
  %0 = shard.reduce_scatter %a on @g grid_axes = [0] : tensor<4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// ORACLE-SKIP: MLIR 22.1.8 does not read trunk's visibility before the grid name.
// expected-error @+1 {{'shard.grid' op visibility expected to be one of ["public", "private", "nested"], but got "hidden"}}
shard.grid "hidden" @g(shape = 2)

// -----

// expected-error @+1 {{'shard.grid' op visibility expected to be one of ["public", "private", "nested"], but got "hidden"}}
shard.grid @g(shape = 2) {sym_visibility = "hidden"}
