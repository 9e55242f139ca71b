"""`x + c` folded into c's contraction (`shardc.runtime.codegen.fusion.fuse_accumulations`): the
contraction starts from x instead of zeros; over a donated x (a gradient accumulator)
BLAS adds the product straight into its buffer (`shardc.inplace_init`). Results equal
the unfolded program within float32 rounding, on every path a contraction can take
(MKL, numpy's matmul, einsum, vecdot, sums), and nothing is folded where the rule
does not hold. Also: max/min reductions along a unit-stride last axis (argmax +
gather) equal numpy's reduce, NaN included."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.linalg.ops import GenericOp

from shardc.context import make_context
from shardc.ir.fast_parser import FastParser
from shardc.runtime.codegen import fusion
from shardc.runtime.codegen.compile import compile_module, compile_text
from shardc.runtime.codegen.donation import INPLACE_INIT_ATTR
from shardc.runtime.execute.kernels import blas

RNG = np.random.default_rng(11)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def accumulate(shape_a, shape_b, shape_c, map_a, map_b, map_c, iters, combiner="arith.addf", fill="0.000000e+00", add_order="%bx, %bc"):
    """@f(%acc, %a, %b) = %acc + generic(%a, %b) from a fill, the add all-identity."""
    ta, tb, tc = (f"tensor<{'x'.join(map(str, s))}xf32>" if s else "tensor<f32>" for s in (shape_a, shape_b, shape_c))
    rank = len(shape_c)
    ident = f"affine_map<({', '.join(f'd{i}' for i in range(rank))}) -> ({', '.join(f'd{i}' for i in range(rank))})>"
    its = ", ".join(f'"{t}"' for t in iters)
    return f"""
func.func @f(%acc: {tc}, %a: {ta}, %b: {tb}) -> {tc} {{
  %zero = arith.constant {fill} : f32
  %e = tensor.empty() : {tc}
  %z = linalg.fill ins(%zero : f32) outs(%e : {tc}) -> {tc}
  %c = linalg.generic {{indexing_maps = [{map_a}, {map_b}, {map_c}], iterator_types = [{its}]}}
      ins(%a, %b : {ta}, {tb}) outs(%z : {tc}) {{
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = {combiner} %o, %m : f32
    linalg.yield %s : f32
  }} -> {tc}
  %e2 = tensor.empty() : {tc}
  %r = linalg.generic {{indexing_maps = [{ident}, {ident}, {ident}], iterator_types = [{', '.join(['"parallel"'] * rank)}]}}
      ins(%acc, %c : {tc}, {tc}) outs(%e2 : {tc}) {{
  ^bb0(%bx: f32, %bc: f32, %o: f32):
    %s = arith.addf {add_order} : f32
    linalg.yield %s : f32
  }} -> {tc}
  return %r : {tc}
}}
"""


# (a shape, b shape, out shape, maps, iterators, numpy reference of the contraction)
CASES = {
    "matmul": ((7, 5), (5, 3), (7, 3), "(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)",
               ["parallel", "parallel", "reduction"], lambda a, b: a @ b),
    "weight_gradient": ((4, 6, 9), (4, 6, 5), (9, 5), "(d0, d1, d2, d3) -> (d2, d3, d0)", "(d0, d1, d2, d3) -> (d2, d3, d1)",
                        "(d0, d1, d2, d3) -> (d0, d1)", ["parallel", "parallel", "reduction", "reduction"],
                        lambda a, b: np.einsum("btc,bto->co", a, b)),
    "batched_transposed": ((3, 6, 5), (3, 4, 5), (3, 6, 4), "(d0, d1, d2, d3) -> (d0, d1, d3)", "(d0, d1, d2, d3) -> (d0, d2, d3)",
                           "(d0, d1, d2, d3) -> (d0, d1, d2)", ["parallel", "parallel", "parallel", "reduction"],
                           lambda a, b: np.einsum("bmk,bnk->bmn", a, b)),
    "dot_over_outer_axes": ((4, 6, 9), (4, 6, 9), (9,), "(d0, d1, d2) -> (d1, d2, d0)", "(d0, d1, d2) -> (d1, d2, d0)",
                            "(d0, d1, d2) -> (d0)", ["parallel", "reduction", "reduction"], lambda a, b: np.einsum("btc,btc->c", a, b)),
    "dot_over_last_axis": ((4, 6, 9), (4, 6, 9), (4, 6), "(d0, d1, d2) -> (d0, d1, d2)", "(d0, d1, d2) -> (d0, d1, d2)",
                           "(d0, d1, d2) -> (d0, d1)", ["parallel", "parallel", "reduction"], lambda a, b: np.einsum("btc,btc->bt", a, b)),
}


def build(case: str, **kw) -> str:
    sa, sb, sc, ma, mb, mc, iters, _ = CASES[case]
    return accumulate(sa, sb, sc, f"affine_map<{ma}>", f"affine_map<{mb}>", f"affine_map<{mc}>", iters, **kw)


def compiled(text: str, donate: bool, fuse: bool = True):
    module = FastParser(make_context(), text).parse_module()
    return compile_module(module, "t", fuse=fuse, donate={"f": {0: 0}} if donate else None)


def generics(cm) -> list[GenericOp]:
    return [op for op in cm.module.walk() if isinstance(op, GenericOp)]


@pytest.fixture(params=["mkl", "openblas", "numpy"])
def blas_mode(request, monkeypatch):
    """Every product through each BLAS however small (where it loads), or numpy's matmul."""
    if request.param != "numpy" and blas._loaded(request.param) is None:  # pyright: ignore[reportPrivateUsage]
        pytest.skip(f"{request.param} not loadable here")
    monkeypatch.setattr(blas, "MIN_FLOPS", 0)
    monkeypatch.setattr(blas, "MIN_MATRIX_FLOPS", 0)
    monkeypatch.setenv("SHARDC_BLAS", request.param)
    return request.param


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("donate", [True, False])
def test_folded_equals_acc_plus_product(case, donate, blas_mode):
    sa, sb, sc, *_, ref = CASES[case]
    cm = compiled(build(case), donate)
    gs = generics(cm)
    assert len(gs) == 1, "the add was not folded into the contraction"
    assert (INPLACE_INIT_ATTR in gs[0].attributes) == donate
    acc, a, b = rand(*sc), rand(*sa), rand(*sb)
    acc0 = acc.copy()
    before = blas.calls()
    got = cm.call("f", acc, a, b)
    want = acc0.astype(np.float64) + ref(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    if donate:  # written into the caller's donated buffer, no copy
        assert got is acc or np.shares_memory(got, acc)
    else:
        assert np.array_equal(acc, acc0) and not np.shares_memory(got, acc)
    # (OpenBLAS's batch calls take no matrices this small: `blas.OPENBLAS_SMALL`)
    if blas_mode != "numpy" and case in ("matmul", "weight_gradient") + (("batched_transposed",) if blas_mode == "mkl" else ()):
        assert blas.calls() > before  # the BLAS ran it (with beta = 1 where donated)


@pytest.mark.parametrize("donate", [True, False])
def test_unfolded_program_gives_the_same(donate):
    """The fold against the same module with the rewrite off: equal within rounding."""
    text = build("weight_gradient")
    acc, a, b = rand(9, 5), rand(4, 6, 9), rand(4, 6, 5)
    old = fusion.ACCUMULATE
    try:
        fusion.ACCUMULATE = False
        plain = compiled(text, donate)
    finally:
        fusion.ACCUMULATE = old
    assert len(generics(plain)) == 2
    want = plain.call("f", acc.copy(), a, b)
    got = compiled(text, donate).call("f", acc.copy(), a, b)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert len(generics(compiled(text, donate, fuse=False))) == 2  # fuse=False: as written


def test_sum_reduction_folds_and_writes_in_place():
    """A bias gradient, acc + sum_bt(g): a one-input reduction folds the same way."""
    text = """
func.func @f(%acc: tensor<5xf32>, %g: tensor<4x6x5xf32>) -> tensor<5xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<5xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<5xf32>) -> tensor<5xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2, d0)>, affine_map<(d0, d1, d2) -> (d0)>], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%g : tensor<4x6x5xf32>) outs(%z : tensor<5xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<5xf32>
  %e2 = tensor.empty() : tensor<5xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%c, %acc : tensor<5xf32>, tensor<5xf32>) outs(%e2 : tensor<5xf32>) {
  ^bb0(%bc: f32, %bx: f32, %o: f32):
    %s = arith.addf %bc, %bx : f32
    linalg.yield %s : f32
  } -> tensor<5xf32>
  return %r : tensor<5xf32>
}
"""
    cm = compiled(text, donate=True)
    assert len(generics(cm)) == 1
    acc, g = rand(5), rand(4, 6, 5)
    want = acc + g.sum(axis=(0, 1))
    got = cm.call("f", acc, g)
    assert got is acc or np.shares_memory(got, acc)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_not_folded_where_the_rule_fails():
    # a max combiner: acc + max(...) is not acc folded into the max
    assert len(generics(compiled(build("matmul", combiner="arith.maximumf"), True))) == 2
    # an init that is not zeros
    assert len(generics(compiled(build("matmul", fill="1.000000e+00"), True))) == 2
    # the contraction's result read by the add twice (c + c): no x to fold
    twice = build("matmul", add_order="%bc, %bc")
    assert len(generics(compiled(twice, False))) == 2
    # the contraction's result used again after the add
    text = build("matmul").replace("func.func @f(%acc: tensor<7x3xf32>, %a: tensor<7x5xf32>, %b: tensor<5x3xf32>) -> tensor<7x3xf32>",
                        "func.func @f(%acc: tensor<7x3xf32>, %a: tensor<7x5xf32>, %b: tensor<5x3xf32>) -> (tensor<7x3xf32>, tensor<7x3xf32>)")
    text = text.replace("return %r : tensor<7x3xf32>", "return %r, %c : tensor<7x3xf32>, tensor<7x3xf32>")
    cm = compiled(text, False)
    assert len(generics(cm)) == 2
    acc, a, b = rand(7, 3), rand(7, 5), rand(5, 3)
    r, c = cm.call("f", acc, a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r, acc + a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_gpt_step_folds_gradients_into_the_accumulators(monkeypatch):
    """A training step: every weight and gain gradient lands in its accumulator in place,
    the buffers reused across steps, loss and parameters equal to the unfolded step
    within float32 rounding."""
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    monkeypatch.setenv("SHARDC_CACHE", "0")
    cfg = GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=64)
    tok = np.random.default_rng(0).integers(0, 64, (4, 16)).astype(np.int32)
    mb = [(tok, np.roll(tok, -1, axis=1))]
    results = {}
    for on in (True, False):
        monkeypatch.setattr(fusion, "ACCUMULATE", on)
        prog = StepProgram.build(cfg, 4, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN)
        folded = sum(INPLACE_INIT_ATTR in op.attributes for op in prog.compiled.module.walk())  # type: ignore[attr-defined]
        st = RankState(prog, 0, init_params(cfg, 0))
        losses = [st.train_step(mb, 1e-3)]
        acc = [id(a) for a in st._acc]  # pyright: ignore[reportPrivateUsage]
        losses.append(st.train_step(mb, 1e-3))
        reused = sum(a == id(b) for a, b in zip(acc, st._acc))  # pyright: ignore[reportPrivateUsage]
        results[on] = (losses, [np.asarray(p).copy() for p in st.params], folded, reused, len(acc))
    (l1, p1, folded, reused, n), (l0, p0, unfolded, _, _) = results[True], results[False]
    assert unfolded == 0 and folded >= 6, "the weight gradients were not folded into their accumulators"
    assert reused == n
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    for a, b in zip(p1, p0):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


MAX_TEXT = """
func.func @f(%x: tensor<{shape}xf32>) -> tensor<{kept}xf32> {{
  %init = arith.constant {init} : f32
  %e = tensor.empty() : tensor<{kept}xf32>
  %z = linalg.fill ins(%init : f32) outs(%e : tensor<{kept}xf32>) -> tensor<{kept}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> ({in_map})>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%x : tensor<{shape}xf32>) outs(%z : tensor<{kept}xf32>) {{
  ^bb0(%p: f32, %o: f32):
    %s = {op} %o, %p : f32
    linalg.yield %s : f32
  }} -> tensor<{kept}xf32>
  return %r : tensor<{kept}xf32>
}}
"""


@pytest.mark.parametrize("op, ref, init", [("arith.maximumf", np.maximum, "0xFF800000"), ("arith.minimumf", np.minimum, "0x7F800000"),
                                           ("arith.maximumf", np.maximum, "5.000000e-01")])
@pytest.mark.parametrize("last", [True, False])
def test_max_min_reductions_equal_numpy_nan_included(op, ref, init, last):
    """Along the last axis (the argmax path) and along a middle one (numpy's reduce)."""
    shape, in_map = ("3x5x7", "d0, d1, d2") if last else ("3x7x5", "d0, d2, d1")
    cm = compile_text(MAX_TEXT.format(shape=shape, kept="3x5", in_map=in_map, op=op, init=init))
    x = rand(*map(int, shape.split("x")))
    x[1, 2 if last else 3, 4 if last else 2] = np.nan  # one NaN row
    x[2, 0, 0] = np.inf if ref is np.maximum else -np.inf
    xl = x if last else x.transpose(0, 2, 1)
    start = np.float32(np.frombuffer(bytes.fromhex(init[2:])[::-1], np.float32)[0]) if init.startswith("0x") else np.float32(init)
    want = ref(ref.reduce(xl, axis=2), start)
    got = cm.call("f", x)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[1, 2]) and np.isnan(got).sum() == 1


BIAS_TEXT = """
func.func @f(%x: tensor<4x6x5xf32>, %w: tensor<5x3x2xf32>, %bias: tensor<3x2xf32>) -> tensor<4x6x3x2xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x6x3x2xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6x3x2xf32>) -> tensor<4x6x3x2xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d4, d2, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x6x5xf32>, tensor<5x3x2xf32>) outs(%z : tensor<4x6x3x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x6x3x2xf32>
  %e2 = tensor.empty() : tensor<4x6x3x2xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c, %bias : tensor<4x6x3x2xf32>, tensor<3x2xf32>) outs(%e2 : tensor<4x6x3x2xf32>) {
  ^bb0(%bc: f32, %bb: f32, %o: f32):
    %s = arith.addf %bc, %bb : f32
    linalg.yield %s : f32
  } -> tensor<4x6x3x2xf32>
  return %r : tensor<4x6x3x2xf32>
}
"""


def test_broadcast_bias_becomes_the_init(blas_mode):
    """qkv = x @ w + bias: the bias broadcast into the result's buffer, BLAS adding the
    product into it; no add left, the bias untouched."""
    cm = compiled(BIAS_TEXT, donate=False)
    gs = generics(cm)
    assert len(gs) == 2 and not any(INPLACE_INIT_ATTR in g.attributes for g in gs)
    assert [len(g.inputs) for g in gs] == [1, 2]  # the broadcast, then the contraction from it
    x, w, bias = rand(4, 6, 5), rand(5, 3, 2), rand(3, 2)
    b0 = bias.copy()
    before = blas.calls()
    got = cm.call("f", x, w, bias)
    np.testing.assert_allclose(got, np.einsum("btc,chd->bthd", x, w) + bias, rtol=2e-5, atol=2e-5)
    assert np.array_equal(bias, b0) and got.flags.writeable
    if blas_mode != "numpy":
        assert blas.calls() > before
    # a bias read through a map that is not a broadcast in order (transposed): not folded
    swapped = BIAS_TEXT.replace("affine_map<(d0, d1, d2, d3) -> (d2, d3)>", "affine_map<(d0, d1, d2, d3) -> (d3, d2)>").replace(
        "%bias: tensor<3x2xf32>", "%bias: tensor<2x3xf32>").replace("%bias : tensor<4x6x3x2xf32>, tensor<3x2xf32>", "%bias : tensor<4x6x3x2xf32>, tensor<2x3xf32>")
    assert len(generics(compiled(swapped, donate=False))) == 2
    got = compiled(swapped, donate=False).call("f", x, w, bias.T.copy())
    np.testing.assert_allclose(got, np.einsum("btc,chd->bthd", x, w) + bias, rtol=2e-5, atol=2e-5)
