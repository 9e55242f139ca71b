"""Fused elementwise kernels (`shardc.runtime.codegen.kernels.fused`): a body runs as a few
loop nests and numpy ufuncs, with results equal to the numpy path; the kernel source
holds no IR text; `SHARDC_KERNELS=numpy` and missing numba keep the numpy path; the
disk cache lives only in a private directory."""

from __future__ import annotations

import os
import pickle
import re

import numpy as np
import pytest

from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.codegen.kernels import fused  # the run time (what the tests patch) is in fused_run
from shardc.runtime.execute.kernels import fused_run
from shardc.runtime.execute.structured_run import StructuredSpec

needs_numba = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")

M, N = 64, 1024  # 64K elements: above fused.MIN_ELEMENTS


def specs(cm, name: str = "f") -> list[StructuredSpec]:
    return [v for v in cm.functions[name].__globals__.values() if isinstance(v, StructuredSpec)]


def program(body: str, extra_args: str = "", extra_ins: str = "", extra_types: str = "", extra_maps: str = "", extra_bb: str = "", sym: str = "f", out: str = "f32") -> str:
    """%x: MxN, %y: N (broadcast over rows), %yt: NxM read transposed, then extras."""
    t = f"tensor<{M}x{N}x{out}>"
    return f"""
func.func @{sym}(%x: tensor<{M}x{N}xf32>, %y: tensor<{N}xf32>, %yt: tensor<{N}x{M}xf32>{extra_args}) -> {t} {{
  %e = tensor.empty() : {t}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (j, i)>{extra_maps}, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x, %y, %yt{extra_ins} : tensor<{M}x{N}xf32>, tensor<{N}xf32>, tensor<{N}x{M}xf32>{extra_types}) outs(%e : {t}) {{
  ^bb0(%a: f32, %b: f32, %c: f32{extra_bb}, %o: {out}):
{body}
  }} -> {t}
  return %r : {t}
}}
"""


GELU_LIKE = """    %h = arith.constant 0.5 : f32
    %k = arith.constant 0.044715 : f32
    %m = arith.mulf %a, %b : f32
    %m2 = arith.mulf %m, %m : f32
    %m3 = arith.mulf %m2, %k : f32
    %s = arith.addf %m3, %c : f32
    %t = math.tanh %s : f32
    %u = arith.mulf %t, %h : f32
    %v = arith.addf %u, %m : f32
    linalg.yield %v : f32"""


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((M, N)).astype(np.float32), rng.standard_normal(N).astype(np.float32), rng.standard_normal((N, M)).astype(np.float32))


def run_both(text: str, *args, monkeypatch) -> tuple[np.ndarray, np.ndarray, StructuredSpec]:
    cm = compile_text(text)
    (spec,) = [s for s in specs(cm) if s.kind == "elementwise"]
    monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    ref = cm.call("f", *args)
    monkeypatch.setenv("SHARDC_KERNELS", "auto")
    got = cm.call("f", *args)
    return np.asarray(got), np.asarray(ref), spec


def reference_gelu_like(x, y, yt):
    m = x * y
    return np.tanh(m * m * np.float32(0.044715) + yt.T) * np.float32(0.5) + m


def test_plan_splits_at_log_and_keeps_ir_text_out():
    """Two loop nests around numpy's SIMD log (no vectorizable version in the nest);
    sources are built from numbering only."""
    hostile = '@"f\\"); __import__(\\"os\\").system(\\"x\\") #"'
    loc = 'loc("x\\n__import__(\\"os\\").system(\\"x\\")")'
    body = GELU_LIKE.replace("%m = arith.mulf %a, %b : f32", f"%m = arith.mulf %a, %b : f32 {loc}").replace("math.tanh", "math.log")
    text = program(body).replace("@f(", f"{hostile}(")
    assert "__import__" in text and "loc(" in text
    cm = compile_text(text)
    (spec,) = [s for s in specs(cm, next(iter(cm.functions))) if s.kind == "elementwise"]
    k = spec.fused
    assert k is not None
    kinds = ["kernel" if st.source is not None else st.ufunc.__name__ for st in k.stages]
    assert kinds == ["kernel", "log", "kernel"]
    # tanh overwrites the first nest's temporary in place; the second nest writes a buffer
    # of its own, never one it reads (aliased arrays defeat LLVM's vectorization)
    assert k.stages[1].inplace
    assert [p[0] for p in k.params].count("const") == 2  # 0.5 and 0.044715: arguments, not text
    src = k.source
    assert "0.5" not in src and "0.044715" not in src and "os" not in src and "system" not in src
    # every identifier is a numbered name or one of the template's own
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", src))
    allowed = {"def", "kernel", "for", "in", "range", "n", "shape", "np", "float32", "math", "sqrt", "if", "else", "not", "or", "abs", "return"}
    assert all(w in allowed or re.fullmatch(r"[qrwxi]\d+", w) for w in words), words - allowed


def test_float32_exp_and_tanh_stay_in_the_nest():
    """Over float32, tanh (and exp) are `vecmath`'s vectorizable versions inside the one
    nest; over float64 they still leave it for numpy's ufunc."""
    (spec,) = [s for s in specs(compile_text(program(GELU_LIKE))) if s.kind == "elementwise"]
    assert spec.fused is not None and [st.source is not None for st in spec.fused.stages] == [True]
    assert "tanh32(" in spec.fused.source
    f64 = program(GELU_LIKE.replace(": f32", ": f64").replace("0.044715 : f64", "0.044715 : f64"), out="f64")
    f64 = f64.replace("xf32>", "xf64>").replace("%a: f32, %b: f32, %c: f32", "%a: f64, %b: f64, %c: f64")
    (spec64,) = [s for s in specs(compile_text(f64)) if s.kind == "elementwise"]
    assert [st.ufunc.__name__ if st.ufunc else "kernel" for st in spec64.fused.stages] == ["kernel", "tanh", "kernel"]


SOFTMAX_EXP = f"""
func.func @f(%x: tensor<{M}x{N}xf32>, %m: tensor<{M}xf32>) -> tensor<{M}x{N}xf32> {{
  %e = tensor.empty() : tensor<{M}x{N}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x, %m : tensor<{M}x{N}xf32>, tensor<{M}xf32>) outs(%e : tensor<{M}x{N}xf32>) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %v = math.exp %d : f32
    linalg.yield %v : f32
  }} -> tensor<{M}x{N}xf32>
  return %r : tensor<{M}x{N}xf32>
}}
"""


@needs_numba
def test_softmax_exp_is_one_nest_equal_to_numpy_path(monkeypatch):
    """exp(x - max): two ops, once left to numpy (no pass saved by a split), now one nest;
    equal to the numpy path within an ulp, infinities and NaN included."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((M, N)) * 30).astype(np.float32)
    x[0, :5] = [np.inf, -np.inf, np.nan, 200.0, -200.0]
    m = x[:, 5:].max(axis=1)
    got, ref, spec = run_both(SOFTMAX_EXP, x, m, monkeypatch=monkeypatch)
    assert spec.fused is not None and "exp32(" in spec.fused.source
    assert all(st.fn is not None for st in spec.fused.stages)

    def ordinal(a):  # float32 bit patterns on a monotonic integer line: ulps are differences
        i = a.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.isnan(got).sum() == 1
    finite = ~np.isnan(ref)
    assert np.abs(ordinal(got[finite]) - ordinal(ref[finite])).max() <= 2  # subnormals too


@needs_numba
def test_gelu_like_chain_equals_numpy_path(monkeypatch):
    x, y, yt = inputs()
    got, ref, spec = run_both(program(GELU_LIKE), x, y, yt, monkeypatch=monkeypatch)
    assert spec.fused is not None and all(st.fn is not None for st in spec.fused.stages if st.source)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(got, reference_gelu_like(x, y, yt), rtol=2e-5, atol=2e-5)


@needs_numba
def test_scalar_argument_compare_select_and_divide(monkeypatch):
    """A scalar operand (cast to the body's f32), cmpf + select, divide by zero (IEEE
    inf, not an exception), sqrt in the loop."""
    body = """    %z = arith.divf %a, %d : f32
    %p = arith.cmpf ogt, %z, %b : f32
    %q = math.sqrt %c : f32
    %w = arith.select %p, %z, %q : f32
    %v = arith.mulf %w, %a : f32
    linalg.yield %v : f32"""
    text = program(body, extra_args=", %s: f32", extra_ins=", %s", extra_types=", f32", extra_maps=", affine_map<(i, j) -> ()>", extra_bb=", %d: f32")
    x, y, yt = inputs(1)
    yt = np.abs(yt)
    for s in (np.float32(0.7), 0.0):
        got, ref, spec = run_both(text, x, y, yt, s, monkeypatch=monkeypatch)
        assert spec.fused is not None and spec.fused._failed is False
        np.testing.assert_allclose(got, ref, rtol=1e-6)


@needs_numba
def test_erf_is_the_numpy_paths_fit(monkeypatch, tmp_path):
    """erf over f32 arrays in the loop nest: the same rational fit as the numpy path (a
    GELU as torch-mlir writes it), NaN and infinities included."""
    body = """    %h = arith.constant 0.5 : f32
    %r2 = arith.constant 0.70710677 : f32
    %one = arith.constant 1.0 : f32
    %m = arith.mulf %a, %b : f32
    %s = arith.mulf %m, %r2 : f32
    %er = math.erf %s : f32
    %p = arith.addf %er, %one : f32
    %g = arith.mulf %m, %p : f32
    %v = arith.mulf %g, %h : f32
    linalg.yield %v : f32"""
    x, y, yt = inputs(3)
    x[0, :4] = [np.nan, np.inf, -np.inf, 30.0]
    got, ref, spec = run_both(program(body), x * 3, y, yt, monkeypatch=monkeypatch)
    assert spec.fused is not None and [st.source is not None for st in spec.fused.stages] == [True]
    np.testing.assert_allclose(got, ref, rtol=2e-7, atol=1e-7)  # NaN and inf where numpy has them


@needs_numba
def test_boolean_result(monkeypatch):
    body = """    %m = arith.mulf %a, %b : f32
    %s = arith.addf %m, %c : f32
    %p = arith.cmpf olt, %s, %a : f32
    linalg.yield %p : i1"""
    got, ref, spec = run_both(program(body, out="i1"), *inputs(2), monkeypatch=monkeypatch)
    assert spec.fused is not None and got.dtype == np.bool_
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize(
    "body",
    [
        # a lone op: one pass either way
        "    %m = arith.mulf %a, %b : f32\n    linalg.yield %m : f32",
        # a copy
        "    linalg.yield %a : f32",
        # linalg.index
        "    %i = linalg.index 1 : index\n    %f = arith.index_cast %i : index to i64\n    %g = arith.sitofp %f : i64 to f32\n    %v = arith.mulf %g, %a : f32\n    %w = arith.addf %v, %b : f32\n    linalg.yield %w : f32",
    ],
)
def test_bodies_that_stay_on_numpy(body):
    (spec,) = [s for s in specs(compile_text(program(body))) if s.kind == "elementwise"]
    assert spec.fused is None


@needs_numba
def test_switched_off_and_small_arrays_take_the_numpy_path(monkeypatch):
    cm = compile_text(program(GELU_LIKE))
    (spec,) = [s for s in specs(cm) if s.kind == "elementwise"]
    calls: list[int] = []
    real = fused.FusedKernel._load
    monkeypatch.setattr(fused.FusedKernel, "_load", lambda self: calls.append(1) or real(self))
    monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    cm.call("f", *inputs())
    assert calls == [] and all(st.fn is None for st in spec.fused.stages)
    monkeypatch.setenv("SHARDC_KERNELS", "auto")
    monkeypatch.setattr(fused_run, "MIN_ELEMENTS", M * N + 1)
    cm.call("f", *inputs())
    assert calls == []


def test_missing_numba_keeps_numpy(monkeypatch):
    monkeypatch.setattr(fused_run, "_NUMBA", [None])
    assert not fused.enabled()
    cm = compile_text(program(GELU_LIKE))
    np.testing.assert_allclose(cm.call("f", *inputs()), reference_gelu_like(*inputs()), rtol=2e-5, atol=2e-5)


def test_plan_pickles_without_compiled_code():
    (spec,) = [s for s in specs(compile_text(program(GELU_LIKE))) if s.kind == "elementwise"]
    spec.fused.stages[0].fn = lambda *a: None
    back = pickle.loads(pickle.dumps(spec.fused))
    assert back.source == spec.fused.source and all(st.fn is None for st in back.stages)


def test_cache_dir_is_private_and_refused_when_shared(tmp_path, monkeypatch):
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path / "c"))
    d = fused.cache_dir()
    assert d is not None and os.stat(d).st_mode & 0o777 == 0o700
    os.chmod(d, 0o777)
    assert fused.cache_dir() is None
    os.chmod(d, 0o700)
    link = tmp_path / "l"
    os.makedirs(link)
    os.symlink(tmp_path / "elsewhere", link / "kernels")
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(link))
    assert fused.cache_dir() is None


@needs_numba
def test_disk_cache_file_is_the_source(tmp_path, monkeypatch):
    """The kernel's file in the private directory holds exactly its source and numba's
    cache sits beside it; a file changed behind our back is rewritten, and what runs is
    always the source itself."""
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path))
    src = "def kernel(q0, w0):\n    n = w0.shape\n    for i0 in range(n[0]):\n        w0[i0] = q0[i0] * np.float32(3)\n"
    out = np.empty(4, np.float32)
    for tamper in (False, True):
        monkeypatch.setattr(fused_run, "_COMPILED", {})
        (path,) = [p for p in (tmp_path / "kernels").glob("k_*.py")] if tamper else [None]
        if tamper:
            path.write_text(src.replace("3", "4"))
        fused_run.compile_kernel(src)(np.arange(4, dtype=np.float32), out)
        np.testing.assert_array_equal(out, [0, 3, 6, 9])
    (path,) = [p for p in (tmp_path / "kernels").glob("k_*.py")]  # beside the helpers' h_*.py
    assert path.read_text() == src
    assert any(p.suffix in (".nbi", ".nbc") for p in (tmp_path / "kernels" / "__pycache__").iterdir())


@pytest.mark.slow
@needs_numba
def test_gpt_step_equal_with_and_without_kernels(monkeypatch):
    """One training step of a GPT big enough for kernels: loss and every updated
    parameter equal the numpy path's within float32 rounding."""
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    cfg = GPTConfig(n_layer=1, n_head=2, n_embd=64, block_size=64, vocab_size=64)
    prog = StepProgram.build(cfg, 8, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN)
    tok = np.random.default_rng(0).integers(0, 64, (8, 64)).astype(np.int32)
    mb = [(tok, np.roll(tok, -1, axis=1))]
    results = {}
    for mode in ("numpy", "auto"):
        monkeypatch.setenv("SHARDC_KERNELS", mode)
        st = RankState(prog, 0, init_params(cfg, 0))
        zeros = [np.zeros(np.shape(p), np.float32) for p in st.params]
        _, *grads = prog.call("train_step", *st.params, *zeros, st._data(tok), st._data(mb[0][1]), st.vocab_ids)
        loss = st.train_step(mb, 1e-3)
        results[mode] = (loss, [np.asarray(p).copy() for p in st.params], [np.asarray(g) for g in grads])
    ran = [s.fused for s in specs(prog.compiled, "train_step") if s.fused is not None and any(x.fn for x in s.fused.stages)]
    assert ran, "no fused kernel ran in the step"
    assert results["auto"][0] == pytest.approx(results["numpy"][0], rel=1e-6)
    for a, b, ga, gb in zip(results["auto"][1], results["numpy"][1], results["auto"][2], results["numpy"][2]):
        scale = float(np.abs(gb).max())
        np.testing.assert_allclose(ga, gb, rtol=1e-4, atol=1e-5 * scale)
        # AdamW moves every entry by about lr whatever the gradient's size: where the
        # gradient is rounding noise (the key bias's is zero in exact arithmetic: softmax
        # ignores a per-row shift) its sign, and so the update, is noise on either path
        signal = np.abs(gb) > 1e-4 * scale
        np.testing.assert_allclose(a[signal], b[signal], rtol=1e-5, atol=1e-6)


LAYERNORM_EPILOGUE = f"""
func.func @f(%x: tensor<{M}x{N}xf32>, %mean: tensor<{M}x1xf32>, %var: tensor<{M}x1xf32>, %w: tensor<{N}xf32>) -> tensor<{M}x{N}xf32> {{
  %e = tensor.empty() : tensor<{M}x{N}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, 0)>, affine_map<(i, j) -> (i, 0)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x, %mean, %var, %w : tensor<{M}x{N}xf32>, tensor<{M}x1xf32>, tensor<{M}x1xf32>, tensor<{N}xf32>) outs(%e : tensor<{M}x{N}xf32>) {{
  ^bb0(%a: f32, %m: f32, %v: f32, %g: f32, %o: f32):
    %eps = arith.constant 1.0e-05 : f32
    %ve = arith.addf %v, %eps : f32
    %rs = math.rsqrt %ve : f32
    %d = arith.subf %a, %m : f32
    %n = arith.mulf %d, %rs : f32
    %y = arith.mulf %n, %g : f32
    linalg.yield %y : f32
  }} -> tensor<{M}x{N}xf32>
  return %r : tensor<{M}x{N}xf32>
}}
"""


def test_row_invariant_work_leaves_the_innermost_loop():
    """Arguments broadcast along the innermost loop (a layernorm's per-row mean and
    variance) are loaded once per row, and what reads only them (rsqrt(var + eps)) is
    computed there: the variant's source has the rsqrt outside `for i1`, the plain one
    inside; both are built from numbering only."""
    cm = compile_text(LAYERNORM_EPILOGUE)
    (spec,) = [s for s in specs(cm) if s.kind == "elementwise"]
    assert spec.fused is not None
    (st,) = [s for s in spec.fused.stages if s.source is not None]
    assert st.nest is not None
    invariant = frozenset((q, 1) for q, (kind, what) in enumerate(spec.fused.params) if kind == "array" and what in (1, 2))
    plain, hoisted = st.nest.render(frozenset()), st.nest.render(invariant)
    assert plain == st.source

    def depth_of_sqrt(src: str) -> int:
        (line,) = [ln for ln in src.splitlines() if "math.sqrt" in ln]
        return (len(line) - len(line.lstrip())) // 4

    assert depth_of_sqrt(plain) == 3 and depth_of_sqrt(hoisted) == 2
    assert "0]" in hoisted  # the per-row loads read column 0 of the broadcast arguments


@needs_numba
def test_row_invariant_variant_equals_numpy_path(monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((M, N)).astype(np.float32)
    mean = x.mean(axis=1, keepdims=True).astype(np.float32)
    var = x.var(axis=1, keepdims=True).astype(np.float32)
    w = rng.standard_normal(N).astype(np.float32)
    cm = compile_text(LAYERNORM_EPILOGUE)
    (spec,) = [s for s in specs(cm) if s.kind == "elementwise"]
    monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    ref = np.asarray(cm.call("f", x, mean, var, w))
    monkeypatch.setenv("SHARDC_KERNELS", "auto")
    got = np.asarray(cm.call("f", x, mean, var, w))
    (st,) = [s for s in spec.fused.stages if s.source is not None]
    assert st.variants and all(fn is not None and fn is not st.fn for fn in st.variants.values())
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-6)
    want = (x - mean) / np.sqrt(var + np.float32(1e-5)) * w
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@needs_numba
def test_broadcast_arguments_are_read_unbroadcast(monkeypatch):
    """A bias broadcast over rows reaches the nest as its own (1, N) array read at index
    0 along the rows, never as a stride-0 view (which defeats LLVM's vectorization: a
    GELU nest ran 15x slower); the result equals the numpy path."""
    x, y, yt = inputs(4)
    got, ref, spec = run_both(program(GELU_LIKE), x, y, yt, monkeypatch=monkeypatch)
    (st,) = spec.fused.stages
    q_y = [q for q, (kind, what) in enumerate(spec.fused.params) if kind == "array" and what == 1]
    assert list(st.variants) == [frozenset({(q_y[0], 0)})] and st.variants[frozenset({(q_y[0], 0)})] is not None
    assert f"q{q_y[0]}[0, i1]" in st.nest.render(frozenset({(q_y[0], 0)}))
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-6)


@needs_numba
def test_a_refused_variant_takes_the_numpy_path(monkeypatch):
    """Unbroadcast arguments must not reach the plain nest (it would read past them):
    when numba refuses the variant, the call takes the numpy path."""
    x, y, yt = inputs(6)
    cm = compile_text(program(GELU_LIKE))
    (spec,) = [s for s in specs(cm) if s.kind == "elementwise"]
    monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    ref = np.asarray(cm.call("f", x, y, yt))
    monkeypatch.setenv("SHARDC_KERNELS", "auto")
    real = fused_run.compile_kernel
    monkeypatch.setattr(fused_run, "compile_kernel", lambda src: (_ for _ in ()).throw(fused_run.KernelRefused("refused")) if "[0, i1]" in src else real(src))
    assert spec.fused([x, y[None, :], yt.T, np.empty_like(x)], (M, N)) is None
    np.testing.assert_array_equal(np.asarray(cm.call("f", x, y, yt)), ref)
