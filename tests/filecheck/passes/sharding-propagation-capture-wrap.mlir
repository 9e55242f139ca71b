// RUN: shardc-opt %s --sharding-propagation --cse | filecheck %s
// RUN: shardc-opt %s --sharding-propagation --shard-partition | filecheck %s --check-prefix=PART

// A captured tensor read at `arith.remsi (linalg.index d), C` with C at least the loop's
// extent (torch-mlir's wrap of a possibly negative index, as in cross-entropy's
// backward) follows loop d as `linalg.index d` does: the wrap is the identity on the
// loop's range. The table stays split like the loop, no all_gather; the extract reads
// the local index, every other use the global one.

shard.grid @g(shape = 2)

// CHECK-LABEL: func.func @wrapped_rows
// CHECK: %[[S:.*]] = shard.sharding @g split_axes = {{\[\[}}0]]
// CHECK: %[[A:.*]] = shard.shard %arg0 to %[[S]]
// CHECK: %[[TU:.*]] = shard.shard %[[A]] to %[[S]] annotate_for_users : tensor<32x1xi64>
// CHECK-NEXT: linalg.generic
// CHECK: tensor.extract %[[TU]][
// PART-LABEL: func.func @wrapped_rows
// PART-SAME: (%[[T:.*]]: tensor<16x1xi64>) -> (tensor<16x1xi64>, tensor<16xi64>)
// PART-NOT: shard.all_gather
// PART: %[[I:.*]] = linalg.index 0 : index
// PART-NEXT: %[[G:.*]] = arith.addi %[[I]], %{{.*}} : index
// PART-NEXT: %[[W:.*]] = arith.remsi %[[G]], %c32 : index
// PART-NEXT: tensor.extract %[[T]][%[[I]], %c0] : tensor<16x1xi64>
// PART-NEXT: arith.index_cast %[[W]] : index to i64
// PART-NOT: shard.all_gather
func.func @wrapped_rows(%t: tensor<32x1xi64>) -> (tensor<32x1xi64>, tensor<32xi64>) {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %ts = shard.shard %t to %s : tensor<32x1xi64>
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %e = tensor.empty() : tensor<32x1xi64>
  %e2 = tensor.empty() : tensor<32xi64>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0, 0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e, %e2 : tensor<32x1xi64>, tensor<32xi64>) {
  ^bb0(%out: i64, %out2: i64):
    %i = linalg.index 0 : index
    %w = arith.remsi %i, %c32 : index
    %x = tensor.extract %ts[%w, %c0] : tensor<32x1xi64>
    %p = arith.index_cast %w : index to i64
    linalg.yield %x, %p : i64, i64
  } -> (tensor<32x1xi64>, tensor<32xi64>)
  %rs = shard.shard %r#0 to %s : tensor<32x1xi64>
  return %rs, %r#1 : tensor<32x1xi64>, tensor<32xi64>
}

// A wrap by less than the extent moves rows (row 20 reads row 4): the table is read
// whole, gathered, at the global index.
// CHECK-LABEL: func.func @short_wrap
// CHECK: %[[A:.*]] = shard.shard %arg0 to
// CHECK: %[[R:.*]] = shard.sharding @g split_axes = {{\[\[\]\]}}
// CHECK: %[[TU:.*]] = shard.shard %[[A]] to %[[R]] annotate_for_users : tensor<32x1xi64>
// CHECK-NEXT: linalg.generic
// CHECK: tensor.extract %[[TU]][
// PART-LABEL: func.func @short_wrap
// PART: shard.all_gather %{{.*}} on @g grid_axes = [0] gather_axis = 0 : tensor<16x1xi64> -> tensor<32x1xi64>
// PART: arith.remsi %{{.*}}, %c16 : index
func.func @short_wrap(%t: tensor<32x1xi64>) -> tensor<32x1xi64> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %ts = shard.shard %t to %s : tensor<32x1xi64>
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %e = tensor.empty() : tensor<32x1xi64>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0, 0)>], iterator_types = ["parallel"]} outs(%e : tensor<32x1xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %w = arith.remsi %i, %c16 : index
    %x = tensor.extract %ts[%w, %c0] : tensor<32x1xi64>
    linalg.yield %x : i64
  } -> tensor<32x1xi64>
  %rs = shard.shard %r to %s : tensor<32x1xi64>
  return %rs : tensor<32x1xi64>
}
