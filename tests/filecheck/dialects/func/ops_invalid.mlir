// RUN: shardc-opt %s --split-input-file --verify-diagnostics

func.func @g(%a: f32, %f: (i32) -> i32) {
  // expected-error @+1 {{'func.call_indirect' op failed to verify that callee input types match argument types}}
  %0 = "func.call_indirect"(%f, %a) : ((i32) -> i32, f32) -> i32
  return
}

// -----

func.func @g(%a: i32, %f: (i32) -> i32) {
  // expected-error @+1 {{'func.call_indirect' op failed to verify that callee result types match result types}}
  %0 = "func.call_indirect"(%f, %a) : ((i32) -> i32, i32) -> f32
  return
}

// -----

func.func @g() {
  // expected-error @+1 {{'func.constant' op reference to undefined function 'nope'}}
  %0 = func.constant @nope : () -> ()
  return
}

// -----

func.func @g() {
  // expected-error @+1 {{'func.constant' op reference to function with mismatched type}}
  %0 = func.constant @g : () -> (i32)
  return
}

// -----

// expected-error @+1 {{'func.func' op entry block must have 1 arguments to match function signature}}
func.func @g(i32) {
  return
}
