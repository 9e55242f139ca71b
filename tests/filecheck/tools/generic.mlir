// RUN: shardc-opt %s --mlir-print-op-generic | filecheck %s
// RUN: shardc-opt %s --mlir-print-op-generic | shardc-opt | filecheck %s --check-prefix=CUSTOM

// CHECK: "builtin.module"() ({
// CHECK: "func.func"() <{function_type = (i32) -> i32, sym_name = "g"}> ({
// CHECK: "arith.addi"(%{{.*}}, %{{.*}}) <{overflowFlags = #arith.overflow<none>}> : (i32, i32) -> i32
// CHECK: "func.return"(%{{.*}}) : (i32) -> ()

// CUSTOM: func.func @g(%{{.*}}: i32) -> i32 {
// CUSTOM-NEXT: arith.addi
func.func @g(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  return %0 : i32
}
