// RUN: shardc-opt --pass-pipeline="builtin.module(func.func(shard-partition))" %s | filecheck %s
//
// Every case here gives the same output as mlir-opt 22.1.8 (up to SSA names).

shard.grid @g2(shape = 2)
shard.grid @g4(shape = 4)
shard.grid @g22(shape = 2x2)

// Elementwise tosa: operands and result take their local shard type.
// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: ([[V1:%\w+]]: tensor<2x6xf32>, [[V2:%\w+]]: tensor<2x6xf32>) -> tensor<2x6xf32> {
// CHECK-NEXT: [[V3:%\w+]] = tosa.maximum [[V1]], [[V2]] : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
// CHECK-NEXT: return [[V3]] : tensor<2x6xf32>
// CHECK-NEXT: }
func.func @elementwise(%x: tensor<8x6xf32>, %y: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %s = shard.sharding @g4 split_axes = [[0]] : !shard.sharding
  %x0 = shard.shard %x to %s : tensor<8x6xf32>
  %x1 = shard.shard %x0 to %s annotate_for_users : tensor<8x6xf32>
  %y0 = shard.shard %y to %s : tensor<8x6xf32>
  %y1 = shard.shard %y0 to %s annotate_for_users : tensor<8x6xf32>
  %r = tosa.maximum %x1, %y1 : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %r0 = shard.shard %r to %s : tensor<8x6xf32>
  %r1 = shard.shard %r0 to %s annotate_for_users : tensor<8x6xf32>
  return %r1 : tensor<8x6xf32>
}

// linalg.matmul split on the rows of A and C (a parallel loop): the same op locally.
// CHECK-LABEL: func.func @matmul_rows
// CHECK-SAME: ([[V4:%\w+]]: tensor<4x6xf32>, [[V5:%\w+]]: tensor<6x10xf32>, [[V6:%\w+]]: tensor<4x10xf32>) -> tensor<4x10xf32> {
// CHECK-NEXT: [[V7:%\w+]] = linalg.matmul ins([[V4]], [[V5]] : tensor<4x6xf32>, tensor<6x10xf32>) outs([[V6]] : tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT: return [[V7]] : tensor<4x10xf32>
// CHECK-NEXT: }
func.func @matmul_rows(%a: tensor<8x6xf32>, %b: tensor<6x10xf32>, %c: tensor<8x10xf32>) -> tensor<8x10xf32> {
  %rows = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %rep = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %a0 = shard.shard %a to %rows : tensor<8x6xf32>
  %a1 = shard.shard %a0 to %rows annotate_for_users : tensor<8x6xf32>
  %b0 = shard.shard %b to %rep : tensor<6x10xf32>
  %b1 = shard.shard %b0 to %rep annotate_for_users : tensor<6x10xf32>
  %c0 = shard.shard %c to %rows : tensor<8x10xf32>
  %c1 = shard.shard %c0 to %rows annotate_for_users : tensor<8x10xf32>
  %r = linalg.matmul ins(%a1, %b1 : tensor<8x6xf32>, tensor<6x10xf32>) outs(%c1 : tensor<8x10xf32>) -> tensor<8x10xf32>
  %r0 = shard.shard %r to %rows : tensor<8x10xf32>
  %r1 = shard.shard %r0 to %rows annotate_for_users : tensor<8x10xf32>
  return %r1 : tensor<8x10xf32>
}

// linalg.matmul split on the columns of B and C (a parallel loop).
// CHECK-LABEL: func.func @matmul_cols
// CHECK-SAME: ([[V8:%\w+]]: tensor<8x6xf32>, [[V9:%\w+]]: tensor<6x5xf32>, [[V10:%\w+]]: tensor<8x5xf32>) -> tensor<8x5xf32> {
// CHECK-NEXT: [[V11:%\w+]] = linalg.matmul ins([[V8]], [[V9]] : tensor<8x6xf32>, tensor<6x5xf32>) outs([[V10]] : tensor<8x5xf32>) -> tensor<8x5xf32>
// CHECK-NEXT: return [[V11]] : tensor<8x5xf32>
// CHECK-NEXT: }
func.func @matmul_cols(%a: tensor<8x6xf32>, %b: tensor<6x10xf32>, %c: tensor<8x10xf32>) -> tensor<8x10xf32> {
  %cols = shard.sharding @g2 split_axes = [[], [0]] : !shard.sharding
  %rep = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %a0 = shard.shard %a to %rep : tensor<8x6xf32>
  %a1 = shard.shard %a0 to %rep annotate_for_users : tensor<8x6xf32>
  %b0 = shard.shard %b to %cols : tensor<6x10xf32>
  %b1 = shard.shard %b0 to %cols annotate_for_users : tensor<6x10xf32>
  %c0 = shard.shard %c to %cols : tensor<8x10xf32>
  %c1 = shard.shard %c0 to %cols annotate_for_users : tensor<8x10xf32>
  %r = linalg.matmul ins(%a1, %b1 : tensor<8x6xf32>, tensor<6x10xf32>) outs(%c1 : tensor<8x10xf32>) -> tensor<8x10xf32>
  %r0 = shard.shard %r to %cols : tensor<8x10xf32>
  %r1 = shard.shard %r0 to %cols annotate_for_users : tensor<8x10xf32>
  return %r1 : tensor<8x10xf32>
}

// linalg.matmul split on the contracting dimension: the init only on the lead process, zeros elsewhere, then a sum all_reduce.
// CHECK-LABEL: func.func @matmul_contracting
// CHECK-SAME: ([[V12:%\w+]]: tensor<8x3xf32>, [[V13:%\w+]]: tensor<3x10xf32>, [[V14:%\w+]]: tensor<8x10xf32>) -> tensor<8x10xf32> {
// CHECK-NEXT: [[V15:%\w+]] = shard.process_multi_index on @g2 axes = {{\[}}0] : index
// CHECK-NEXT: [[V16:%\w+]] = shard.grid_shape @g2 axes = {{\[}}0] : index
// CHECK-NEXT: [[V17:%\w+]] = arith.constant 0 : index
// CHECK-NEXT: [[V18:%\w+]] = arith.cmpi eq, [[V15]], [[V17]] : index
// CHECK-NEXT: [[V19:%\w+]] = scf.if [[V18]] -> (tensor<8x10xf32>) {
// CHECK-NEXT: scf.yield [[V14]] : tensor<8x10xf32>
// CHECK-NEXT: } else {
// CHECK-NEXT: [[V20:%\w+]] = tensor.empty() : tensor<8x10xf32>
// CHECK-NEXT: [[V21:%\w+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: [[V22:%\w+]] = linalg.fill ins([[V21]] : f32) outs([[V20]] : tensor<8x10xf32>) -> tensor<8x10xf32>
// CHECK-NEXT: scf.yield [[V22]] : tensor<8x10xf32>
// CHECK-NEXT: }
// CHECK-NEXT: [[V23:%\w+]] = linalg.matmul ins([[V12]], [[V13]] : tensor<8x3xf32>, tensor<3x10xf32>) outs([[V19]] : tensor<8x10xf32>) -> tensor<8x10xf32>
// CHECK-NEXT: [[V24:%\w+]] = shard.all_reduce [[V23]] on @g2 grid_axes = {{\[}}0] : tensor<8x10xf32> -> tensor<8x10xf32>
// CHECK-NEXT: return [[V24]] : tensor<8x10xf32>
// CHECK-NEXT: }
func.func @matmul_contracting(%a: tensor<8x6xf32>, %b: tensor<6x10xf32>, %c: tensor<8x10xf32>) -> tensor<8x10xf32> {
  %k0 = shard.sharding @g2 split_axes = [[], [0]] : !shard.sharding
  %k1 = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %rep = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %a0 = shard.shard %a to %k0 : tensor<8x6xf32>
  %a1 = shard.shard %a0 to %k0 annotate_for_users : tensor<8x6xf32>
  %b0 = shard.shard %b to %k1 : tensor<6x10xf32>
  %b1 = shard.shard %b0 to %k1 annotate_for_users : tensor<6x10xf32>
  %c0 = shard.shard %c to %rep : tensor<8x10xf32>
  %c1 = shard.shard %c0 to %rep annotate_for_users : tensor<8x10xf32>
  %r = linalg.matmul ins(%a1, %b1 : tensor<8x6xf32>, tensor<6x10xf32>) outs(%c1 : tensor<8x10xf32>) -> tensor<8x10xf32>
  %r0 = shard.shard %r to %rep : tensor<8x10xf32>
  %r1 = shard.shard %r0 to %rep annotate_for_users : tensor<8x10xf32>
  return %r1 : tensor<8x10xf32>
}

// A max reduction over a dimension split along two grid axes: linear index in the group, -inf elsewhere, max all_reduce.
// CHECK-LABEL: func.func @reduce_max_2d
// CHECK-SAME: ([[V25:%\w+]]: tensor<2x6xf32>, [[V26:%\w+]]: tensor<6xf32>) -> tensor<6xf32> {
// CHECK-NEXT: [[V27:%\w+]]:2 = shard.process_multi_index on @g22 axes = {{\[}}1, 0] : index, index
// CHECK-NEXT: [[V28:%\w+]]:2 = shard.grid_shape @g22 axes = {{\[}}1, 0] : index, index
// CHECK-NEXT: [[V29:%\w+]] = affine.apply #map(){{\[}}[[V27]]#0, [[V28]]#1, [[V27]]#1]
// CHECK-NEXT: [[V30:%\w+]] = arith.constant 0 : index
// CHECK-NEXT: [[V31:%\w+]] = arith.cmpi eq, [[V29]], [[V30]] : index
// CHECK-NEXT: [[V32:%\w+]] = scf.if [[V31]] -> (tensor<6xf32>) {
// CHECK-NEXT: scf.yield [[V26]] : tensor<6xf32>
// CHECK-NEXT: } else {
// CHECK-NEXT: [[V33:%\w+]] = tensor.empty() : tensor<6xf32>
// CHECK-NEXT: [[V34:%\w+]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT: [[V35:%\w+]] = linalg.fill ins([[V34]] : f32) outs([[V33]] : tensor<6xf32>) -> tensor<6xf32>
// CHECK-NEXT: scf.yield [[V35]] : tensor<6xf32>
// CHECK-NEXT: }
// CHECK-NEXT: [[V36:%\w+]] = linalg.reduce ins([[V25]] : tensor<2x6xf32>) outs([[V32]] : tensor<6xf32>) dimensions = {{\[}}0]
// CHECK-NEXT: ([[V37:%\w+]]: f32, [[V38:%\w+]]: f32) {
// CHECK-NEXT: [[V39:%\w+]] = arith.maximumf [[V37]], [[V38]] : f32
// CHECK-NEXT: linalg.yield [[V39]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: [[V40:%\w+]] = shard.all_reduce [[V36]] on @g22 grid_axes = {{\[}}1, 0] reduction =  max : tensor<6xf32> -> tensor<6xf32>
// CHECK-NEXT: return [[V40]] : tensor<6xf32>
// CHECK-NEXT: }
func.func @reduce_max_2d(%x: tensor<8x6xf32>, %init: tensor<6xf32>) -> tensor<6xf32> {
  %s = shard.sharding @g22 split_axes = [[1, 0]] : !shard.sharding
  %rep = shard.sharding @g22 split_axes = [[]] : !shard.sharding
  %x0 = shard.shard %x to %s : tensor<8x6xf32>
  %x1 = shard.shard %x0 to %s annotate_for_users : tensor<8x6xf32>
  %i0 = shard.shard %init to %rep : tensor<6xf32>
  %i1 = shard.shard %i0 to %rep annotate_for_users : tensor<6xf32>
  %r = linalg.reduce ins(%x1 : tensor<8x6xf32>) outs(%i1 : tensor<6xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %m = arith.maximumf %in, %acc : f32
      linalg.yield %m : f32
    }
  %r0 = shard.shard %r to %rep : tensor<6xf32>
  %r1 = shard.shard %r0 to %rep annotate_for_users : tensor<6xf32>
  return %r1 : tensor<6xf32>
}

// An xori reduction: neutral 0, bitwise_xor all_reduce.
// CHECK-LABEL: func.func @reduce_xor
// CHECK-SAME: ([[V41:%\w+]]: tensor<6x2xi32>, [[V42:%\w+]]: tensor<6xi32>) -> tensor<6xi32> {
// CHECK-NEXT: [[V43:%\w+]] = shard.process_multi_index on @g4 axes = {{\[}}0] : index
// CHECK-NEXT: [[V44:%\w+]] = shard.grid_shape @g4 axes = {{\[}}0] : index
// CHECK-NEXT: [[V45:%\w+]] = arith.constant 0 : index
// CHECK-NEXT: [[V46:%\w+]] = arith.cmpi eq, [[V43]], [[V45]] : index
// CHECK-NEXT: [[V47:%\w+]] = scf.if [[V46]] -> (tensor<6xi32>) {
// CHECK-NEXT: scf.yield [[V42]] : tensor<6xi32>
// CHECK-NEXT: } else {
// CHECK-NEXT: [[V48:%\w+]] = tensor.empty() : tensor<6xi32>
// CHECK-NEXT: [[V49:%\w+]] = arith.constant 0 : i32
// CHECK-NEXT: [[V50:%\w+]] = linalg.fill ins([[V49]] : i32) outs([[V48]] : tensor<6xi32>) -> tensor<6xi32>
// CHECK-NEXT: scf.yield [[V50]] : tensor<6xi32>
// CHECK-NEXT: }
// CHECK-NEXT: [[V51:%\w+]] = linalg.generic {indexing_maps = {{\[}}#map1, #map2], iterator_types = {{\[}}"parallel", "reduction"]} ins([[V41]] : tensor<6x2xi32>) outs([[V47]] : tensor<6xi32>) {
// CHECK-NEXT: ^bb0([[V52:%\w+]]: i32, [[V53:%\w+]]: i32):
// CHECK-NEXT: [[V54:%\w+]] = arith.xori [[V52]], [[V53]] : i32
// CHECK-NEXT: linalg.yield [[V54]] : i32
// CHECK-NEXT: } -> tensor<6xi32>
// CHECK-NEXT: [[V55:%\w+]] = shard.all_reduce [[V51]] on @g4 grid_axes = {{\[}}0] reduction =  bitwise_xor : tensor<6xi32> -> tensor<6xi32>
// CHECK-NEXT: return [[V55]] : tensor<6xi32>
// CHECK-NEXT: }
func.func @reduce_xor(%x: tensor<6x8xi32>, %init: tensor<6xi32>) -> tensor<6xi32> {
  %s = shard.sharding @g4 split_axes = [[], [0]] : !shard.sharding
  %rep = shard.sharding @g4 split_axes = [[]] : !shard.sharding
  %x0 = shard.shard %x to %s : tensor<6x8xi32>
  %x1 = shard.shard %x0 to %s annotate_for_users : tensor<6x8xi32>
  %i0 = shard.shard %init to %rep : tensor<6xi32>
  %i1 = shard.shard %i0 to %rep annotate_for_users : tensor<6xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x1 : tensor<6x8xi32>) outs(%i1 : tensor<6xi32>) {
  ^bb0(%in: i32, %acc: i32):
    %m = arith.xori %in, %acc : i32
    linalg.yield %m : i32
  } -> tensor<6xi32>
  %r0 = shard.shard %r to %rep : tensor<6xi32>
  %r1 = shard.shard %r0 to %rep annotate_for_users : tensor<6xi32>
  return %r1 : tensor<6xi32>
}

// linalg.broadcast keeps the split of the kept dimension; tensor.empty becomes its local shard.
// CHECK-LABEL: func.func @broadcast
// CHECK-SAME: ([[V56:%\w+]]: tensor<4xf32>) -> tensor<4x6xf32> {
// CHECK-NEXT: [[V57:%\w+]] = tensor.empty() : tensor<4x6xf32>
// CHECK-NEXT: [[V58:%\w+]] = linalg.broadcast ins([[V56]] : tensor<4xf32>) outs([[V57]] : tensor<4x6xf32>) dimensions = {{\[}}1]
// CHECK-NEXT: return [[V58]] : tensor<4x6xf32>
// CHECK-NEXT: }
func.func @broadcast(%x: tensor<8xf32>) -> tensor<8x6xf32> {
  %s1 = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %x0 = shard.shard %x to %s1 : tensor<8xf32>
  %x1 = shard.shard %x0 to %s1 annotate_for_users : tensor<8xf32>
  %e = tensor.empty() : tensor<8x6xf32>
  %e0 = shard.shard %e to %s1 : tensor<8x6xf32>
  %e1 = shard.shard %e0 to %s1 annotate_for_users : tensor<8x6xf32>
  %b = linalg.broadcast ins(%x1 : tensor<8xf32>) outs(%e1 : tensor<8x6xf32>) dimensions = [1]
  %b0 = shard.shard %b to %s1 : tensor<8x6xf32>
  %b1 = shard.shard %b0 to %s1 annotate_for_users : tensor<8x6xf32>
  return %b1 : tensor<8x6xf32>
}

// Splat constants and tensor.splat become splats of the local type.
// CHECK-LABEL: func.func @creators
// CHECK-SAME: ([[V59:%\w+]]: f32) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
// CHECK-NEXT: [[V60:%\w+]] = arith.constant dense<2.500000e+00> : tensor<4x3xf32>
// CHECK-NEXT: [[V61:%\w+]] = tensor.splat [[V59]] : tensor<4x3xf32>
// CHECK-NEXT: return [[V60]], [[V61]] : tensor<4x3xf32>, tensor<4x3xf32>
// CHECK-NEXT: }
func.func @creators(%f: f32) -> (tensor<8x6xf32>, tensor<8x6xf32>) {
  %s = shard.sharding @g22 split_axes = [[0], [1]] : !shard.sharding
  %c = arith.constant dense<2.500000e+00> : tensor<8x6xf32>
  %c0 = shard.shard %c to %s : tensor<8x6xf32>
  %c1 = shard.shard %c0 to %s annotate_for_users : tensor<8x6xf32>
  %p = tensor.splat %f : tensor<8x6xf32>
  %p0 = shard.shard %p to %s : tensor<8x6xf32>
  %p1 = shard.shard %p0 to %s annotate_for_users : tensor<8x6xf32>
  return %c1, %p1 : tensor<8x6xf32>, tensor<8x6xf32>
}

// tosa.matmul has no partitioning: fully replicated, it is cloned as it is.
// CHECK-LABEL: func.func @replicated_only
// CHECK-SAME: ([[V62:%\w+]]: tensor<1x4x6xf32>, [[V63:%\w+]]: tensor<1x6x8xf32>) -> tensor<1x4x8xf32> {
// CHECK-NEXT: [[V64:%\w+]] = "tosa.const"() <{values = dense<0.000000e+00> : tensor<1xf32>}> : () -> tensor<1xf32>
// CHECK-NEXT: [[V65:%\w+]] = tosa.matmul [[V62]], [[V63]], [[V64]], [[V64]] : (tensor<1x4x6xf32>, tensor<1x6x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x8xf32>
// CHECK-NEXT: return [[V65]] : tensor<1x4x8xf32>
// CHECK-NEXT: }
func.func @replicated_only(%a: tensor<1x4x6xf32>, %b: tensor<1x6x8xf32>) -> tensor<1x4x8xf32> {
  %rep = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %a0 = shard.shard %a to %rep : tensor<1x4x6xf32>
  %a1 = shard.shard %a0 to %rep annotate_for_users : tensor<1x4x6xf32>
  %b0 = shard.shard %b to %rep : tensor<1x6x8xf32>
  %b1 = shard.shard %b0 to %rep annotate_for_users : tensor<1x6x8xf32>
  %z = "tosa.const"() <{values = dense<0.000000e+00> : tensor<1xf32>}> : () -> tensor<1xf32>
  %z0 = shard.shard %z to %rep : tensor<1xf32>
  %z1 = shard.shard %z0 to %rep annotate_for_users : tensor<1xf32>
  %r = tosa.matmul %a1, %b1, %z1, %z1 : (tensor<1x4x6xf32>, tensor<1x6x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x8xf32>
  %r0 = shard.shard %r to %rep : tensor<1x4x8xf32>
  %r1 = shard.shard %r0 to %rep annotate_for_users : tensor<1x4x8xf32>
  return %r1 : tensor<1x4x8xf32>
}

// Resharding between annotations: all_slice into the op, all_gather (and its cast) out of it.
// CHECK-LABEL: func.func @reshard
// CHECK-SAME: ([[V66:%\w+]]: tensor<8x4xf32>) -> tensor<8x4xf32> {
// CHECK-NEXT: [[V67:%\w+]] = shard.all_slice [[V66]] on @g2 grid_axes = {{\[}}0] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: [[V68:%\w+]] = tosa.exp [[V67]] : (tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: [[V69:%\w+]] = shard.all_gather [[V68]] on @g2 grid_axes = {{\[}}0] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: [[V70:%\w+]] = tensor.cast [[V69]] : tensor<8x4xf32> to tensor<8x4xf32>
// CHECK-NEXT: return [[V70]] : tensor<8x4xf32>
// CHECK-NEXT: }
func.func @reshard(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %rep = shard.sharding @g2 split_axes = [[]] : !shard.sharding
  %rows = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %x0 = shard.shard %x to %rep : tensor<8x4xf32>
  %x1 = shard.shard %x0 to %rows annotate_for_users : tensor<8x4xf32>
  %e = tosa.exp %x1 : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %e0 = shard.shard %e to %rows : tensor<8x4xf32>
  %e1 = shard.shard %e0 to %rep annotate_for_users : tensor<8x4xf32>
  return %e1 : tensor<8x4xf32>
}

// A halo annotation for users: core copied into a larger tensor, then update_halo.
// CHECK-LABEL: func.func @halo
// CHECK-SAME: ([[V71:%\w+]]: tensor<4x4xf32>) -> tensor<7x4xf32> {
// CHECK-NEXT: [[V72:%\w+]] = tensor.empty() : tensor<7x4xf32>
// CHECK-NEXT: [[V73:%\w+]] = tensor.extract_slice [[V71]]{{\[}}0, 0] {{\[}}4, 4] {{\[}}1, 1] : tensor<4x4xf32> to tensor<4x4xf32>
// CHECK-NEXT: [[V74:%\w+]] = tensor.insert_slice [[V73]] into [[V72]]{{\[}}1, 0] {{\[}}4, 4] {{\[}}1, 1] : tensor<4x4xf32> into tensor<7x4xf32>
// CHECK-NEXT: [[V75:%\w+]] = shard.update_halo [[V74]] on @g4 split_axes = {{\[}}{{\[}}0]] halo_sizes = {{\[}}1, 2] : tensor<7x4xf32>
// CHECK-NEXT: [[V76:%\w+]] = tosa.tanh [[V75]] : (tensor<7x4xf32>) -> tensor<7x4xf32>
// CHECK-NEXT: return [[V76]] : tensor<7x4xf32>
// CHECK-NEXT: }
func.func @halo(%x: tensor<16x4xf32>) -> tensor<16x4xf32> {
  %s = shard.sharding @g4 split_axes = [[0]] : !shard.sharding
  %h = shard.sharding @g4 split_axes = [[0]] halo_sizes = [1, 2] : !shard.sharding
  %x0 = shard.shard %x to %s : tensor<16x4xf32>
  %x1 = shard.shard %x0 to %h annotate_for_users : tensor<16x4xf32>
  %t = tosa.tanh %x1 : (tensor<16x4xf32>) -> tensor<16x4xf32>
  %t0 = shard.shard %t to %h : tensor<16x4xf32>
  %t1 = shard.shard %t0 to %h annotate_for_users : tensor<16x4xf32>
  return %t1 : tensor<16x4xf32>
}

// Uneven shards: the local size comes from shard.shard_shape for this process.
// CHECK-LABEL: func.func @uneven
// CHECK-SAME: () -> tensor<?x4xf32> {
// CHECK-NEXT: [[V77:%\w+]] = shard.sharding @g2 split_axes = {{\[}}{{\[}}0]] sharded_dims_offsets = {{\[}}0, 4, 7] : !shard.sharding
// CHECK-NEXT: [[V78:%\w+]] = shard.process_multi_index on @g2 : index
// CHECK-NEXT: [[V79:%\w+]]:2 = shard.shard_shape dims = {{\[}}7, 4] sharding = [[V77]] device = {{\[}}[[V78]]] : index, index
// CHECK-NEXT: [[V80:%\w+]] = tensor.empty([[V79]]#0) : tensor<?x4xf32>
// CHECK-NEXT: [[V81:%\w+]] = tosa.abs [[V80]] : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: return [[V81]] : tensor<?x4xf32>
// CHECK-NEXT: }
func.func @uneven() -> tensor<7x4xf32> {
  %s = shard.sharding @g2 split_axes = [[0]] sharded_dims_offsets = [0, 4, 7] : !shard.sharding
  %e = tensor.empty() : tensor<7x4xf32>
  %e0 = shard.shard %e to %s : tensor<7x4xf32>
  %e1 = shard.shard %e0 to %s annotate_for_users : tensor<7x4xf32>
  %a = tosa.abs %e1 : (tensor<7x4xf32>) -> tensor<7x4xf32>
  %a0 = shard.shard %a to %s : tensor<7x4xf32>
  %a1 = shard.shard %a0 to %s annotate_for_users : tensor<7x4xf32>
  return %a1 : tensor<7x4xf32>
}

// shard.get_sharding becomes the sharding it reads.
// CHECK-LABEL: func.func @get_sharding
// CHECK-SAME: ([[V82:%\w+]]: tensor<4xf32>) -> (tensor<4xf32>, !shard.sharding) {
// CHECK-NEXT: [[V83:%\w+]] = shard.sharding @g2 split_axes = {{\[}}{{\[}}0]] : !shard.sharding
// CHECK-NEXT: return [[V82]], [[V83]] : tensor<4xf32>, !shard.sharding
// CHECK-NEXT: }
func.func @get_sharding(%x: tensor<8xf32>) -> (tensor<8xf32>, !shard.sharding) {
  %s = shard.sharding @g2 split_axes = [[0]] : !shard.sharding
  %x0 = shard.shard %x to %s : tensor<8xf32>
  %g = shard.get_sharding %x0 : tensor<8xf32> -> !shard.sharding
  %x1 = shard.shard %x0 to %s annotate_for_users : tensor<8xf32>
  return %x1, %g : tensor<8xf32>, !shard.sharding
}

// A function without annotations is left alone.
// CHECK-LABEL: func.func @untouched
// CHECK-SAME: ([[V84:%\w+]]: tensor<8xf32>) -> tensor<8xf32> {
// CHECK-NEXT: [[V85:%\w+]] = tosa.abs [[V84]] : (tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: return [[V85]] : tensor<8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
func.func @untouched(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = tosa.abs %x : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
