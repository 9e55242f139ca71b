// RUN: shardc-opt %s --split-input-file --verify-diagnostics

// tm_tensor.scan's verifier: torch-mlir's checks and messages, and what the runtime needs
// that torch-mlir leaves unchecked (the dimension in range, the region's two scalars and
// single yield, the results).

func.func @two_inputs(%x: tensor<4x8xf32>, %o: tensor<4x8xf32>, %acc: tensor<4xf32>) {
  // expected-error @+1 {{'tm_tensor.scan' op expected one input operands}}
  %r:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x, %x : tensor<4x8xf32>, tensor<4x8xf32>) outs(%o, %acc : tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tm_tensor.yield %s : f32
  } -> tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @one_output(%x: tensor<4x8xf32>, %o: tensor<4x8xf32>, %acc: tensor<4xf32>) {
  // expected-error @+1 {{'tm_tensor.scan' op expected two output operands}}
  %r = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%o : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tm_tensor.yield %s : f32
  } -> tensor<4x8xf32>
  return
}

// -----

func.func @accumulator_element_type(%x: tensor<4x8xf32>, %o: tensor<4x8xf32>, %acc: tensor<4xf64>) {
  // expected-error @+1 {{'tm_tensor.scan' op expected input/accumulator element types to be identical}}
  %r:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%o, %acc : tensor<4x8xf32>, tensor<4xf64>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tm_tensor.yield %s : f32
  } -> tensor<4x8xf32>, tensor<4xf64>
  return
}

// -----

func.func @accumulator_rank(%x: tensor<4x8xf32>, %o: tensor<4x8xf32>, %acc: tensor<4x1xf32>) {
  // expected-error @+1 {{'tm_tensor.scan' op expected accumulator rank to be equal to input rank - 1}}
  %r:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%o, %acc : tensor<4x8xf32>, tensor<4x1xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tm_tensor.yield %s : f32
  } -> tensor<4x8xf32>, tensor<4x1xf32>
  return
}

// -----

func.func @dimension_out_of_range(%x: tensor<4x8xf32>, %o: tensor<4x8xf32>, %acc: tensor<4xf32>) {
  // expected-error @+1 {{'tm_tensor.scan' op dimension 2 is out of range for an input of rank 2}}
  %r:2 = tm_tensor.scan dimension(2) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%o, %acc : tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tm_tensor.yield %s : f32
  } -> tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @accumulator_shape(%x: tensor<4x8xf32>, %o: tensor<4x8xf32>, %acc: tensor<8xf32>) {
  // expected-error @+1 {{'tm_tensor.scan' op incompatible input/accumulator shapes}}
  %r:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%o, %acc : tensor<4x8xf32>, tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tm_tensor.yield %s : f32
  } -> tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @output_element_type(%x: tensor<4x8xf32>, %o: tensor<4x8xf16>, %acc: tensor<4xf32>) {
  // expected-error @+1 {{'tm_tensor.scan' op expected input/output element types to be identical}}
  %r:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%o, %acc : tensor<4x8xf16>, tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tm_tensor.yield %s : f32
  } -> tensor<4x8xf16>, tensor<4xf32>
  return
}

// -----

func.func @output_rank(%x: tensor<4x8xf32>, %o: tensor<32xf32>, %acc: tensor<4xf32>) {
  // expected-error @+1 {{'tm_tensor.scan' op expected input/output to have identical ranks}}
  %r:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%o, %acc : tensor<32xf32>, tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tm_tensor.yield %s : f32
  } -> tensor<32xf32>, tensor<4xf32>
  return
}

// -----

func.func @output_shape(%x: tensor<4x8xf32>, %o: tensor<4x9xf32>, %acc: tensor<4xf32>) {
  // expected-error @+1 {{'tm_tensor.scan' op incompatible input/output shapes}}
  %r:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%o, %acc : tensor<4x9xf32>, tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tm_tensor.yield %s : f32
  } -> tensor<4x9xf32>, tensor<4xf32>
  return
}

// -----

func.func @region_arguments(%x: tensor<4x8xf32>, %o: tensor<4x8xf32>, %acc: tensor<4xf32>) {
  // expected-error @+1 {{'tm_tensor.scan' op expected region to have two arguments of the element type f32}}
  %r:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%o, %acc : tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: f32):
    %s = arith.addf %a, %a : f32
    tm_tensor.yield %s : f32
  } -> tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @region_yield(%x: tensor<4x8xf32>, %o: tensor<4x8xf32>, %acc: tensor<4xf32>) {
  // expected-error @+1 {{'tm_tensor.scan' op expected region to yield a single value of the element type f32}}
  %r:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%o, %acc : tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    tm_tensor.yield %a, %b : f32, f32
  } -> tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @result_types(%x: tensor<4x8xf32>, %o: tensor<4x8xf32>, %acc: tensor<4xf32>) {
  // expected-error @+1 {{'tm_tensor.scan' op expected a result of each tensor output's type}}
  %r = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<4x8xf32>) outs(%o, %acc : tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tm_tensor.yield %s : f32
  } -> tensor<4x8xf32>
  return
}

// -----

func.func @missing_inclusive(%x: tensor<4xf32>, %o: tensor<4xf32>, %acc: tensor<f32>) {
  // expected-error @+1 {{Expected 'inclusive'}}
  %r:2 = tm_tensor.scan dimension(0) ins(%x : tensor<4xf32>) outs(%o, %acc : tensor<4xf32>, tensor<f32>) {
  ^bb0(%p: f32, %q: f32):
    tm_tensor.yield %p : f32
  } -> tensor<4xf32>, tensor<f32>
  return
}
