// RUN: shardc-opt %s --split-input-file --mlir-print-op-generic | shardc-opt --split-input-file | filecheck %s
// RUN: shardc-opt %s --split-input-file | filecheck %s

// cf.assert, as torch-mlir emits for shape checks.
// CHECK-LABEL: func.func @asserts(%arg0: index, %arg1: index, %arg2: i1) {
// CHECK-NEXT: %0 = arith.cmpi eq, %arg0, %arg1 : index
// CHECK-NEXT: cf.assert %0, "mismatching contracting dimension for torch.aten.mm"
// CHECK-NEXT: cf.assert %arg2, "quotes \22inside\22 and a \\ backslash"
// CHECK-NEXT: return
// CHECK-NEXT: }
func.func @asserts(%a: index, %b: index, %p: i1) {
  %0 = arith.cmpi eq, %a, %b : index
  cf.assert %0, "mismatching contracting dimension for torch.aten.mm"
  cf.assert %p, "quotes \"inside\" and a \\ backslash"
  return
}
