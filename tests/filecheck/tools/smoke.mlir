// RUN: shardc-opt %s | filecheck %s

// CHECK: func.func @smoke
func.func @smoke(%a: i32) -> i32 {
  return %a : i32
}
