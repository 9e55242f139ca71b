func.func @attrs() {
  "test.op"() {unit, str = "a \"quoted\" \n line", sym = @a::@b, arr = [1, 2 : i32, [3.5, "s"]], dict = {z = 1 : i64, a = unit}, ty = tensor<?x4xf32>, big = 123456789012 : i64} : () -> ()
  "test.op"() {dense = dense<[[1.0, 2.0], [3.0, 4.5]]> : tensor<2x2xf32>, ints = dense<[1, -2]> : vector<2xi16>, split = dense<7> : tensor<3xi8>, arr = array<i64: 1, 2>, empty = array<i32>, b = dense<[true, false]> : tensor<2xi1>} : () -> ()
  "test.op"() {a = 123456.789 : f64, b = 123456789.0 : f64, c = 1.0000001 : f32, d = -2.5000001e-05 : f64, e = 1.00000000000000012e+20 : f64, k = 0.1 : f16, l = 3.3 : bf16} : () -> ()
  "test.op"() {f = 0.1 : f32, g = 1.0e-07 : f64, h = -2.5e+10 : f16, i = 0x7F800000 : f32, j = 3.0 : bf16} : () -> ()
  "test.op"() {c = complex<f32>, v = vector<[4]x2xf32>, m = memref<?xf32, 1>, t = tuple<i32, f32>, n = none, u = ui8, s = si4} : () -> ()
  return
}
// -----
func.func @locs(%a: i32 loc("x.py":1:2)) -> i32 {
  %0 = arith.addi %a, %a : i32 loc(fused["a", "b"])
  return %0 : i32 loc(unknown)
}
// -----
func.func @many_results() -> (i32, i32, i32) {
  %0:3 = "test.op"() : () -> (i32, i32, i32)
  %1 = "test.op"(%0#0, %0#2) ({
  ^bb0(%x: i32):
    "test.yield"(%x) : (i32) -> ()
  }, {
    "test.yield"() : () -> ()
  }) : (i32, i32) -> i32
  return %0#0, %0#1, %1 : i32, i32, i32
}
// -----
func.func @sets(%i: index) {
  affine.if affine_set<(d0) : (d0 - 2 >= 0, d0 == 0)>(%i) {
  }
  return
}
