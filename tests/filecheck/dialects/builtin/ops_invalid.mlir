// RUN: shardc-opt %s --split-input-file --verify-diagnostics

func.func @not_shaped() -> f32 {
  // expected-error @+1 {{`dense_resource` expected a shaped type}}
  %0 = arith.constant dense_resource<k> : f32
  return %0 : f32
}

// -----

func.func @f() -> tensor<2xf32> {
  %0 = arith.constant dense_resource<bad_blob> : tensor<2xf32>
  return %0 : tensor<2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      // expected-error @+1 {{expected hex string blob for key 'bad_blob'}}
      bad_blob: "0x0400000"
    }
  }
#-}

// -----

func.func @f() -> tensor<2xf32> {
  %0 = arith.constant dense_resource<k> : tensor<2xf32>
  return %0 : tensor<2xf32>
}
{-#
  dialect_resources: {
    // expected-error @+1 {{dialect 'nosuchdialect' is unknown}}
    nosuchdialect: {
      k: "0x04000000"
    }
  }
#-}
