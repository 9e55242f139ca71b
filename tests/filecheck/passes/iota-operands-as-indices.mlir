// RUN: shardc-opt %s --iota-operands-as-indices | filecheck %s

// A generic input holding its loop's positions (torch-mlir's `arange`, reshaped to
// broadcast) is read as that loop's `linalg.index`; the input, its reshape and the arange
// go. An input computed otherwise from the positions stays.

// CHECK-LABEL: func.func @rows
// CHECK-NOT: tensor.expand_shape
// CHECK: linalg.generic {indexing_maps = [#{{.*}}], iterator_types = ["parallel", "parallel"]} outs(
// CHECK-NEXT: ^bb0(%{{.*}}: i1):
// CHECK-NEXT: %[[I:.*]] = linalg.index 0 : index
// CHECK-NEXT: %[[P:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK-NEXT: arith.cmpi slt, %[[P]], %{{.*}} : i64
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<4x8xi1>
func.func @rows(%m: tensor<4x8xi1>) -> tensor<4x8xi1> {
  %z = arith.constant 0 : i64
  %c4 = arith.constant 4 : i64
  %e0 = tensor.empty() : tensor<4xi64>
  %rows = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e0 : tensor<4xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %p = arith.index_cast %i : index to i64
    linalg.yield %p : i64
  } -> tensor<4xi64>
  %r2 = tensor.expand_shape %rows [[0, 1]] output_shape [4, 1] : tensor<4xi64> into tensor<4x1xi64>
  %e2 = tensor.empty() : tensor<4x8xi1>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%r2 : tensor<4x1xi64>) outs(%e2 : tensor<4x8xi1>) {
  ^bb0(%a: i64, %o: i1):
    %an = arith.cmpi slt, %a, %z : i64
    %aw = arith.addi %a, %c4 : i64
    %as = arith.select %an, %aw, %a : i64
    %ai = arith.index_cast %as : i64 to index
    %j = linalg.index 1 : index
    %x = tensor.extract %m[%ai, %j] : tensor<4x8xi1>
    linalg.yield %x : i1
  } -> tensor<4x8xi1>
  return %g : tensor<4x8xi1>
}

// CHECK-LABEL: func.func @shifted
// CHECK: tensor.expand_shape
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<4x1xi64>)
func.func @shifted(%m: tensor<4x8xi1>) -> tensor<4x8xi1> {
  %one = arith.constant 1 : i64
  %e0 = tensor.empty() : tensor<4xi64>
  %rows = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e0 : tensor<4xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %p = arith.index_cast %i : index to i64
    %q = arith.addi %p, %one : i64
    linalg.yield %q : i64
  } -> tensor<4xi64>
  %r2 = tensor.expand_shape %rows [[0, 1]] output_shape [4, 1] : tensor<4xi64> into tensor<4x1xi64>
  %e2 = tensor.empty() : tensor<4x8xi1>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%r2 : tensor<4x1xi64>) outs(%e2 : tensor<4x8xi1>) {
  ^bb0(%a: i64, %o: i1):
    %ai = arith.index_cast %a : i64 to index
    %j = linalg.index 1 : index
    %x = tensor.extract %m[%ai, %j] : tensor<4x8xi1>
    linalg.yield %x : i1
  } -> tensor<4x8xi1>
  return %g : tensor<4x8xi1>
}
