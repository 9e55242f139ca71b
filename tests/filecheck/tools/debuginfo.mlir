// RUN: shardc-opt %s --mlir-print-debuginfo | filecheck %s
// RUN: shardc-opt %s --mlir-print-debuginfo | shardc-opt --mlir-print-debuginfo | filecheck %s --check-prefix=ROUND
// RUN: shardc-opt %s | filecheck %s --check-prefix=PLAIN

// Every op gets loc("file":line:col) of its name, block arguments that of their
// %name; explicit loc(...) wins; nothing is printed without --mlir-print-debuginfo.

// CHECK-DAG: debuginfo.mlir":[[# @LINE + 7]]:1
// CHECK-DAG: debuginfo.mlir":[[# @LINE + 6]]:20
// CHECK-DAG: debuginfo.mlir":[[# @LINE + 6]]:8
// CHECK-DAG: "somewhere.py":7:3
// CHECK-DAG: "inner":1:1
// CHECK-DAG: "outer":2:2
// CHECK-DAG: "elsewhere.c":9:9
func.func @located(%arg: i32) -> i32 {
  %0 = arith.addi %arg, %arg : i32
  %1 = arith.muli %0, %0 : i32 loc("somewhere.py":7:3)
  return %1 : i32 loc(callsite("inner":1:1 at "outer":2:2))
}

func.func @aliased() {
  return loc(#fwd)
}
#fwd = loc("elsewhere.c":9:9)

// ROUND-DAG: debuginfo.mlir":16:8
// ROUND-DAG: "somewhere.py":7:3

// PLAIN-NOT: loc(
