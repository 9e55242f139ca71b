// Affine expressions kept as MLIR builds them: xDSL alone distributes (d0 + d1) * 4.
func.func @exprs(%a: index, %b: index) -> index attributes {m = affine_map<(d0, d1)[s0] -> ((d0 + d1) * 4, (d0 * 2 + s0) floordiv 2, d1 - (d0 + 1) * 3)>} {
  %0 = affine.apply affine_map<(d0, d1) -> ((d0 + d1) * 4)>(%a, %b)
  %1 = affine.apply affine_map<(d0) -> ((d0 + 2) mod 4)>(%0)
  return %1 : index
}
