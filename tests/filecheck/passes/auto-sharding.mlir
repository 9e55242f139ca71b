// RUN: shardc-opt --auto-sharding="rates=default" %s | filecheck %s
// RUN: shardc-opt --auto-sharding="rates=default" %s | shardc-opt --sharding-propagation --shard-partition --canonicalize | filecheck %s --check-prefix=PART
// RUN: shardc-opt --auto-sharding="rates=default explain=true" %s 2>&1 >/dev/null | filecheck %s --check-prefix=EXPLAIN
// RUN: not shardc-opt --auto-sharding="rates=default memory-budget=1KB" %s 2>&1 | filecheck %s --check-prefix=BUDGET
// RUN: not shardc-opt --auto-sharding="memory-budget=lots" %s 2>&1 | filecheck %s --check-prefix=SIZE

// A two-layer MLP on two ranks: with every argument free, the batch split costs no
// collective and halves every op, so the plan splits the batch dimension throughout.

shard.grid @g(shape = 2)

func.func @mlp(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %w2: tensor<32x16xf32>) -> tensor<8x16xf32> {
  %c0 = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8x32xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x32xf32>) outs(%z1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%z2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>, %[[W1:.*]]: tensor<16x32xf32>, %[[W2:.*]]: tensor<32x16xf32>)
// CHECK: %[[S0:.*]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: shard.shard %[[X]] to %[[S0]] : tensor<8x16xf32>
// CHECK: shard.sharding @g split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-NEXT: shard.shard %[[W1]]
// CHECK: shard.sharding @g split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-NEXT: shard.shard %[[W2]]
// CHECK: %[[H:.*]] = linalg.matmul
// CHECK: %[[SH:.*]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: shard.shard %[[H]] to %[[SH]] : tensor<8x32xf32>
// CHECK: %[[Y:.*]] = linalg.matmul
// CHECK: shard.shard %[[Y]] to %{{.*}} : tensor<8x16xf32>

// Partitioned as it is: local batch halves, no collective.
// PART: func.func @mlp(%{{.*}}: tensor<4x16xf32>, %{{.*}}: tensor<16x32xf32>, %{{.*}}: tensor<32x16xf32>) -> tensor<4x16xf32>
// PART-NOT: shard.all_
// PART: linalg.matmul {{.*}} -> tensor<4x32xf32>
// PART-NOT: shard.all_
// PART: return

// EXPLAIN: remark: auto-sharding: predicted {{.*}} us per call, peak 5.25KiB per rank (rates: default)
// EXPLAIN: remark: auto-sharding: argument #0: @g split_axes = {{\[\[}}0]] -> {{.*}} (own cost 0 us); the best for the choice of linalg.matmul, which it alone feeds or reads
// The first matmul alone feeds the second: folded into it before solving (exact).
// EXPLAIN: 16:8: remark: auto-sharding: linalg.matmul: loops {{\[\[}}0]] -> @g split_axes = {{\[\[}}0]] (own cost {{.*}} us); the best for the choice of linalg.matmul
// EXPLAIN: 19:8: remark: auto-sharding: linalg.matmul: loops {{\[\[}}0]] -> @g split_axes = {{\[\[}}0]] (own cost {{.*}} us); runner-up loops {{.*}} (+{{.*}} us)

// BUDGET: 10:1: error: auto-sharding: memory budget 1000B per rank is infeasible; the smallest budget that fits is 3.75KiB
// BUDGET-NOT: error

// SIZE: error: memory-budget: expected a size such as 512MB or 2GiB, got 'lots'
