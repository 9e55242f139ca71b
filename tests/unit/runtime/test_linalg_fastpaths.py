"""The contraction fast paths: constant one-hot selectors, matmul into the output
layout, one-hot operands run as gather / scatter-add; and the allocator tuning."""

import numpy as np
import pytest

from shardc.runtime import compile_text
from shardc.runtime.codegen.compile import tune_allocator
from shardc.runtime.execute.structured_run import StructuredSpec, contract2, onehot_positions, scatter_rows


def specs(fn) -> list[StructuredSpec]:
    """The structured-op specs a compiled function runs."""
    return [v for v in fn.__globals__.values() if isinstance(v, StructuredSpec)]

MUL_ADD = """    %m = arith.mulf %x0, %x1 : f32
    %m2 = arith.mulf %m, %x2 : f32
    %s = arith.addf %o, %m2 : f32
    linalg.yield %s : f32"""


def _sel(values: list[float]) -> str:
    return "dense<[" + ", ".join(f"{v:e}" for v in values) + "]> : tensor<" + str(len(values)) + "xf32>"


def _qkv_select(sel: list[float], zero_init: bool) -> str:
    """y[b,h,e] = sum_{c,s} x[b,c] * w[c,s,h,e] * sel[s] (the fused q/k/v weight)."""
    init = (
        "%z = arith.constant 0.0 : f32\n  %e = tensor.empty() : tensor<3x2x4xf32>\n  %i = linalg.fill ins(%z : f32) outs(%e : tensor<3x2x4xf32>) -> tensor<3x2x4xf32>"
        if zero_init
        else "%i = tensor.empty() : tensor<3x2x4xf32>"
    )
    init_use = "%i" if zero_init else "%init"
    return f"""func.func @f(%x: tensor<3x5xf32>, %w: tensor<5x3x2x4xf32>, %init: tensor<3x2x4xf32>) -> tensor<3x2x4xf32> {{
  %sel = arith.constant {_sel(sel)}
  {init}
  %r = linalg.generic {{indexing_maps = [affine_map<(b, h, e, c, s) -> (b, c)>, affine_map<(b, h, e, c, s) -> (c, s, h, e)>, affine_map<(b, h, e, c, s) -> (s)>, affine_map<(b, h, e, c, s) -> (b, h, e)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}} ins(%x, %w, %sel : tensor<3x5xf32>, tensor<5x3x2x4xf32>, tensor<3xf32>) outs({init_use} : tensor<3x2x4xf32>) {{
  ^bb0(%x0: f32, %x1: f32, %x2: f32, %o: f32):
{MUL_ADD}
  }} -> tensor<3x2x4xf32>
  return %r : tensor<3x2x4xf32>
}}"""


@pytest.mark.parametrize("sel", [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [1.0, 1.0, 0.0]])
@pytest.mark.parametrize("zero_init", [True, False])
def test_constant_selector_over_a_reduction_dim(sel, zero_init, rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    w = rng.standard_normal((5, 3, 2, 4)).astype(np.float32)
    init = rng.standard_normal((3, 2, 4)).astype(np.float32)
    fn = compile_text(_qkv_select(sel, zero_init))["f"]
    (spec,) = [s for s in specs(fn) if s.kind == "contraction"]
    assert spec.plan.fixed == ({4: sel.index(max(sel))} if sum(v != 0 for v in sel) == 1 else {})
    got = fn(x, w, init)
    ref = np.einsum("bc,cshe,s->bhe", x, w, np.array(sel, np.float32)) + (0 if zero_init else init)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_constant_selector_on_an_output_dim_places_one_slice(rng):
    """dw[c,s,h] = sum_b x[b,c] * g[b,h] * sel[s]: the slice s=2 gets x^T g (+ init)."""
    src = f"""func.func @f(%x: tensor<4x5xf32>, %g: tensor<4x2xf32>, %init: tensor<5x3x2xf32>) -> tensor<5x3x2xf32> {{
  %sel = arith.constant {_sel([0.0, 0.0, 1.0])}
  %r = linalg.generic {{indexing_maps = [affine_map<(c, s, h, b) -> (b, c)>, affine_map<(c, s, h, b) -> (b, h)>, affine_map<(c, s, h, b) -> (s)>, affine_map<(c, s, h, b) -> (c, s, h)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}} ins(%x, %g, %sel : tensor<4x5xf32>, tensor<4x2xf32>, tensor<3xf32>) outs(%init : tensor<5x3x2xf32>) {{
  ^bb0(%x0: f32, %x1: f32, %x2: f32, %o: f32):
{MUL_ADD}
  }} -> tensor<5x3x2xf32>
  return %r : tensor<5x3x2xf32>
}}"""
    x = rng.standard_normal((4, 5)).astype(np.float32)
    g = rng.standard_normal((4, 2)).astype(np.float32)
    init = rng.standard_normal((5, 3, 2)).astype(np.float32)
    fn = compile_text(src)["f"]
    assert [s.plan.fixed for s in specs(fn)] == [{1: 2}]
    got = fn(x, g, init)
    ref = init + np.einsum("bc,bh,s->csh", x, g, np.array([0, 0, 1], np.float32))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert not np.shares_memory(got, init)


@pytest.mark.parametrize(
    "sa,sb,so",
    [
        ("bik", "bkj", "bij"),
        ("bik", "bkj", "bji"),  # transposed output: swap the operands
        ("btk", "kn", "btn"),
        ("bthd", "bshd", "bhts"),  # attention scores
        ("bhts", "bshd", "bthd"),  # attention output: batch dims not leading
        ("btc", "btn", "cn"),  # weight gradient
        ("xik", "kj", "ij"),  # a dim summed by one operand alone
        ("btc", "btc", "c"),  # batched dots over leading axes (a layernorm gain's gradient): einsum
        ("btc", "ctb", "c"),
        ("btc", "btc", "bt"),  # batched dots over the innermost axis: matmul
    ],
)
def test_contract2_writes_the_output_layout(sa, sb, so, rng):
    letters = sorted(set(sa + sb + so))
    sizes = {c: 2 + i for i, c in enumerate(letters)}
    dim = {c: i for i, c in enumerate(letters)}
    a = rng.standard_normal([sizes[c] for c in sa]).astype(np.float32)
    b = rng.standard_normal([sizes[c] for c in sb]).astype(np.float32)
    r, fresh = contract2(a, tuple(dim[c] for c in sa), b, tuple(dim[c] for c in sb), [dim[c] for c in so], [sizes[c] for c in letters], np.dtype(np.float32))
    np.testing.assert_allclose(r, np.einsum(f"{sa},{sb}->{so}", a, b), rtol=1e-5, atol=1e-5)
    assert fresh and r.flags.c_contiguous and r.dtype == np.float32


def test_onehot_positions():
    tok = np.array([[3, 7], [5, 9]], np.int32)
    np.testing.assert_array_equal(onehot_positions(tok, np.arange(10, dtype=np.int32)), tok)
    np.testing.assert_array_equal(onehot_positions(tok, np.arange(4, 8, dtype=np.int32)), [[-1, 3], [1, -1]])  # a shard
    np.testing.assert_array_equal(onehot_positions(tok, np.array([9, 3, 5, 1], np.int32)), [[1, -1], [2, 0]])  # any order
    assert onehot_positions(tok, np.array([3, 3], np.int32)) is None  # repeats: no positions


def test_scatter_rows(rng):
    pos = np.array([2, -1, 0, 2, 2])
    x = rng.standard_normal((5, 3)).astype(np.float32)
    ref = np.zeros((4, 3), np.float32)
    for p, row in zip(pos, x):
        if p >= 0:
            ref[p] += row
    np.testing.assert_allclose(scatter_rows(pos, x, 4, np.dtype(np.float32)), ref, rtol=1e-6)


ONEHOT = """  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x6xf32>
  %oh = linalg.generic {indexing_maps = [affine_map<(b, t, v) -> (b, t)>, affine_map<(b, t, v) -> (v)>, affine_map<(b, t, v) -> (b, t, v)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%tok, %ids : tensor<2x3xi32>, tensor<6xi32>) outs(%e : tensor<2x3x6xf32>) {
  ^bb0(%a: i32, %i: i32, %o: f32):
    %c = arith.cmpi eq, %a, %i : i32
    %s = arith.select %c, %one, %zero : f32
    linalg.yield %s : f32
  } -> tensor<2x3x6xf32>
"""
MUL_ADD2 = """    %m = arith.mulf %x0, %x1 : f32
    %s2 = arith.addf %o, %m : f32
    linalg.yield %s2 : f32"""


def _onehot_module() -> str:
    """Embedding gather, its gradient (scatter-add), and a per-row pick (loss)."""
    return f"""func.func @f(%tok: tensor<2x3xi32>, %ids: tensor<6xi32>, %w: tensor<6x4xf32>, %g: tensor<2x3x4xf32>, %lp: tensor<2x3x6xf32>, %i1: tensor<2x3x4xf32>, %i2: tensor<6x4xf32>, %i3: tensor<2x3xf32>) -> (tensor<2x3x4xf32>, tensor<6x4xf32>, tensor<2x3xf32>) {{
{ONEHOT}
  %emb = linalg.generic {{indexing_maps = [affine_map<(b, t, c, v) -> (b, t, v)>, affine_map<(b, t, c, v) -> (v, c)>, affine_map<(b, t, c, v) -> (b, t, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}} ins(%oh, %w : tensor<2x3x6xf32>, tensor<6x4xf32>) outs(%i1 : tensor<2x3x4xf32>) {{
  ^bb0(%x0: f32, %x1: f32, %o: f32):
{MUL_ADD2}
  }} -> tensor<2x3x4xf32>
  %dw = linalg.generic {{indexing_maps = [affine_map<(v, c, b, t) -> (b, t, c)>, affine_map<(v, c, b, t) -> (b, t, v)>, affine_map<(v, c, b, t) -> (v, c)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}} ins(%g, %oh : tensor<2x3x4xf32>, tensor<2x3x6xf32>) outs(%i2 : tensor<6x4xf32>) {{
  ^bb0(%x0: f32, %x1: f32, %o: f32):
{MUL_ADD2}
  }} -> tensor<6x4xf32>
  %pick = linalg.generic {{indexing_maps = [affine_map<(b, t, v) -> (b, t, v)>, affine_map<(b, t, v) -> (b, t, v)>, affine_map<(b, t, v) -> (b, t)>], iterator_types = ["parallel", "parallel", "reduction"]}} ins(%oh, %lp : tensor<2x3x6xf32>, tensor<2x3x6xf32>) outs(%i3 : tensor<2x3xf32>) {{
  ^bb0(%x0: f32, %x1: f32, %o: f32):
{MUL_ADD2}
  }} -> tensor<2x3xf32>
  return %emb, %dw, %pick : tensor<2x3x4xf32>, tensor<6x4xf32>, tensor<2x3xf32>
}}"""


@pytest.mark.parametrize(
    "ids",
    [
        np.arange(6),  # the vocabulary
        np.arange(4, 10),  # a shard of it: tokens outside give zeros
        np.array([5, 0, 3, 1, 4, 2]),  # any order
        np.array([1, 1, 2, 3, 4, 5]),  # a repeat: the one-hot is built after all
    ],
)
def test_onehot_operand_runs_as_gather_and_scatter(ids, rng):
    cm = compile_text(_onehot_module())
    # the one-hot generic is left out: its users get the tokens and ids
    assert "(None, " in cm.source and ", None)" in cm.source
    assert sum(s.onehot is not None for s in specs(cm["f"])) == 3
    tok = rng.integers(0, 8, (2, 3)).astype(np.int32)
    tok[0, 0] = tok[1, 2] = 5  # a repeated token: the scatter adds both rows
    ids = ids.astype(np.int32)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    g = rng.standard_normal((2, 3, 4)).astype(np.float32)
    lp = rng.standard_normal((2, 3, 6)).astype(np.float32)
    i1, i2, i3 = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 4), (6, 4), (2, 3)))
    emb, dw, pick = cm["f"](tok, ids, w, g, lp, i1, i2, i3)
    oh = (tok[..., None] == ids).astype(np.float32)
    np.testing.assert_allclose(emb, i1 + np.einsum("btv,vc->btc", oh, w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dw, i2 + np.einsum("btc,btv->vc", g, oh), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pick, i3 + np.einsum("btv,btv->bt", oh, lp), rtol=1e-5, atol=1e-6)
    assert emb.dtype == dw.dtype == pick.dtype == np.float32


def test_onehot_with_another_user_is_still_built(rng):
    """An elementwise use of the one-hot keeps its generic; the contraction still gathers."""
    src = f"""func.func @f(%tok: tensor<2x3xi32>, %ids: tensor<6xi32>, %w: tensor<6x4xf32>, %i1: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x6xf32>) {{
{ONEHOT}
  %emb = linalg.generic {{indexing_maps = [affine_map<(b, t, c, v) -> (b, t, v)>, affine_map<(b, t, c, v) -> (v, c)>, affine_map<(b, t, c, v) -> (b, t, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}} ins(%oh, %w : tensor<2x3x6xf32>, tensor<6x4xf32>) outs(%i1 : tensor<2x3x4xf32>) {{
  ^bb0(%x0: f32, %x1: f32, %o: f32):
{MUL_ADD2}
  }} -> tensor<2x3x4xf32>
  return %emb, %oh : tensor<2x3x4xf32>, tensor<2x3x6xf32>
}}"""
    cm = compile_text(src)
    tok = rng.integers(0, 6, (2, 3)).astype(np.int32)
    ids = np.arange(6, dtype=np.int32)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    i1 = np.zeros((2, 3, 4), np.float32)
    emb, oh = cm["f"](tok, ids, w, i1)
    np.testing.assert_array_equal(oh, (tok[..., None] == ids).astype(np.float32))
    np.testing.assert_allclose(emb, w[tok], rtol=1e-6)


def test_allocator_tuning_is_idempotent():
    first = tune_allocator()
    assert tune_allocator() == first


def _stack_text(order: str) -> str:
    """out[b, k, d] = (p0, p1, p2)[k][b, d] as a select chain on linalg.index 1; `order`
    swaps the compared constants (a chain the fast path must still read right)."""
    c0, c1 = ("0", "1") if order == "plain" else ("1", "0")
    t, o = "tensor<2x4xf32>", "tensor<2x3x4xf32>"
    part = "affine_map<(b, k, d) -> (b, d)>"
    return f"""func.func @f(%p0: {t}, %p1: {t}, %p2: {t}) -> {o} {{
  %e = tensor.empty() : {o}
  %r = linalg.generic {{indexing_maps = [{part}, {part}, {part}, affine_map<(b, k, d) -> (b, k, d)>], iterator_types = ["parallel", "parallel", "parallel"]}} ins(%p0, %p1, %p2 : {t}, {t}, {t}) outs(%e : {o}) {{
  ^bb0(%a: f32, %b: f32, %c: f32, %out: f32):
    %k = linalg.index 1 : index
    %i0 = arith.constant {c0} : index
    %i1 = arith.constant {c1} : index
    %is0 = arith.cmpi eq, %k, %i0 : index
    %is1 = arith.cmpi eq, %i1, %k : index
    %s1 = arith.select %is1, %b, %c : f32
    %s0 = arith.select %is0, %a, %s1 : f32
    linalg.yield %s0 : f32
  }} -> {o}
  return %r : {o}
}}"""


@pytest.mark.parametrize("order", ["plain", "swapped"])
def test_a_select_chain_on_an_index_runs_as_a_stack(order, rng):
    fn = compile_text(_stack_text(order))["f"]
    (spec,) = specs(fn)
    parts = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(3)]
    want = np.stack(parts if order == "plain" else [parts[1], parts[0], parts[2]], axis=1)
    assert spec.stack == (1, (0, 1, 2) if order == "plain" else (1, 0, 2))
    np.testing.assert_array_equal(fn(*parts), want)


@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 1, 3), (4,), (2, 3)])
def test_sum_axes_equals_numpy_on_every_layout(shape, rng):
    """Sums through BLAS (outer or inner axes of the memory layout, transposed views
    included) and numpy's reduce elsewhere: every axis subset of every transpose."""
    import itertools

    from shardc.runtime.execute.structured_run import sum_axes

    base = rng.standard_normal(shape).astype(np.float32)
    for perm in itertools.permutations(range(len(shape))):
        x = base.transpose(perm)
        for r in range(1, x.ndim + 1):
            for axes in itertools.combinations(range(x.ndim), r):
                for keepdims in (False, True):
                    got = sum_axes(x, axes, np.dtype(np.float32), keepdims)
                    want = x.sum(axis=axes, keepdims=keepdims, dtype=np.float32)
                    assert got.shape == want.shape and got.dtype == np.float32
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
