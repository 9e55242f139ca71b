// RUN: shardc-opt %s --split-input-file --verify-diagnostics

func.func @mask_rank() -> vector<4x8xi1> {
  // expected-error @+1 {{'vector.constant_mask' op must specify array attr of size equal vector result rank}}
  %m = vector.constant_mask [2] : vector<4x8xi1>
  return %m : vector<4x8xi1>
}

// -----

func.func @mask_bounds() -> vector<4x8xi1> {
  // expected-error @+1 {{'vector.constant_mask' op array attr of size out of bounds of vector result dimension size}}
  %m = vector.constant_mask [5, 1] : vector<4x8xi1>
  return %m : vector<4x8xi1>
}

// -----

func.func @reduction_dim_range(%v: vector<2x8xf32>, %s: vector<2xf32>) -> vector<2xf32> {
  // expected-error @+1 {{'vector.multi_reduction' op destination type 'vector<2xf32>' is incompatible with source type 'vector<2x8xf32>'}}
  %0 = vector.multi_reduction <add>, %v, %s [2] : vector<2x8xf32> to vector<2xf32>
  return %0 : vector<2xf32>
}

// -----

func.func @mask_two_ops(%m: vector<8xi1>, %v: vector<8xf32>, %s: f32) -> f32 {
  // expected-error @+1 {{'vector.mask' op expects only one operation to mask}}
  %0 = vector.mask %m {
    %a = vector.multi_reduction <add>, %v, %s [0] : vector<8xf32> to f32
    %b = vector.multi_reduction <add>, %v, %a [0] : vector<8xf32> to f32
    vector.yield %b : f32
  } : vector<8xi1> -> f32
  return %0 : f32
}

// -----

func.func @reduction_passthru(%m: vector<8xi1>, %v: vector<8xf32>, %s: f32) -> f32 {
  // expected-error @+1 {{'vector.mask' op doesn't expect a passthru argument for this maskable operation}}
  %0 = vector.mask %m, %s { vector.multi_reduction <add>, %v, %s [0] : vector<8xf32> to f32 } : vector<8xi1> -> f32
  return %0 : f32
}
