// RUN: shardc-opt %s --mixed-precision --split-input-file | filecheck %s
// RUN: shardc-opt %s --mixed-precision --sharding-propagation --shard-partition --shard-simplify --canonicalize --cse --split-input-file | filecheck %s --check-prefix=PART
// RUN: shardc-opt %s --pass-pipeline='builtin.module(mixed-precision{compute=f32})' --split-input-file | filecheck %s --check-prefix=F32
// RUN: not shardc-opt %s --pass-pipeline='builtin.module(mixed-precision{grad-reduce=bf16})' 2>&1 | filecheck %s --check-prefix=BAD

// A weight stored split over the grid (FSDP), gathered for a product; the same
// activation read by the forward product and by the weight gradient's; a tanh between.
// The weight's bf16 copy is made where it is stored, pinned to the storage sharding, and
// the gather moves bf16. The tanh stays float32; both products read bf16 and write f32.
// One copy of %x serves both products.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[W:.*]]: tensor<8x4xf32>, %[[X:.*]]: tensor<6x8xf32>, %[[DY:.*]]: tensor<6x4xf32>)
// CHECK-DAG: %[[DYB:.*]] = linalg.generic {{.*}} ins(%[[DY]] : tensor<6x4xf32>) outs(%{{.*}} : tensor<6x4xbf16>)
// CHECK-DAG: %[[XB:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<6x8xf32>) outs(%{{.*}} : tensor<6x8xbf16>)
// CHECK: %[[WS:.*]] = shard.sharding @grid split_axes = {{\[\[}}0]]
// CHECK: %[[W0:.*]] = shard.shard %[[W]] to %[[WS]] : tensor<8x4xf32>
// CHECK: %[[WC:.*]] = shard.sharding @grid split_axes = {{\[\[}}]]
// CHECK: %[[WB:.*]] = linalg.generic {{.*}} ins(%[[W0]] : tensor<8x4xf32>) outs(%{{.*}} : tensor<8x4xbf16>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: bf16):
// CHECK-NEXT: arith.truncf %[[IN]] : f32 to bf16
// CHECK: %[[WB0:.*]] = shard.shard %[[WB]] to %[[WS]] : tensor<8x4xbf16>
// CHECK-NEXT: %[[WB1:.*]] = shard.shard %[[WB0]] to %[[WC]] annotate_for_users : tensor<8x4xbf16>
// CHECK-NOT: annotate_for_users : tensor<8x4xf32>
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%[[XB]], %[[WB1]] : tensor<6x8xbf16>, tensor<8x4xbf16>) outs(%{{.*}} : tensor<6x4xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %[[O:.*]]: f32):
// CHECK-NEXT: %[[AE:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: %[[BE:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[AE]], %[[BE]] : f32
// CHECK-NEXT: arith.addf %[[O]], %[[M]] : f32
// CHECK: ins(%[[Y]] : tensor<6x4xf32>) outs(%{{.*}} : tensor<6x4xf32>)
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT: math.tanh
// CHECK: linalg.generic {{.*}} ins(%[[XB]], %[[DYB]] : tensor<6x8xbf16>, tensor<6x4xbf16>) outs(%{{.*}} : tensor<8x4xf32>)

// PART-LABEL: func.func @step
// PART: shard.all_gather %{{.*}} on @grid grid_axes = [0] gather_axis = 0 : tensor<4x4xbf16> -> tensor<8x4xbf16>
// PART-NOT: shard.all_gather

// F32-LABEL: func.func @step
// F32-NOT: bf16

// BAD: shardc-opt: <Pass-Options-Parser>: no such option grad-reduce for pass 'mixed-precision' (valid options: compute)
#x = affine_map<(b, i, k) -> (b, k)>
#w = affine_map<(b, i, k) -> (k, i)>
#o = affine_map<(b, i, k) -> (b, i)>
#e = affine_map<(b, i) -> (b, i)>
#dwx = affine_map<(k, i, b) -> (b, k)>
#dwy = affine_map<(k, i, b) -> (b, i)>
#dwo = affine_map<(k, i, b) -> (k, i)>
shard.grid @grid(shape = 2)
func.func @step(%w: tensor<8x4xf32>, %x: tensor<6x8xf32>, %dy: tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<8x4xf32>) {
  %ws = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %w0 = shard.shard %w to %ws : tensor<8x4xf32>
  %wc = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %w1 = shard.shard %w0 to %wc annotate_for_users : tensor<8x4xf32>
  %z = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<6x4xf32>
  %i0 = linalg.fill ins(%z : f32) outs(%e0 : tensor<6x4xf32>) -> tensor<6x4xf32>
  %y = linalg.generic {indexing_maps = [#x, #w, #o], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w1 : tensor<6x8xf32>, tensor<8x4xf32>) outs(%i0 : tensor<6x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<6x4xf32>
  %e1 = tensor.empty() : tensor<6x4xf32>
  %r = linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<6x4xf32>) outs(%e1 : tensor<6x4xf32>) {
  ^bb0(%a: f32, %c: f32):
    %t = math.tanh %a : f32
    linalg.yield %t : f32
  } -> tensor<6x4xf32>
  %e2 = tensor.empty() : tensor<8x4xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %dw = linalg.generic {indexing_maps = [#dwx, #dwy, #dwo], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %dy : tensor<6x8xf32>, tensor<6x4xf32>) outs(%i2 : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x4xf32>
  return %r, %dw : tensor<6x4xf32>, tensor<8x4xf32>
}

// -----

// A product with a constant factor (a one-hot selector, which the runtime reads as an
// index) and a sum (one input) keep float32.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: bf16
// CHECK: return
#a = affine_map<(i, j, k) -> (i, k)>
#b = affine_map<(i, j, k) -> (k, j)>
#c = affine_map<(i, j, k) -> (i, j)>
#r0 = affine_map<(i, k) -> (i, k)>
#r1 = affine_map<(i, k) -> (i)>
func.func @kept(%x: tensor<2x3xf32>) -> (tensor<2x2xf32>, tensor<2xf32>) {
  %sel = arith.constant dense<[[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]> : tensor<3x2xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x2xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %sel : tensor<2x3xf32>, tensor<3x2xf32>) outs(%i : tensor<2x2xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %m = arith.mulf %u, %v : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2xf32>
  %e2 = tensor.empty() : tensor<2xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<2xf32>) -> tensor<2xf32>
  %sum = linalg.generic {indexing_maps = [#r0, #r1], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<2x3xf32>) outs(%i2 : tensor<2xf32>) {
  ^bb0(%u: f32, %o: f32):
    %s = arith.addf %o, %u : f32
    linalg.yield %s : f32
  } -> tensor<2xf32>
  return %p, %sum : tensor<2x2xf32>, tensor<2xf32>
}

// -----

// A product of dynamic shape is left float32 (its bf16 copy would need the sizes).
// CHECK-LABEL: func.func @dynamic
// CHECK-NOT: bf16
// CHECK: return
#da = affine_map<(i, j, k) -> (i, k)>
#db = affine_map<(i, j, k) -> (k, j)>
#dc = affine_map<(i, j, k) -> (i, j)>
func.func @dynamic(%x: tensor<?x3xf32>, %w: tensor<3x2xf32>, %init: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %p = linalg.generic {indexing_maps = [#da, #db, #dc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<?x3xf32>, tensor<3x2xf32>) outs(%init : tensor<?x2xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %m = arith.mulf %u, %v : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x2xf32>
  return %p : tensor<?x2xf32>
}

// -----

// A sum of an elementwise product (a layernorm's sum of squares: no M and N of a matrix
// product) keeps float32; a one-hot made from integer tokens keeps its product float32
// (the runtime gathers), reading the bf16 copy of the table that the head's product
// casts anyway (a tied embedding: one copy, one gather under FSDP).
// CHECK-LABEL: func.func @rows_and_picks
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[TOK:.*]]: tensor<4xi32>, %[[IDS:.*]]: tensor<6xi32>, %[[WTE:.*]]: tensor<6x8xf32>)
// CHECK: %[[WB:.*]] = linalg.generic {{.*}} ins(%[[WTE]] : tensor<6x8xf32>) outs(%{{.*}} : tensor<6x8xbf16>)
// CHECK: %[[SS:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[X]] : tensor<4x8xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[OH:.*]] = linalg.generic {{.*}} ins(%[[TOK]], %[[IDS]] : tensor<4xi32>, tensor<6xi32>) outs(%{{.*}} : tensor<4x6xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[OH]], %[[WB]] : tensor<4x6xf32>, tensor<6x8xbf16>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT: %[[BE:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: arith.mulf %[[A]], %[[BE]] : f32
// CHECK: ins(%{{.*}}, %[[WB]] : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%{{.*}} : tensor<4x6xf32>)
#r = affine_map<(i, k) -> (i, k)>
#r1 = affine_map<(i, k) -> (i)>
#tok = affine_map<(i, v) -> (i)>
#ids = affine_map<(i, v) -> (v)>
#oh = affine_map<(i, v) -> (i, v)>
#ga = affine_map<(i, c, v) -> (i, v)>
#gb = affine_map<(i, c, v) -> (v, c)>
#go = affine_map<(i, c, v) -> (i, c)>
#ha = affine_map<(i, v, c) -> (i, c)>
#hb = affine_map<(i, v, c) -> (v, c)>
#ho = affine_map<(i, v, c) -> (i, v)>
func.func @rows_and_picks(%x: tensor<4x8xf32>, %tok: tensor<4xi32>, %ids: tensor<6xi32>, %wte: tensor<6x8xf32>) -> (tensor<4xf32>, tensor<4x6xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %ss = linalg.generic {indexing_maps = [#r, #r, #r1], iterator_types = ["parallel", "reduction"]} ins(%x, %x : tensor<4x8xf32>, tensor<4x8xf32>) outs(%i : tensor<4xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %m = arith.mulf %u, %v : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %eo = tensor.empty() : tensor<4x6xf32>
  %onehot = linalg.generic {indexing_maps = [#tok, #ids, #oh], iterator_types = ["parallel", "parallel"]} ins(%tok, %ids : tensor<4xi32>, tensor<6xi32>) outs(%eo : tensor<4x6xf32>) {
  ^bb0(%t: i32, %d: i32, %o: f32):
    %one = arith.constant 1.0 : f32
    %eq = arith.cmpi eq, %t, %d : i32
    %y = arith.select %eq, %one, %z : f32
    linalg.yield %y : f32
  } -> tensor<4x6xf32>
  %ee = tensor.empty() : tensor<4x8xf32>
  %ie = linalg.fill ins(%z : f32) outs(%ee : tensor<4x8xf32>) -> tensor<4x8xf32>
  %emb = linalg.generic {indexing_maps = [#ga, #gb, #go], iterator_types = ["parallel", "parallel", "reduction"]} ins(%onehot, %wte : tensor<4x6xf32>, tensor<6x8xf32>) outs(%ie : tensor<4x8xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %m = arith.mulf %u, %v : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %ih = linalg.fill ins(%z : f32) outs(%eo : tensor<4x6xf32>) -> tensor<4x6xf32>
  %logits = linalg.generic {indexing_maps = [#ha, #hb, #ho], iterator_types = ["parallel", "parallel", "reduction"]} ins(%emb, %wte : tensor<4x8xf32>, tensor<6x8xf32>) outs(%ih : tensor<4x6xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %m = arith.mulf %u, %v : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  return %ss, %logits : tensor<4xf32>, tensor<4x6xf32>
}

// -----

// A product scaled by a constant in its body (attention's scores recomputed in the
// backward: BLAS's alpha) reads bf16 copies too; the scale stays in the body.
// CHECK-LABEL: func.func @scaled
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x3xbf16>, tensor<5x3xbf16>) outs(%{{.*}} : tensor<4x5xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %[[O:.*]]: f32):
// CHECK: %[[AE:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: %[[BE:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[AE]], %[[BE]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.mulf %[[M]], %{{.*}} : f32
// CHECK-NEXT: arith.addf %[[O]], %[[S]] : f32
#sa = affine_map<(i, j, k) -> (i, k)>
#sb = affine_map<(i, j, k) -> (j, k)>
#so = affine_map<(i, j, k) -> (i, j)>
func.func @scaled(%q: tensor<4x3xf32>, %k: tensor<5x3xf32>) -> tensor<4x5xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %p = linalg.generic {indexing_maps = [#sa, #sb, #so], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q, %k : tensor<4x3xf32>, tensor<5x3xf32>) outs(%i : tensor<4x5xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %c = arith.constant 0.125 : f32
    %m = arith.mulf %u, %v : f32
    %s = arith.mulf %m, %c : f32
    %a = arith.addf %o, %s : f32
    linalg.yield %a : f32
  } -> tensor<4x5xf32>
  return %p : tensor<4x5xf32>
}

// -----

// torch-mlir's named products become the generic form reading bf16 copies.
// CHECK-LABEL: func.func @named
// CHECK-NOT: linalg.matmul
// CHECK-NOT: linalg.batch_matmul
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<4x3xbf16>, tensor<3x5xbf16>) outs(%{{.*}} : tensor<4x5xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %[[O:.*]]: f32):
// CHECK-NEXT: arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: arith.extf %[[B]] : bf16 to f32
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<2x4x3xbf16>, tensor<2x3x5xbf16>) outs(%{{.*}} : tensor<2x4x5xf32>)
func.func @named(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %c: tensor<2x4x3xf32>, %d: tensor<2x3x5xf32>) -> (tensor<4x5xf32>, tensor<2x4x5xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %p = linalg.matmul ins(%a, %b : tensor<4x3xf32>, tensor<3x5xf32>) outs(%i : tensor<4x5xf32>) -> tensor<4x5xf32>
  %e2 = tensor.empty() : tensor<2x4x5xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
  %q = linalg.batch_matmul ins(%c, %d : tensor<2x4x3xf32>, tensor<2x3x5xf32>) outs(%i2 : tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
  return %p, %q : tensor<4x5xf32>, tensor<2x4x5xf32>
}
