// RUN: shardc-opt %s --canonicalize --split-input-file | filecheck %s
// RUN: shardc-opt %s --canonicalize="top-down=false" --split-input-file | filecheck %s --check-prefix=BOTTOM

// Constants are uniqued and hoisted to the front of the entry block; a constant found
// later in the walk lands in front of the ones found before it, except that a constant
// right after an already uniqued one stays where it is.

// CHECK-LABEL: func.func @hoist_order
// CHECK-NEXT:    %[[C5:.*]] = arith.constant 5 : i32
// CHECK-NEXT:    %[[C7:.*]] = arith.constant 7 : i32
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : i32
// CHECK-NEXT:    %[[A:.*]] = arith.addi %arg0, %arg0 : i32
// CHECK-NEXT:    %[[B:.*]] = arith.addi %[[A]], %[[C1]] : i32
// CHECK-NEXT:    %[[E:.*]] = arith.addi %arg0, %[[C7]] : i32
// CHECK-NEXT:    return %[[B]], %[[C5]], %[[E]], %[[C5]]
func.func @hoist_order(%x: i32) -> (i32, i32, i32, i32) {
  %a = arith.addi %x, %x : i32
  %c1 = arith.constant 1 : i32
  %b = arith.addi %a, %c1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %d = arith.addi %c2, %c3 : i32
  %c7 = arith.constant 7 : i32
  %e = arith.addi %c7, %x : i32
  %c1b = arith.constant 1 : i32
  %g = arith.muli %d, %c1b : i32
  return %b, %d, %e, %g : i32, i32, i32, i32
}

// -----

// Constants inside loops move to the function entry and merge with equal ones there.

// CHECK-LABEL: func.func @loop_constants
// CHECK-NEXT:    %[[C3:.*]] = arith.constant 3 : i32
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    scf.for %[[I:.*]] = %arg0 to %arg1 step %[[C1]]
// CHECK-NEXT:      arith.maxsi %{{.*}}, %[[C3]] : i32
// CHECK-NEXT:      arith.addi %[[I]], %[[C1]] : index
// CHECK-NOT:     arith.constant
func.func @loop_constants(%lb: index, %ub: index, %x: i32) -> i32 {
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %lb to %ub step %c1 iter_args(%acc = %x) -> (i32) {
    %c3 = arith.constant 3 : i32
    %t = arith.maxsi %acc, %c3 : i32
    %c1b = arith.constant 1 : index
    %j = arith.addi %i, %c1b : index
    %k = arith.index_cast %j : index to i32
    %u = arith.maxsi %t, %k : i32
    scf.yield %u : i32
  }
  return %r : i32
}

// -----

// Unused pure ops and allocations go; stores, calls and symbols stay.

// CHECK-LABEL: func.func @effects
// CHECK-NOT:     memref.load
// CHECK-NOT:     memref.alloc
// CHECK:         memref.store
// CHECK-NEXT:    call @ext
// CHECK-NEXT:    return
// BOTTOM-LABEL: func.func @effects
// BOTTOM-NOT:     memref.alloc
// BOTTOM:         memref.store
func.func private @ext(i32) -> ()
func.func @effects(%m: memref<4xi32>, %x: i32) {
  %c0 = arith.constant 0 : index
  %v = memref.load %m[%c0] : memref<4xi32>
  %a = memref.alloc() : memref<8xf32>
  %d = arith.muli %x, %x : i32
  memref.store %x, %m[%c0] : memref<4xi32>
  func.call @ext(%x) : (i32) -> ()
  return
}

// -----

// Region simplification: unreachable blocks and dead block arguments are removed.

// CHECK-LABEL: func.func @cfg
// CHECK-NOT:     constant 7
// CHECK:         ^bb3(%{{.*}}: i32):
// CHECK-NEXT:    return
// CHECK-NOT:     return
func.func @cfg(%c: i1, %x: i32) -> i32 {
  %c1 = arith.constant 1 : i32
  cf.cond_br %c, ^bb1(%x : i32), ^bb2(%c1 : i32)
^bb1(%a: i32):
  %s = arith.addi %a, %c1 : i32
  cf.br ^bb3(%s, %x : i32, i32)
^bb2(%b: i32):
  %c2 = arith.constant 2 : i32
  %t = arith.muli %b, %c2 : i32
  cf.br ^bb3(%t, %x : i32, i32)
^bb3(%r: i32, %unused: i32):
  return %r : i32
^bb4:
  %z = arith.constant 7 : i32
  return %z : i32
}
