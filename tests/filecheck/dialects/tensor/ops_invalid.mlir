// RUN: shardc-opt %s --split-input-file --verify-diagnostics

func.func @extents(%s: f32, %i: index) {
  // expected-error @+1 {{'tensor.generate' op must have as many index operands as dynamic extents in the result type}}
  %0 = tensor.generate %i, %i {
  ^bb0(%x: index, %y: index):
    tensor.yield %s : f32
  } : tensor<?x3xf32>
  return
}

// -----

func.func @yield_type(%s: i32, %i: index) {
  // expected-error @+1 {{'tensor.generate' op body must be terminated with a `yield` operation of the tensor element type}}
  %0 = tensor.generate %i {
  ^bb0(%x: index, %y: index):
    tensor.yield %s : i32
  } : tensor<?x3xf32>
  return
}
