// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s

// A multi-result generic: `%r:2 = ...`, uses `%r#1`, results `-> (t1, t2)`
// (torch-mlir's max/argmax). The leading dictionary prints sorted, as MLIR's.
// CHECK: #map = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-NEXT: #map1 = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @max_argmax(%arg0: tensor<4x8xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>) {
// CHECK-NEXT: %0:2 = linalg.generic {indexing_maps = [#map, #map1, #map1], iterator_types = ["parallel", "reduction"]} ins(%arg0 : tensor<4x8xf32>) outs(%arg1, %arg2 : tensor<4xf32>, tensor<4xi64>) {
// CHECK-NEXT: ^bb0(%in: f32, %out: f32, %out_0: i64):
// CHECK-NEXT: %1 = linalg.index 1 : index
// CHECK-NEXT: %2 = arith.index_cast %1 : index to i64
// CHECK-NEXT: %3 = arith.maximumf %in, %out : f32
// CHECK-NEXT: %4 = arith.cmpf ogt, %in, %out : f32
// CHECK-NEXT: %5 = arith.select %4, %2, %out_0 : i64
// CHECK-NEXT: linalg.yield %3, %5 : f32, i64
// CHECK-NEXT: } -> (tensor<4xf32>, tensor<4xi64>)
// CHECK-NEXT: return %0#0, %0#1 : tensor<4xf32>, tensor<4xi64>
// CHECK-NEXT: }
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @max_argmax(%a: tensor<4x8xf32>, %init: tensor<4xf32>, %idx: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>) {
  %r:2 = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<4x8xf32>) outs(%init, %idx : tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%in: f32, %out: f32, %out_0: i64):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %p = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %p, %c, %out_0 : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xi64>
}

// -----

// CHECK: #map = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @trait_attrs(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: %0 = linalg.generic {doc = "hello", indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"], library_call = "foo"} ins(%arg0 : tensor<4x8xf32>) outs(%arg1 : tensor<4x8xf32>) attrs =  {my.attr = 3 : i32} {
// CHECK-NEXT: ^bb0(%in: f32, %out: f32):
// CHECK-NEXT: %1 = math.exp %in fastmath<fast> : f32
// CHECK-NEXT: linalg.yield %1 : f32
// CHECK-NEXT: } -> tensor<4x8xf32>
// CHECK-NEXT: return %0 : tensor<4x8xf32>
// CHECK-NEXT: }
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @trait_attrs(%a: tensor<4x8xf32>, %o: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = linalg.generic {library_call = "foo", iterator_types = ["parallel", "parallel"], indexing_maps = [#id, #id], doc = "hello"} ins(%a : tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) attrs = {my.attr = 3 : i32} {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in fastmath<fast> : f32
    linalg.yield %e : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// CHECK: #map = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @on_memrefs(%arg0: memref<4x8xf32>, %arg1: memref<4x8xf32>, %arg2: memref<4x8xi1>) {
// CHECK-NEXT: linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0 : memref<4x8xf32>) outs(%arg1, %arg2 : memref<4x8xf32>, memref<4x8xi1>) {
// CHECK-NEXT: ^bb0(%in: f32, %out: f32, %out_0: i1):
// CHECK-NEXT: %cst = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %0 = arith.cmpf ogt, %in, %cst : f32
// CHECK-NEXT: linalg.yield %in, %0 : f32, i1
// CHECK-NEXT: }
// CHECK-NEXT: return
// CHECK-NEXT: }
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @on_memrefs(%a: memref<4x8xf32>, %o: memref<4x8xf32>, %p: memref<4x8xi1>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : memref<4x8xf32>) outs(%o, %p : memref<4x8xf32>, memref<4x8xi1>) {
  ^bb0(%in: f32, %out: f32, %out_1: i1):
    %z = arith.constant 0.0 : f32
    %c = arith.cmpf ogt, %in, %z : f32
    linalg.yield %in, %c : f32, i1
  }
  return
}

// -----

// Named ops torch-mlir emits, and a gather: tensor.extract inside a generic body.
// CHECK: #map = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-NEXT: #map1 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @named(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x8x3xf32>, %arg2: tensor<2x4x3xf32>, %arg3: tensor<8xf32>, %arg4: tensor<4x8xf32>, %arg5: tensor<8x4xf32>, %arg6: tensor<4xf32>, %arg7: tensor<2x4xi64>, %arg8: tensor<10x3xf32>, %arg9: tensor<2x4x3xf32>) -> tensor<2x4x3xf32> {
// CHECK-NEXT: %0 = linalg.batch_matmul ins(%arg0, %arg1 : tensor<2x4x8xf32>, tensor<2x8x3xf32>) outs(%arg2 : tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
// CHECK-NEXT: %broadcasted = linalg.broadcast ins(%arg3 : tensor<8xf32>) outs(%arg4 : tensor<4x8xf32>) dimensions = [0]
// CHECK-NEXT: %transposed = linalg.transpose ins(%arg4 : tensor<4x8xf32>) outs(%arg5 : tensor<8x4xf32>) permutation = [1, 0]
// CHECK-NEXT: %reduced = linalg.reduce { arith.addf } ins(%arg4 : tensor<4x8xf32>) outs(%arg6 : tensor<4xf32>) dimensions = [1]
// CHECK-NEXT: %1 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg7 : tensor<2x4xi64>) outs(%arg9 : tensor<2x4x3xf32>) {
// CHECK-NEXT: ^bb0(%in: i64, %out: f32):
// CHECK-NEXT: %2 = arith.index_cast %in : i64 to index
// CHECK-NEXT: %3 = linalg.index 2 : index
// CHECK-NEXT: %extracted = tensor.extract %arg8[%2, %3] : tensor<10x3xf32>
// CHECK-NEXT: linalg.yield %extracted : f32
// CHECK-NEXT: } -> tensor<2x4x3xf32>
// CHECK-NEXT: return %1 : tensor<2x4x3xf32>
// CHECK-NEXT: }
#map = affine_map<(d0, d1, d2) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @named(%a: tensor<2x4x8xf32>, %b: tensor<2x8x3xf32>, %c: tensor<2x4x3xf32>, %v: tensor<8xf32>, %w: tensor<4x8xf32>, %t: tensor<8x4xf32>, %r: tensor<4xf32>, %ids: tensor<2x4xi64>, %table: tensor<10x3xf32>, %e: tensor<2x4x3xf32>) -> tensor<2x4x3xf32> {
  %0 = linalg.batch_matmul ins(%a, %b : tensor<2x4x8xf32>, tensor<2x8x3xf32>) outs(%c : tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %1 = linalg.broadcast ins(%v : tensor<8xf32>) outs(%w : tensor<4x8xf32>) dimensions = [0]
  %2 = linalg.transpose ins(%w : tensor<4x8xf32>) outs(%t : tensor<8x4xf32>) permutation = [1, 0]
  %3 = linalg.reduce { arith.addf } ins(%w : tensor<4x8xf32>) outs(%r : tensor<4xf32>) dimensions = [1]
  %4 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ids : tensor<2x4xi64>) outs(%e : tensor<2x4x3xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %j = linalg.index 2 : index
    %x = tensor.extract %table[%i, %j] : tensor<10x3xf32>
    linalg.yield %x : f32
  } -> tensor<2x4x3xf32>
  return %4 : tensor<2x4x3xf32>
}

// -----

// Mixed-precision contractions: the body casts the operands to the accumulator's type
// (visible in generic form, which the first RUN line goes through).
// CHECK-LABEL: func.func @mixed(%arg0: tensor<4x6xf16>, %arg1: tensor<6x4xf16>, %arg2: tensor<4x4xf32>, %arg3: tensor<2x4x6xi8>, %arg4: tensor<2x6x4xi8>, %arg5: tensor<2x4x4xi32>) -> (tensor<4x4xf32>, tensor<2x4x4xi32>) {
// CHECK-NEXT: %0 = linalg.matmul ins(%arg0, %arg1 : tensor<4x6xf16>, tensor<6x4xf16>) outs(%arg2 : tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %1 = linalg.batch_matmul ins(%arg3, %arg4 : tensor<2x4x6xi8>, tensor<2x6x4xi8>) outs(%arg5 : tensor<2x4x4xi32>) -> tensor<2x4x4xi32>
// CHECK-NEXT: return %0, %1 : tensor<4x4xf32>, tensor<2x4x4xi32>
// CHECK-NEXT: }
func.func @mixed(%a: tensor<4x6xf16>, %b: tensor<6x4xf16>, %c: tensor<4x4xf32>, %i: tensor<2x4x6xi8>, %j: tensor<2x6x4xi8>, %k: tensor<2x4x4xi32>) -> (tensor<4x4xf32>, tensor<2x4x4xi32>) {
  %0 = linalg.matmul ins(%a, %b : tensor<4x6xf16>, tensor<6x4xf16>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = linalg.batch_matmul ins(%i, %j : tensor<2x4x6xi8>, tensor<2x6x4xi8>) outs(%k : tensor<2x4x4xi32>) -> tensor<2x4x4xi32>
  return %0, %1 : tensor<4x4xf32>, tensor<2x4x4xi32>
}

// -----

// A variadic linalg.reduce: two inputs reduced together, one result per init.
// CHECK-LABEL: func.func @reduce2(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf32>, %arg2: tensor<4xf32>, %arg3: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT: %reduced:2 = linalg.reduce ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%arg2, %arg3 : tensor<4xf32>, tensor<4xf32>) dimensions = [1]
// CHECK-NEXT: (%in: f32, %in_0: f32, %init: f32, %init_1: f32) {
// CHECK-NEXT: %0 = arith.addf %in, %init : f32
// CHECK-NEXT: %1 = arith.maximumf %in_0, %init_1 : f32
// CHECK-NEXT: linalg.yield %0, %1 : f32, f32
// CHECK-NEXT: }
// CHECK-NEXT: return %reduced#0, %reduced#1 : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT: }
func.func @reduce2(%w: tensor<4x8xf32>, %v: tensor<4x8xf32>, %r: tensor<4xf32>, %r2: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0:2 = linalg.reduce ins(%w, %v : tensor<4x8xf32>, tensor<4x8xf32>) outs(%r, %r2 : tensor<4xf32>, tensor<4xf32>) dimensions = [1]
    (%a: f32, %b: f32, %c: f32, %d: f32) {
      %s = arith.addf %a, %c : f32
      %m = arith.maximumf %b, %d : f32
      linalg.yield %s, %m : f32, f32
    }
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}
