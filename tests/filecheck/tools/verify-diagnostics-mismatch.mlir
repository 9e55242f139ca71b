// RUN: not shardc-opt %s --split-input-file --verify-diagnostics 2>&1 >/dev/null | filecheck %s
// RUN: not shardc-opt %s --split-input-file 2>&1 >/dev/null | filecheck %s --check-prefix=PLAIN

// Every kind of mismatch --verify-diagnostics reports (exit code 1); the checks are at
// the end of the file so that they do not move the lines they name.

func.func @bad_regex() {
  // expected-error-re @+1 {{abc {{[0-9}} def}}
  return
}

// -----

func.func @unexpected() -> i32 {
  %1 = arith.addi %0, %0 : i32
  %0 = arith.constant 1 : i32
  return %1 : i32
}

// -----

func.func @unmet() {
  // expected-error @+1 {{this is never reported}}
  return
}

// -----

func.func @unclosed_regex() {
  // expected-error-re @+1 {{abc {{[0-9]}}
  return
}

// -----

func.func @near_miss() -> i32 {
  // expected-warning @+1 {{does not dominate}}
  %1 = arith.addi %0, %0 : i32
  %0 = arith.constant 1 : i32 // expected-note {{defined here}}
  return %1 : i32
}

// Regex problems are reported while the file is scanned, before any chunk runs.
// CHECK: verify-diagnostics-mismatch.mlir:8:6: error: invalid regex:
// CHECK: verify-diagnostics-mismatch.mlir:30:6: error: found start of regex with no end '}}'
// CHECK-NEXT: {{^  // expected-e}}rror-re @+1
// CHECK-NEXT: {{^     \^~~~~~~~~~~$}}
// CHECK: verify-diagnostics-mismatch.mlir:15:8: error: unexpected error: operand #0 does not dominate this use
// CHECK-NEXT: {{^  %1 = arith.addi %0, %0 : i32$}}
// CHECK-NEXT: {{^       \^$}}
// CHECK: verify-diagnostics-mismatch.mlir:16:8: error: unexpected note: operand defined here (op in the same block)
// CHECK: verify-diagnostics-mismatch.mlir:37:6: error: 'error' diagnostic emitted when expecting a 'warning'
// Unmet expectations come last, in file order.
// CHECK: verify-diagnostics-mismatch.mlir:23:6: error: expected error "this is never reported" was not produced
// CHECK-NEXT: {{^  // expected-e}}rror @+1
// CHECK-NEXT: {{^     \^~~~~~~~~~~~~~~~~~~~~~$}}
// CHECK: verify-diagnostics-mismatch.mlir:37:6: error: expected warning "does not dominate" was not produced

// Without --verify-diagnostics the same file just fails with its diagnostics.
// PLAIN: verify-diagnostics-mismatch.mlir:15:8: error: operand #0 does not dominate this use
// PLAIN: verify-diagnostics-mismatch.mlir:16:8: note: operand defined here (op in the same block)
