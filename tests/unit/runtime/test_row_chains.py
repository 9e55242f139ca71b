"""Row-chain kernels (`shardc.runtime.codegen.row_fusion`, `kernels/rows.py`): a softmax-shaped
chain of elementwise generics and last-axis reductions runs as one kernel whose results
equal the numpy path's within float32 rounding (odd row lengths, rows of length 1,
-inf entries, fully masked rows, NaN, strided and transposed inputs, float64); it fires
where the chain has that shape (counted) and not where it differs; torch-mlir's
softmax and layernorm fire too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shardc.context import make_context
from shardc.ir.fast_parser import FastParser
from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.codegen.fusion import fuse_elementwise
from shardc.runtime.codegen.kernels import fused
from shardc.runtime.execute.kernels import fused_run
from shardc.runtime.execute.kernels import rows_run
from shardc.runtime.codegen.row_fusion import RowChainOp, fuse_rows

pytestmark = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")

DATA = Path(__file__).parents[2] / "data" / "torch_mlir"
_NINF = {"f32": "0xFF800000", "f64": "0xFFF0000000000000"}


def softmax(r: int, n: int, e: str = "f32", between: str = "") -> str:
    """@f(x: r x n, bias: n) -> (softmax(x/8 + bias), max + log sum): scale and mask,
    row max, exp, row sum, the per-row logsumexp and the division; `between` is IR
    placed after the max."""
    t, v = f"tensor<{r}x{n}x{e}>", f"tensor<{r}x{e}>"
    ij, i, j = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>", "affine_map<(i, j) -> (j)>"
    return f"""
func.func @f(%x: {t}, %bias: tensor<{n}x{e}>) -> ({t}, {v}) {{
  %ninf = arith.constant {_NINF[e]} : {e}
  %zero = arith.constant 0.0 : {e}
  %e0 = tensor.empty() : {t}
  %a = linalg.generic {{indexing_maps = [{ij}, {j}, {ij}], iterator_types = ["parallel", "parallel"]}} ins(%x, %bias : {t}, tensor<{n}x{e}>) outs(%e0 : {t}) {{
  ^bb0(%p: {e}, %q: {e}, %o: {e}):
    %c = arith.constant 0.125 : {e}
    %s = arith.mulf %p, %c : {e}
    %y = arith.addf %s, %q : {e}
    linalg.yield %y : {e}
  }} -> {t}
  %r0 = tensor.empty() : {v}
  %mi = linalg.fill ins(%ninf : {e}) outs(%r0 : {v}) -> {v}
  %m = linalg.generic {{indexing_maps = [{ij}, {i}], iterator_types = ["parallel", "reduction"]}} ins(%a : {t}) outs(%mi : {v}) {{
  ^bb0(%p: {e}, %o: {e}):
    %y = arith.maximumf %o, %p : {e}
    linalg.yield %y : {e}
  }} -> {v}
  {between}
  %e = linalg.generic {{indexing_maps = [{ij}, {i}, {ij}], iterator_types = ["parallel", "parallel"]}} ins(%a, %m : {t}, {v}) outs(%e0 : {t}) {{
  ^bb0(%p: {e}, %q: {e}, %o: {e}):
    %d = arith.subf %p, %q : {e}
    %y = math.exp %d : {e}
    linalg.yield %y : {e}
  }} -> {t}
  %zi = linalg.fill ins(%zero : {e}) outs(%r0 : {v}) -> {v}
  %z = linalg.generic {{indexing_maps = [{ij}, {i}], iterator_types = ["parallel", "reduction"]}} ins(%e : {t}) outs(%zi : {v}) {{
  ^bb0(%p: {e}, %o: {e}):
    %y = arith.addf %p, %o : {e}
    linalg.yield %y : {e}
  }} -> {v}
  %l = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}} ins(%m, %z : {v}, {v}) outs(%r0 : {v}) {{
  ^bb0(%p: {e}, %q: {e}, %o: {e}):
    %lz = math.log %q : {e}
    %y = arith.addf %p, %lz : {e}
    linalg.yield %y : {e}
  }} -> {v}
  %sm = linalg.generic {{indexing_maps = [{ij}, {i}, {ij}], iterator_types = ["parallel", "parallel"]}} ins(%e, %z : {t}, {v}) outs(%e0 : {t}) {{
  ^bb0(%p: {e}, %q: {e}, %o: {e}):
    %y = arith.divf %p, %q : {e}
    linalg.yield %y : {e}
  }} -> {t}
  return %sm, %l : {t}, {v}
}}
"""


def chains(text: str) -> int:
    module = FastParser(make_context(), text).parse_module()
    fuse_elementwise(module)
    return fuse_rows(module)


def inputs(r: int, n: int, dtype=np.float32, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((r, n)) * 4).astype(dtype)
    bias = np.where(np.arange(n) % 5 == 1, -np.inf, 0).astype(dtype)  # masked columns
    x[3] = -np.inf  # a fully masked row: NaN on both paths
    x[4, n // 2] = np.nan
    x[5, 0] = np.inf
    return x, bias


def both(cm, args, monkeypatch):
    """(numpy path's results, row kernel's results, row kernels run)."""
    monkeypatch.setattr(rows_run, "MIN_ELEMENTS", 0)
    with np.errstate(all="ignore"):
        monkeypatch.setenv("SHARDC_KERNELS", "numpy")
        ref = [np.asarray(a) for a in cm.call("f", *args)]
        monkeypatch.setenv("SHARDC_KERNELS", "auto")
        before = rows_run.CALLS[0]
        got = [np.asarray(a) for a in cm.call("f", *args)]
    return ref, got, rows_run.CALLS[0] - before


def close(got, ref, dtype) -> None:
    rtol = 3e-6 if dtype == np.float32 else 1e-13
    for g, w in zip(got, ref):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * 1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 7, 128, 601])
@pytest.mark.parametrize("e, dtype", [("f32", np.float32), ("f64", np.float64)])
def test_softmax_chain_equals_the_numpy_path(n, e, dtype, monkeypatch):
    text = softmax(16, n, e)
    assert chains(text) == 1
    cm = compile_text(text)
    ref, got, calls = both(cm, inputs(16, n, dtype), monkeypatch)
    assert calls == 1
    close(got, ref, dtype)
    assert np.isnan(got[0][3]).all() and not np.isnan(got[0][6]).any()


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["strided", "transposed"])
def test_strided_inputs(layout, monkeypatch):
    r, n = 12, 33
    x, bias = inputs(r, n)
    big = np.zeros((r, 2 * n), np.float32)
    big[:, ::2] = x
    view = big[:, ::2] if layout == "strided" else np.ascontiguousarray(x.T).T
    assert not view.flags.c_contiguous
    cm = compile_text(softmax(r, n))
    ref, got, calls = both(cm, (view, bias), monkeypatch)
    assert calls == 1
    close(got, ref, np.float32)
    _, plain, _ = both(cm, (x, bias), monkeypatch)
    close(got, plain, np.float32)


def test_small_spaces_and_numpy_mode_run_the_members(monkeypatch):
    """Below MIN_ELEMENTS, and with SHARDC_KERNELS=numpy, the chain's own ops run."""
    cm = compile_text(softmax(4, 8))
    x, bias = inputs(8, 8)
    before = rows_run.CALLS[0]
    with np.errstate(all="ignore"):
        cm.call("f", x[:4], bias)
        monkeypatch.setattr(rows_run, "MIN_ELEMENTS", 0)
        monkeypatch.setenv("SHARDC_KERNELS", "numpy")
        cm.call("f", x[:4], bias)
    assert rows_run.CALLS[0] == before


def test_an_outside_reader_splits_the_chain(monkeypatch):
    """A column sum of the scaled scores after the max (not a row op) reads a chain
    value: that chain ends there (scale + max), the rest (exp ...) is a chain of its own."""
    col = """%c0 = tensor.empty() : tensor<40xf32>
  %cz = linalg.fill ins(%zero : f32) outs(%c0 : tensor<40xf32>) -> tensor<40xf32>
  %cs = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<24x40xf32>) outs(%cz : tensor<40xf32>) {
  ^bb0(%p: f32, %o: f32):
    %y = arith.addf %p, %o : f32
    linalg.yield %y : f32
  } -> tensor<40xf32>"""
    text = softmax(24, 40, between=col)
    assert chains(text) == 2
    cm = compile_text(text)
    ref, got, calls = both(cm, inputs(24, 40), monkeypatch)
    assert calls == 2
    close(got, ref, np.float32)


def test_other_shapes_do_not_fire():
    """A reduction over the first axis, a matmul (operands through projections) and a
    body reading linalg.index are no chain members."""
    t = "tensor<16x32xf32>"
    colsum = f"""
func.func @f(%x: {t}) -> {t} {{
  %zero = arith.constant 0.0 : f32
  %c0 = tensor.empty() : tensor<32xf32>
  %cz = linalg.fill ins(%zero : f32) outs(%c0 : tensor<32xf32>) -> tensor<32xf32>
  %s = linalg.generic {{indexing_maps = [affine_map<(j, i) -> (i, j)>, affine_map<(j, i) -> (j)>], iterator_types = ["parallel", "reduction"]}} ins(%x : {t}) outs(%cz : tensor<32xf32>) {{
  ^bb0(%p: f32, %o: f32):
    %y = arith.addf %p, %o : f32
    linalg.yield %y : f32
  }} -> tensor<32xf32>
  %e0 = tensor.empty() : {t}
  %d = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x, %s : {t}, tensor<32xf32>) outs(%e0 : {t}) {{
  ^bb0(%p: f32, %q: f32, %o: f32):
    %y = arith.divf %p, %q : f32
    linalg.yield %y : f32
  }} -> {t}
  return %d : {t}
}}
"""
    assert chains(colsum) == 0
    matmul = """
func.func @f(%x: tensor<16x32xf32>, %w: tensor<8x32xf32>) -> tensor<16x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<16x32xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<16x32xf32>) outs(%e0 : tensor<16x32xf32>) {
  ^bb0(%p: f32, %o: f32):
    %y = math.exp %p : f32
    linalg.yield %y : f32
  } -> tensor<16x32xf32>
  %c0 = tensor.empty() : tensor<16x8xf32>
  %cz = linalg.fill ins(%zero : f32) outs(%c0 : tensor<16x8xf32>) -> tensor<16x8xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(i, n, j) -> (i, j)>, affine_map<(i, n, j) -> (n, j)>, affine_map<(i, n, j) -> (i, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : tensor<16x32xf32>, tensor<8x32xf32>) outs(%cz : tensor<16x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %y = arith.mulf %p, %q : f32
    %s = arith.addf %o, %y : f32
    linalg.yield %s : f32
  } -> tensor<16x8xf32>
  return %m : tensor<16x8xf32>
}
"""
    assert chains(matmul) == 0
    indexed = softmax(16, 32).replace("%s = arith.mulf %p, %c : f32", "%ix = linalg.index 1 : index\n    %s = arith.mulf %p, %c : f32")
    assert "linalg.index" in indexed
    assert chains(indexed) == 1  # the scale is no member: the chain starts at the max


@pytest.mark.slow
def test_torch_mlir_softmax_and_layernorm_fire(monkeypatch):
    """torch-mlir's GPT export: its three layernorms (keepdim rows, float64 statistics)
    and the softmax after its max/argmax (exp, sum, divide) are chains; run as row
    kernels, the result equals PyTorch's."""
    text = (DATA / "gpt.mlir").read_text()
    assert chains(text) == 4
    module = FastParser(make_context(), text).parse_module()
    from shardc.runtime import compile_module

    cm = compile_module(module)
    assert len([op for op in cm.functions["gpt"].__globals__.values() if type(op).__name__ == "RowKernel"]) == 4
    d = np.load(DATA / "gpt.npz")
    args = [d[k] for k in d.files if k != "result"]
    monkeypatch.setattr(rows_run, "MIN_ELEMENTS", 0)
    before = rows_run.CALLS[0]
    got = cm.call("gpt", *args)
    assert rows_run.CALLS[0] - before == 4
    assert np.abs(got - d["result"]).max() < 1e-4


def test_chain_op_holds_members_in_block_order():
    module = FastParser(make_context(), softmax(16, 32)).parse_module()
    fuse_elementwise(module)
    assert fuse_rows(module) == 1
    (op,) = [o for o in module.walk() if isinstance(o, RowChainOp)]
    members = list(op.body.block.ops)[:-1]
    assert [len(m.inputs) for m in members] == [2, 1, 2, 1, 2, 2]
    assert len(op.outs) == 2  # the softmax and the logsumexp; max, exp and sum stay inside


@pytest.mark.slow
def test_kernel_pickles_and_its_run_time_needs_no_xdsl(monkeypatch):
    """A compile-cache hit unpickles the kernel (its compiled code is not data) and runs
    it without xDSL's IR: rows_run imports only what fused_run does (xdsl.utils.exceptions,
    for codegen_safe's diagnostics)."""
    import pickle
    import subprocess
    import sys

    cm = compile_text(softmax(16, 40))
    (kernel,) = [v for v in cm.functions["f"].__globals__.values() if isinstance(v, rows_run.RowKernel)]
    x, bias = inputs(16, 40)
    monkeypatch.setattr(rows_run, "MIN_ELEMENTS", 0)
    with np.errstate(all="ignore"):
        want = cm.call("f", x, bias)
        m = np.full(16, -np.inf, np.float32)
        got = pickle.loads(pickle.dumps(kernel))((x, bias, m, np.zeros(16, np.float32)))
    assert got is not None
    close([got[1], got[0]], [np.asarray(w) for w in want], np.float32)
    allowed = "{'xdsl', 'xdsl.utils', 'xdsl.utils.exceptions'}"
    code = f"import sys, shardc.runtime.execute.kernels.rows_run; bad = {{m for m in sys.modules if m.startswith('xdsl')}} - {allowed}; assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_chain_across_an_in_place_write_of_its_input(monkeypatch):
    """An op between the members that writes in place (a donated buffer) over an input
    of an earlier member cuts the chain there: its members would run after the write."""
    over = """%dbl = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<16x40xf32>) outs(%e0 : tensor<16x40xf32>) attrs = {shardc.inplace = [[0 : i64, 0 : i64]]} {
  ^bb0(%p: f32, %o: f32):
    %y = arith.addf %p, %p : f32
    linalg.yield %y : f32
  } -> tensor<16x40xf32>"""
    text = softmax(16, 40, between=over).replace("return %sm, %l : tensor<16x40xf32>, tensor<16xf32>", "return %sm, %l, %dbl : tensor<16x40xf32>, tensor<16xf32>, tensor<16x40xf32>")
    text = text.replace("-> (tensor<16x40xf32>, tensor<16xf32>) {", "-> (tensor<16x40xf32>, tensor<16xf32>, tensor<16x40xf32>) {", 1)
    assert chains(text) == 2  # scale + max, then exp, sum, log, divide
    assert chains(text.replace("attrs = {shardc.inplace = [[0 : i64, 0 : i64]]} ", "")) == 1
    cm = compile_text(text)
    x, bias = inputs(16, 40)
    monkeypatch.setattr(rows_run, "MIN_ELEMENTS", 0)
    with np.errstate(all="ignore"):
        monkeypatch.setenv("SHARDC_KERNELS", "numpy")
        ref = [np.asarray(a) for a in cm.call("f", x.copy(), bias)]
        monkeypatch.setenv("SHARDC_KERNELS", "auto")
        before = rows_run.CALLS[0]
        got = [np.asarray(a) for a in cm.call("f", x.copy(), bias)]
    assert rows_run.CALLS[0] - before == 2
    close(got, ref, np.float32)
    np.testing.assert_allclose(ref[2], 2 * x)
    with np.errstate(all="ignore"):  # the scores of x, not of the doubled buffer
        a = x / np.float32(8) + bias
        e = np.exp(a - a.max(axis=1, keepdims=True))
    close([got[0]], [e / e.sum(axis=1, keepdims=True)], np.float32)
