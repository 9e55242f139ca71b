"""torch-mlir's linalg-on-tensors IR executed by the runtime, vectorized: the committed
exports against PyTorch's results, and the body shapes they are made of (max with
argmax, gathers through tensor.extract, vectorized cf.assert, erf, dense_resource
constants, i1 and f64 values in f32 programs) op by op against numpy."""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.runtime import compile_module, compile_text
from shardc.runtime.codegen.builder import CompileError
from shardc.runtime.codegen.compile import RuntimeExecutionError

DATA = Path(__file__).parents[2] / "data" / "torch_mlir"


def _compile(text: str, name: str = "input.mlir"):
    """Compile with file locations (as shardc-run parses), failing on any runtime warning
    (the general path, a loop over reduction points, warns)."""
    module = LocatingParser(make_context(), text, name).parse_module()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return compile_module(module, name)


def _npz_args(name: str) -> tuple[list[np.ndarray], np.ndarray]:
    d = np.load(DATA / f"{name}.npz")
    return [d[k] for k in d.files if k != "result"], d["result"]


# --- the committed exports --------------------------------------------------------------


@pytest.mark.parametrize("name", ["mlp", "gpt", "gpt_2layer"])
def test_fixture_equals_pytorch(name: str) -> None:
    cm = _compile((DATA / f"{name}.mlir").read_text(), f"{name}.mlir")
    args, expected = _npz_args(name)
    (fn,) = cm.functions
    assert len(args) == len(cm.signatures[fn].function_type.inputs.data)
    got = cm.call(fn, *args)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.abs(got - expected).max() < 1e-4


@pytest.mark.parametrize("name", ["gpt", "gpt_2layer"])
def test_gpt_runs_without_python_loops(name: str) -> None:
    """Every op of the GPT exports takes a whole-array path: no loop in the generated
    code, no general-path warning (raised as an error by _compile), and the softmax's
    max/argmax and the embedding gathers take their own paths."""
    cm = _compile((DATA / f"{name}.mlir").read_text(), f"{name}.mlir")
    assert not re.search(r"^\s*(for|while) ", cm.source, re.M)
    kinds = [v.kind for v in cm.functions["gpt"].__globals__.values() if type(v).__name__ == "StructuredSpec"]
    assert "argreduce" in kinds and "general" not in kinds
    assert "_gather" in cm.source


def _blob_arrays(text: str) -> dict[str, np.ndarray]:
    """The float32 blobs of a dialect_resources section, decoded here (alignment word,
    then little-endian elements) independently of the runtime's decoder."""
    out = {}
    for key, hexdata in re.findall(r"(torch_tensor_[\w.]+): \"0x([0-9A-F]+)\"", text):
        out[key] = np.frombuffer(bytes.fromhex(hexdata)[4:], dtype="<f4")
    return out


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_mlp_baked_equals_its_weights() -> None:
    """Linear(8, 16), tanh, Linear(16, 4), softmax with the weights from the blobs."""
    text = (DATA / "mlp_baked.mlir").read_text()
    cm = _compile(text, "mlp_baked.mlir")
    b = _blob_arrays(text)
    w1, b1 = b["torch_tensor_16_8_torch.float32"].reshape(16, 8), b["torch_tensor_16_torch.float32"]
    w2, b2 = b["torch_tensor_4_16_torch.float32"].reshape(4, 16), b["torch_tensor_4_torch.float32"]
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    expected = _softmax(np.tanh(x @ w1.T + b1) @ w2.T + b2)
    assert np.abs(cm.call("mlp_baked", x) - expected).max() < 1e-6


@pytest.mark.slow
def test_live_exports_equal_pytorch() -> None:
    """Exported now (another seed, 4 heads, batch 3): the GPT, and the MLP with baked weights."""
    pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
    pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")
    import torch

    from shardc.testing.torch_models import GPTConfig, gpt_export, mlp_baked_export, reference

    model, inputs, exported = gpt_export(GPTConfig(n_head=4, n_embd=16, block_size=8), batch=3, seed=7)
    ref = reference(model, inputs, exported)
    cm = _compile(exported.text)
    got = cm.call("gpt", *[ref[n] for n in [*exported.input_names, *exported.param_names]])
    assert np.abs(got - ref["result"]).max() < 1e-4

    text = mlp_baked_export(seed=5)
    torch.manual_seed(5)  # the model mlp_baked_export builds, rebuilt from the same seed
    nn = torch.nn
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4), nn.Softmax(-1))
    x = torch.randn(2, 8)
    with torch.no_grad():
        expected = model(x).numpy()
    assert np.abs(_compile(text).call("mlp_baked", x.numpy()) - expected).max() < 1e-6


# --- max with argmax ---------------------------------------------------------------------

ARGMAX = """
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @f(%x: tensor<5x7x{t}>, %v0: tensor<5x{t}>, %i0: tensor<5xi64>) -> (tensor<5x{t}>, tensor<5xi64>) {{
  %r:2 = linalg.generic {{indexing_maps = [#in, #out, #out], iterator_types = ["parallel", "reduction"]}} ins(%x : tensor<5x7x{t}>) outs(%v0, %i0 : tensor<5x{t}>, tensor<5xi64>) {{
  ^bb0(%in: {t}, %out: {t}, %out_i: i64):
    %i = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i64
    %m = {comb} %in, %out : {t}
    %c = {cmp}, {a}, {b} : {t}
    %s = arith.select %c, %ii, %out_i : i64
    linalg.yield {yields} : {t}, i64
  }} -> (tensor<5x{t}>, tensor<5xi64>)
  return %r#0, %r#1 : tensor<5x{t}>, tensor<5xi64>
}}"""


def _argmax_text(comb: str, cmp: str, swap: bool = False, t: str = "f32") -> str:
    a, b = ("%out", "%in") if swap else ("%in", "%out")
    return ARGMAX.format(t=t, comb=comb, cmp=cmp, a=a, b=b, yields="%m, %s")


def _sequential(x, v0, i0, better):
    """The loop the body describes, element by element."""
    v, i = v0.copy(), i0.copy()
    for r in range(x.shape[0]):
        for j in range(x.shape[1]):
            if better(x[r, j], v[r]):
                i[r] = j
            v[r] = max(v[r], x[r, j]) if better(1, 0) else min(v[r], x[r, j])
    return v, i


@pytest.mark.parametrize(
    "comb,cmp,swap,better",
    [
        ("arith.maximumf", "arith.cmpf ogt", False, lambda a, b: a > b),  # torch's max(dim)
        ("arith.maximumf", "arith.cmpf oge", False, lambda a, b: a >= b),  # last of ties
        ("arith.maximumf", "arith.cmpf olt", True, lambda a, b: a > b),  # out < in
        ("arith.minimumf", "arith.cmpf olt", False, lambda a, b: a < b),  # argmin
        ("arith.maxnumf", "arith.cmpf ugt", False, lambda a, b: a > b),
    ],
)
def test_argmax_reduction(comb, cmp, swap, better) -> None:
    cm = _compile(_argmax_text(comb, cmp, swap))
    spec = next(v for v in cm.functions["f"].__globals__.values() if type(v).__name__ == "StructuredSpec")
    assert spec.kind == "argreduce"
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, (5, 7)).astype(np.float32)  # many ties
    v0 = np.array([-np.inf, 10, -10, 0, 2], np.float32) * (1 if better(1, 0) else -1)
    i0 = np.full(5, -1, np.int64)  # rows where the init wins keep it
    v, i = cm.call("f", x, v0, i0)
    ev, ei = _sequential(x, v0, i0, better)
    np.testing.assert_array_equal(v, ev)
    np.testing.assert_array_equal(i, ei)


def test_argmax_integer_and_result_order() -> None:
    text = ARGMAX.format(t="i32", comb="arith.maxsi", cmp="arith.cmpi sgt", a="%in", b="%out", yields="%m, %s")
    cm = _compile(text)
    x = np.random.default_rng(1).integers(-50, 50, (5, 7)).astype(np.int32)
    v, i = cm.call("f", x, np.full(5, -100, np.int32), np.zeros(5, np.int64))
    np.testing.assert_array_equal(v, x.max(1))
    np.testing.assert_array_equal(i, x.argmax(1))


def test_argmax_lookalike_runs_the_general_path() -> None:
    """The index taken from the wrong dim is not an argmax: the exact, slow path runs."""
    text = _argmax_text("arith.maximumf", "arith.cmpf ogt").replace("linalg.index 1", "linalg.index 0")
    with pytest.warns(RuntimeWarning, match="general vectorized path"):
        cm = compile_text(text)
    x = np.random.default_rng(2).standard_normal((5, 7)).astype(np.float32)
    v, i = cm.call("f", x, np.full(5, -np.inf, np.float32), np.full(5, -1, np.int64))
    np.testing.assert_array_equal(v, x.max(1))
    np.testing.assert_array_equal(i, np.arange(5))


# --- gathers and vectorized assertions -------------------------------------------------

EMBED = """
#tok = affine_map<(d0, d1, d2) -> (d0, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @f(%tok: tensor<3x5xi64>, %w: tensor<11x4xf32>) -> tensor<3x5x4xf32> {
  %c0_i64 = arith.constant 0 : i64
  %c11 = arith.constant 11 : index
  %0 = tensor.empty() : tensor<3x5x4xf32>
  %1 = linalg.generic {indexing_maps = [#tok, #out], iterator_types = ["parallel", "parallel", "parallel"]} ins(%tok : tensor<3x5xi64>) outs(%0 : tensor<3x5x4xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %j = linalg.index 2 : index
    %lt = arith.cmpi slt, %i, %c11 : index
    cf.assert %lt, "index must be smaller than dim size"
    %ge = arith.cmpi sge, %in, %c0_i64 : i64
    cf.assert %ge, "index must be larger or equal to 0"
    %e = tensor.extract %w[%i, %j] : tensor<11x4xf32>
    linalg.yield %e : f32
  } -> tensor<3x5x4xf32>
  return %1 : tensor<3x5x4xf32>
}"""


def test_embedding_gather() -> None:
    cm = _compile(EMBED)
    rng = np.random.default_rng(4)
    tok = rng.integers(0, 11, (3, 5))
    w = rng.standard_normal((11, 4)).astype(np.float32)
    np.testing.assert_array_equal(cm.call("f", tok, w), w[tok])


def test_gather_of_part_of_an_axis() -> None:
    """An index grid shorter than the axis it reads (not a whole-row gather)."""
    text = EMBED.replace("%w: tensor<11x4xf32>", "%w: tensor<11x6xf32>").replace("%w[%i, %j] : tensor<11x4xf32>", "%w[%i, %j] : tensor<11x6xf32>")
    cm = _compile(text)
    rng = np.random.default_rng(9)
    tok = rng.integers(0, 11, (3, 5))
    w = rng.standard_normal((11, 6)).astype(np.float32)
    np.testing.assert_array_equal(cm.call("f", tok, w), w[tok][:, :, :4])


def test_gather_of_columns() -> None:
    """The grid on the first axis, the tokens on the second: `w.T[tok]`."""
    text = EMBED.replace("%w: tensor<11x4xf32>", "%w: tensor<4x11xf32>").replace("%w[%i, %j] : tensor<11x4xf32>", "%w[%j, %i] : tensor<4x11xf32>")
    cm = _compile(text)
    rng = np.random.default_rng(10)
    tok = rng.integers(0, 11, (3, 5))
    w = rng.standard_normal((4, 11)).astype(np.float32)
    np.testing.assert_array_equal(cm.call("f", tok, w), w.T[tok])


@pytest.mark.parametrize("bad,message", [(11, "index must be smaller than dim size"), (-1, "index must be larger or equal to 0")])
def test_vectorized_assert_names_message_and_location(bad, message) -> None:
    cm = _compile(EMBED, "embed.mlir")
    tok = np.zeros((3, 5), np.int64)
    tok[2, 1] = bad
    with pytest.raises(RuntimeExecutionError) as info:
        cm.call("f", tok, np.zeros((11, 4), np.float32))
    line = 1 + next(k for k, ln in enumerate(EMBED.splitlines()) if message in ln)
    assert f'loc("embed.mlir":{line}:5)' in str(info.value)
    assert f"assertion failed: {message}" in str(info.value)


def test_assert_message_is_data_not_code() -> None:
    """A message written to break out of a string literal stays a message."""
    text = EMBED.replace("index must be smaller than dim size", '\\"); import os; (\\"')
    cm = _compile(text)
    assert "import os" not in cm.source
    tok = np.full((3, 5), 11, np.int64)
    with pytest.raises(RuntimeExecutionError, match='assertion failed: "\\); import os'):
        cm.call("f", tok, np.zeros((11, 4), np.float32))


GATHER2 = """
#m = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%rows: tensor<4x6xi64>, %cols: tensor<4x6xi64>, %w: tensor<9x8xf32>) -> tensor<4x6xf32> {
  %0 = tensor.empty() : tensor<4x6xf32>
  %1 = linalg.generic {indexing_maps = [#m, #m, #m], iterator_types = ["parallel", "parallel"]} ins(%rows, %cols : tensor<4x6xi64>, tensor<4x6xi64>) outs(%0 : tensor<4x6xf32>) {
  ^bb0(%r: i64, %c: i64, %out: f32):
    %i = arith.index_cast %r : i64 to index
    %j = arith.index_cast %c : i64 to index
    %e = tensor.extract %w[%i, %j] : tensor<9x8xf32>
    linalg.yield %e : f32
  } -> tensor<4x6xf32>
  return %1 : tensor<4x6xf32>
}"""


def test_elementwise_gather_and_bounds() -> None:
    cm = _compile(GATHER2, "g.mlir")
    rng = np.random.default_rng(5)
    rows, cols = rng.integers(0, 9, (4, 6)), rng.integers(0, 8, (4, 6))
    w = rng.standard_normal((9, 8)).astype(np.float32)
    np.testing.assert_array_equal(cm.call("f", rows, cols, w), w[rows, cols])
    cols[0, 0] = 8
    with pytest.raises(RuntimeExecutionError, match=r"'tensor.extract' at loc\(\"g.mlir\":\d+:\d+\).*index 8 out of bounds for dimension 1 of size 8"):
        cm.call("f", rows, cols, w)


def test_gather_in_tensor_generate_is_vectorized() -> None:
    text = """
func.func @f(%w: tensor<6x3xf32>) -> tensor<3x6xf32> {
  %t = tensor.generate {
  ^bb0(%i: index, %j: index):
    %e = tensor.extract %w[%j, %i] : tensor<6x3xf32>
    tensor.yield %e : f32
  } : tensor<3x6xf32>
  return %t : tensor<3x6xf32>
}"""
    cm = _compile(text)
    assert "ndindex" not in cm.source
    w = np.arange(18, dtype=np.float32).reshape(6, 3)
    np.testing.assert_array_equal(cm.call("f", w), w.T)


# --- erf --------------------------------------------------------------------------------


def test_erf_within_one_ulp_of_correctly_rounded() -> None:
    from shardc.runtime.execute.kernels.math_run import erf as _erf

    x = np.concatenate([np.linspace(-6, 6, 200001), [0.0, -0.0, 1e-30, 3.9, 4.0, 4.1, 30.0, np.inf, -np.inf]]).astype(np.float32)
    expected = np.array([math.erf(v) for v in x.astype(np.float64)]).astype(np.float32)
    got = _erf(x)
    assert got.dtype == np.float32
    ulps = np.abs(got.view(np.int32).astype(np.int64) - expected.view(np.int32).astype(np.int64))
    assert ulps.max() <= 1
    assert np.isnan(_erf(np.float32(np.nan)))
    assert isinstance(_erf(np.float32(0.5)), np.float32)
    assert _erf(np.float64(0.5)) == math.erf(0.5)


# --- the other ops of the exports, in linalg bodies and on tensors -----------------------


def _elementwise(body: str, ins: list[str], out: str, shape=(3, 4)) -> str:
    s = "x".join(map(str, shape))
    ident = "affine_map<(d0, d1) -> (d0, d1)>"
    args = ", ".join(f"%a{k}: tensor<{s}x{t}>" for k, t in enumerate(ins))
    bb = ", ".join([f"%x{k}: {t}" for k, t in enumerate(ins)] + [f"%o: {out}"])
    return f"""func.func @f({args}) -> tensor<{s}x{out}> {{
  %e = tensor.empty() : tensor<{s}x{out}>
  %r = linalg.generic {{indexing_maps = [{", ".join([ident] * (len(ins) + 1))}], iterator_types = ["parallel", "parallel"]}} ins({", ".join(f"%a{k}" for k in range(len(ins)))} : {", ".join(f"tensor<{s}x{t}>" for t in ins)}) outs(%e : tensor<{s}x{out}>) {{
  ^bb0({bb}):
{body}
  }} -> tensor<{s}x{out}>
  return %r : tensor<{s}x{out}>
}}"""


F = np.float32
CASES = {
    "truncf_f64_const": ("%c = arith.constant 0.59460355750136051 : f64\n%t = arith.truncf %c : f64 to f32\n%y = arith.mulf %x0, %t : f32", ["f32"], "f32", lambda x: x * F(0.59460355750136051)),
    "extf_cmpf_oeq_ninf": ("%c = arith.constant 0xFFF0000000000000 : f64\n%w = arith.extf %x0 : f32 to f64\n%y = arith.cmpf oeq, %w, %c : f64", ["f32"], "i1", lambda x: x == -np.inf),
    "extui": ("%y = arith.extui %x0 : i1 to i64", ["i1"], "i64", lambda x: x.astype(np.int64)),
    "index_cast": ("%i = arith.index_cast %x0 : i64 to index\n%y = arith.index_cast %i : index to i32", ["i64"], "i32", lambda x: x.astype(np.int32)),
    "remsi": ("%y = arith.remsi %x0, %x1 : i64", ["i64", "i64"], "i64", lambda a, b: np.fmod(a, b)),
    "minsi_maxsi": ("%m = arith.minsi %x0, %x1 : i64\n%n = arith.maxsi %x0, %x1 : i64\n%y = arith.subi %n, %m : i64", ["i64", "i64"], "i64", lambda a, b: np.abs(a - b)),
    "xori_andi_i1": ("%n = arith.xori %x0, %x1 : i1\n%y = arith.andi %n, %x0 : i1", ["i1", "i1"], "i1", lambda a, b: (a ^ b) & a),
    "cmpi_select": ("%c = arith.cmpi sle, %x0, %x1 : i64\n%y = arith.select %c, %x0, %x1 : i64", ["i64", "i64"], "i64", np.minimum),
    "fpowi": ("%c = arith.constant 3 : i64\n%y = math.fpowi %x0, %c : f32, i64", ["f32"], "f32", lambda x: x**3),
    "rsqrt_exp_log_tanh": ("%a = math.exp %x0 : f32\n%b = math.log %a : f32\n%c = math.tanh %b : f32\n%d = math.absf %c : f32\n%y = math.rsqrt %d : f32", ["f32"], "f32", lambda x: 1 / np.sqrt(np.abs(np.tanh(x)))),
    "gelu_erf": ("%c = arith.constant 1.41421354 : f32\n%h = arith.constant 5.000000e-01 : f32\n%one = arith.constant 1.0 : f32\n%d = arith.divf %x0, %c : f32\n%er = math.erf %d : f32\n%a = arith.addf %er, %one : f32\n%m = arith.mulf %a, %h : f32\n%y = arith.mulf %x0, %m : f32", ["f32"], "f32", None),
}


def test_extf_compared_with_a_narrow_constant_skips_the_copy() -> None:
    """extf then cmpf against -inf reads the float32 array itself; against 0.1, which
    float32 does not hold, it widens (x == f32(0.1) is true, extf(x) == 0.1 is not)."""
    body = "    %c = arith.constant {c} : f64\n    %w = arith.extf %x0 : f32 to f64\n    %y = arith.cmpf oeq, %w, %c : f64\n    linalg.yield %y : i1"
    x = np.array([[-np.inf, 0.1, 1, 2]] * 3, np.float32)
    narrow = _compile(_elementwise(body.format(c="0xFFF0000000000000"), ["f32"], "i1"))
    assert "float64" not in narrow.source
    np.testing.assert_array_equal(narrow.call("f", x), x == -np.inf)
    wide = _compile(_elementwise(body.format(c="1.000000e-01"), ["f32"], "i1"))
    assert "float64" in wide.source
    assert not wide.call("f", x).any()


def _rand(rng, ty, shape=(3, 4)):
    if ty == "i1":
        return rng.integers(0, 2, shape).astype(bool)
    if ty.startswith("i"):
        v = rng.integers(-20, 20, shape)
        return np.where(v == 0, 7, v).astype(np.int64 if ty == "i64" else np.int32)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("case", sorted(CASES))
def test_body_ops(case) -> None:
    body, ins, out, ref = CASES[case]
    body = "\n".join("    " + ln for ln in body.splitlines()) + f"\n    linalg.yield %y : {out}"
    cm = _compile(_elementwise(body, ins, out))
    rng = np.random.default_rng(6)
    args = [_rand(rng, t) for t in ins]
    if case == "extf_cmpf_oeq_ninf":
        args[0][0, 1] = -np.inf
    got = cm.call("f", *args)
    if ref is None:  # GELU: against float64 math.erf
        x = args[0].astype(np.float64)
        ref_v = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel()]).reshape(x.shape)
        np.testing.assert_allclose(got, ref_v, rtol=1e-6, atol=1e-7)
        return
    expected = ref(*args)
    assert got.dtype == expected.dtype if out != "i32" else got.dtype == np.int32
    np.testing.assert_allclose(got, expected, rtol=2e-6)


TENSOR_OPS = """
#m3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>, %v: tensor<4xf32>) -> (tensor<6x5xf32>, tensor<3x2x4xf32>, tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x7x4xf32>, tensor<2x3x4xf32>, tensor<2x3x6xf32>) {
  %z = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<2x3x5xf32>
  %f0 = linalg.fill ins(%z : f32) outs(%e0 : tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %bm = linalg.batch_matmul ins(%a, %b : tensor<2x3x4xf32>, tensor<2x4x5xf32>) outs(%f0 : tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %c = tensor.collapse_shape %bm [[0, 1], [2]] : tensor<2x3x5xf32> into tensor<6x5xf32>
  %e1 = tensor.empty() : tensor<3x2x4xf32>
  %t = linalg.transpose ins(%a : tensor<2x3x4xf32>) outs(%e1 : tensor<3x2x4xf32>) permutation = [1, 0, 2]
  %e2 = tensor.empty() : tensor<2x3x4xf32>
  %bc = linalg.broadcast ins(%v : tensor<4xf32>) outs(%e2 : tensor<2x3x4xf32>) dimensions = [0, 1]
  %e3 = tensor.empty() : tensor<2x3xf32>
  %f3 = linalg.fill ins(%z : f32) outs(%e3 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %red = linalg.reduce ins(%a : tensor<2x3x4xf32>) outs(%f3 : tensor<2x3xf32>) dimensions = [2]
    (%x: f32, %acc: f32) {
      %s = arith.addf %x, %acc : f32
      linalg.yield %s : f32
    }
  %cat = tensor.concat dim(1) %a, %a, %bc : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x9x4xf32>
  %sl = tensor.extract_slice %cat[0, 1, 0] [2, 7, 4] [1, 1, 1] : tensor<2x9x4xf32> to tensor<2x7x4xf32>
  %ins = tensor.insert_slice %a into %e2[0, 0, 0] [2, 3, 4] [1, 1, 1] : tensor<2x3x4xf32> into tensor<2x3x4xf32>
  %pad = tensor.pad %a low[0, 0, 1] high[0, 0, 1] {
  ^bb0(%i: index, %j: index, %k: index):
    tensor.yield %z : f32
  } : tensor<2x3x4xf32> to tensor<2x3x6xf32>
  return %c, %t, %bc, %red, %sl, %ins, %pad : tensor<6x5xf32>, tensor<3x2x4xf32>, tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x7x4xf32>, tensor<2x3x4xf32>, tensor<2x3x6xf32>
}"""


def test_tensor_and_named_ops() -> None:
    cm = _compile(TENSOR_OPS)
    rng = np.random.default_rng(7)
    a, b, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 4), (2, 4, 5), (4,)))
    c, t, bc, red, sl, ins, pad = cm.call("f", a, b, v)
    np.testing.assert_allclose(c, (a @ b).reshape(6, 5), rtol=1e-5)
    np.testing.assert_array_equal(t, a.transpose(1, 0, 2))
    np.testing.assert_array_equal(bc, np.broadcast_to(v, (2, 3, 4)))
    np.testing.assert_allclose(red, a.sum(2), rtol=1e-5)
    np.testing.assert_array_equal(sl, np.concatenate([a, a, bc], 1)[:, 1:8])
    np.testing.assert_array_equal(ins, a)
    np.testing.assert_array_equal(pad, np.pad(a, ((0, 0), (0, 0), (1, 1))))


def test_dense_resource_constant_and_missing_blob() -> None:
    from xdsl.dialects.builtin import Float32Type, TensorType

    from shardc.ir.resources import dense_resource_attr

    w = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    attr = dense_resource_attr(w, TensorType(Float32Type(), [2, 3]), "h3_test_blob")
    key = attr.resource_handle.data
    text = f"""func.func @f() -> tensor<2x3xf32> {{
  %c = arith.constant dense_resource<{key}> : tensor<2x3xf32>
  return %c : tensor<2x3xf32>
}}"""
    np.testing.assert_array_equal(_compile(text).call("f"), w)
    with pytest.raises(CompileError, match=r"runtime: 'arith.constant' at loc\(\"m.mlir\":2:\d+\).*no blob named 'h3_no_such_blob'"):
        _compile(text.replace(key, "h3_no_such_blob"), "m.mlir")


# --- fusion keeps the new body shapes --------------------------------------------------

FUSED = """
#m = affine_map<(d0, d1) -> (d0, d1)>
#tok = affine_map<(d0, d1, d2) -> (d0, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @f(%x: tensor<3x5xf32>, %tok: tensor<3x5xi64>, %w: tensor<11x4xf32>) -> (tensor<3x5xf32>, tensor<3x5x4xf32>) {
  %z = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1 : i64
  %e = tensor.empty() : tensor<3x5xf32>
  %s = linalg.generic {indexing_maps = [#m, #m], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<3x5xf32>) outs(%e : tensor<3x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %ok = arith.cmpf oge, %in, %z : f32
    cf.assert %ok, "sqrt of a negative number"
    %r = math.sqrt %in : f32
    linalg.yield %r : f32
  } -> tensor<3x5xf32>
  %y = linalg.generic {indexing_maps = [#m, #m], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<3x5xf32>) outs(%e : tensor<3x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %in : f32
    linalg.yield %r : f32
  } -> tensor<3x5xf32>
  %ei = tensor.empty() : tensor<3x5xi64>
  %t1 = linalg.generic {indexing_maps = [#m, #m], iterator_types = ["parallel", "parallel"]} ins(%tok : tensor<3x5xi64>) outs(%ei : tensor<3x5xi64>) {
  ^bb0(%in: i64, %out: i64):
    %r = arith.addi %in, %one : i64
    linalg.yield %r : i64
  } -> tensor<3x5xi64>
  %e3 = tensor.empty() : tensor<3x5x4xf32>
  %g = linalg.generic {indexing_maps = [#tok, #out], iterator_types = ["parallel", "parallel", "parallel"]} ins(%t1 : tensor<3x5xi64>) outs(%e3 : tensor<3x5x4xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %j = linalg.index 2 : index
    %v = tensor.extract %w[%i, %j] : tensor<11x4xf32>
    linalg.yield %v : f32
  } -> tensor<3x5x4xf32>
  return %y, %g : tensor<3x5xf32>, tensor<3x5x4xf32>
}"""


def test_fusion_keeps_asserts_and_gathers() -> None:
    from shardc.runtime.codegen.fusion import fuse_elementwise

    module = LocatingParser(make_context(), FUSED, "fused.mlir").parse_module()
    assert fuse_elementwise(module.clone()) == 2  # the sqrt into the add, the +1 into the gather
    cm = compile_module(module)
    rng = np.random.default_rng(8)
    x = rng.random((3, 5)).astype(np.float32)
    tok = rng.integers(0, 10, (3, 5))
    w = rng.standard_normal((11, 4)).astype(np.float32)
    y, g = cm.call("f", x, tok, w)
    np.testing.assert_allclose(y, 2 * np.sqrt(x), rtol=1e-6)
    np.testing.assert_array_equal(g, w[tok + 1])
    x[1, 2] = -1
    with pytest.raises(RuntimeExecutionError, match=r'loc\("fused.mlir":12:5\).*sqrt of a negative number'):
        cm.call("f", x, tok, w)
    tok[0, 0] = 10
    with pytest.raises(RuntimeExecutionError, match="index 11 out of bounds for dimension 0 of size 11"):
        cm.call("f", np.abs(x), tok, w)


def test_assert_on_a_running_sum_takes_the_exact_path() -> None:
    """An assertion reading the accumulator cannot run on the inputs alone: the body
    runs point by point along the reduction (with its warning) and still checks."""
    text = """
func.func @f(%x: tensor<3x4xf32>, %init: tensor<3xf32>) -> tensor<3xf32> {
  %z = arith.constant 0.000000e+00 : f32
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<3x4xf32>) outs(%init : tensor<3xf32>) {
  ^bb0(%in: f32, %out: f32):
    %ok = arith.cmpf oge, %out, %z : f32
    cf.assert %ok, "the running sum went negative"
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  return %r : tensor<3xf32>
}"""
    with pytest.warns(RuntimeWarning, match="general vectorized path"):
        cm = compile_text(text)
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(cm.call("f", x, np.zeros(3, np.float32)), [4, 4, 4])
    x[1, 0] = -2  # the sum is -2 after the first step, checked before the second
    with pytest.raises(RuntimeExecutionError, match="the running sum went negative"):
        cm.call("f", x, np.zeros(3, np.float32))
