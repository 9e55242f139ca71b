// RUN: shardc-opt %s --shard-simplify | filecheck %s

shard.grid @mesh(shape = 4x2)
shard.grid @other(shape = 4x2)
shard.grid @line(shape = 8)

// --- all-reduce endomorphisms ---

// CHECK-LABEL: func.func @sum_of_sums
// CHECK-SAME: (%[[A:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xf32>)
func.func @sum_of_sums(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %ra = shard.all_reduce %a on @mesh grid_axes = [1] : tensor<3xf32> -> tensor<3xf32>
  %rb = shard.all_reduce %b on @mesh grid_axes = [1] : tensor<3xf32> -> tensor<3xf32>
  // CHECK-NEXT: %[[S:.*]] = arith.addf %[[A]], %[[B]] fastmath<nnan> : tensor<3xf32>
  // CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[S]] on @mesh grid_axes = [1] : tensor<3xf32> -> tensor<3xf32>
  // CHECK-NEXT: return %[[R]]
  %s = arith.addf %ra, %rb fastmath<nnan> : tensor<3xf32>
  return %s : tensor<3xf32>
}

// CHECK-LABEL: func.func @int_sum_used_twice
func.func @int_sum_used_twice(%a: tensor<2xi32>, %b: tensor<2xi32>) -> (tensor<2xi32>, tensor<2xi32>) {
  %ra = shard.all_reduce %a on @line : tensor<2xi32> -> tensor<2xi32>
  %rb = shard.all_reduce %b on @line : tensor<2xi32> -> tensor<2xi32>
  // CHECK-NEXT: %[[S:.*]] = arith.addi
  // CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[S]] on @line
  // CHECK-NEXT: return %[[R]], %[[R]]
  %s = arith.addi %ra, %rb : tensor<2xi32>
  return %s, %s : tensor<2xi32>, tensor<2xi32>
}

// CHECK-LABEL: func.func @min_max_kinds
func.func @min_max_kinds(%a: tensor<2xf32>, %b: tensor<2xf32>, %i: tensor<2xi8>, %j: tensor<2xi8>)
    -> (tensor<2xf32>, tensor<2xi8>, tensor<2xi8>, tensor<2xf32>, tensor<2xi8>, tensor<2xi8>) {
  %0 = shard.all_reduce %a on @line reduction = min : tensor<2xf32> -> tensor<2xf32>
  %1 = shard.all_reduce %b on @line reduction = min : tensor<2xf32> -> tensor<2xf32>
  %2 = arith.minimumf %0, %1 : tensor<2xf32>
  %3 = shard.all_reduce %i on @line reduction = min : tensor<2xi8> -> tensor<2xi8>
  %4 = shard.all_reduce %j on @line reduction = min : tensor<2xi8> -> tensor<2xi8>
  %5 = arith.minsi %3, %4 : tensor<2xi8>
  %6 = shard.all_reduce %i on @line reduction = min : tensor<2xi8> -> tensor<2xi8>
  %7 = shard.all_reduce %j on @line reduction = min : tensor<2xi8> -> tensor<2xi8>
  %8 = arith.minui %6, %7 : tensor<2xi8>
  %9 = shard.all_reduce %a on @line reduction = max : tensor<2xf32> -> tensor<2xf32>
  %10 = shard.all_reduce %b on @line reduction = max : tensor<2xf32> -> tensor<2xf32>
  %11 = arith.maximumf %9, %10 : tensor<2xf32>
  %12 = shard.all_reduce %i on @line reduction = max : tensor<2xi8> -> tensor<2xi8>
  %13 = shard.all_reduce %j on @line reduction = max : tensor<2xi8> -> tensor<2xi8>
  %14 = arith.maxsi %12, %13 : tensor<2xi8>
  %15 = shard.all_reduce %i on @line reduction = max : tensor<2xi8> -> tensor<2xi8>
  %16 = shard.all_reduce %j on @line reduction = max : tensor<2xi8> -> tensor<2xi8>
  %17 = arith.maxui %15, %16 : tensor<2xi8>
  // CHECK-NEXT: arith.minimumf %{{.*}}, %{{.*}}
  // CHECK-NEXT: shard.all_reduce {{.*}} reduction = min
  // CHECK-NEXT: arith.minsi
  // CHECK-NEXT: shard.all_reduce {{.*}} reduction = min
  // CHECK-NEXT: arith.minui
  // CHECK-NEXT: shard.all_reduce {{.*}} reduction = min
  // CHECK-NEXT: arith.maximumf
  // CHECK-NEXT: shard.all_reduce {{.*}} reduction = max
  // CHECK-NEXT: arith.maxsi
  // CHECK-NEXT: shard.all_reduce {{.*}} reduction = max
  // CHECK-NEXT: arith.maxui
  // CHECK-NEXT: shard.all_reduce {{.*}} reduction = max
  // CHECK-NEXT: return
  return %2, %5, %8, %11, %14, %17 : tensor<2xf32>, tensor<2xi8>, tensor<2xi8>, tensor<2xf32>, tensor<2xi8>, tensor<2xi8>
}

// Negative cases: the all-reduce has another use, the grids, axes or kinds differ,
// the all-reduce converts the element type, the op is not distributive (minnumf,
// mulf, a sum under max).
// CHECK-LABEL: func.func @not_endomorphisms
func.func @not_endomorphisms(%a: tensor<2xf32>, %b: tensor<2xf32>, %h: tensor<2xf16>)
    -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  // CHECK-COUNT-14: shard.all_reduce
  // CHECK-NOT: shard.all_reduce
  %0 = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<2xf32> -> tensor<2xf32>
  %1 = shard.all_reduce %b on @mesh grid_axes = [0] : tensor<2xf32> -> tensor<2xf32>
  %2 = arith.addf %0, %1 : tensor<2xf32>
  %3 = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<2xf32> -> tensor<2xf32>
  %4 = shard.all_reduce %b on @other grid_axes = [0] : tensor<2xf32> -> tensor<2xf32>
  %5 = arith.addf %3, %4 : tensor<2xf32>
  %6 = shard.all_reduce %a on @mesh grid_axes = [0] : tensor<2xf32> -> tensor<2xf32>
  %7 = shard.all_reduce %b on @mesh grid_axes = [1] : tensor<2xf32> -> tensor<2xf32>
  %8 = arith.addf %6, %7 : tensor<2xf32>
  %9 = shard.all_reduce %a on @line reduction = max : tensor<2xf32> -> tensor<2xf32>
  %10 = shard.all_reduce %b on @line : tensor<2xf32> -> tensor<2xf32>
  %11 = arith.addf %9, %10 : tensor<2xf32>
  %12 = shard.all_reduce %h on @line : tensor<2xf16> -> tensor<2xf32>
  %13 = shard.all_reduce %h on @line : tensor<2xf16> -> tensor<2xf32>
  %14 = arith.addf %12, %13 : tensor<2xf32>
  %15 = shard.all_reduce %a on @line reduction = min : tensor<2xf32> -> tensor<2xf32>
  %16 = shard.all_reduce %b on @line reduction = min : tensor<2xf32> -> tensor<2xf32>
  %17 = arith.minnumf %15, %16 : tensor<2xf32>
  %18 = arith.mulf %2, %5 : tensor<2xf32>
  %19 = shard.all_reduce %a on @line reduction = max : tensor<2xf32> -> tensor<2xf32>
  %20 = shard.all_reduce %b on @line reduction = max : tensor<2xf32> -> tensor<2xf32>
  %21 = arith.addf %19, %20 : tensor<2xf32>
  %22 = arith.addf %0, %0 : tensor<2xf32>
  return %0, %2, %5, %8, %11, %14, %17, %21, %22 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// --- all_slice(all_reduce) -> reduce_scatter ---

// CHECK-LABEL: func.func @reduce_then_slice
// CHECK-SAME: (%[[X:.*]]: tensor<8x6xf32>)
func.func @reduce_then_slice(%x: tensor<8x6xf32>) -> tensor<8x3xf32> {
  %r = shard.all_reduce %x on @mesh grid_axes = [1] reduction = max : tensor<8x6xf32> -> tensor<8x6xf32>
  %s = shard.all_slice %r on @mesh grid_axes = [1] slice_axis = 1 : tensor<8x6xf32> -> tensor<8x3xf32>
  // CHECK-NEXT: %[[RS:.*]] = shard.reduce_scatter %[[X]] on @mesh grid_axes = [1] reduction = max scatter_dim = 1 : tensor<8x6xf32> -> tensor<8x3xf32>
  // CHECK-NEXT: return %[[RS]]
  return %s : tensor<8x3xf32>
}

// CHECK-LABEL: func.func @reduce_then_slice_kept
func.func @reduce_then_slice_kept(%x: tensor<8x6xf32>) -> (tensor<8x3xf32>, tensor<2x6xf32>, tensor<8x6xf32>, tensor<8x6xf32>, tensor<1x6xf32>) {
  // Other axes, another grid, a second use of the all-reduce.
  // CHECK-COUNT-3: shard.all_slice
  // CHECK-NOT: reduce_scatter
  %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<8x6xf32> -> tensor<8x6xf32>
  %s = shard.all_slice %r on @mesh grid_axes = [1] slice_axis = 1 : tensor<8x6xf32> -> tensor<8x3xf32>
  %r2 = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<8x6xf32> -> tensor<8x6xf32>
  %s2 = shard.all_slice %r2 on @other grid_axes = [0] slice_axis = 0 : tensor<8x6xf32> -> tensor<2x6xf32>
  %r3 = shard.all_reduce %x on @line : tensor<8x6xf32> -> tensor<8x6xf32>
  %s3 = shard.all_slice %r3 on @line grid_axes = [0] slice_axis = 0 : tensor<8x6xf32> -> tensor<1x6xf32>
  %sum = arith.addf %r3, %r3 : tensor<8x6xf32>
  // CHECK: return
  return %s, %s2, %r, %sum, %s3 : tensor<8x3xf32>, tensor<2x6xf32>, tensor<8x6xf32>, tensor<8x6xf32>, tensor<1x6xf32>
}

// --- all_gather / all_slice pairs ---

// CHECK-LABEL: func.func @gather_then_slice
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
func.func @gather_then_slice(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<8x3xf32>) {
  // The gather has another use: it stays, the slice goes.
  // CHECK-NEXT: %[[G:.*]] = shard.all_gather %[[X]]
  // CHECK-NEXT: return %[[X]], %[[G]]
  %g = shard.all_gather %x on @mesh grid_axes = [0] gather_axis = 0 : tensor<2x3xf32> -> tensor<8x3xf32>
  %s = shard.all_slice %g on @mesh grid_axes = [0] slice_axis = 0 : tensor<8x3xf32> -> tensor<2x3xf32>
  return %s, %g : tensor<2x3xf32>, tensor<8x3xf32>
}

// CHECK-LABEL: func.func @slice_then_gather
// CHECK-SAME: (%[[X:.*]]: tensor<4x6xf32>)
func.func @slice_then_gather(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // CHECK-NEXT: return %[[X]]
  %s = shard.all_slice %x on @mesh grid_axes = [1] slice_axis = 1 : tensor<4x6xf32> -> tensor<4x3xf32>
  %g = shard.all_gather %s on @mesh grid_axes = [1] gather_axis = 1 : tensor<4x3xf32> -> tensor<4x6xf32>
  return %g : tensor<4x6xf32>
}

// CHECK-LABEL: func.func @pairs_kept
func.func @pairs_kept(%x: tensor<4x6xf32>) -> (tensor<2x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>) {
  // Different tensor axis, different grid axes, different grid.
  // CHECK-NEXT: shard.all_slice
  // CHECK-NEXT: shard.all_gather
  // CHECK-NEXT: shard.all_slice
  // CHECK-NEXT: shard.all_gather
  // CHECK-NEXT: shard.all_slice
  // CHECK-NEXT: shard.all_gather
  %s = shard.all_slice %x on @mesh grid_axes = [1] slice_axis = 1 : tensor<4x6xf32> -> tensor<4x3xf32>
  %g = shard.all_gather %s on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
  %s1 = shard.all_slice %g on @mesh grid_axes = [0] slice_axis = 0 : tensor<8x3xf32> -> tensor<2x3xf32>
  %g1 = shard.all_gather %s1 on @mesh grid_axes = [1] gather_axis = 1 : tensor<2x3xf32> -> tensor<2x6xf32>
  %s2 = shard.all_slice %x on @mesh grid_axes = [1] slice_axis = 1 : tensor<4x6xf32> -> tensor<4x3xf32>
  %g2 = shard.all_gather %s2 on @other grid_axes = [1] gather_axis = 1 : tensor<4x3xf32> -> tensor<4x6xf32>
  return %g1, %g2, %x, %x : tensor<2x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>
}

// --- grid_shape folding ---

shard.grid @partly(shape = 2x?x5)

// CHECK-LABEL: func.func @grid_shape
func.func @grid_shape() -> (index, index, index, index, index, index) {
  // CHECK-NEXT: %[[C2:.*]] = arith.constant 2 : index
  // CHECK-NEXT: %[[C5:.*]] = arith.constant 5 : index
  // CHECK-NEXT: %[[D:.*]] = shard.grid_shape @partly axes = [1] : index
  // CHECK-NEXT: %[[D2:.*]] = shard.grid_shape @partly axes = [1] : index
  // CHECK-NEXT: return %[[C2]], %[[D]], %[[C5]], %[[C5]], %[[D2]], %[[C2]]
  %0:3 = shard.grid_shape @partly : index, index, index
  %1:3 = shard.grid_shape @partly axes = [2, 1, 0] : index, index, index
  return %0#0, %0#1, %0#2, %1#0, %1#1, %1#2 : index, index, index, index, index, index
}

// CHECK-LABEL: func.func @grid_shape_dynamic_only
func.func @grid_shape_dynamic_only() -> index {
  // CHECK-NEXT: shard.grid_shape @partly axes = [1] : index
  %0 = shard.grid_shape @partly axes = [1] : index
  return %0 : index
}
