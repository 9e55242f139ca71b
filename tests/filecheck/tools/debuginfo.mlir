// RUN: shardc-opt %s --mlir-print-debuginfo | filecheck %s
// RUN: shardc-opt %s --mlir-print-debuginfo | shardc-opt --mlir-print-debuginfo | filecheck %s
// RUN: shardc-opt %s | filecheck %s --check-prefix=PLAIN

// mlir-opt's debug info: every op location becomes a `#locN` alias, numbered by depth
// then by first use; block arguments print theirs inline; aliases a block argument
// reaches are defined before the module, the others after it. Explicit loc(...) wins,
// forward aliases resolve. Printing the output again gives the same text.

// CHECK:      #[[A:loc[0-9]+]] = loc("{{.*}}debuginfo.mlir":[[# @LINE + 21]]:20)
// CHECK-NEXT: #[[B:loc[0-9]+]] = loc("{{.*}}debuginfo.mlir":[[# @LINE + 20]]:29)
// CHECK-NEXT: #[[CALLEE:loc[0-9]+]] = loc("callee.c":1:1)
// CHECK-NEXT: #[[CALLER:loc[0-9]+]] = loc("caller.c":2:2)
// CHECK-NEXT: #[[CALL:loc[0-9]+]] = loc(callsite(#[[CALLEE]] at #[[CALLER]]))
// CHECK-NEXT: module {
// CHECK-NEXT:   func.func @located(%arg0: i32 loc("{{.*}}debuginfo.mlir":[[# @LINE + 15]]:20), %arg1: i32 loc("{{.*}}debuginfo.mlir":[[# @LINE + 15]]:29)) -> i32 {
// CHECK-NEXT:     %0 = arith.addi %arg0, %arg1 : i32 loc(#[[ADDI:loc[0-9]*]])
// CHECK-NEXT:     %1 = arith.muli %0, %0 : i32 loc(#[[PY:loc[0-9]*]])
// CHECK-NEXT:     %2 = arith.subi %1, %0 : i32 loc(#[[UNK:loc[0-9]*]])
// CHECK-NEXT:     %3 = arith.addi %2, %0 : i32 loc(#[[NAMED:loc[0-9]*]])
// CHECK-NEXT:     %4 = arith.addi %3, %0 : i32 loc(#[[FUSED:loc[0-9]*]])
// CHECK-NEXT:     cf.br ^bb1(%4 : i32) loc(#[[PY]])
// CHECK-NEXT:   ^bb1(%5: i32 loc(callsite(#[[CALLEE]] at #[[CALLER]]))):  // pred: ^bb0
// CHECK-NEXT:     return %5 : i32 loc(#[[CALL]])
// CHECK-NEXT:   } loc(#[[FUNC:loc[0-9]*]])
// CHECK-NEXT:   func.func @aliased() {
// CHECK-NEXT:     return loc(#[[FWD:loc[0-9]*]])
// CHECK-NEXT:   } loc(#{{loc[0-9]*}})
// CHECK-NEXT: } loc(#loc)
// CHECK-NEXT: #loc = loc("{{.*}}debuginfo.mlir":0:0)
func.func @located(%a: i32, %b: i32) -> i32 {
  %0 = arith.addi %a, %b : i32
  %1 = arith.muli %0, %0 : i32 loc("somewhere.py":7:3)
  %2 = arith.subi %1, %0 : i32 loc(unknown)
  %3 = arith.addi %2, %0 : i32 loc("named"("inner.py":1:2))
  %4 = arith.addi %3, %0 : i32 loc(fused<"tag">["somewhere.py":7:3, "x.py":5:5])
  cf.br ^bb1(%4 : i32) loc("somewhere.py":7:3)
^bb1(%x: i32 loc(callsite("callee.c":1:1 at "caller.c":2:2))):
  return %x : i32 loc(callsite("callee.c":1:1 at "caller.c":2:2))
}

func.func @aliased() {
  return loc(#fwd)
}
#fwd = loc("elsewhere.c":9:9)

// CHECK-DAG: #[[ADDI]] = loc("{{.*}}debuginfo.mlir":[[# @LINE - 15]]:8)
// CHECK-DAG: #[[PY]] = loc("somewhere.py":7:3)
// CHECK-DAG: #[[UNK]] = loc(unknown)
// CHECK-DAG: #[[INNER:loc[0-9]+]] = loc("inner.py":1:2)
// CHECK-DAG: #[[X:loc[0-9]+]] = loc("x.py":5:5)
// CHECK-DAG: #[[FUNC]] = loc("{{.*}}debuginfo.mlir":[[# @LINE - 21]]:1)
// CHECK-DAG: #[[FWD]] = loc("elsewhere.c":9:9)
// CHECK-DAG: #[[NAMED]] = loc("named"(#[[INNER]]))
// CHECK-DAG: #[[FUSED]] = loc(fused<"tag">[#[[PY]], #[[X]]])

// PLAIN-NOT: loc(
