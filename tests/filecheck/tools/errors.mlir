// RUN: not shardc-opt %s -split-input-file 2>&1 | filecheck %s
// RUN: not shardc-opt %s.missing 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not shardc-opt %s --no-such-flag 2>&1 | filecheck %s --check-prefix=FLAG
// RUN: not shardc-opt %s --pass-pipeline="builtin.module(no-such-pass)" 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not shardc-opt %s --inline="bogus=1" 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not shardc-opt %s --inline="max-iterations=many" 2>&1 | filecheck %s --check-prefix=VALUE
// RUN: not shardc-opt %s --pass-pipeline="inline" 2>&1 | filecheck %s --check-prefix=ANCHOR

// Diagnostics as mlir-opt prints them: file:line:col, the source line, a caret, on
// stderr, lines of the whole file even with -split-input-file; exit code 1.

// CHECK: errors.mlir:[[# @LINE + 5]]:19: error: use of value '%x' expects different type than prior uses: 'i64' vs 'i32'
// CHECK-NEXT: {{^}}  %0 = arith.addi %x, %x : i64
// CHECK-NEXT: {{^                  \^$}}
// CHECK-NEXT: errors.mlir:[[# @LINE + 1]]:18: note: prior use here
func.func @types(%x: i32) -> i64 {
  %0 = arith.addi %x, %x : i64
  return %0 : i64
}

// -----

// CHECK: errors.mlir:[[# @LINE + 2]]:3: error: custom op 'retrun' is unknown (tried 'func.retrun' as well)
func.func @typo() {
  retrun
}

// -----

// Verifier errors are located at the failing op, with the op in generic form.
// CHECK: errors.mlir:[[# @LINE + 4]]:8: error: operand #0 does not dominate this use
// CHECK: errors.mlir:[[# @LINE + 3]]:8: note: see current operation: %{{.*}} = "arith.addi"
// CHECK: errors.mlir:[[# @LINE + 3]]:8: note: operand defined here (op in the same block)
func.func @dominance() -> i32 {
  %1 = arith.addi %0, %0 : i32
  %0 = arith.constant 1 : i32
  return %1 : i32
}

// -----

// Location aliases may be defined after their use, as mlir-opt prints them.
// CHECK: errors.mlir:[[# @LINE + 2]]:14: error: operation location alias was never defined
func.func @alias() {
  return loc(#nowhere)
}

// MISSING: shardc-opt: cannot open input file '{{.*}}errors.mlir.missing': No such file or directory
// FLAG: shardc-opt: Unknown command line argument '--no-such-flag'.  Try: 'shardc-opt --help'
// PASS: shardc-opt: 'no-such-pass' does not refer to a registered pass or pass pipeline; registered passes: {{.*}}inline
// OPTION: shardc-opt: <Pass-Options-Parser>: no such option bogus for pass 'inline' (valid options: default-pipeline, max-iterations)
// VALUE: shardc-opt: for the --max-iterations option of pass 'inline': 'many' value invalid for integer argument!
// ANCHOR: shardc-opt: expected pass pipeline to be wrapped with the anchor operation type, e.g. 'builtin.module(...)'
