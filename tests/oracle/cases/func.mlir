func.func private @decl(i32) -> i32
func.func @calls(%a: i32) -> (i32, i32) {
  %0 = func.call @decl(%a) : (i32) -> i32
  %1:2 = call @pair(%0) : (i32) -> (i32, i32)
  return %1#1, %1#0 : i32, i32
}
func.func @pair(%a: i32) -> (i32, i32) attributes {llvm.emit_c_interface, b = 1 : i64} {
  return %a, %a : i32, i32
}
func.func @noret(%a: tensor<2xf32> {foo.attr = 1 : i64}) -> (tensor<2xf32> {foo.res}) {
  return %a : tensor<2xf32>
}
// -----
module attributes {z.attr = 1 : i32, a.attr = "x"} {
  func.func @f() {
    return
  }
}
// -----
module @named {
  func.func public @g() {
    return
  }
}
// -----
func.func @blocks(%c: i1, %x: i32) -> i32 {
  cf.cond_br %c, ^bb1(%x : i32), ^bb2
^bb1(%a: i32):
  cf.br ^bb3(%a : i32)
^bb2:
  %y = arith.addi %x, %x : i32
  cf.br ^bb3(%y : i32)
^bb3(%r: i32):
  return %r : i32
^bb4:
  cf.br ^bb3(%x : i32)
}
// -----
func.func @casts(%x: i32) -> i64 {
  %0 = builtin.unrealized_conversion_cast %x : i32 to i64
  %1:2 = builtin.unrealized_conversion_cast %x : i32 to i64, i64
  return %0 : i64
}
// -----
module {
  %0 = builtin.unrealized_conversion_cast to i64
  module {
    func.func @inner() {
      return
    }
  }
}
// -----
func.func private @nothing()
func.func private @typed(i32 {a.b}, f32) -> (i32 {a.r = 1 : i64})
func.func private @fnres() -> ((i32) -> i32) attributes {x}
func.func nested @n() attributes {sym.z = 1} {
  return
}
func.func @indirect(%a: i32, %f: (i32) -> i32) -> i32 {
  %0 = call_indirect %f(%a) : (i32) -> i32
  %g = func.constant @indirect : (i32, (i32) -> i32) -> i32
  return %0 : i32
}
