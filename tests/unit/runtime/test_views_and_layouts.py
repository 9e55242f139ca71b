"""What the runtime does about the shape of torch-mlir's IR rather than its arithmetic:
transposes and broadcasts read as views, contractions on those views without copies
(a weight broadcast over the batch folded into one matmul, a result laid out for the
transpose that reads it), torch-mlir's collapsed-heads batch_matmuls run uncollapsed,
a max whose argmax nobody reads computed alone, the embedding backward's scatter-add
without `add.at`. Every test checks the numbers against numpy, so a view that became a
copy of the wrong thing (or a skipped result that was needed) fails here."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from shardc.runtime import compile_text
from shardc.runtime.execute.kernels import tm_tensor_run
from shardc.runtime.execute.structured_run import StructuredSpec, contract2, run_structured

DATA = Path(__file__).parents[2] / "data" / "torch_mlir"


def _specs(cm, fn: str = "f") -> list[StructuredSpec]:
    return [v for v in cm.functions[fn].__globals__.values() if isinstance(v, StructuredSpec)]


def _record_results(cm, fn: str = "f") -> list[tuple[StructuredSpec, tuple[np.ndarray, ...]]]:
    """Make the compiled function log every structured op's (spec, results)."""
    log: list[tuple[StructuredSpec, tuple[np.ndarray, ...]]] = []
    g = cm.functions[fn].__globals__
    name = next(k for k, v in g.items() if v is run_structured)

    def recording(spec, body, ins, outs, aux=()):
        res = run_structured(spec, body, ins, outs, aux)
        log.append((spec, res))
        return res

    g[name] = recording
    return log


# --- a max whose argmax is dead ------------------------------------------------------

MAX_ARGMAX = """
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @f(%x: tensor<6x9xf32>, %v0: tensor<6xf32>, %i0: tensor<6xi64>) -> {results} {{
  %r:2 = linalg.generic {{indexing_maps = [#in, #out, #out], iterator_types = ["parallel", "reduction"]}} ins(%x : tensor<6x9xf32>) outs(%v0, %i0 : tensor<6xf32>, tensor<6xi64>) {{
  ^bb0(%in: f32, %out: f32, %out_i: i64):
    %i = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i64
    %m = {comb} %in, %out : f32
    %c = arith.cmpf {pred}, %in, %out : f32
    %s = arith.select %c, %ii, %out_i : i64
    linalg.yield %m, %s : f32, i64
  }} -> (tensor<6xf32>, tensor<6xi64>)
  return {returned}
}}"""


def _max_program(comb: str, dead: bool, pred: str = "ogt") -> str:
    if dead:
        return MAX_ARGMAX.format(comb=comb, pred=pred, results="tensor<6xf32>", returned="%r#0 : tensor<6xf32>")
    return MAX_ARGMAX.format(comb=comb, pred=pred, results="(tensor<6xf32>, tensor<6xi64>)", returned="%r#0, %r#1 : tensor<6xf32>, tensor<6xi64>")


def _max_inputs():
    x = np.random.default_rng(3).integers(-4, 5, (6, 9)).astype(np.float32)  # ties
    x[1, 4] = np.nan  # a NaN row
    x[2, :] = np.nan  # an all-NaN row
    v0 = np.array([-np.inf, -np.inf, -np.inf, 100, -np.inf, 0.5], np.float32)  # row 3: the init wins
    return x, v0, np.full(6, -1, np.int64)


@pytest.mark.parametrize("comb", ["arith.maximumf", "arith.maxnumf"])
def test_dead_argmax_computes_the_max_alone(comb: str) -> None:
    cm = compile_text(_max_program(comb, dead=True))
    (spec,) = [s for s in _specs(cm) if s.kind == "argreduce"]
    assert spec.arg is not None and spec.arg.index_dead
    x, v0, i0 = _max_inputs()
    got = cm.call("f", x, v0, i0)
    if comb == "arith.maximumf":  # NaN-propagating
        want = np.maximum(v0, np.maximum.reduce(x, axis=1))
    else:  # NaN-ignoring
        want = np.fmax(v0, np.fmax.reduce(x, axis=1))
    np.testing.assert_array_equal(got, want)


def test_live_argmax_keeps_the_positions() -> None:
    """The same op with both results returned: the index is not dead and follows the
    sequential loop (first position of the max, the init's index where the init wins)."""
    cm = compile_text(_max_program("arith.maximumf", dead=False))
    (spec,) = [s for s in _specs(cm) if s.kind == "argreduce"]
    assert spec.arg is not None and not spec.arg.index_dead
    x, v0, i0 = _max_inputs()
    x = np.nan_to_num(x, nan=0.0)
    v, i = cm.call("f", x, v0, i0)
    np.testing.assert_array_equal(v, np.maximum(v0, x.max(1)))
    want_i = np.where(x.max(1) > v0, x.argmax(1), -1)
    np.testing.assert_array_equal(i, want_i)


def test_argmax_used_by_another_op_is_not_dead() -> None:
    text = _max_program("arith.maximumf", dead=True).replace(
        "  return %r#0 : tensor<6xf32>",
        "  %e = tensor.extract %r#1[%c0] : tensor<6xi64>\n  %f = arith.sitofp %e : i64 to f32\n"
        "  %t = tensor.insert %f into %r#0[%c0] : tensor<6xf32>\n  return %t : tensor<6xf32>",
    ).replace("-> tensor<6xf32> {\n", "-> tensor<6xf32> {\n  %c0 = arith.constant 0 : index\n", 1)
    cm = compile_text(text)
    (spec,) = [s for s in _specs(cm) if s.kind == "argreduce"]
    assert spec.arg is not None and not spec.arg.index_dead
    x, v0, i0 = _max_inputs()
    x = np.nan_to_num(x, nan=0.0)
    got = cm.call("f", x, v0, i0)
    assert got[0] == float(x[0].argmax())
    np.testing.assert_array_equal(got[1:], np.maximum(v0, x.max(1))[1:])


# --- contractions on views ---------------------------------------------------------------

BCAST_BMM = """
func.func @f(%x: tensor<4x5x6xf32>, %w: tensor<7x6xf32>) -> tensor<4x5x7xf32> {
  %e = tensor.empty() : tensor<6x7xf32>
  %t = linalg.transpose ins(%w : tensor<7x6xf32>) outs(%e : tensor<6x7xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<4x6x7xf32>
  %b = linalg.broadcast ins(%t : tensor<6x7xf32>) outs(%e2 : tensor<4x6x7xf32>) dimensions = [0]
  %z = arith.constant 0.0 : f32
  %e3 = tensor.empty() : tensor<4x5x7xf32>
  %f = linalg.fill ins(%z : f32) outs(%e3 : tensor<4x5x7xf32>) -> tensor<4x5x7xf32>
  %r = linalg.batch_matmul ins(%x, %b : tensor<4x5x6xf32>, tensor<4x6x7xf32>) outs(%f : tensor<4x5x7xf32>) -> tensor<4x5x7xf32>
  return %r : tensor<4x5x7xf32>
}"""


def test_weight_broadcast_over_the_batch() -> None:
    """torch-mlir's linear on 3-D input: a transposed weight broadcast over the batch
    into a batch_matmul. The transpose and the broadcast are views (stride 0 over the
    batch) and the product is right."""
    cm = compile_text(BCAST_BMM)
    log = _record_results(cm)
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((4, 5, 6)).astype(np.float32), rng.standard_normal((7, 6)).astype(np.float32)
    got = cm.call("f", x, w)
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-5, atol=1e-5)
    copies = [res[0] for spec, res in log if spec.kind == "elementwise" and res and res[0].ndim == 3 and res[0].shape == (4, 6, 7)]
    assert copies and copies[0].strides[0] == 0  # the broadcast is a view


def test_contract2_folds_a_batch_broadcast_operand() -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((5, 6)).astype(np.float32)
    b = np.broadcast_to(w, (3, 5, 6))
    dt = np.dtype(np.float32)
    for a_in in (a, a.transpose(1, 0, 2).copy().transpose(1, 0, 2)):  # C-ordered and strided
        r, fresh = contract2(a_in, (0, 1, 3), b, (0, 3, 2), (0, 1, 2), (3, 4, 6, 5), dt)
        assert fresh and r.shape == (3, 4, 6) and r.dtype == dt
        np.testing.assert_allclose(r, np.einsum("bmk,kn->bmn", a, w), rtol=1e-5, atol=1e-5)


ATTN_OUT = """
#a = affine_map<(b, h, m, n, k) -> (b, h, m, k)>
#b = affine_map<(b, h, m, n, k) -> (b, h, k, n)>
#o = affine_map<(b, h, m, n, k) -> (b, h, m, n)>
func.func @f(%p: tensor<2x3x4x4xf32>, %v: tensor<2x3x4x5xf32>) -> tensor<2x4x15xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x4x5xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %y = linalg.generic {indexing_maps = [#a, #b, #o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x5xf32>) outs(%f : tensor<2x3x4x5xf32>) {
  ^bb0(%x: f32, %w: f32, %acc: f32):
    %m = arith.mulf %x, %w : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x3x4x5xf32>
  %e2 = tensor.empty() : tensor<2x4x3x5xf32>
  %t = linalg.transpose ins(%y : tensor<2x3x4x5xf32>) outs(%e2 : tensor<2x4x3x5xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %t [[0], [1], [2, 3]] : tensor<2x4x3x5xf32> into tensor<2x4x15xf32>
  return %c : tensor<2x4x15xf32>
}"""


def test_contraction_result_laid_out_for_its_transpose() -> None:
    """Attention's output (`bhmn`) transposed to `bmhn` and collapsed: the contraction
    writes its result in the transpose's order, so the transpose is a C-ordered view
    and the collapse a view too; the numbers are the product's."""
    cm = compile_text(ATTN_OUT)
    (spec,) = [s for s in _specs(cm) if s.kind == "contraction"]
    assert spec.out_layout == (0, 2, 1, 3)
    log = _record_results(cm)
    rng = np.random.default_rng(6)
    p, v = rng.standard_normal((2, 3, 4, 4)).astype(np.float32), rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    got = cm.call("f", p, v)
    want = np.einsum("bhmk,bhkn->bmhn", p, v).reshape(2, 4, 15)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    (y,) = next(res for s, res in log if s.kind == "contraction")
    (t,) = next(res for s, res in log if "linalg.transpose" in s.name)
    assert not y.flags.c_contiguous and t.flags.c_contiguous and np.shares_memory(y, t)


def test_contract2_layout_falls_back_where_blas_cannot_write_it() -> None:
    """A layout that splits the matmul's rows is not used: C order, same numbers."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
    dt = np.dtype(np.float32)
    r, _ = contract2(a, (0, 2), b, (2, 1), (0, 1), (4, 5, 3), dt, layout=(1, 0))
    np.testing.assert_allclose(r, a @ b, rtol=1e-6)
    assert r.flags.c_contiguous or r.flags.f_contiguous


def test_gpt_fixture_attention_reads_views() -> None:
    """The committed GPT export: its collapsed-heads batch_matmuls run uncollapsed (as
    4-D generics in the runtime's copy), every reshape in the generated code is a
    view (no transposed copies), and the result still equals PyTorch's."""
    cm = compile_text((DATA / "gpt.mlir").read_text())
    uncollapsed = [s for s in _specs(cm, "gpt") if s.kind == "contraction" and s.n_loops == 5 and "linalg.generic" in s.name]
    assert len(uncollapsed) == 2  # q @ k^T and p @ v of the one layer, as bhmk,bhkn->bhmn
    d = np.load(DATA / "gpt.npz")
    args = [d[k] for k in d.files if k != "result"]
    copies: list[str] = []
    g = cm.functions["gpt"].__globals__

    def reshape(x, shape, line):
        r = x.reshape(shape)
        if x.size and not np.shares_memory(r, x):
            copies.append(line)
        return r

    src = re.sub(r"^(\s*)(\w+) = (\w+)\.reshape\((.*)\)$", lambda m: f"{m[1]}{m[2]} = _reshape({m[3]}, {m[4]}, {m[0].strip()!r})", cm.source, flags=re.M)
    ns = dict(g, _reshape=reshape)
    exec(compile(src, "<gpt-views>", "exec"), ns)
    with np.errstate(all="ignore"):
        got = ns[cm.functions["gpt"].__name__](*args)
    assert copies == []
    assert np.abs(got - d["result"]).max() < 1e-4


MEMREF_FILL = """
func.func @f() -> memref<3xf32> {
  %c = arith.constant 2.5 : f32
  %m = memref.alloc() : memref<3xf32>
  linalg.fill ins(%c : f32) outs(%m : memref<3xf32>)
  return %m : memref<3xf32>
}"""


def test_memref_fills_survive_the_runtime_rewrites() -> None:
    """A fill on a memref has no results yet is not dead: the rewrites of the runtime's
    copy keep it."""
    np.testing.assert_array_equal(compile_text(MEMREF_FILL).call("f"), np.full(3, 2.5, np.float32))


# --- the embedding backward's scatter-add --------------------------------------------------


def _add_at(upd, idx, orig, dims):
    out = orig.copy()
    pos = tm_tensor_run.scatter_positions(idx, upd.shape, orig.ndim, dims)
    np.add.at(out, tuple(np.broadcast_to(p, upd.shape) for p in pos), upd)
    return out


@pytest.mark.parametrize(
    "upd_shape, orig_shape, dims",
    [((40, 1, 8), (6, 8), [0]), ((40, 8), (6, 8), [0]), ((40, 1, 1, 4), (3, 5, 4), [0, 1]), ((40, 1, 4), (3, 5, 4), [1])],
)
def test_scatter_add_of_rows_equals_add_at(upd_shape, orig_shape, dims) -> None:
    rng = np.random.default_rng(8)
    upd = rng.standard_normal(upd_shape).astype(np.float32)
    idx = np.stack([rng.integers(0, orig_shape[d], upd_shape[0]) for d in dims], 1)  # repeats
    orig = rng.standard_normal(orig_shape).astype(np.float32)
    out = orig.copy()
    assert tm_tensor_run.add_rows(out, upd, idx, dims)
    np.testing.assert_array_equal(out, _add_at(upd, idx, orig, dims))  # the same sums, in the same order
    np.testing.assert_array_equal(tm_tensor_run.scatter_ufunc(np.add, upd, idx, orig, dims), out)


def test_scatter_add_of_a_row_repeated_often_takes_add_at() -> None:
    upd = np.random.default_rng(9).standard_normal((100, 1, 4)).astype(np.float32)
    idx = np.zeros((100, 1), np.int64)
    orig = np.ones((3, 4), np.float32)
    assert not tm_tensor_run.add_rows(orig.copy(), upd, idx, [0])
    np.testing.assert_array_equal(tm_tensor_run.scatter_ufunc(np.add, upd, idx, orig, [0]), _add_at(upd, idx, orig, [0]))


def test_scatter_add_partial_slices_and_bad_indices_take_add_at() -> None:
    upd = np.ones((4, 1, 3), np.float32)
    orig = np.zeros((5, 6), np.float32)
    idx = np.array([[0], [2], [2], [4]])
    assert not tm_tensor_run.add_rows(orig.copy(), upd, idx, [0])  # 3 of 6 columns
    np.testing.assert_array_equal(tm_tensor_run.scatter_ufunc(np.add, upd, idx, orig, [0]), _add_at(upd, idx, orig, [0]))
    bad = np.array([[0], [2], [7], [4]])
    assert not tm_tensor_run.add_rows(orig.copy(), np.ones((4, 1, 6), np.float32), bad, [0])
    with pytest.raises(IndexError):
        tm_tensor_run.scatter_ufunc(np.add, np.ones((4, 1, 6), np.float32), bad, orig, [0])


def test_scatter_add_of_distinct_rows_is_one_step() -> None:
    """Updates whose rows are all distinct (a max pool's gradient) are added in one
    fancy-indexed step: add.at's result, without its sort."""
    rng = np.random.default_rng(10)
    orig = rng.standard_normal((7, 3, 2)).astype(np.float32)
    idx = np.stack(np.unravel_index(rng.permutation(21)[:9], (7, 3)), 1)
    upd = rng.standard_normal((9, 1, 1, 2)).astype(np.float32)
    out = orig.copy()
    assert tm_tensor_run.add_rows(out, upd, idx, [0, 1])
    np.testing.assert_array_equal(out, _add_at(upd, idx, orig, [0, 1]))
