// RUN: shardc-opt %s --scatter-by-position --split-input-file | filecheck %s
// RUN: shardc-opt %s --scatter-by-position --sharding-propagation --shard-partition --split-input-file | filecheck %s --check-prefix=PART

// One-hot rows: update n lands at (n, t[n]), the first index column `linalg.index 0`
// of the generic that also reads t. The scatter becomes a generic over the original
// that adds where the column is t[n]; the insert_slices that built the pairs go.
// CHECK-DAG: #[[UPD:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @one_hot_add
// CHECK: %[[G:.*]]:2 = linalg.generic
// CHECK-NOT: tensor.insert_slice
// CHECK: %[[R:.*]] = linalg.generic {indexing_maps = [#[[UPD]], #[[COL]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %[[G]]#1 : tensor<6xf32>, tensor<6x1xi32>) outs(%{{.*}} : tensor<6x4xf32>) {
// CHECK-NEXT: ^bb0(%[[U:.*]]: f32, %[[T:.*]]: i32, %[[O:.*]]: f32):
// CHECK-NEXT:   %[[J:.*]] = linalg.index 1 : index
// CHECK-NEXT:   %[[JI:.*]] = arith.index_cast %[[J]] : index to i32
// CHECK-NEXT:   %[[HIT:.*]] = arith.cmpi eq, %[[JI]], %[[T]] : i32
// CHECK-NEXT:   %[[SUM:.*]] = arith.addf %[[O]], %[[U]] : f32
// CHECK-NEXT:   %[[SEL:.*]] = arith.select %[[HIT]], %[[SUM]], %[[O]] : f32
// CHECK-NEXT:   linalg.yield %[[SEL]] : f32
// CHECK-NOT: tm_tensor.scatter
// CHECK: shard.shard %[[R]]

// Split by rows, the rewritten scatter stays split: nothing is gathered.
// PART-LABEL: func.func @one_hot_add
// PART-NOT: shard.all_gather
// PART: linalg.generic {{.*}} outs(%{{.*}} : tensor<3x4xf32>)
// PART-NOT: shard.all_gather
// PART: return %{{.*}} : tensor<3x4xf32>
shard.grid @grid(shape = 2)
func.func @one_hot_add(%t: tensor<6xi32>, %u: tensor<6xf32>, %orig: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %t0 = shard.shard %t to %s : tensor<6xi32>
  %t1 = shard.shard %t0 to %s annotate_for_users : tensor<6xi32>
  %u0 = shard.shard %u to %s : tensor<6xf32>
  %u1 = shard.shard %u0 to %s annotate_for_users : tensor<6xf32>
  %o0 = shard.shard %orig to %s : tensor<6x4xf32>
  %o1 = shard.shard %o0 to %s annotate_for_users : tensor<6x4xf32>
  %z = arith.constant 0 : i32
  %e0 = tensor.empty() : tensor<6x1xi32>
  %e1 = tensor.empty() : tensor<6x1xi32>
  %g:2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0, 0)>, affine_map<(d0) -> (d0, 0)>], iterator_types = ["parallel"]} ins(%t1 : tensor<6xi32>) outs(%e0, %e1 : tensor<6x1xi32>, tensor<6x1xi32>) {
  ^bb0(%in: i32, %p0: i32, %p1: i32):
    %i = linalg.index 0 : index
    %p = arith.index_cast %i : index to i32
    linalg.yield %p, %in : i32, i32
  } -> (tensor<6x1xi32>, tensor<6x1xi32>)
  %e2 = tensor.empty() : tensor<6x2xi32>
  %f = linalg.fill ins(%z : i32) outs(%e2 : tensor<6x2xi32>) -> tensor<6x2xi32>
  %s0 = tensor.insert_slice %g#0 into %f[0, 0] [6, 1] [1, 1] : tensor<6x1xi32> into tensor<6x2xi32>
  %s1 = tensor.insert_slice %g#1 into %s0[0, 1] [6, 1] [1, 1] : tensor<6x1xi32> into tensor<6x2xi32>
  %r = tm_tensor.scatter {dimension_map = array<i64: 0, 1>} unique_indices(false) ins(%u1, %s1 : tensor<6xf32>, tensor<6x2xi32>) outs(%o1 : tensor<6x4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %sum = arith.addf %b, %a : f32
    tm_tensor.yield %sum : f32
  } -> tensor<6x4xf32>
  %r0 = shard.shard %r to %s : tensor<6x4xf32>
  return %r0 : tensor<6x4xf32>
}

// -----

// A slice over the trailing dimension: update n (a row of 3) lands at (n, t[n], :).
// The position is read through a wrap (`remsi` by the row count) and an index_cast
// to a type that holds every row; the combine assigns.
// CHECK-LABEL: func.func @rows_of_slices
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "parallel"]} ins(%{{.*}}, %{{.*}} : tensor<4x3xf16>, tensor<4x1xi64>) outs(%{{.*}} : tensor<4x5x3xf16>) {
// CHECK-NEXT: ^bb0(%[[U:.*]]: f16, %[[T:.*]]: i64, %[[O:.*]]: f16):
// CHECK-NEXT:   %[[J:.*]] = linalg.index 1 : index
// CHECK-NEXT:   %[[JI:.*]] = arith.index_cast %[[J]] : index to i64
// CHECK-NEXT:   %[[HIT:.*]] = arith.cmpi eq, %[[JI]], %[[T]] : i64
// CHECK-NEXT:   %[[SEL:.*]] = arith.select %[[HIT]], %[[U]], %[[O]] : f16
// CHECK-NEXT:   linalg.yield %[[SEL]] : f16
// CHECK-NOT: tm_tensor.scatter
// CHECK: return
func.func @rows_of_slices(%t: tensor<4x1xi64>, %u: tensor<4x3xf16>, %orig: tensor<4x5x3xf16>) -> tensor<4x5x3xf16> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %z = arith.constant 0 : i64
  %e0 = tensor.empty() : tensor<4x1xi64>
  %e1 = tensor.empty() : tensor<4x1xi64>
  %g:2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0, 0)>, affine_map<(d0) -> (d0, 0)>], iterator_types = ["parallel"]} outs(%e0, %e1 : tensor<4x1xi64>, tensor<4x1xi64>) {
  ^bb0(%p0: i64, %p1: i64):
    %i = linalg.index 0 : index
    %w = arith.remsi %i, %c4 : index
    %x = tensor.extract %t[%w, %c0] : tensor<4x1xi64>
    %p = arith.index_cast %w : index to i64
    linalg.yield %p, %x : i64, i64
  } -> (tensor<4x1xi64>, tensor<4x1xi64>)
  %e2 = tensor.empty() : tensor<4x2xi64>
  %f = linalg.fill ins(%z : i64) outs(%e2 : tensor<4x2xi64>) -> tensor<4x2xi64>
  %s0 = tensor.insert_slice %g#0 into %f[0, 0] [4, 1] [1, 1] : tensor<4x1xi64> into tensor<4x2xi64>
  %s1 = tensor.insert_slice %g#1 into %s0[0, 1] [4, 1] [1, 1] : tensor<4x1xi64> into tensor<4x2xi64>
  %r = tm_tensor.scatter {dimension_map = array<i64: 0, 1>} unique_indices(true) ins(%u, %s1 : tensor<4x3xf16>, tensor<4x2xi64>) outs(%orig : tensor<4x5x3xf16>) {
  ^bb0(%a: f16, %b: f16):
    tm_tensor.yield %a : f16
  } -> tensor<4x5x3xf16>
  return %r : tensor<4x5x3xf16>
}

// -----

// Where an update lands depends on data (an embedding's backward): left alone.
// CHECK-LABEL: func.func @rows_from_data
// CHECK: tm_tensor.scatter
func.func @rows_from_data(%u: tensor<6x1x4xf32>, %ids: tensor<6x1xi64>, %orig: tensor<10x4xf32>) -> tensor<10x4xf32> {
  %r = tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(false) ins(%u, %ids : tensor<6x1x4xf32>, tensor<6x1xi64>) outs(%orig : tensor<10x4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %b, %a : f32
    tm_tensor.yield %s : f32
  } -> tensor<10x4xf32>
  return %r : tensor<10x4xf32>
}

// -----

// The position is in the second column, the data in the first: rows come from data.
// CHECK-LABEL: func.func @position_in_the_second_column
// CHECK: tensor.insert_slice
// CHECK: tm_tensor.scatter
func.func @position_in_the_second_column(%t: tensor<6xi32>, %u: tensor<6xf32>, %orig: tensor<6x6xf32>) -> tensor<6x6xf32> {
  %z = arith.constant 0 : i32
  %e0 = tensor.empty() : tensor<6x1xi32>
  %e1 = tensor.empty() : tensor<6x1xi32>
  %g:2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0, 0)>, affine_map<(d0) -> (d0, 0)>], iterator_types = ["parallel"]} ins(%t : tensor<6xi32>) outs(%e0, %e1 : tensor<6x1xi32>, tensor<6x1xi32>) {
  ^bb0(%in: i32, %p0: i32, %p1: i32):
    %i = linalg.index 0 : index
    %p = arith.index_cast %i : index to i32
    linalg.yield %p, %in : i32, i32
  } -> (tensor<6x1xi32>, tensor<6x1xi32>)
  %e2 = tensor.empty() : tensor<6x2xi32>
  %f = linalg.fill ins(%z : i32) outs(%e2 : tensor<6x2xi32>) -> tensor<6x2xi32>
  %s0 = tensor.insert_slice %g#1 into %f[0, 0] [6, 1] [1, 1] : tensor<6x1xi32> into tensor<6x2xi32>
  %s1 = tensor.insert_slice %g#0 into %s0[0, 1] [6, 1] [1, 1] : tensor<6x1xi32> into tensor<6x2xi32>
  %r = tm_tensor.scatter {dimension_map = array<i64: 0, 1>} unique_indices(false) ins(%u, %s1 : tensor<6xf32>, tensor<6x2xi32>) outs(%orig : tensor<6x6xf32>) {
  ^bb0(%a: f32, %b: f32):
    tm_tensor.yield %a : f32
  } -> tensor<6x6xf32>
  return %r : tensor<6x6xf32>
}

// -----

// The position cast to i8 wraps past 127 rows: not provably the position.
// CHECK-LABEL: func.func @position_cast_may_wrap
// CHECK: tm_tensor.scatter
func.func @position_cast_may_wrap(%u: tensor<200xf32>, %orig: tensor<200xf32>) -> tensor<200xf32> {
  %e0 = tensor.empty() : tensor<200x1xi8>
  %g = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0, 0)>], iterator_types = ["parallel"]} outs(%e0 : tensor<200x1xi8>) {
  ^bb0(%p0: i8):
    %i = linalg.index 0 : index
    %p = arith.index_cast %i : index to i8
    linalg.yield %p : i8
  } -> tensor<200x1xi8>
  %r = tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(true) ins(%u, %g : tensor<200xf32>, tensor<200x1xi8>) outs(%orig : tensor<200xf32>) {
  ^bb0(%a: f32, %b: f32):
    tm_tensor.yield %a : f32
  } -> tensor<200xf32>
  return %r : tensor<200xf32>
}
