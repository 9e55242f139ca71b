// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC

// Grids: static, dynamic and one-dimensional shapes.

// CHECK: shard.grid @grid_2x3(shape = 2x3)
// CHECK: shard.grid @grid_dyn(shape = ?x4x?)
// CHECK: shard.grid @grid_8(shape = 8)
// GENERIC: "shard.grid"() <{{{.*}}shape = array<i64: -9223372036854775808, 4, -9223372036854775808>{{.*}}}>
shard.grid @grid_2x3(shape = 2x3)
shard.grid @grid_dyn(shape = ?x4x?)
shard.grid @grid_8(shape = 8)

// -----

// ORACLE-FAILS: trunk prints grid visibility as `shard.grid "private" @g(...)`, which MLIR 22.1.8 does not read (it prints `{sym_visibility = "private"}`, read here too).
// Visibility: trunk's string before the name, MLIR 22.1.8's attribute, the bare keyword;
// all print in trunk's form, other attributes stay in the dictionary.
// CHECK: shard.grid "private" @grid_trunk(shape = 2x2)
// CHECK: shard.grid "private" @grid_attr(shape = 4)
// CHECK: shard.grid "nested" @grid_keyword(shape = 4)
// CHECK: shard.grid "public" @grid_more(shape = 2) {other = 1 : i64}
// CHECK: shard.grid @grid_plain(shape = 2)
// GENERIC: "shard.grid"() <{shape = array<i64: 2, 2>, sym_name = "grid_trunk"}> {sym_visibility = "private"} : () -> ()
shard.grid "private" @grid_trunk(shape = 2x2)
shard.grid @grid_attr(shape = 4) {sym_visibility = "private"}
shard.grid nested @grid_keyword(shape = 4)
shard.grid "public" @grid_more(shape = 2) {other = 1}
shard.grid @grid_plain(shape = 2)

// -----

// Queries on the grid and on the current process.

shard.grid @grid_2x3(shape = 2x3)

// CHECK-LABEL: func.func @grid_queries
func.func @grid_queries(%row: index, %col: index) -> (index, index, index, index) {
  // CHECK: {{.*}} = shard.grid_shape @grid_2x3 : index, index
  %rows, %cols = shard.grid_shape @grid_2x3 : index, index
  // CHECK: %{{.*}} = shard.grid_shape @grid_2x3 axes = [1] : index
  %n = shard.grid_shape @grid_2x3 axes = [1] : index
  // CHECK: {{.*}} = shard.process_multi_index on @grid_2x3 : index, index
  %i, %j = shard.process_multi_index on @grid_2x3 : index, index
  // CHECK: %{{.*}} = shard.process_multi_index on @grid_2x3 axes = [0] : index
  %k = shard.process_multi_index on @grid_2x3 axes = [0] : index
  // CHECK: %{{.*}} = shard.process_linear_index on @grid_2x3 : index
  %lin = shard.process_linear_index on @grid_2x3 : index
  // CHECK: {{.*}} = shard.neighbors_linear_indices on @grid_2x3[%{{.*}}, %{{.*}}] split_axes = [1] : index, index
  %down, %up = shard.neighbors_linear_indices on @grid_2x3[%row, %col] split_axes = [1] : index, index
  return %rows, %n, %lin, %up : index, index, index, index
}
// GENERIC: "shard.grid_shape"() <{{{.*}}axes = array<i16>{{.*}}}> : () -> (index, index)
// GENERIC: "shard.grid_shape"() <{{{.*}}axes = array<i16: 1>{{.*}}}> : () -> index

// -----

// Shardings: replicated, split, multi-axis, halos and offsets (static and dynamic).

shard.grid @grid_2x3(shape = 2x3)
shard.grid @grid_4(shape = 4)

// CHECK-LABEL: func.func @shardings
func.func @shardings(%arg0: tensor<8x12xf32>, %h: i64, %o: i64) -> tensor<8x12xf32> {
  // CHECK: %{{.*}} = shard.sharding @grid_2x3 split_axes = {{\[\[\]\]}} : !shard.sharding
  %replicated = shard.sharding @grid_2x3 split_axes = [[]] : !shard.sharding
  // CHECK: %{{.*}} = shard.sharding @grid_2x3 split_axes = {{\[\[}}0], []] : !shard.sharding
  %rows = shard.sharding @grid_2x3 split_axes = [[0], []] : !shard.sharding
  // CHECK: %{{.*}} = shard.sharding @grid_2x3 split_axes = {{\[\[}}], [1, 0]] : !shard.sharding
  %cols = shard.sharding @grid_2x3 split_axes = [[], [1, 0]] : !shard.sharding
  // CHECK: %{{.*}} = shard.sharding @grid_2x3 split_axes = {{\[\[}}0], [1]] halo_sizes = [1, 2, 0, 3] : !shard.sharding
  %halo = shard.sharding @grid_2x3 split_axes = [[0], [1]] halo_sizes = [1, 2, 0, 3] : !shard.sharding
  // CHECK: %{{.*}} = shard.sharding @grid_2x3 split_axes = {{\[\[}}0]] halo_sizes = [%{{.*}}, 1] : !shard.sharding
  %dyn_halo = shard.sharding @grid_2x3 split_axes = [[0]] halo_sizes = [%h, 1] : !shard.sharding
  // CHECK: %{{.*}} = shard.sharding @grid_4 split_axes = {{\[\[}}], [0]] sharded_dims_offsets = [0, 2, 5, 9, 12] : !shard.sharding
  %offs = shard.sharding @grid_4 split_axes = [[], [0]] sharded_dims_offsets = [0, 2, 5, 9, 12] : !shard.sharding
  // CHECK: %{{.*}} = shard.sharding @grid_4 split_axes = {{\[\[}}0]] sharded_dims_offsets = [0, %{{.*}}, 4, 6, 8] : !shard.sharding
  %dyn_offs = shard.sharding @grid_4 split_axes = [[0]] sharded_dims_offsets = [0, %o, 4, 6, 8] : !shard.sharding
  // CHECK: %[[A:.*]] = shard.shard %{{.*}} to %{{.*}} : tensor<8x12xf32>
  %a = shard.shard %arg0 to %rows : tensor<8x12xf32>
  // CHECK: %{{.*}} = shard.shard %[[A]] to %{{.*}} annotate_for_users : tensor<8x12xf32>
  %b = shard.shard %a to %cols annotate_for_users : tensor<8x12xf32>
  // CHECK: %{{.*}} = shard.get_sharding %{{.*}} : tensor<8x12xf32> -> !shard.sharding
  %s = shard.get_sharding %b : tensor<8x12xf32> -> !shard.sharding
  return %b : tensor<8x12xf32>
}
// GENERIC: "shard.sharding"() <{{{.*}}split_axes = #shard<axisarray{{\[\[}}0], []]>{{.*}}}> : () -> !shard.sharding
// GENERIC: "shard.sharding"(%{{.*}}) <{{{.*}}operandSegmentSizes = array<i32: 0, 1>{{.*}}static_halo_sizes = array<i64: -9223372036854775808, 1>{{.*}}}> : (i64) -> !shard.sharding
// GENERIC: "shard.shard"(%{{.*}}, %{{.*}}) <{annotate_for_users}> : (tensor<8x12xf32>, !shard.sharding) -> tensor<8x12xf32>

// -----

shard.grid @grid_2x3(shape = 2x3)

// CHECK-LABEL: func.func @shard_shapes
func.func @shard_shapes(%d: index, %p: index) -> index {
  %s = shard.sharding @grid_2x3 split_axes = [[0], [1]] : !shard.sharding
  // CHECK: {{.*}} = shard.shard_shape dims = [8, 12] sharding = %{{.*}} device = [1, 2] : index, index
  %x, %y = shard.shard_shape dims = [8, 12] sharding = %s device = [1, 2] : index, index
  // CHECK: {{.*}} = shard.shard_shape dims = [%{{.*}}, 12] sharding = %{{.*}} device = [%{{.*}}, 0] : index, index
  %u, %v = shard.shard_shape dims = [%d, 12] sharding = %s device = [%p, 0] : index, index
  return %u : index
}
// GENERIC: "shard.shard_shape"(%{{.*}}, %{{.*}}, %{{.*}}) <{{{.*}}operandSegmentSizes = array<i32: 1, 1, 1>{{.*}}}> : (index, !shard.sharding, index) -> (index, index)

// -----

// Collectives.

shard.grid @grid_2x4(shape = 2x4)
shard.grid @grid_dyn(shape = 2x?)

// CHECK-LABEL: func.func @gathers_and_slices
func.func @gathers_and_slices(%arg0: tensor<2x3xf32>, %arg1: tensor<8x?xi8>) -> tensor<4x3xf32> {
  // CHECK: %{{.*}} = shard.all_gather %{{.*}} on @grid_2x4 grid_axes = [0] gather_axis = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
  %0 = shard.all_gather %arg0 on @grid_2x4 grid_axes = [0] gather_axis = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
  // CHECK: %{{.*}} = shard.all_gather %{{.*}} on @grid_2x4 grid_axes = [1, 0] gather_axis = 1 : tensor<2x3xf32> -> tensor<2x24xf32>
  %1 = shard.all_gather %arg0 on @grid_2x4 grid_axes = [1, 0] gather_axis = 1 : tensor<2x3xf32> -> tensor<2x24xf32>
  // CHECK: %{{.*}} = shard.all_gather %{{.*}} on @grid_dyn grid_axes = [1] gather_axis = 0 : tensor<8x?xi8> -> tensor<?x?xi8>
  %2 = shard.all_gather %arg1 on @grid_dyn grid_axes = [1] gather_axis = 0 : tensor<8x?xi8> -> tensor<?x?xi8>
  // CHECK: %{{.*}} = shard.all_slice %{{.*}} on @grid_2x4 grid_axes = [1] slice_axis = 0 : tensor<8x?xi8> -> tensor<2x?xi8>
  %3 = shard.all_slice %arg1 on @grid_2x4 grid_axes = [1] slice_axis = 0 : tensor<8x?xi8> -> tensor<2x?xi8>
  // CHECK: %{{.*}} = shard.all_to_all %{{.*}} on @grid_2x4 grid_axes = [1] split_axis = 0 concat_axis = 1 : tensor<8x?xi8> -> tensor<2x?xi8>
  %4 = shard.all_to_all %arg1 on @grid_2x4 grid_axes = [1] split_axis = 0 concat_axis = 1 : tensor<8x?xi8> -> tensor<2x?xi8>
  // CHECK: %{{.*}} = shard.gather %{{.*}} on @grid_2x4 grid_axes = [1] gather_axis = 1 root = [3] : (tensor<2x3xf32>) -> tensor<2x12xf32>
  %5 = shard.gather %arg0 on @grid_2x4 grid_axes = [1] gather_axis = 1 root = [3] : (tensor<2x3xf32>) -> tensor<2x12xf32>
  return %0 : tensor<4x3xf32>
}
// GENERIC: "shard.all_gather"(%{{.*}}) <{{{.*}}gather_axis = 0 : index{{.*}}grid_axes = array<i16: 0>{{.*}}}>
// GENERIC: "shard.all_to_all"(%{{.*}}) <{{{.*}}concat_axis = 1 : index{{.*}}split_axis = 0 : index{{.*}}}>

// -----

shard.grid @grid_2x4(shape = 2x4)

// CHECK-LABEL: func.func @reductions
func.func @reductions(%arg0: tensor<4x6xf32>, %m: memref<4xi32>) -> tensor<4x6xf64> {
  // CHECK: %{{.*}} = shard.all_reduce %{{.*}} on @grid_2x4 grid_axes = [1, 0] : tensor<4x6xf32> -> tensor<4x6xf64>
  %0 = shard.all_reduce %arg0 on @grid_2x4 grid_axes = [1, 0] : tensor<4x6xf32> -> tensor<4x6xf64>
  // CHECK: %{{.*}} = shard.all_reduce %{{.*}} on @grid_2x4 grid_axes = [0] : tensor<4x6xf32> -> tensor<4x6xf32>
  %1 = shard.all_reduce %arg0 on @grid_2x4 grid_axes = [0] reduction = sum : tensor<4x6xf32> -> tensor<4x6xf32>
  // CHECK: shard.all_reduce %{{.*}} reduction = max
  %2 = shard.all_reduce %arg0 on @grid_2x4 grid_axes = [0] reduction = max : tensor<4x6xf32> -> tensor<4x6xf32>
  // CHECK: shard.all_reduce %{{.*}} reduction = min
  %3 = shard.all_reduce %arg0 on @grid_2x4 grid_axes = [0] reduction = min : tensor<4x6xf32> -> tensor<4x6xf32>
  // CHECK: shard.all_reduce %{{.*}} reduction = product
  %4 = shard.all_reduce %arg0 on @grid_2x4 grid_axes = [0] reduction = product : tensor<4x6xf32> -> tensor<4x6xf32>
  // CHECK: shard.all_reduce %{{.*}} reduction = average
  %5 = shard.all_reduce %arg0 on @grid_2x4 grid_axes = [0] reduction = average : tensor<4x6xf32> -> tensor<4x6xf32>
  // CHECK: shard.all_reduce %{{.*}} reduction = bitwise_and : memref<4xi32> -> memref<4xi32>
  %6 = shard.all_reduce %m on @grid_2x4 grid_axes = [0] reduction = bitwise_and : memref<4xi32> -> memref<4xi32>
  // CHECK: shard.all_reduce %{{.*}} reduction = bitwise_or
  %7 = shard.all_reduce %m on @grid_2x4 grid_axes = [0] reduction = bitwise_or : memref<4xi32> -> memref<4xi32>
  // CHECK: shard.all_reduce %{{.*}} reduction = bitwise_xor
  %8 = shard.all_reduce %m on @grid_2x4 grid_axes = [0] reduction = bitwise_xor : memref<4xi32> -> memref<4xi32>
  // CHECK: shard.all_reduce %{{.*}} reduction = generic
  %9 = shard.all_reduce %arg0 on @grid_2x4 grid_axes = [0] reduction = generic : tensor<4x6xf32> -> tensor<4x6xf32>
  // CHECK: %{{.*}} = shard.reduce %{{.*}} on @grid_2x4 grid_axes = [1] reduction = max root = [2] : (tensor<4x6xf32>) -> tensor<4x6xf64>
  %10 = shard.reduce %arg0 on @grid_2x4 grid_axes = [1] reduction = max root = [2] : (tensor<4x6xf32>) -> tensor<4x6xf64>
  return %0 : tensor<4x6xf64>
}
// GENERIC: "shard.all_reduce"(%{{.*}}) <{{{.*}}reduction = #shard<partial sum>{{.*}}}> : (tensor<4x6xf32>) -> tensor<4x6xf64>
// GENERIC: "shard.all_reduce"(%{{.*}}) <{{{.*}}reduction = #shard<partial sum>{{.*}}}> : (tensor<4x6xf32>) -> tensor<4x6xf32>
// GENERIC: "shard.all_reduce"(%{{.*}}) <{{{.*}}reduction = #shard<partial max>{{.*}}}>

// -----

// ORACLE-FAILS: trunk renamed `scatter_axis` to `scatter_dim`; MLIR 22.1.8 reads only `scatter_axis`.
// reduce_scatter and scatter: trunk's `scatter_dim` and MLIR 22.1.8's `scatter_axis` are
// read, in op syntax and in generic form; trunk's is printed.

shard.grid @grid_2x4(shape = 2x4)

// CHECK-LABEL: func.func @scatter_dim
func.func @scatter_dim(%arg0: tensor<4x6xf32>, %arg1: tensor<8x?xi8>) -> tensor<1x6xf64> {
  // CHECK: %{{.*}} = shard.reduce_scatter %{{.*}} on @grid_2x4 grid_axes = [1] scatter_dim = 0 : tensor<4x6xf32> -> tensor<1x6xf64>
  %0 = shard.reduce_scatter %arg0 on @grid_2x4 grid_axes = [1] scatter_dim = 0 : tensor<4x6xf32> -> tensor<1x6xf64>
  // CHECK: %{{.*}} = shard.reduce_scatter %{{.*}} on @grid_2x4 grid_axes = [0] reduction = min scatter_dim = 1 : tensor<4x6xf32> -> tensor<4x3xf32>
  %1 = shard.reduce_scatter %arg0 on @grid_2x4 grid_axes = [0] reduction = min scatter_axis = 1 : tensor<4x6xf32> -> tensor<4x3xf32>
  // CHECK: %{{.*}} = shard.reduce_scatter %{{.*}} on @grid_2x4 grid_axes = [0] scatter_dim = 1 : tensor<4x6xf32> -> tensor<4x3xf32>
  %2 = "shard.reduce_scatter"(%arg0) <{grid = @grid_2x4, grid_axes = array<i16: 0>, scatter_axis = 1 : index}> : (tensor<4x6xf32>) -> tensor<4x3xf32>
  // CHECK: %{{.*}} = shard.scatter %{{.*}} on @grid_2x4 grid_axes = [0] scatter_dim = 0 root = [1] : (tensor<8x?xi8>) -> tensor<4x?xi8>
  %3 = shard.scatter %arg1 on @grid_2x4 grid_axes = [0] scatter_dim = 0 root = [1] : (tensor<8x?xi8>) -> tensor<4x?xi8>
  // CHECK: %{{.*}} = shard.scatter %{{.*}} on @grid_2x4 grid_axes = [1] scatter_dim = 0 root = [3] : (tensor<8x?xi8>) -> tensor<2x?xi8>
  %4 = shard.scatter %arg1 on @grid_2x4 grid_axes = [1] scatter_axis = 0 root = [3] : (tensor<8x?xi8>) -> tensor<2x?xi8>
  // CHECK: %{{.*}} = shard.scatter %{{.*}} on @grid_2x4 grid_axes = [0] scatter_dim = 0 root = [0] : (tensor<8x?xi8>) -> tensor<4x?xi8>
  %5 = "shard.scatter"(%arg1) <{grid = @grid_2x4, grid_axes = array<i16: 0>, root = array<i64: 0>, scatter_dim = 0 : index}> : (tensor<8x?xi8>) -> tensor<4x?xi8>
  return %0 : tensor<1x6xf64>
}
// GENERIC: "shard.reduce_scatter"(%{{.*}}) <{{{.*}}scatter_dim = 0 : index}> : (tensor<4x6xf32>) -> tensor<1x6xf64>
// GENERIC: "shard.reduce_scatter"(%{{.*}}) <{{{.*}}scatter_dim = 1 : index}>
// GENERIC: "shard.reduce_scatter"(%{{.*}}) <{{{.*}}scatter_dim = 1 : index}>
// GENERIC: "shard.scatter"(%{{.*}}) <{{{.*}}scatter_dim = 0 : index}>

// -----

shard.grid @grid_2x4(shape = 2x4)

// CHECK-LABEL: func.func @point_to_point
func.func @point_to_point(%arg0: tensor<3xi8>, %r: index) -> tensor<3xi8> {
  // CHECK: %{{.*}} = shard.broadcast %{{.*}} on @grid_2x4 grid_axes = [0] root = [1] : (tensor<3xi8>) -> tensor<3xi8>
  %0 = shard.broadcast %arg0 on @grid_2x4 grid_axes = [0] root = [1] : (tensor<3xi8>) -> tensor<3xi8>
  // CHECK: %{{.*}} = shard.broadcast %{{.*}} on @grid_2x4 grid_axes = [1, 0] root = [%{{.*}}, 1] : (tensor<3xi8>, index) -> tensor<3xi8>
  %1 = shard.broadcast %arg0 on @grid_2x4 grid_axes = [1, 0] root = [%r, 1] : (tensor<3xi8>, index) -> tensor<3xi8>
  // CHECK: %{{.*}} = shard.send %{{.*}} on @grid_2x4 grid_axes = [1] destination = [3] : (tensor<3xi8>) -> tensor<3xi8>
  %2 = shard.send %arg0 on @grid_2x4 grid_axes = [1] destination = [3] : (tensor<3xi8>) -> tensor<3xi8>
  // CHECK: %{{.*}} = shard.send %{{.*}} on @grid_2x4 grid_axes = [1] destination = [%{{.*}}] : (tensor<3xi8>, index) -> tensor<3xi8>
  %3 = shard.send %arg0 on @grid_2x4 grid_axes = [1] destination = [%r] : (tensor<3xi8>, index) -> tensor<3xi8>
  // CHECK: %{{.*}} = shard.recv %{{.*}} on @grid_2x4 grid_axes = [1] source = [0] : (tensor<3xi8>) -> tensor<3xi8>
  %4 = shard.recv %arg0 on @grid_2x4 grid_axes = [1] source = [0] : (tensor<3xi8>) -> tensor<3xi8>
  // CHECK: %{{.*}} = shard.recv %{{.*}} on @grid_2x4 grid_axes = [1] : (tensor<3xi8>) -> tensor<3xi8>
  %5 = shard.recv %arg0 on @grid_2x4 grid_axes = [1] : (tensor<3xi8>) -> tensor<3xi8>
  // CHECK: %{{.*}} = shard.shift %{{.*}} on @grid_2x4 grid_axes = [1] shift_axis = 1 offset = 2 rotate : tensor<3xi8> -> tensor<3xi8>
  %6 = shard.shift %arg0 on @grid_2x4 grid_axes = [1] shift_axis = 1 offset = 2 rotate : tensor<3xi8> -> tensor<3xi8>
  // CHECK: %{{.*}} = shard.shift %{{.*}} on @grid_2x4 grid_axes = [0, 1] shift_axis = 0 offset = -1 : tensor<3xi8> -> tensor<3xi8>
  %7 = shard.shift %arg0 on @grid_2x4 grid_axes = [0, 1] shift_axis = 0 offset = -1 : tensor<3xi8> -> tensor<3xi8>
  return %0 : tensor<3xi8>
}
// GENERIC: "shard.broadcast"(%{{.*}}, %{{.*}}) <{{{.*}}root = array<i64: -9223372036854775808, 1>{{.*}}}> : (tensor<3xi8>, index) -> tensor<3xi8>
// GENERIC: "shard.recv"(%{{.*}}) <{{{.*}}source = array<i64: 0>{{.*}}}>
// GENERIC: "shard.shift"(%{{.*}}) <{{{.*}}offset = 2 : i64{{.*}}rotate{{.*}}shift_axis = 1 : index{{.*}}}>

// -----

shard.grid @grid_2x2(shape = 2x2)

// CHECK-LABEL: func.func @halos
func.func @halos(%arg0: tensor<6x6xf32>, %m: memref<6x6xf32>, %h: i64) -> tensor<6x6xf32> {
  // CHECK: %{{.*}} = shard.update_halo %{{.*}} on @grid_2x2 split_axes = {{\[\[}}0], [1]] halo_sizes = [1, 1, 0, 1] : tensor<6x6xf32>
  %0 = shard.update_halo %arg0 on @grid_2x2 split_axes = [[0], [1]] halo_sizes = [1, 1, 0, 1] : tensor<6x6xf32>
  // CHECK: %{{.*}} = shard.update_halo %{{.*}} on @grid_2x2 split_axes = {{\[\[}}0]] halo_sizes = [%{{.*}}, 2] : memref<6x6xf32>
  %1 = shard.update_halo %m on @grid_2x2 split_axes = [[0]] halo_sizes = [%h, 2] : memref<6x6xf32>
  // CHECK: %{{.*}} = shard.update_halo %{{.*}} on @grid_2x2 split_axes = {{\[\[}}1]] : tensor<6x6xf32>
  %2 = shard.update_halo %0 on @grid_2x2 split_axes = [[1]] : tensor<6x6xf32>
  return %2 : tensor<6x6xf32>
}
// GENERIC: "shard.update_halo"(%{{.*}}, %{{.*}}) <{{{.*}}static_halo_sizes = array<i64: -9223372036854775808, 2>{{.*}}}> : (memref<6x6xf32>, i64) -> memref<6x6xf32>

// -----

// CHECK-LABEL: func @memref_collectives
// CHECK: shard.all_reduce %{{.*}} on @g grid_axes = [1] : memref<4x?xf32> -> memref<4x?xf64>
// CHECK: shard.all_reduce %{{.*}} on @g : memref<f32> -> memref<f32>
// CHECK: shard.update_halo %{{.*}} on @g split_axes = {{\[\[}}0]] halo_sizes = [1, 1] : memref<6xf32>
// CHECK: shard.shift %{{.*}} on @g grid_axes = [0] shift_axis = 0 offset = -1 rotate : tensor<?xf32> -> tensor<4xf32>
shard.grid @g(shape = 2x3)
func.func @memref_collectives(%m: memref<4x?xf32>, %s: memref<f32>, %h: memref<6xf32>, %t: tensor<?xf32>) {
  %0 = shard.all_reduce %m on @g grid_axes = [1] : memref<4x?xf32> -> memref<4x?xf64>
  %1 = shard.all_reduce %s on @g : memref<f32> -> memref<f32>
  %2 = shard.update_halo %h on @g split_axes = [[0]] halo_sizes = [1, 1] : memref<6xf32>
  %3 = shard.shift %t on @g grid_axes = [0] shift_axis = 0 offset = -1 rotate : tensor<?xf32> -> tensor<4xf32>
  return
}

// -----

// ORACLE-SKIP: trunk's all_gather/reduce_scatter take memrefs (MLIR 22.1.8's: tensors only).
// Trunk's all_gather and reduce_scatter take memrefs too (and a memref in, a tensor out).
// CHECK-LABEL: func @trunk_memref_collectives
// CHECK: %all_gather = shard.all_gather %{{.*}} on @g grid_axes = [1] gather_axis = 0 : memref<2x5xi8> -> memref<6x5xi8>
// CHECK: %reduce_scatter = shard.reduce_scatter %{{.*}} on @g grid_axes = [0] reduction = min scatter_dim = 1 : memref<2x6xi8> -> memref<2x3xi8>
// CHECK: shard.reduce_scatter %{{.*}} on @g grid_axes = [1] scatter_dim = 0 : memref<6x5xi8> -> tensor<2x5xi8>
// GENERIC-LABEL: sym_name = "trunk_memref_collectives"
// GENERIC: "shard.all_gather"(%{{.*}}) <{gather_axis = 0 : index, grid = @g, grid_axes = array<i16: 1>}> : (memref<2x5xi8>) -> memref<6x5xi8>
shard.grid @g(shape = 2x3)
func.func @trunk_memref_collectives(%b: memref<2x5xi8>, %c: memref<2x6xi8>, %d: memref<6x5xi8>) {
  %4 = shard.all_gather %b on @g grid_axes = [1] gather_axis = 0 : memref<2x5xi8> -> memref<6x5xi8>
  %5 = shard.reduce_scatter %c on @g grid_axes = [0] reduction = min scatter_dim = 1 : memref<2x6xi8> -> memref<2x3xi8>
  %6 = shard.reduce_scatter %d on @g grid_axes = [1] scatter_dim = 0 : memref<6x5xi8> -> tensor<2x5xi8>
  return
}

// -----

// ORACLE-SKIP: mlir-opt prints `split_axes = []` but does not read it.
// A 0-d tensor's sharding: trunk's propagation prints `split_axes = []` (mlir-opt's parser
// rejects what its printer writes there; shardc reads it back).
// CHECK-LABEL: func @scalar_sharding
// CHECK: %[[S:.*]] = shard.sharding @g split_axes = [] : !shard.sharding
// CHECK: shard.shard %{{.*}} to %[[S]] : tensor<f32>
// GENERIC-LABEL: sym_name = "scalar_sharding"
// GENERIC: split_axes = #shard<axisarray[]>
shard.grid @g(shape = 2x3)
func.func @scalar_sharding(%x: tensor<f32>) -> tensor<f32> {
  %s = shard.sharding @g split_axes = [] : !shard.sharding
  %0 = shard.shard %x to %s : tensor<f32>
  return %0 : tensor<f32>
}
