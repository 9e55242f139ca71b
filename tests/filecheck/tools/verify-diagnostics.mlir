// RUN: shardc-opt %s -split-input-file -verify-diagnostics | filecheck %s

// CHECK: func.func @fine

// A use before its definition in the same block: an error at the use, a note at
// the definition; the designators below cover every way to name a line.

func.func @same_line() -> i32 {
  %1 = arith.addi %0, %0 : i32 // expected-error {{operand #0 does not dominate this use}}
  %0 = arith.constant 1 : i32 // expected-note {{operand defined here (op in the same block)}}
  return %1 : i32
}

// -----

func.func @offsets() -> i32 {
  // expected-error @+1 {{does not dominate}}
  %1 = arith.addi %0, %0 : i32
  %0 = arith.constant 1 : i32
  // expected-note @-1 {{operand defined here}}
  return %1 : i32
}

// -----

func.func @above_below() -> i32 {
  // expected-error @below {{does not dominate}}
  %1 = arith.addi %0, %0 : i32
  %0 = arith.constant 1 : i32
  // expected-note @above {{defined here}}
  return %1 : i32
}

// -----

func.func @regex() -> i32 {
  // expected-error-re @+1 {{operand #{{[0-9]+}} does {{(not)}} dominate}}
  %1 = arith.addi %0, %0 : i32
  %0 = arith.constant 1 : i32 // expected-note-re {{defined {{h.re}}}}
  return %1 : i32
}

// -----

// expected-error @+1 {{expected operation name in quotes}}
}

// -----

func.func @unknown_location() -> i32 {
  // expected-error @unknown {{does not dominate}}
  %1 = arith.addi %0, %0 : i32 loc(unknown)
  %0 = arith.constant 1 : i32 // expected-note {{defined here}}
  return %1 : i32
}

// -----

// A chunk without any diagnostic is printed as usual.
func.func @fine() {
  return
}
