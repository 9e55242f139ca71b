// RUN: shardc-opt %s --split-input-file --verify-diagnostics

func.func @delinearize_results(%i: index) {
  // expected-error @+1 {{'affine.delinearize_index' op should return an index for each basis element and up to one extra index}}
  %0:4 = affine.delinearize_index %i into (2, 6) : index, index, index, index
  return
}

// -----

func.func @delinearize_zero(%i: index) {
  // expected-error @+1 {{'affine.delinearize_index' op no basis element may be statically non-positive}}
  %0:2 = affine.delinearize_index %i into (0, 6) : index, index
  return
}

// -----

func.func @linearize_indices(%i: index) {
  // expected-error @+1 {{'affine.linearize_index' op should be passed a basis element for each index except possibly the first}}
  %0 = affine.linearize_index [%i, %i] by (2, 3, 4) : index
  return
}

// -----

func.func @max_operands(%i: index) {
  // expected-error @+1 {{'affine.max' op operand count and affine map dimension and symbol count must match}}
  %0 = affine.max affine_map<(d0, d1) -> (d0, d1)>(%i)
  return
}

// -----

func.func @max_no_results(%i: index) {
  // expected-error @+1 {{'affine.max' op affine map expect at least one result}}
  %0 = affine.max affine_map<(d0) -> ()>(%i)
  return
}

// -----

func.func @rank(%m: memref<4x8xf32>, %i: index) {
  // expected-error @+1 {{'affine.load' op affine map num results must equal memref rank}}
  %0 = "affine.load"(%m, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<4x8xf32>, index) -> f32
  return
}

// -----

func.func @subscripts(%m: memref<4x8xf32>, %i: index) {
  // expected-error @+1 {{'affine.load' op expects as many subscripts as affine map inputs}}
  %0 = "affine.load"(%m, %i) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (memref<4x8xf32>, index) -> f32
  return
}
