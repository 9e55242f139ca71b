func.func @loops(%lb: index, %ub: index, %step: index, %init: f32) -> f32 {
  %0 = scf.for %i = %lb to %ub step %step iter_args(%acc = %init) -> (f32) {
    %1 = arith.addf %acc, %acc : f32
    %2 = scf.for %j = %lb to %ub step %step iter_args(%a2 = %1) -> (f32) {
      scf.yield %a2 : f32
    }
    scf.yield %2 : f32
  }
  scf.for %i = %lb to %ub step %step {
    %c = arith.constant 1 : index
  }
  return %0 : f32
}
// -----
func.func @ifs(%c: i1, %x: f32) -> (f32, f32) {
  %0:2 = scf.if %c -> (f32, f32) {
    scf.yield %x, %x : f32, f32
  } else {
    %n = arith.negf %x : f32
    scf.yield %n, %x : f32, f32
  }
  scf.if %c {
    %y = arith.addf %x, %x : f32
  }
  return %0#0, %0#1 : f32, f32
}
// -----
func.func @while(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %0 = scf.while (%arg = %c0) : (i32) -> i32 {
    %cmp = arith.cmpi slt, %arg, %n : i32
    scf.condition(%cmp) %arg : i32
  } do {
  ^bb0(%arg: i32):
    %next = arith.addi %arg, %arg : i32
    scf.yield %next : i32
  }
  return %0 : i32
}
// -----
func.func @switch(%i: index, %x: f32) -> f32 {
  %0 = scf.index_switch %i -> f32
  case 2 {
    scf.yield %x : f32
  }
  default {
    scf.yield %x : f32
  }
  return %0 : f32
}
// -----
func.func @parallel(%lb: index, %ub: index) {
  scf.parallel (%x, %y) = (%lb, %lb) to (%ub, %ub) step (%ub, %ub) {
    scf.reduce
  }
  %0 = scf.execute_region -> index {
    scf.yield %lb : index
  }
  return
}
// -----
func.func @forall(%t: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = scf.forall (%x, %y) in (4, 8) shared_outs(%o = %t) -> (tensor<4x8xf32>) {
    scf.forall.in_parallel {
    }
  }
  return %0 : tensor<4x8xf32>
}
// -----
func.func @forall_forms(%t: tensor<4x8xf32>, %n: index) -> tensor<4x8xf32> {
  %0 = scf.forall (%x, %y) in (4, %n) shared_outs(%o = %t) -> (tensor<4x8xf32>) {
    %s = tensor.extract_slice %o[%x, %y] [1, 1] [1, 1] : tensor<4x8xf32> to tensor<1x1xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %s into %o[%x, %y] [1, 1] [1, 1] : tensor<1x1xf32> into tensor<4x8xf32>
    }
  }
  scf.forall (%x) = (%n) to (8) step (2) {
    %c = arith.constant 0 : index
  } {mapping = [#gpu.thread<x>]}
  return %0 : tensor<4x8xf32>
}
// -----
func.func @parallel_reduce(%lb: index, %ub: index, %f: f32, %g: i32) -> (f32, i32) {
  %0:2 = scf.parallel (%x) = (%lb) to (%ub) step (%ub) init (%f, %g) -> (f32, i32) {
    scf.reduce(%f, %g : f32, i32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }, {
    ^bb0(%a: i32, %b: i32):
      %s = arith.addi %a, %b : i32
      scf.reduce.return %s : i32
    }
  } {foo}
  return %0#0, %0#1 : f32, i32
}
