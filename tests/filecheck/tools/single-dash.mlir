// RUN: shardc-opt %s -split-input-file -allow-unregistered-dialect -mlir-print-op-generic -verify-each=false -o %t
// RUN: filecheck %s < %t
// RUN: shardc-opt %s --split-input-file --allow-unregistered-dialect=1 --mlir-print-op-generic=true | filecheck %s
// RUN: shardc-opt %s -allow-unregistered-dialect | filecheck %s --check-prefix=NOSPLIT
// RUN: not shardc-opt %s -split-input-file -allow-unregistered-dialect=0 2>&1 | filecheck %s --check-prefix=NOUNREG

// LLVM-style flags: one dash or two, booleans with =true/false/1/0, -o <file>.

// CHECK: "test.first"() : () -> ()
// CHECK-NEXT: }) : () -> ()
// CHECK-EMPTY:
// CHECK-NEXT: {{^}}// -{{----$}}
// CHECK: "func.func"() <{function_type = () -> (), sym_name = "second"}> ({
// CHECK-NEXT: "func.return"() : () -> ()
"test.first"() : () -> ()

// -----

func.func @second() {
  return
}

// NOSPLIT: "test.first"() : () -> ()
// NOSPLIT-NOT: // -{{-}}
// NOSPLIT: func.func @second
// NOUNREG: single-dash.mlir:15:13: error: operation being parsed with an unregistered dialect
