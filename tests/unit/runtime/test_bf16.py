"""bf16 in the runtime: arrays are `ml_dtypes.bfloat16`; truncf / extf / constants round to
nearest even as MLIR does; elementwise ops compute per op; a contraction of bf16 operands
runs a bf16 GEMM accumulating in float32 (`kernels/bf16_gemm.py`).

Tolerances: a result MLIR defines in float32 (bf16 inputs extended, products summed in
f32) is compared with float64 sums of the same bf16 inputs within the float32 bound
k * eps32 * (|A| @ |B|); a bf16 result is the float32 result rounded once, so within half
a bf16 ulp of the exact value plus that bound."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from shardc.runtime import compile_text
from shardc.runtime.execute import structured_run
from shardc.runtime.execute.dtypes import bfloat16, is_bfloat16, np_dtype
from shardc.runtime.execute.kernels import bf16_gemm

BF = ml_dtypes.bfloat16
EPS32 = float(np.finfo(np.float32).eps)


def _bf(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(BF)


def _f32_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    k = a.shape[-1]
    return k * EPS32 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))


@pytest.fixture
def gemm_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the products `contract2` sends to the bf16 GEMM."""
    calls = [0]
    real = structured_run.bf16_matmul

    def counted(*args: object, **kw: object) -> np.ndarray:
        calls[0] += 1
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(structured_run, "bf16_matmul", counted)
    return calls


def test_bf16_maps_to_ml_dtypes() -> None:
    from xdsl.dialects.builtin import BFloat16Type

    dt = np_dtype(BFloat16Type())
    assert dt == np.dtype(BF) and dt is bfloat16()
    assert is_bfloat16(dt) and not is_bfloat16(np.dtype(np.float16)) and not is_bfloat16(np.dtype(np.void))


def test_programs_without_bf16_do_not_import_ml_dtypes() -> None:
    code = (
        "import sys, numpy as np\n"
        "from shardc.runtime import compile_text\n"
        "cm = compile_text('func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\\n"
        "  %b = arith.addf %a, %a : tensor<4xf32>\\n  return %b : tensor<4xf32>\\n}')\n"
        "assert cm.call('f', np.ones(4, np.float32)).tolist() == [2.0] * 4\n"
        "print('ml_dtypes' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


CASTS = """
func.func @f(%a: tensor<6xf32>, %s: f32) -> (tensor<6xbf16>, tensor<6xf32>, bf16, f32, tensor<3xbf16>, bf16) {
  %t = arith.truncf %a : tensor<6xf32> to tensor<6xbf16>
  %e = arith.extf %t : tensor<6xbf16> to tensor<6xf32>
  %ts = arith.truncf %s : f32 to bf16
  %es = arith.extf %ts : bf16 to f32
  %c = arith.constant dense<[0.1, 0x7FC0, -3.0e+38]> : tensor<3xbf16>
  %k = arith.constant 1.00390625 : bf16
  return %t, %e, %ts, %es, %c, %k : tensor<6xbf16>, tensor<6xf32>, bf16, f32, tensor<3xbf16>, bf16
}"""


def test_truncf_extf_and_constants_round_to_nearest_even() -> None:
    cm = compile_text(CASTS)
    a = np.array([1.00390625, 1.01171875, -2.7182817, 1e-40, 3.4e38, np.inf], np.float32)  # two ties, a denormal, an overflow
    t, e, ts, es, c, k = cm.call("f", a, np.float32(0.1))
    assert t.dtype == np.dtype(BF) and e.dtype == np.float32
    assert t.view(np.uint16).tolist() == a.astype(BF).view(np.uint16).tolist()
    assert t.astype(np.float32).tolist()[:2] == [1.0, 1.015625]  # ties to even
    assert np.isinf(t.astype(np.float32)[4]) and np.isinf(t.astype(np.float32)[5])
    np.testing.assert_array_equal(e, a.astype(BF).astype(np.float32))
    assert type(ts) is BF and float(ts) == float(BF(0.1)) and type(es) is np.float32 and es == np.float32(BF(0.1))
    assert c.dtype == np.dtype(BF) and c.view(np.uint16).tolist() == [0x3DCD, 0x7FC0, 0xFF62]
    assert type(k) is BF and float(k) == 1.0


ELEMENTWISE = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @ew(%a: tensor<8x16xbf16>, %b: tensor<8x16xbf16>, %s: bf16) -> (tensor<8x16xbf16>, tensor<8xbf16>, tensor<8x16xbf16>, bf16) {
  %x = arith.addf %a, %b : tensor<8x16xbf16>
  %y = arith.mulf %x, %a : tensor<8x16xbf16>
  %e = math.exp %y : tensor<8x16xbf16>
  %d = arith.divf %e, %b : tensor<8x16xbf16>
  %m = arith.maximumf %d, %a : tensor<8x16xbf16>
  %n = arith.negf %m : tensor<8x16xbf16>
  %z = arith.constant 0.0 : bf16
  %e0 = tensor.empty() : tensor<8xbf16>
  %f0 = linalg.fill ins(%z : bf16) outs(%e0 : tensor<8xbf16>) -> tensor<8xbf16>
  %r = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<8x16xbf16>) outs(%f0 : tensor<8xbf16>) {
  ^bb0(%in: bf16, %acc: bf16):
    %t = arith.addf %in, %acc : bf16
    linalg.yield %t : bf16
  } -> tensor<8xbf16>
  %e1 = tensor.empty() : tensor<8x16xbf16>
  %g = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%a, %b : tensor<8x16xbf16>, tensor<8x16xbf16>) outs(%e1 : tensor<8x16xbf16>) {
  ^bb0(%p: bf16, %q: bf16, %o: bf16):
    %pf = arith.extf %p : bf16 to f32
    %qf = arith.extf %q : bf16 to f32
    %t = arith.mulf %pf, %qf : f32
    %u = math.tanh %t : f32
    %v = arith.truncf %u : f32 to bf16
    %w = arith.addf %v, %s : bf16
    linalg.yield %w : bf16
  } -> tensor<8x16xbf16>
  %sc = arith.mulf %s, %s : bf16
  return %n, %r, %g, %sc : tensor<8x16xbf16>, tensor<8xbf16>, tensor<8x16xbf16>, bf16
}"""


def test_elementwise_ops_round_each_result_to_bf16() -> None:
    cm = compile_text(ELEMENTWISE)
    rng = np.random.default_rng(0)
    a = _bf(rng.standard_normal((8, 16)))
    b = _bf(rng.random((8, 16)) + 0.5)
    n, r, g, sc = cm.call("ew", a, b, BF(1.5))
    assert n.dtype == r.dtype == g.dtype == np.dtype(BF) and type(sc) is BF
    # each op's float32 result rounded to bf16 (exact for + - * / of bf16: f32 holds it)
    expect = -np.maximum(np.exp((a + b) * a) / b, a)
    np.testing.assert_array_equal(n.view(np.uint16), expect.view(np.uint16))
    np.testing.assert_array_equal(g.view(np.uint16), (np.tanh(a.astype(np.float32) * b.astype(np.float32)).astype(BF) + BF(1.5)).view(np.uint16))
    # a bf16 sum rounds at every step, as the IR says: within 16 half-ulps of the f32 sum
    exact = a.astype(np.float64).sum(1)
    assert np.all(np.abs(r.astype(np.float64) - exact) <= 16 * 2.0**-8 * np.abs(a.astype(np.float64)).sum(1))
    assert float(sc) == 2.25


MATMULS = """
func.func @to_f32(%a: tensor<64x128xbf16>, %b: tensor<128x96xbf16>, %c: tensor<64x96xf32>) -> tensor<64x96xf32> {
  %m = linalg.matmul ins(%a, %b : tensor<64x128xbf16>, tensor<128x96xbf16>) outs(%c : tensor<64x96xf32>) -> tensor<64x96xf32>
  return %m : tensor<64x96xf32>
}
func.func @to_bf16(%a: tensor<64x128xbf16>, %b: tensor<128x96xbf16>) -> tensor<64x96xbf16> {
  %z = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<64x96xbf16>
  %c = linalg.fill ins(%z : bf16) outs(%e : tensor<64x96xbf16>) -> tensor<64x96xbf16>
  %m = linalg.matmul ins(%a, %b : tensor<64x128xbf16>, tensor<128x96xbf16>) outs(%c : tensor<64x96xbf16>) -> tensor<64x96xbf16>
  return %m : tensor<64x96xbf16>
}
func.func @mixed(%a: tensor<64x128xbf16>, %b: tensor<128x96xf32>) -> tensor<64x96xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x96xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<64x96xf32>) -> tensor<64x96xf32>
  %m = linalg.matmul ins(%a, %b : tensor<64x128xbf16>, tensor<128x96xf32>) outs(%c : tensor<64x96xf32>) -> tensor<64x96xf32>
  return %m : tensor<64x96xf32>
}
func.func @batched(%a: tensor<3x32x64xbf16>, %b: tensor<3x64x48xbf16>, %c: tensor<3x32x48xf32>) -> tensor<3x32x48xf32> {
  %m = linalg.batch_matmul ins(%a, %b : tensor<3x32x64xbf16>, tensor<3x64x48xbf16>) outs(%c : tensor<3x32x48xf32>) -> tensor<3x32x48xf32>
  return %m : tensor<3x32x48xf32>
}
func.func @pipeline(%x: tensor<32x64xf32>, %w: tensor<64x48xbf16>) -> tensor<32x48xf32> {
  %t = arith.truncf %x : tensor<32x64xf32> to tensor<32x64xbf16>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x48xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<32x48xf32>) -> tensor<32x48xf32>
  %m = linalg.matmul ins(%t, %w : tensor<32x64xbf16>, tensor<64x48xbf16>) outs(%c : tensor<32x48xf32>) -> tensor<32x48xf32>
  %h = arith.truncf %m : tensor<32x48xf32> to tensor<32x48xbf16>
  %r = arith.extf %h : tensor<32x48xbf16> to tensor<32x48xf32>
  return %r : tensor<32x48xf32>
}"""


@pytest.fixture(params=["auto", "numpy"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each matmul test runs on the machine's choice and on the widened float32 fallback."""
    monkeypatch.setenv("SHARDC_BF16_GEMM", request.param)
    return bf16_gemm.backend()


def test_matmul_into_f32_accumulates_in_f32(backend: str, gemm_calls: list[int]) -> None:
    cm = compile_text(MATMULS)
    rng = np.random.default_rng(1)
    a, b = _bf(rng.standard_normal((64, 128))), _bf(rng.standard_normal((128, 96)))
    c = rng.standard_normal((64, 96)).astype(np.float32)
    r = cm.call("to_f32", a, b, c)
    assert r.dtype == np.float32
    exact = a.astype(np.float64) @ b.astype(np.float64) + c
    assert np.all(np.abs(r - exact) <= _f32_bound(a, b) + EPS32 * np.abs(exact))
    assert gemm_calls[0] == 1  # the body's extf left to the GEMM, not a float32 matmul of copies


def test_matmul_into_bf16_rounds_once(backend: str, gemm_calls: list[int]) -> None:
    cm = compile_text(MATMULS)
    rng = np.random.default_rng(2)
    a, b = _bf(rng.standard_normal((64, 128))), _bf(rng.standard_normal((128, 96)))
    r = cm.call("to_bf16", a, b)
    assert r.dtype == np.dtype(BF)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    half_ulp = np.float64(2.0**-8) * np.exp2(np.floor(np.log2(np.maximum(np.abs(exact), 1e-30))))
    assert np.all(np.abs(r.astype(np.float64) - exact) <= half_ulp + _f32_bound(a, b))
    assert gemm_calls[0] == 1


def test_mixed_and_batched_matmuls(backend: str) -> None:
    cm = compile_text(MATMULS)
    rng = np.random.default_rng(3)
    a, b32 = _bf(rng.standard_normal((64, 128))), rng.standard_normal((128, 96)).astype(np.float32)
    r = cm.call("mixed", a, b32)
    exact = a.astype(np.float64) @ b32.astype(np.float64)
    assert r.dtype == np.float32 and np.all(np.abs(r - exact) <= _f32_bound(a, b32))
    a3, b3 = _bf(rng.standard_normal((3, 32, 64))), _bf(rng.standard_normal((3, 64, 48)))
    c3 = np.zeros((3, 32, 48), np.float32)
    r3 = cm.call("batched", a3, b3, c3)
    exact3 = a3.astype(np.float64) @ b3.astype(np.float64)
    assert r3.dtype == np.float32 and np.all(np.abs(r3 - exact3) <= 64 * EPS32 * (np.abs(a3.astype(np.float64)) @ np.abs(b3.astype(np.float64))))


def test_truncf_matmul_extf_matches_the_ml_dtypes_reference(backend: str) -> None:
    cm = compile_text(MATMULS)
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((32, 64)).astype(np.float32), _bf(rng.standard_normal((64, 48)))
    r = cm.call("pipeline", x, w)
    ref = (x.astype(BF).astype(np.float32) @ w.astype(np.float32)).astype(BF).astype(np.float32)
    # the same f32 sums in another order: at most one bf16 ulp apart after rounding
    ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(ref), 1e-30))) - 7)
    assert r.dtype == np.float32 and np.all(np.abs(r - ref) <= ulp)
    assert np.mean(r == ref) > 0.95


def test_bf16_scalar_arguments_convert() -> None:
    cm = compile_text("func.func @f(%s: bf16) -> f32 {\n  %e = arith.extf %s : bf16 to f32\n  return %e : f32\n}")
    assert cm.call("f", 0.1) == np.float32(BF(0.1))


CACHED = """
func.func @f(%a: tensor<8x16xbf16>, %b: tensor<16x4xbf16>, %s: bf16) -> (tensor<8x4xf32>, bf16) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x4xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x16xbf16>, tensor<16x4xbf16>) outs(%c : tensor<8x4xf32>) -> tensor<8x4xf32>
  %k = arith.constant 0.1 : bf16
  %t = arith.addf %s, %k : bf16
  return %m, %t : tensor<8x4xf32>, bf16
}"""


@pytest.mark.usefixtures("_own_cache")
def test_compile_cache_keeps_bf16_argument_types() -> None:
    """A cache hit restores bf16 array and scalar arguments as bf16 (numpy spells the dtype
    `<V2`, which would read as raw bytes)."""
    from shardc.runtime.codegen.cache import compile_cached, make_key, parse_lowered

    key = make_key("bf16-program", text=CACHED)
    built: list[int] = []

    def build():  # noqa: ANN202
        built.append(1)
        return parse_lowered(CACHED), {}

    rng = np.random.default_rng(5)
    a, b = _bf(rng.standard_normal((8, 16))), _bf(rng.standard_normal((16, 4)))
    first = compile_cached(key, build, "test")
    hit = compile_cached(key, build, "test")
    assert built == [1] and (first.source, hit.source) == ("compiled", "cache")
    for cm in (first.compiled, hit.compiled):
        m, t = cm.call("f", a, b.astype(np.float32), 0.5)  # float32 and Python float arguments convert to bf16
        np.testing.assert_array_equal(m, cm.call("f", a, b, BF(0.5))[0])
        assert m.dtype == np.float32 and type(t) is BF and float(t) == float(BF(BF(0.5) + BF(0.1)))


REDUCTIONS = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @sum(%a: tensor<3x5xbf16>) -> tensor<3xbf16> {
  %z = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<3xbf16>
  %f = linalg.fill ins(%z : bf16) outs(%e : tensor<3xbf16>) -> tensor<3xbf16>
  %r = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<3x5xbf16>) outs(%f : tensor<3xbf16>) {
  ^bb0(%in: bf16, %acc: bf16):
    %t = arith.addf %in, %acc : bf16
    linalg.yield %t : bf16
  } -> tensor<3xbf16>
  return %r : tensor<3xbf16>
}
func.func @max(%a: tensor<3x5xbf16>) -> tensor<3xbf16> {
  %z = arith.constant 0xFF80 : bf16
  %e = tensor.empty() : tensor<3xbf16>
  %f = linalg.fill ins(%z : bf16) outs(%e : tensor<3xbf16>) -> tensor<3xbf16>
  %r = linalg.reduce ins(%a : tensor<3x5xbf16>) outs(%f : tensor<3xbf16>) dimensions = [1]
    (%in: bf16, %acc: bf16) {
      %m = arith.maximumf %in, %acc : bf16
      linalg.yield %m : bf16
    }
  return %r : tensor<3xbf16>
}"""


def test_bf16_reductions_accumulate_in_f32_and_round_once() -> None:
    """A sum of bf16 runs in float32 and rounds once (as the GEMM does; torch's bf16 sum
    too): 256 + 1 + 1 is 258, where bf16 steps give 256 (257 ties to even)."""
    cm = compile_text(REDUCTIONS)
    a = np.array([[256, 1, 1, 0, 0], [1, 1, 256, 0, 0], [-3.5, 0.25, 7, 0.125, -1]], np.float32).astype(BF)
    r = cm.call("sum", a)
    assert r.dtype == np.dtype(BF) and r.astype(np.float32).tolist() == [258.0, 258.0, 2.875]
    m = cm.call("max", a)
    assert m.dtype == np.dtype(BF) and m.astype(np.float32).tolist() == [256.0, 256.0, 7.0]


def test_fast_casts_give_ml_dtypes_bits_on_every_kind_of_float32():
    """`cast_float` (what truncf/extf on arrays call) rounds float32 to bf16 in a numba
    loop and widens by a shift: the bits must be ml_dtypes' for ties, denormals,
    overflow, infinities, signed zeros and NaNs (quiet, sign kept), on arrays past the
    size where the loop takes over and on a strided view."""
    from shardc.runtime.execute.kernels import bf16_cast, fused_run

    if not fused_run.enabled():
        pytest.skip("numba is absent: the rounding loop is not used")
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32)
    special = np.array([0x3F808000, 0x3F818000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x7F800000,
                        0xFF800000, 0x80000000, 0x7F800001, 0xFFC00001, 0x7FFFFFFF], np.uint32)
    bits[: special.size] = special
    x = bits.view(np.float32).reshape(250, 200)
    for a in (x, x[:, ::2]):
        got = bf16_cast.cast_float(a, np.dtype(BF))
        want = a.astype(BF)
        assert got.dtype == np.dtype(BF) and got.shape == a.shape
        same = got.view(np.uint16) == want.view(np.uint16)
        nan = np.isnan(a)
        assert same[~nan].all()
        assert np.isnan(got.astype(np.float32)[nan]).all()
        assert (np.signbit(got.astype(np.float32)) == np.signbit(a))[nan].all()
        back = bf16_cast.cast_float(got, np.dtype(np.float32))
        assert back.dtype == np.float32
        np.testing.assert_array_equal(back.view(np.uint32), got.astype(np.float32).view(np.uint32))
