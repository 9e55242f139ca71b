// RUN: shardc-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{'shard.grid' op rank of grid is expected to be a positive integer}}
shard.grid @flat(shape = [])

// -----

// expected-error @+1 {{'shard.grid' op dimension size of a grid is expected to be non-negative or dynamic}}
"shard.grid"() <{shape = array<i64: 4, -3>, sym_name = "neg"}> : () -> ()

// -----

func.func @unknown_grid_in_query() -> index {
  // expected-error @+1 {{Undefined required grid symbol "nowhere".}}
  %0 = shard.grid_shape @nowhere axes = [0] : index
  return %0 : index
}

// -----

shard.grid @g(shape = 2x3)
func.func @query_duplicate_axes() -> (index, index) {
  // expected-error @+1 {{Grid axes contains duplicate elements.}}
  %0:2 = shard.process_multi_index on @g axes = [1, 1] : index, index
  return %0#0, %0#1 : index, index
}

// -----

shard.grid @g(shape = 2x3)
func.func @query_axis_out_of_bounds() -> index {
  // expected-error @+1 {{0-based grid axis index 2 is out of bounds. The referenced grid "g" is of rank 2.}}
  %0 = shard.grid_shape @g axes = [2] : index
  return %0 : index
}

// -----

shard.grid @g(shape = 2x3)
func.func @query_result_count() -> index {
  // expected-error @+1 {{Unexpected number of results 1. Expected 2.}}
  %0 = shard.process_multi_index on @g : index
  return %0 : index
}

// -----

shard.grid @g(shape = 2x3)
func.func @query_result_type() -> i32 {
  // expected-error @+1 {{'shard.grid_shape' op result #0 must be variadic of index, but got 'i32'}}
  %0 = "shard.grid_shape"() <{axes = array<i16: 0>, grid = @g}> : () -> i32
  return %0 : i32
}

// -----

shard.grid @g(shape = 2x3)
func.func @linear_index_type() -> i64 {
  // expected-error @+1 {{'shard.process_linear_index' op result #0 must be index, but got 'i64'}}
  %0 = "shard.process_linear_index"() <{grid = @g}> : () -> i64
  return %0 : i64
}

// -----

func.func @linear_index_unknown_grid() -> index {
  // expected-error @+1 {{Undefined required grid symbol "missing".}}
  %0 = shard.process_linear_index on @missing : index
  return %0 : index
}

// -----

func.func @neighbors_unknown_grid(%i: index) -> index {
  // expected-error @+1 {{Undefined required grid symbol "missing".}}
  %0:2 = shard.neighbors_linear_indices on @missing[%i] split_axes = [0] : index, index
  return %0#0 : index
}

// -----

shard.grid @g(shape = 4)
func.func @neighbors_device_type(%i: i32) -> index {
  // expected-error @+1 {{'shard.neighbors_linear_indices' op operand #0 must be variadic of index, but got 'i32'}}
  %0:2 = "shard.neighbors_linear_indices"(%i) <{grid = @g, split_axes = array<i16: 0>}> : (i32) -> (index, index)
  return %0#0 : index
}

// -----

shard.grid @g(shape = 2x3)
func.func @sharding_axis_twice() {
  // expected-error @+1 {{grid axis duplicated}}
  %s = shard.sharding @g split_axes = [[1], [0, 1]] : !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @sharding_negative_axis() {
  // expected-error @+1 {{grid axis is expected to be non-negative}}
  %s = shard.sharding @g split_axes = [[0], [-2]] : !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @sharding_halos_and_offsets() {
  // expected-error @+1 {{'shard.sharding' op halo sizes and shard offsets are mutually exclusive}}
  %s = shard.sharding @g split_axes = [[0]] halo_sizes = [1, 1] sharded_dims_offsets = [0, 3, 6] : !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @sharding_halo_count() {
  // expected-error @+1 {{halo sizes must be specified for all split axes.}}
  %s = shard.sharding @g split_axes = [[0], [], [1]] halo_sizes = [1, 1, 2] : !shard.sharding
  return
}

// -----

func.func @sharding_unknown_grid() {
  // expected-error @+1 {{Undefined required grid symbol "gone".}}
  %s = shard.sharding @gone split_axes = [[0]] : !shard.sharding
  return
}

// -----

func.func @not_a_grid() {
  return
}
func.func @sharding_on_function() {
  // expected-error @+1 {{Undefined required grid symbol "not_a_grid".}}
  %s = shard.sharding @not_a_grid split_axes = [[0]] : !shard.sharding
  return
}

// -----

shard.grid @g(shape = ?x3)
func.func @offsets_on_dynamic_grid() {
  // expected-error @+1 {{sharded dims offsets are not allowed for device grids with dynamic shape.}}
  %s = shard.sharding @g split_axes = [[1]] sharded_dims_offsets = [0, 1, 2, 3] : !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @offsets_too_short() {
  // expected-error @+1 {{sharded dims offsets has wrong size.}}
  %s = shard.sharding @g split_axes = [[0], [1]] sharded_dims_offsets = [0, 4, 8, 0, 2] : !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @offsets_decreasing() {
  // expected-error @+1 {{sharded dims offsets must be non-decreasing.}}
  %s = shard.sharding @g split_axes = [[1]] sharded_dims_offsets = [0, 5, 4, 9] : !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @halo_operand_type(%h: index) {
  // expected-error @+1 {{'shard.sharding' op operand #0 must be variadic of 64-bit signless integer, but got 'index'}}
  %s = "shard.sharding"(%h) <{grid = @g, operandSegmentSizes = array<i32: 0, 1>, split_axes = #shard<axisarray[[0]]>, static_halo_sizes = array<i64: -9223372036854775808, 1>, static_sharded_dims_offsets = array<i64>}> : (index) -> !shard.sharding
  return
}

// -----

// ORACLE-SKIP: mlir-opt 22.1.8 does not check this and crashes printing the op.
shard.grid @g(shape = 2x3)
func.func @halo_markers_without_values() {
  // expected-error @+1 {{'shard.sharding' op expected 1 dynamic halo size values, got 0}}
  %s = "shard.sharding"() <{grid = @g, operandSegmentSizes = array<i32: 0, 0>, split_axes = #shard<axisarray[[0]]>, static_halo_sizes = array<i64: -9223372036854775808, 1>, static_sharded_dims_offsets = array<i64>}> : () -> !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @shard_type_changes(%arg0: tensor<6xf32>) -> tensor<3xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{'shard.shard' op failed to verify that all of {result, src} have same type}}
  %0 = "shard.shard"(%arg0, %s) : (tensor<6xf32>, !shard.sharding) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @shard_unranked(%arg0: tensor<*xf32>) -> tensor<*xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{'shard.shard' op operand #0 must be ranked tensor of any type values, but got 'tensor<*xf32>'}}
  %0 = "shard.shard"(%arg0, %s) : (tensor<*xf32>, !shard.sharding) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @get_sharding_unranked(%arg0: tensor<*xf32>) {
  // expected-error @+1 {{'shard.get_sharding' op operand #0 must be ranked tensor of any type values, but got 'tensor<*xf32>'}}
  %s = "shard.get_sharding"(%arg0) : (tensor<*xf32>) -> !shard.sharding
  return
}

// -----

func.func @shard_shape_result(%s: !shard.sharding) {
  // expected-error @+1 {{'shard.shard_shape' op result #1 must be variadic of index, but got 'i64'}}
  %0:2 = "shard.shard_shape"(%s) <{device = array<i64: 0>, dims = array<i64: 4, 4>, operandSegmentSizes = array<i32: 0, 1, 0>}> : (!shard.sharding) -> (index, i64)
  return
}

// -----

// ORACLE-SKIP: trunk's all_gather/reduce_scatter take memrefs (MLIR 22.1.8's: tensors only).
shard.grid @g(shape = 2x3)
func.func @all_gather_scalar(%arg0: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{'shard.all_gather' op operand #0 must be non-0-ranked.memref of any type values or non-0-ranked.tensor of any type values, but got 'tensor<f32>'}}
  %0 = shard.all_gather %arg0 on @g grid_axes = [0] gather_axis = 0 : tensor<f32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_gather_element_type(%arg0: tensor<4xf32>) -> tensor<8xf16> {
  // expected-error @+1 {{'shard.all_gather' op requires the same element type for all operands and results}}
  %0 = shard.all_gather %arg0 on @g grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<8xf16>
  return %0 : tensor<8xf16>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_gather_rank(%arg0: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'shard.all_gather' op result type has different rank than operands}}
  %0 = shard.all_gather %arg0 on @g grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_gather_axis(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{Gather axis 2 is out of bounds [0, 2).}}
  %0 = shard.all_gather %arg0 on @g grid_axes = [0] gather_axis = 2 : tensor<4x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_gather_size(%arg0: tensor<4x5xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{Dimension size mismatch for result axis 1. Expected 15, but got 10.}}
  %0 = shard.all_gather %arg0 on @g grid_axes = [1] gather_axis = 1 : tensor<4x5xf32> -> tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

shard.grid @g(shape = 2x?)
func.func @all_gather_dynamic_group(%arg0: tensor<5xf32>) -> tensor<10xf32> {
  // expected-error @+1 {{Dimension size mismatch for result axis 0. Expected dynamic, but got 10.}}
  %0 = shard.all_gather %arg0 on @g grid_axes = [0, 1] gather_axis = 0 : tensor<5xf32> -> tensor<10xf32>
  return %0 : tensor<10xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_gather_duplicate_axes(%arg0: tensor<5xf32>) -> tensor<20xf32> {
  // expected-error @+1 {{Grid axes contains duplicate elements.}}
  %0 = shard.all_gather %arg0 on @g grid_axes = [0, 0] gather_axis = 0 : tensor<5xf32> -> tensor<20xf32>
  return %0 : tensor<20xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_reduce_shape(%arg0: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'shard.all_reduce' op requires the same shape for all operands and results}}
  %0 = shard.all_reduce %arg0 on @g grid_axes = [0] : tensor<4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_reduce_unranked(%arg0: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{'shard.all_reduce' op operand #0 must be memref of any type values or ranked tensor of any type values, but got 'tensor<*xf32>'}}
  %0 = shard.all_reduce %arg0 on @g grid_axes = [0] : tensor<*xf32> -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_reduce_axis(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{0-based grid axis index 5 is out of bounds. The referenced grid "g" is of rank 2.}}
  %0 = shard.all_reduce %arg0 on @g grid_axes = [5] : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce_unknown_grid(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{Undefined required grid symbol "g".}}
  %0 = shard.all_reduce %arg0 on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_slice_divisibility(%arg0: tensor<7x2xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{Operand dimension size 7 is not divisible by collective device group size 2 for tensor axis 0.}}
  %0 = shard.all_slice %arg0 on @g grid_axes = [0] slice_axis = 0 : tensor<7x2xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_slice_other_dim(%arg0: tensor<6x2xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{Dimension size mismatch for result axis 1. Expected 2, but got 4.}}
  %0 = shard.all_slice %arg0 on @g grid_axes = [1] slice_axis = 0 : tensor<6x2xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_slice_size(%arg0: tensor<6x2xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{Dimension size mismatch for result axis 0. Expected 2, but got 3.}}
  %0 = shard.all_slice %arg0 on @g grid_axes = [1] slice_axis = 0 : tensor<6x2xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_to_all_split(%arg0: tensor<4x3xf32>) -> tensor<1x9xf32> {
  // expected-error @+1 {{Dimension size mismatch for result axis 0. Expected dynamic, but got 1.}}
  %0 = shard.all_to_all %arg0 on @g grid_axes = [1] split_axis = 0 concat_axis = 1 : tensor<4x3xf32> -> tensor<1x9xf32>
  return %0 : tensor<1x9xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_to_all_concat(%arg0: tensor<6x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{Dimension size mismatch for result axis 1. Expected 9, but got 6.}}
  %0 = shard.all_to_all %arg0 on @g grid_axes = [1] split_axis = 0 concat_axis = 1 : tensor<6x3xf32> -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_to_all_same_axis(%arg0: tensor<6x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{Dimension size mismatch for result axis 0. Expected 6, but got 2.}}
  %0 = shard.all_to_all %arg0 on @g grid_axes = [1] split_axis = 0 concat_axis = 0 : tensor<6x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @broadcast_shape(%arg0: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'shard.broadcast' op failed to verify that all of {input, result} have same shape}}
  %0 = shard.broadcast %arg0 on @g grid_axes = [0] root = [0] : (tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @broadcast_element_type(%arg0: tensor<4xf32>) -> tensor<4xi32> {
  // expected-error @+1 {{'shard.broadcast' op failed to verify that all of {input, result} have same element type}}
  %0 = shard.broadcast %arg0 on @g grid_axes = [0] root = [0] : (tensor<4xf32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @broadcast_root_size(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{In-group device "root" has unexpected multi-index size 1. Expected 2.}}
  %0 = shard.broadcast %arg0 on @g grid_axes = [0, 1] root = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @broadcast_root_range(%arg0: tensor<4xf32>, %r: index) -> tensor<4xf32> {
  // expected-error @+1 {{Out of bounds coordinate 1 for in-group device "root". Got 3, but expected value in the range [0, 2].}}
  %0 = shard.broadcast %arg0 on @g grid_axes = [0, 1] root = [%r, 3] : (tensor<4xf32>, index) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @gather_rank(%arg0: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'shard.gather' op failed to verify that all of {input, result} have same rank}}
  %0 = shard.gather %arg0 on @g grid_axes = [0] gather_axis = 0 root = [0] : (tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @gather_root(%arg0: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{Out of bounds coordinate 0 for in-group device "root". Got 2, but expected value in the range [0, 1].}}
  %0 = shard.gather %arg0 on @g grid_axes = [0] gather_axis = 0 root = [2] : (tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @gather_size(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{Dimension size mismatch for result axis 0. Expected 8, but got 4.}}
  %0 = shard.gather %arg0 on @g grid_axes = [0] gather_axis = 0 root = [1] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @recv_shape(%arg0: tensor<4xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'shard.recv' op failed to verify that all of {input, result} have same shape}}
  %0 = shard.recv %arg0 on @g grid_axes = [1] source = [0] : (tensor<4xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @recv_source(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{Out of bounds coordinate 0 for in-group device "source". Got 3, but expected value in the range [0, 2].}}
  %0 = shard.recv %arg0 on @g grid_axes = [1] source = [3] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @reduce_shape(%arg0: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'shard.reduce' op failed to verify that all of {input, result} have same shape}}
  %0 = shard.reduce %arg0 on @g grid_axes = [0] root = [0] : (tensor<4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @reduce_root(%arg0: tensor<4xf32>) -> tensor<4xf64> {
  // expected-error @+1 {{In-group device "root" has unexpected multi-index size 0. Expected 1.}}
  %0 = shard.reduce %arg0 on @g grid_axes = [1] reduction = max root = [] : (tensor<4xf32>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}

// -----

shard.grid @g(shape = 2x3)
func.func @reduce_scatter_rank(%arg0: tensor<4xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'shard.reduce_scatter' op result type has different rank than operands}}
  %0 = shard.reduce_scatter %arg0 on @g grid_axes = [0] scatter_axis = 0 : tensor<4xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @reduce_scatter_divisibility(%arg0: tensor<4xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{Operand dimension size 4 is not divisible by collective device group size 3 for tensor axis 0.}}
  %0 = shard.reduce_scatter %arg0 on @g grid_axes = [1] scatter_axis = 0 : tensor<4xf32> -> tensor<1xf32>
  return %0 : tensor<1xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @scatter_size(%arg0: tensor<12xi8>) -> tensor<6xi8> {
  // expected-error @+1 {{Dimension size mismatch for result axis 0. Expected 2, but got 6.}}
  %0 = shard.scatter %arg0 on @g grid_axes = [0, 1] scatter_axis = 0 root = [0, 0] : (tensor<12xi8>) -> tensor<6xi8>
  return %0 : tensor<6xi8>
}

// -----

shard.grid @g(shape = 2x3)
func.func @scatter_element_type(%arg0: tensor<12xi8>) -> tensor<6xi16> {
  // expected-error @+1 {{'shard.scatter' op failed to verify that all of {input, result} have same element type}}
  %0 = shard.scatter %arg0 on @g grid_axes = [0] scatter_axis = 0 root = [0] : (tensor<12xi8>) -> tensor<6xi16>
  return %0 : tensor<6xi16>
}

// -----

shard.grid @g(shape = 2x3)
func.func @send_destination(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{Out of bounds coordinate 0 for in-group device "destination". Got 2, but expected value in the range [0, 1].}}
  %0 = shard.send %arg0 on @g grid_axes = [0] destination = [2] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @send_root_index_type(%arg0: tensor<4xf32>, %d: i64) -> tensor<4xf32> {
  // expected-error @+1 {{'shard.send' op operand #1 must be variadic of index, but got 'i64'}}
  %0 = "shard.send"(%arg0, %d) <{destination = array<i64: -9223372036854775808>, grid = @g, grid_axes = array<i16: 0>}> : (tensor<4xf32>, i64) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @shift_axis(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{Invalid shift axis 1. It must be one of the grouping grid axes.}}
  %0 = shard.shift %arg0 on @g grid_axes = [0] shift_axis = 1 offset = 1 : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @shift_shape(%arg0: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'shard.shift' op requires the same shape for all operands and results}}
  %0 = shard.shift %arg0 on @g grid_axes = [0] shift_axis = 0 offset = 1 : tensor<4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @update_halo_type(%arg0: tensor<4xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{'shard.update_halo' op failed to verify that result has same type as destination}}
  %0 = "shard.update_halo"(%arg0) <{grid = @g, split_axes = #shard<axisarray[[0]]>, static_halo_sizes = array<i64: 1, 1>}> : (tensor<4xf32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @update_halo_scalar(%arg0: memref<f32>) -> memref<f32> {
  // expected-error @+1 {{'shard.update_halo' op operand #0 must be non-0-ranked.memref of any type values or non-0-ranked.tensor of any type values, but got 'memref<f32>'}}
  %0 = "shard.update_halo"(%arg0) <{grid = @g, split_axes = #shard<axisarray[[0]]>, static_halo_sizes = array<i64>}> : (memref<f32>) -> memref<f32>
  return %0 : memref<f32>
}

// -----

func.func @update_halo_unknown_grid(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{Undefined required grid symbol "elsewhere".}}
  %0 = shard.update_halo %arg0 on @elsewhere split_axes = [[0]] halo_sizes = [1, 1] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2)
builtin.module @inner {
  func.func @grid_of_outer_module(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{Undefined required grid symbol "g".}}
    %0 = shard.all_reduce %arg0 on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// ORACLE-SKIP: mlir-opt 22.1.8 does not bound-check the slice axis and crashes.
shard.grid @g(shape = 2x3)
func.func @all_slice_axis(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{Slice axis 1 is out of bounds [0, 1).}}
  %0 = shard.all_slice %arg0 on @g grid_axes = [0] slice_axis = 1 : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// ORACLE-SKIP: mlir-opt 22.1.8 does not bound-check the concat axis and crashes.
shard.grid @g(shape = 2x3)
func.func @all_to_all_axis(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{Concat axis 2 is out of bounds [0, 2).}}
  %0 = shard.all_to_all %arg0 on @g grid_axes = [0] split_axis = 0 concat_axis = 2 : tensor<4x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// ORACLE-SKIP: mlir-opt 22.1.8 does not bound-check the scatter axis.
shard.grid @g(shape = 2x3)
func.func @scatter_axis(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{Scatter axis -1 is out of bounds [0, 1).}}
  %0 = shard.scatter %arg0 on @g grid_axes = [0] scatter_axis = -1 root = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{'shard.grid' op requires attribute 'sym_name'}}
"shard.grid"() <{shape = array<i64: 2>}> : () -> ()

// -----

func.func @all_gather_without_properties(%arg0: tensor<4xf32>) -> tensor<8xf32> {
  // Required properties are checked in name order, as MLIR's generated verifier does.
  // expected-error @+1 {{'shard.all_gather' op requires attribute 'gather_axis'}}
  %0 = "shard.all_gather"(%arg0) : (tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @sharding_without_split_axes() {
  // expected-error @+1 {{'shard.sharding' op requires attribute 'split_axes'}}
  %s = "shard.sharding"() <{grid = @g, operandSegmentSizes = array<i32: 0, 0>}> : () -> !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @sharding_without_segment_sizes(%h: i64) {
  // expected-error @+1 {{'shard.sharding' op operand count (1) does not match with the total size (0) specified in attribute 'operandSegmentSizes'}}
  %s = "shard.sharding"(%h) <{grid = @g, split_axes = #shard<axisarray[[0]]>, static_halo_sizes = array<i64: -9223372036854775808, 1>}> : (i64) -> !shard.sharding
  return
}

// -----

shard.grid @g(shape = 2x3)
func.func @shift_offset_type(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shard.shift' op attribute 'offset' failed to satisfy constraint: 64-bit signless integer attribute}}
  %0 = "shard.shift"(%arg0) <{grid = @g, offset = 1 : i32, shift_axis = 0 : index}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @gather_axis_type(%arg0: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'shard.all_gather' op attribute 'gather_axis' failed to satisfy constraint: index attribute}}
  %0 = "shard.all_gather"(%arg0) <{gather_axis = 0 : i64, grid = @g, grid_axes = array<i16: 0>}> : (tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// ORACLE-SKIP: trunk's all_gather/reduce_scatter take memrefs (MLIR 22.1.8's: tensors only).
shard.grid @g(shape = 2x3)
func.func @all_gather_vector(%arg0: vector<4xf32>) -> memref<8xf32> {
  // Memrefs and tensors only (trunk lowers both), never vectors.
  // expected-error @+1 {{'shard.all_gather' op operand #0 must be non-0-ranked.memref of any type values or non-0-ranked.tensor of any type values, but got 'vector<4xf32>'}}
  %0 = shard.all_gather %arg0 on @g grid_axes = [0] gather_axis = 0 : vector<4xf32> -> memref<8xf32>
  return %0 : memref<8xf32>
}

// -----

// ORACLE-SKIP: trunk's all_gather/reduce_scatter take memrefs (MLIR 22.1.8's: tensors only).
shard.grid @g(shape = 2x3)
func.func @reduce_scatter_scalar_memref(%arg0: memref<f32>) -> memref<f32> {
  // expected-error @+1 {{'shard.reduce_scatter' op operand #0 must be non-0-ranked.memref of any type values or non-0-ranked.tensor of any type values, but got 'memref<f32>'}}
  %0 = shard.reduce_scatter %arg0 on @g grid_axes = [0] scatter_dim = 0 : memref<f32> -> memref<f32>
  return %0 : memref<f32>
}

// -----

// ORACLE-SKIP: trunk's all_gather/reduce_scatter take memrefs (MLIR 22.1.8's: tensors only).
shard.grid @g(shape = 2x3)
func.func @reduce_scatter_memref_shape(%arg0: memref<4x3xf32>) -> memref<3x3xf32> {
  // expected-error @+1 {{Dimension size mismatch for result axis 0. Expected 2, but got 3.}}
  %0 = shard.reduce_scatter %arg0 on @g grid_axes = [0] scatter_dim = 0 : memref<4x3xf32> -> memref<3x3xf32>
  return %0 : memref<3x3xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @all_reduce_unranked_memref(%arg0: memref<*xf32>) -> memref<*xf32> {
  // expected-error @+1 {{'shard.all_reduce' op operand #0 must be memref of any type values or ranked tensor of any type values, but got 'memref<*xf32>'}}
  %0 = shard.all_reduce %arg0 on @g grid_axes = [0] : memref<*xf32> -> memref<*xf32>
  return %0 : memref<*xf32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @update_halo_rank0_generic(%arg0: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'shard.update_halo' op operand #0 must be non-0-ranked.memref of any type values or non-0-ranked.tensor of any type values, but got 'tensor<f32>'}}
  %0 = "shard.update_halo"(%arg0) <{grid = @g, split_axes = #shard<axisarray[[0]]>}> : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

shard.grid @g(shape = 2x3)
func.func @shift_incompatible_shape(%arg0: tensor<?x4xf32>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'shard.shift' op requires the same shape for all operands and results}}
  %0 = shard.shift %arg0 on @g grid_axes = [0] shift_axis = 0 offset = 1 : tensor<?x4xf32> -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

// ORACLE-SKIP: mlir-opt 22.1.8 does not check this and crashes printing the op.
shard.grid @g(shape = 2x3)
func.func @root_marker_without_value(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shard.broadcast' op expected 1 dynamic root index values, got 0}}
  %0 = "shard.broadcast"(%arg0) <{grid = @g, grid_axes = array<i16: 0>, root = array<i64: -9223372036854775808>}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
