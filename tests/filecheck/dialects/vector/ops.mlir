// RUN: shardc-opt %s --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC

// The vector ops convert-shard-to-mpi's inputs may hold, printed as mlir-opt prints them.

// CHECK-LABEL: func.func @masks_and_broadcasts
func.func @masks_and_broadcasts(%x: f32) -> (vector<4x8xi1>, vector<8xf32>, vector<2x8xf32>) {
  // CHECK: %[[M:.*]] = vector.constant_mask [2, 3] : vector<4x8xi1>
  %m = vector.constant_mask [2, 3] : vector<4x8xi1>
  // CHECK: %[[B:.*]] = vector.broadcast %{{.*}} : f32 to vector<8xf32>
  %b = vector.broadcast %x : f32 to vector<8xf32>
  // CHECK: %[[B2:.*]] = vector.broadcast %[[B]] : vector<8xf32> to vector<2x8xf32>
  %b2 = vector.broadcast %b : vector<8xf32> to vector<2x8xf32>
  // CHECK: return %[[M]], %[[B]], %[[B2]]
  return %m, %b, %b2 : vector<4x8xi1>, vector<8xf32>, vector<2x8xf32>
}
// GENERIC: "vector.constant_mask"() <{mask_dim_sizes = array<i64: 2, 3>}> : () -> vector<4x8xi1>

// -----

// CHECK-LABEL: func.func @reductions
func.func @reductions(%src: vector<1x4x1xf32>, %acc: vector<1x4xf32>, %mask: vector<1x4x1xi1>, %v: vector<2x8xf32>, %s: f32) -> (vector<1x4xf32>, vector<1x4xf32>, f32, vector<1x4xf32>) {
  // CHECK: %{{.*}} = vector.mask %{{.*}} { vector.multi_reduction <add>, %{{.*}}, %{{.*}} [2] : vector<1x4x1xf32> to vector<1x4xf32> } : vector<1x4x1xi1> -> vector<1x4xf32>
  %0 = vector.mask %mask { vector.multi_reduction <add>, %src, %acc [2] : vector<1x4x1xf32> to vector<1x4xf32> } : vector<1x4x1xi1> -> vector<1x4xf32>
  // CHECK: %{{.*}} = vector.multi_reduction <maximumf>, %{{.*}}, %{{.*}} [2] : vector<1x4x1xf32> to vector<1x4xf32>
  %1 = vector.multi_reduction <maximumf>, %src, %acc [2] : vector<1x4x1xf32> to vector<1x4xf32>
  // CHECK: %{{.*}} = vector.multi_reduction <add>, %{{.*}}, %{{.*}} [0, 1] : vector<2x8xf32> to f32
  %2 = vector.multi_reduction <add>, %v, %s [0, 1] : vector<2x8xf32> to f32
  // CHECK: %{{.*}} = vector.mask %{{.*}} {
  // CHECK-SAME: vector.multi_reduction <mul>, %{{.*}}, %{{.*}} [2] : vector<1x4x1xf32> to vector<1x4xf32> } : vector<1x4x1xi1> -> vector<1x4xf32>
  %3 = vector.mask %mask {
    %r = vector.multi_reduction <mul>, %src, %acc [2] : vector<1x4x1xf32> to vector<1x4xf32>
    vector.yield %r : vector<1x4xf32>
  } : vector<1x4x1xi1> -> vector<1x4xf32>
  return %0, %1, %2, %3 : vector<1x4xf32>, vector<1x4xf32>, f32, vector<1x4xf32>
}
// GENERIC: "vector.mask"(%{{.*}}) ({
// GENERIC-NEXT: %[[R:.*]] = "vector.multi_reduction"(%{{.*}}, %{{.*}}) <{kind = #vector.kind<add>, reduction_dims = array<i64: 2>}> : (vector<1x4x1xf32>, vector<1x4xf32>) -> vector<1x4xf32>
// GENERIC-NEXT: "vector.yield"(%[[R]]) : (vector<1x4xf32>) -> ()
// GENERIC-NEXT: }) : (vector<1x4x1xi1>) -> vector<1x4xf32>
