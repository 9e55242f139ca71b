"""A 2-layer MLP forward + backward written as linalg.generic ops, compiled by
shardc.runtime, against the same computation in hand-written numpy, measured side by side.
Prints the time ratio (target within 1.2x). Both run on one BLAS thread: the machine is
shared, and two threads make the ratio swing with the load rather than the runtime."""

from __future__ import annotations

import time

import numpy as np

from shardc.runtime import compile_text

B, D, H, O = 256, 512, 1024, 256

MM = "^bb0(%a: f32, %b: f32, %o: f32):\n    %m = arith.mulf %a, %b : f32\n    %s = arith.addf %o, %m : f32\n    linalg.yield %s : f32"
SUM = "^bb0(%a: f32, %o: f32):\n    %s = arith.addf %o, %a : f32\n    linalg.yield %s : f32"


def t(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def contraction(name: str, a: str, ta: str, b: str, tb: str, amap: str, bmap: str, shape: tuple[int, int]) -> str:
    return f"""  %{name}_e = tensor.empty() : {t(*shape)}
  %{name}_z = linalg.fill ins(%zero : f32) outs(%{name}_e : {t(*shape)}) -> {t(*shape)}
  %{name} = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> ({amap})>, affine_map<(d0, d1, d2) -> ({bmap})>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}} ins(%{a}, %{b} : {ta}, {tb}) outs(%{name}_z : {t(*shape)}) {{
  {MM}
  }} -> {t(*shape)}"""


def colsum(name: str, a: str, rows: int, cols: int) -> str:
    return f"""  %{name}_e = tensor.empty() : {t(cols)}
  %{name}_z = linalg.fill ins(%zero : f32) outs(%{name}_e : {t(cols)}) -> {t(cols)}
  %{name} = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}} ins(%{a} : {t(rows, cols)}) outs(%{name}_z : {t(cols)}) {{
  {SUM}
  }} -> {t(cols)}"""


def elementwise2(name: str, a: str, ta: str, amap: str, b: str, tb: str, bmap: str, shape: tuple[int, int], body: str) -> str:
    return f"""  %{name}_e = tensor.empty() : {t(*shape)}
  %{name} = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> ({amap})>, affine_map<(d0, d1) -> ({bmap})>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}} ins(%{a}, %{b} : {ta}, {tb}) outs(%{name}_e : {t(*shape)}) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
{body}
  }} -> {t(*shape)}"""


def build() -> str:
    relu = "    %s = arith.addf %a, %b : f32\n    %r = arith.maximumf %s, %zero : f32\n    linalg.yield %r : f32"
    add = "    %s = arith.addf %a, %b : f32\n    linalg.yield %s : f32"
    sub = "    %s = arith.subf %a, %b : f32\n    linalg.yield %s : f32"
    mask = "    %c = arith.cmpf ogt, %b, %zero : f32\n    %r = arith.select %c, %a, %zero : f32\n    linalg.yield %r : f32"
    body = "\n".join(
        [
            contraction("z1", "x", t(B, D), "w1", t(D, H), "d0, d2", "d2, d1", (B, H)),
            elementwise2("a1", "z1", t(B, H), "d0, d1", "b1", t(H), "d1", (B, H), relu),
            contraction("z2", "a1", t(B, H), "w2", t(H, O), "d0, d2", "d2, d1", (B, O)),
            elementwise2("y", "z2", t(B, O), "d0, d1", "b2", t(O), "d1", (B, O), add),
            elementwise2("dy", "y", t(B, O), "d0, d1", "tgt", t(B, O), "d0, d1", (B, O), sub),
            contraction("dw2", "a1", t(B, H), "dy", t(B, O), "d2, d0", "d2, d1", (H, O)),
            colsum("db2", "dy", B, O),
            contraction("da1", "dy", t(B, O), "w2", t(H, O), "d0, d2", "d1, d2", (B, H)),
            elementwise2("dz1", "da1", t(B, H), "d0, d1", "a1", t(B, H), "d0, d1", (B, H), mask),
            contraction("dw1", "x", t(B, D), "dz1", t(B, H), "d2, d0", "d2, d1", (D, H)),
            colsum("db1", "dz1", B, H),
        ]
    )
    sig = f"%x: {t(B, D)}, %w1: {t(D, H)}, %b1: {t(H)}, %w2: {t(H, O)}, %b2: {t(O)}, %tgt: {t(B, O)}"
    res = f"{t(B, O)}, {t(D, H)}, {t(H)}, {t(H, O)}, {t(O)}"
    return f"""func.func @step({sig}) -> ({res}) {{
  %zero = arith.constant 0.0 : f32
{body}
  return %y, %dw1, %db1, %dw2, %db2 : {res}
}}"""


def numpy_step(x, w1, b1, w2, b2, tgt):  # type: ignore[no-untyped-def]
    a1 = np.maximum(x @ w1 + b1, 0)
    y = a1 @ w2 + b2
    dy = y - tgt
    dw2 = a1.T @ dy
    db2 = dy.sum(0)
    da1 = dy @ w2.T
    dz1 = np.where(a1 > 0, da1, 0)
    dw1 = x.T @ dz1
    db1 = dz1.sum(0)
    return y, dw1, db1, dw2, db2


def main() -> None:
    from shardc.training.train import set_blas_threads

    set_blas_threads(1)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) * 0.1 for s in [(B, D), (D, H), (H,), (H, O), (O,), (B, O)]]
    fn = compile_text(build())["step"]
    got, ref = fn(*args), numpy_step(*args)
    for g, r in zip(got, ref):  # type: ignore[arg-type]
        np.testing.assert_allclose(g, r, rtol=2e-3, atol=2e-3)
    t_rt, t_np = [], []
    with np.errstate(all="ignore"):
        for _ in range(25):
            t0 = time.perf_counter()
            fn(*args)
            t1 = time.perf_counter()
            numpy_step(*args)
            t2 = time.perf_counter()
            t_rt.append(t1 - t0)
            t_np.append(t2 - t1)
    a, b = min(t_rt), min(t_np)
    print(f"MLP fwd+bwd (B={B}, D={D}, H={H}, O={O}): runtime {a * 1e3:.2f} ms, numpy {b * 1e3:.2f} ms, ratio {a / b:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
