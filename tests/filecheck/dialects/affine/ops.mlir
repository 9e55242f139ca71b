// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC

// delinearize_index: static and dynamic bases, with and without an outer bound.

// CHECK-LABEL: func.func @delinearize
// CHECK: affine.delinearize_index %{{.*}} into (2, 3, 5) : index, index, index
// CHECK: affine.delinearize_index %{{.*}} into (3, 5) : index, index, index
// CHECK: affine.delinearize_index %{{.*}} into (%{{.*}}, 7) : index, index
// CHECK: affine.delinearize_index %{{.*}} into () : index
// GENERIC: "affine.delinearize_index"(%{{.*}}) <{static_basis = array<i64: 2, 3, 5>}> : (index) -> (index, index, index)
// GENERIC: "affine.delinearize_index"(%{{.*}}, %{{.*}}) <{static_basis = array<i64: -9223372036854775808, 7>}> : (index, index) -> (index, index)
func.func @delinearize(%lin: index, %n: index) -> (index, index, index) {
  %0:3 = affine.delinearize_index %lin into (2, 3, 5) : index, index, index
  %1:3 = affine.delinearize_index %lin into (3, 5) : index, index, index
  %2:2 = affine.delinearize_index %lin into (%n, 7) : index, index
  %3 = affine.delinearize_index %lin into () : index
  return %0#2, %1#0, %2#1 : index, index, index
}

// -----

// linearize_index: `disjoint`, a basis with or without its first entry.

// CHECK-LABEL: func.func @linearize
// CHECK: affine.linearize_index [%{{.*}}, %{{.*}}, %{{.*}}] by (2, 3, 5) : index
// CHECK: affine.linearize_index disjoint [%{{.*}}, %{{.*}}, %{{.*}}] by (3, %{{.*}}) : index
// CHECK: affine.linearize_index [] by () : index
// GENERIC: "affine.linearize_index"(%{{.*}}, %{{.*}}, %{{.*}}) <{disjoint = false, operandSegmentSizes = array<i32: 3, 0>, static_basis = array<i64: 2, 3, 5>}>
// GENERIC: "affine.linearize_index"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{disjoint, operandSegmentSizes = array<i32: 3, 1>, static_basis = array<i64: 3, -9223372036854775808>}>
func.func @linearize(%i: index, %j: index, %k: index, %n: index) -> (index, index) {
  %0 = affine.linearize_index [%i, %j, %k] by (2, 3, 5) : index
  %1 = affine.linearize_index disjoint [%i, %j, %k] by (3, %n) : index
  %2 = affine.linearize_index [] by () : index
  return %0, %1 : index, index
}

// -----

// affine.max next to affine.min.

// CHECK-LABEL: func.func @max_min
// CHECK: affine.max #{{.*}}(%{{.*}})[%{{.*}}]
// CHECK: affine.min #{{.*}}(%{{.*}})[%{{.*}}]
// GENERIC: "affine.max"(%{{.*}}, %{{.*}}) <{map = #{{.*}}}> : (index, index) -> index
func.func @max_min(%i: index, %s: index) -> (index, index) {
  %0 = affine.max affine_map<(d0)[s0] -> (d0 * 2, s0 - 1)>(%i)[%s]
  %1 = affine.min affine_map<(d0)[s0] -> (d0 * 2, s0 - 1)>(%i)[%s]
  return %0, %1 : index, index
}

// -----

// Subscripts are map dimensions unless wrapped in symbol().

// CHECK-LABEL: func.func @subscripts(
// CHECK: affine.load %arg0[%arg4 + symbol(%arg1), %arg4 * 2 + %arg2] : memref<4x8xf32>
// CHECK: affine.store %{{.*}}, %arg0[symbol(%arg1), %arg4 floordiv 2 - 1] : memref<4x8xf32>
// CHECK: %0 = affine.if #set(%arg1)[%arg2] -> f32 {
// CHECK: } else {
func.func @subscripts(%m: memref<4x8xf32>, %i: index, %j: index, %x: f32) -> f32 {
  affine.for %k = 0 to 4 {
    %v = affine.load %m[%k + symbol(%i), %k * 2 + %j] : memref<4x8xf32>
    affine.store %v, %m[symbol(%i), %k floordiv 2 - 1] : memref<4x8xf32>
  }
  %0 = affine.if affine_set<(d0)[s0] : (d0 - s0 >= 0)>(%i)[%j] -> f32 {
    affine.yield %x : f32
  } else {
    affine.yield %x : f32
  }
  return %0 : f32
}
