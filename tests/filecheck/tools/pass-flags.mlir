// RUN: shardc-opt %s --inline | filecheck %s --check-prefix=INLINE
// RUN: shardc-opt %s -inline="default-pipeline= max-iterations=1" -cse | filecheck %s --check-prefix=CSE
// RUN: shardc-opt %s -inline=default-pipeline= --cse --mlir-disable-threading --verify-each | filecheck %s --check-prefix=CSE
// RUN: shardc-opt %s -cse | filecheck %s --check-prefix=NOINLINE
// RUN: shardc-opt %s --inline="default-pipeline=cse max-iterations=4" | filecheck %s --check-prefix=CSE

// Registered passes as flags, one or two dashes, with options after `=`, run in
// the order given.

func.func private @inc(%x: i32) -> i32 {
  %c1 = arith.constant 1 : i32
  %0 = arith.addi %x, %c1 : i32
  return %0 : i32
}

// INLINE-LABEL: func.func @f
// INLINE-NOT: call
// INLINE: return

// CSE-LABEL: func.func @f
// CSE: arith.constant 1 : i32
// CSE-NOT: arith.constant
// CSE-NOT: call
// CSE: return

// NOINLINE: func.func private @inc
// NOINLINE: call @inc
func.func @f(%x: i32) -> i32 {
  %0 = func.call @inc(%x) : (i32) -> i32
  %1 = func.call @inc(%0) : (i32) -> i32
  return %1 : i32
}
