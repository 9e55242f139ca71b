// Locations of every kind, on ops and block arguments (see test_debuginfo_oracle.py).
func.func @kinds(%a: i32, %b: i32 loc("args.py":3:4)) -> i32 {
  %0 = arith.addi %a, %b : i32
  %1 = arith.muli %0, %0 : i32 loc("kinds.py":7:3)
  %2 = arith.subi %1, %0 : i32 loc(unknown)
  %3 = arith.addi %2, %0 : i32 loc("named"("kinds.py":1:2))
  %4 = arith.addi %3, %0 : i32 loc("bare name")
  %5 = arith.addi %4, %0 : i32 loc(fused["kinds.py":1:2, "other.py":2:2])
  %6 = arith.addi %5, %0 : i32 loc(fused<"tag">["kinds.py":7:3])
  cf.br ^bb1(%6 : i32) loc("kinds.py":7:3)
^bb1(%x: i32 loc(callsite("callee.py":1:1 at "caller.py":2:2))):
  return %x : i32 loc(callsite("callee.py":1:1 at callsite("mid.py":5:5 at "caller.py":2:2)))
}

// -----

#id = affine_map<(d0) -> (d0)>
func.func @regions(%t: tensor<4xf32>, %n: index) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %t) -> (tensor<4xf32>) {
    %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%acc : tensor<4xf32>) outs(%t : tensor<4xf32>) {
    ^bb0(%in: f32, %out: f32 loc("body.py":4:4)):
      %s = arith.addf %in, %out : f32
      linalg.yield %s : f32 loc("body.py":4:4)
    } -> tensor<4xf32>
    scf.yield %g : tensor<4xf32>
  }
  scf.for %j = %c0 to %n step %c1 {
  }
  return %r : tensor<4xf32> loc(#later)
}
#later = loc("late.py":9:9)
