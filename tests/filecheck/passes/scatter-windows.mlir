// RUN: shardc-opt %s --scatter-windows --split-input-file | filecheck %s

// A scatter of each window's recorded position (here the last positive element of
// each non-overlapping window of 2 along the row: kernel 2, stride 2), the index
// pairs (row, flat position) built by a generic and both operands collapsed: it
// becomes a generic over the original expanded to [rows, windows, 2] that combines
// where the recorded position is this element's, collapsed back.
// CHECK-LABEL: func.func @window_positions
// CHECK-SAME: (%{{.*}}: tensor<2x8xf32>, %[[U:.*]]: tensor<2x4xf32>, %[[ORIG:.*]]: tensor<2x8xf32>)
// CHECK: %[[COLS:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4x2xi64>)
// CHECK-NOT: tensor.collapse_shape
// CHECK: %[[E:.*]] = tensor.expand_shape %[[ORIG]] {{\[}}[0], [1, 2]] output_shape [2, 4, 2] : tensor<2x8xf32> into tensor<2x4x2xf32>
// CHECK: %[[G:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[U]], %[[COLS]] : tensor<2x4xf32>, tensor<2x4x2xi64>) outs(%[[E]] : tensor<2x4x2xf32>) {
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %[[COL:.*]]: i64, %[[OUT:.*]]: f32):
// CHECK-NEXT:   %[[I:.*]] = linalg.index 1 : index
// CHECK-NEXT:   %[[A:.*]] = linalg.index 2 : index
// CHECK-NEXT:   %[[S:.*]] = arith.constant 2 : index
// CHECK-NEXT:   %[[SI:.*]] = arith.muli %[[I]], %[[S]] : index
// CHECK-NEXT:   %[[AT:.*]] = arith.addi %[[SI]], %[[A]] : index
// CHECK-NEXT:   %[[ATI:.*]] = arith.index_cast %[[AT]] : index to i64
// CHECK-NEXT:   %[[HIT:.*]] = arith.cmpi eq, %[[COL]], %[[ATI]] : i64
// CHECK-NEXT:   %[[SUM:.*]] = arith.addf %[[OUT]], %[[IN]] : f32
// CHECK-NEXT:   %[[SEL:.*]] = arith.select %[[HIT]], %[[SUM]], %[[OUT]] : f32
// CHECK-NEXT:   linalg.yield %[[SEL]] : f32
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[G]] {{\[}}[0], [1, 2]] : tensor<2x4x2xf32> into tensor<2x8xf32>
// CHECK-NOT: tm_tensor.scatter
// CHECK: return %[[R]]
func.func @window_positions(%x: tensor<2x8xf32>, %u: tensor<2x4xf32>, %orig: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %none = arith.constant -1 : i64
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %window = tensor.empty() : tensor<2xf32>
  %e = tensor.empty() : tensor<2x4xi64>
  %init = linalg.fill ins(%none : i64) outs(%e : tensor<2x4xi64>) -> tensor<2x4xi64>
  %flat = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1 * 2 + d2)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %window : tensor<2x8xf32>, tensor<2xf32>) outs(%init : tensor<2x4xi64>) {
  ^bb0(%in: f32, %w: f32, %out: i64):
    %j = linalg.index 1 : index
    %r = linalg.index 2 : index
    %s = arith.muli %j, %c2 : index
    %at = arith.addi %s, %r : index
    %pos = arith.index_cast %at : index to i64
    %positive = arith.cmpf ogt, %in, %zero : f32
    %next = arith.select %positive, %pos, %out : i64
    linalg.yield %next : i64
  } -> tensor<2x4xi64>
  %ge = tensor.empty() : tensor<2x4x2xi64>
  %cols = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%flat : tensor<2x4xi64>) outs(%ge : tensor<2x4x2xi64>) {
  ^bb0(%f: i64, %out: i64):
    %k = linalg.index 2 : index
    %n = linalg.index 0 : index
    %fi = arith.index_cast %f : i64 to index
    %is0 = arith.cmpi eq, %k, %c0 : index
    %is1 = arith.cmpi eq, %k, %c1 : index
    %col0 = arith.select %is0, %n, %c0 : index
    %col1 = arith.select %is1, %fi, %c0 : index
    %sum = arith.addi %col0, %col1 : index
    %v = arith.index_cast %sum : index to i64
    linalg.yield %v : i64
  } -> tensor<2x4x2xi64>
  %uf = tensor.collapse_shape %u [[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
  %gf = tensor.collapse_shape %cols [[0, 1], [2]] : tensor<2x4x2xi64> into tensor<8x2xi64>
  %r = tm_tensor.scatter {dimension_map = array<i64: 0, 1>} unique_indices(false) ins(%uf, %gf : tensor<8xf32>, tensor<8x2xi64>) outs(%orig : tensor<2x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %t = arith.addf %b, %a : f32
    tm_tensor.yield %t : f32
  } -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// Overlapping windows (kernel 3, stride 2): a position may be recorded by two
// windows, so the scatter stays.
// CHECK-LABEL: func.func @overlapping_windows
// CHECK: tm_tensor.scatter
func.func @overlapping_windows(%x: tensor<2x9xf32>, %u: tensor<2x4xf32>, %orig: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %none = arith.constant -1 : i64
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %window = tensor.empty() : tensor<3xf32>
  %e = tensor.empty() : tensor<2x4xi64>
  %init = linalg.fill ins(%none : i64) outs(%e : tensor<2x4xi64>) -> tensor<2x4xi64>
  %flat = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1 * 2 + d2)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %window : tensor<2x9xf32>, tensor<3xf32>) outs(%init : tensor<2x4xi64>) {
  ^bb0(%in: f32, %w: f32, %out: i64):
    %j = linalg.index 1 : index
    %r = linalg.index 2 : index
    %s = arith.muli %j, %c2 : index
    %at = arith.addi %s, %r : index
    %pos = arith.index_cast %at : index to i64
    %positive = arith.cmpf ogt, %in, %zero : f32
    %next = arith.select %positive, %pos, %out : i64
    linalg.yield %next : i64
  } -> tensor<2x4xi64>
  %ge = tensor.empty() : tensor<2x4x2xi64>
  %cols = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%flat : tensor<2x4xi64>) outs(%ge : tensor<2x4x2xi64>) {
  ^bb0(%f: i64, %out: i64):
    %k = linalg.index 2 : index
    %n = linalg.index 0 : index
    %fi = arith.index_cast %f : i64 to index
    %is0 = arith.cmpi eq, %k, %c0 : index
    %is1 = arith.cmpi eq, %k, %c1 : index
    %col0 = arith.select %is0, %n, %c0 : index
    %col1 = arith.select %is1, %fi, %c0 : index
    %sum = arith.addi %col0, %col1 : index
    %v = arith.index_cast %sum : index to i64
    linalg.yield %v : i64
  } -> tensor<2x4x2xi64>
  %uf = tensor.collapse_shape %u [[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
  %gf = tensor.collapse_shape %cols [[0, 1], [2]] : tensor<2x4x2xi64> into tensor<8x2xi64>
  %r = tm_tensor.scatter {dimension_map = array<i64: 0, 1>} unique_indices(false) ins(%uf, %gf : tensor<8xf32>, tensor<8x2xi64>) outs(%orig : tensor<2x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %t = arith.addf %b, %a : f32
    tm_tensor.yield %t : f32
  } -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}
