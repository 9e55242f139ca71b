// RUN: shardc-opt %s --cse | filecheck %s

// In a CFG region an op is replaced by an equivalent one in a dominating block, and
// commutative ops match with their operands swapped.

// CHECK-LABEL: func.func @dominance
// CHECK:         %[[A:.*]] = arith.muli %arg1, %arg2 : i32
// CHECK-NOT:     arith.muli
// CHECK:         cf.br ^bb3(%[[A]] : i32)
// CHECK:         cf.br ^bb3(%[[A]] : i32)
// CHECK:         arith.addi %{{.*}}, %[[A]] : i32
func.func @dominance(%c: i1, %x: i32, %y: i32) -> i32 {
  %a = arith.muli %x, %y : i32
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  %b = arith.muli %y, %x : i32
  cf.br ^bb3(%b : i32)
^bb2:
  %d = arith.muli %x, %y : i32
  cf.br ^bb3(%d : i32)
^bb3(%r: i32):
  %e = arith.muli %x, %y : i32
  %f = arith.addi %r, %e : i32
  %g = arith.addi %f, %a : i32
  return %g : i32
}
