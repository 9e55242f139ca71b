func.func @constants() -> (index, i32, i1, f32, tensor<4xf32>) {
  %0 = arith.constant 0 : index
  %1 = arith.constant 0 : index
  %2 = arith.constant -7 : i32
  %3 = arith.constant true
  %4 = arith.constant false
  %5 = arith.constant 1.5 : f32
  %6 = arith.constant dense<0.0> : tensor<4xf32>
  %7 = arith.constant dense<[1, 2, 3]> : tensor<3xi64>
  %8 = arith.constant 255 : i8
  %10 = arith.constant 0x7FC00000 : f32
  %11 = arith.constant -0.0 : f64
  %12 = arith.constant dense<[true, false]> : tensor<2xi1>
  %13 = arith.constant 1.0e10 : f32
  %14 = arith.constant 0.1 : f64
  return %0, %2, %3, %5, %6 : index, i32, i1, f32, tensor<4xf32>
}
// -----
func.func @binary(%a: i32, %b: i32, %x: f32, %y: f32, %t: tensor<4xf32>) -> f32 {
  %0 = arith.addi %a, %b : i32
  %1 = arith.muli %0, %b overflow<nsw> : i32
  %2 = arith.subf %x, %y fastmath<fast> : f32
  %3 = arith.cmpi slt, %a, %b : i32
  %4 = arith.cmpf ogt, %x, %y : f32
  %5 = arith.select %3, %x, %y : f32
  %6 = arith.maximumf %x, %y : f32
  %7 = arith.negf %x : f32
  %8 = arith.sitofp %a : i32 to f32
  %9 = arith.index_cast %a : i32 to index
  %10 = arith.divf %t, %t : tensor<4xf32>
  %11 = arith.extf %x : f32 to f64
  %12 = arith.ceildivsi %a, %b : i32
  %13 = arith.truncf %11 : f64 to f32
  %14 = arith.addf %5, %13 fastmath<nnan,ninf> : f32
  return %14 : f32
}
// -----
func.func @extended(%a: i64, %b: i64) -> (i64, i1) {
  %0:2 = arith.addui_extended %a, %b : i64, i1
  %1:2 = arith.mulsi_extended %a, %b : i64
  return %0#0, %0#1 : i64, i1
}
