"""Per-op overhead of compiled functions: one function of 1,000 tiny scalar and tensor ops.
Prints microseconds per op (target < 10)."""

from __future__ import annotations

import time

import numpy as np

from shardc.runtime import compile_text

N_OPS = 1000


def build() -> str:
    lines = [
        "func.func @f(%i: i64, %x: f64, %t: tensor<4xf32>) -> (i64, f64, tensor<4xf32>) {",
        "  %c3 = arith.constant 3 : i64",
        "  %h = arith.constant 0.5 : f64",
    ]
    i, x, t = "%i", "%x", "%t"
    for k in range(N_OPS // 4):
        lines.append(f"  %i{k} = arith.addi {i}, %c3 : i64")
        lines.append(f"  %j{k} = arith.muli %i{k}, %c3 : i64")
        lines.append(f"  %x{k} = arith.mulf {x}, %h : f64")
        lines.append(f"  %t{k} = arith.addf {t}, {t} : tensor<4xf32>")
        i, x, t = f"%j{k}", f"%x{k}", f"%t{k}"
    lines.append(f"  return {i}, {x}, {t} : i64, f64, tensor<4xf32>")
    lines.append("}")
    return "\n".join(lines)


def main() -> None:
    cm = compile_text(build())
    fn = cm["f"]
    args = (1, np.float64(1.0), np.ones(4, np.float32))
    np.seterr(all="ignore")  # the tensor chain overflows to inf: harmless here
    fn(*args)
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(20):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / 20)
    per_op = best / N_OPS * 1e6
    print(f"runtime overhead: {per_op:.2f} us/op over {N_OPS} ops (target < 10)")


if __name__ == "__main__":
    main()
