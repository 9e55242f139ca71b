// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC

// copy and cast in their custom forms, ranked and unranked.

// CHECK-LABEL: func.func @copy_cast
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<6x2xi32> to memref<6x2xi32, strided<[4, 1], offset: ?>>
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<6x2xi32> to memref<*xi32>
// CHECK: memref.cast %{{.*}} : memref<6x2xi32> to memref<?x2xi32>
// CHECK: memref.cast %{{.*}} : memref<6x2xi32> to memref<*xi32>
// CHECK: memref.cast %{{.*}} : memref<*xi32> to memref<6x?xi32>
// CHECK: memref.cast %{{.*}} : memref<6x2xi32, strided<[4, 1], offset: ?>> to memref<6x2xi32, strided<[?, 1], offset: 8>>
// GENERIC: "memref.copy"(%{{.*}}, %{{.*}}) : (memref<6x2xi32>, memref<6x2xi32, strided<[4, 1], offset: ?>>) -> ()
// GENERIC: "memref.cast"(%{{.*}}) : (memref<6x2xi32>) -> memref<?x2xi32>
func.func @copy_cast(%a: memref<6x2xi32>, %b: memref<6x2xi32, strided<[4, 1], offset: ?>>, %u: memref<*xi32>) {
  memref.copy %a, %b : memref<6x2xi32> to memref<6x2xi32, strided<[4, 1], offset: ?>>
  memref.copy %a, %u : memref<6x2xi32> to memref<*xi32>
  %0 = memref.cast %a : memref<6x2xi32> to memref<?x2xi32>
  %1 = memref.cast %a : memref<6x2xi32> to memref<*xi32>
  %2 = memref.cast %u : memref<*xi32> to memref<6x?xi32>
  %3 = memref.cast %b : memref<6x2xi32, strided<[4, 1], offset: ?>> to memref<6x2xi32, strided<[?, 1], offset: 8>>
  return
}

// -----

// Reassociations print without integer types, as mlir-opt prints them.

// CHECK-LABEL: func.func @reshape
// CHECK: memref.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : memref<2x3x4xf64> into memref<6x4xf64>
// CHECK: memref.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [3, 2, 4] : memref<6x4xf64> into memref<3x2x4xf64>
// CHECK: memref.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [%{{.*}}, 4] : memref<?xf64> into memref<?x4xf64>
// CHECK: memref.collapse_shape %{{.*}} [] : memref<1x1xf64> into memref<f64>
// GENERIC: "memref.collapse_shape"(%{{.*}}) <{reassociation = {{.*}}}> : (memref<2x3x4xf64>) -> memref<6x4xf64>
func.func @reshape(%a: memref<2x3x4xf64>, %d: memref<?xf64>, %n: index, %s: memref<1x1xf64>) {
  %0 = memref.collapse_shape %a [[0, 1], [2]] : memref<2x3x4xf64> into memref<6x4xf64>
  %1 = memref.expand_shape %0 [[0, 1], [2]] output_shape [3, 2, 4] : memref<6x4xf64> into memref<3x2x4xf64>
  %2 = memref.expand_shape %d [[0, 1]] output_shape [%n, 4] : memref<?xf64> into memref<?x4xf64>
  %3 = memref.collapse_shape %s [] : memref<1x1xf64> into memref<f64>
  return
}

// -----

// The other memref forms the MPI lowering emits already print as mlir-opt does.

// CHECK-LABEL: func.func @views
// CHECK: memref.alloc(%{{.*}}) {alignment = 16 : i64} : memref<?x8xf32>
// CHECK: memref.subview %{{.*}}[%{{.*}}, 0] [2, 8] [1, 1] : memref<?x8xf32> to memref<2x8xf32, strided<[8, 1], offset: ?>>
// CHECK: memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [%{{.*}}, 4, 2], strides: [8, 2, 1] : memref<?x8xf32> to memref<?x4x2xf32>
func.func @views(%n: index, %o: index) {
  %a = memref.alloc(%n) {alignment = 16 : i64} : memref<?x8xf32>
  %0 = memref.subview %a[%o, 0] [2, 8] [1, 1] : memref<?x8xf32> to memref<2x8xf32, strided<[8, 1], offset: ?>>
  %1 = memref.reinterpret_cast %a to offset: [0], sizes: [%n, 4, 2], strides: [8, 2, 1] : memref<?x8xf32> to memref<?x4x2xf32>
  memref.dealloc %a : memref<?x8xf32>
  return
}

// -----

// CHECK: memref.global "private" constant @g : memref<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
// CHECK: memref.global @h : memref<2xi32> = uninitialized
// CHECK: memref.global "private" @k : memref<2xi32> {alignment = 64 : i64}
// CHECK: %0 = memref.get_global @g : memref<2xf32>
memref.global "private" constant @g : memref<2xf32> = dense<[1.0, 2.0]>
memref.global @h : memref<2xi32> = uninitialized
memref.global "private" @k : memref<2xi32> {alignment = 64 : i64}
func.func @globals() -> memref<2xf32> {
  %0 = memref.get_global @g : memref<2xf32>
  return %0 : memref<2xf32>
}
