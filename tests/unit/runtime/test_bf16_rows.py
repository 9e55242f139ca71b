"""bf16 in row-chain kernels (`kernels/rows.py`): the mixed-precision pass's cast of a
product's operand (`arith.truncf` f32 -> bf16) joins the row chain that makes the
value, so a layernorm or softmax writes its bf16 copy in the same pass over the row.
The kernel's bits equal ml_dtypes' rounding (nearest even, NaN quiet, infinities,
overflow to inf) and the numpy path's; an `arith.extf` back to f32 inside the chain
reads them exactly; other arithmetic on bf16 is refused (the members run)."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.context import make_context
from shardc.ir.fast_parser import FastParser
from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.codegen.fusion import fuse_elementwise
from shardc.runtime.codegen.row_fusion import fuse_rows
from shardc.runtime.execute.kernels import fused_run, rows_run
from shardc.runtime.execute.kernels.bf16_run import bfloat16

pytestmark = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")

IJ, I = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>"


def chain(r: int, n: int, cast_body: str, out: str = "bf16") -> str:
    """@f(x) -> (x - rowmax(x), cast(x - rowmax(x))): a reduction and two full members,
    the second's body `cast_body` over %d (the centred value) yielding `out`."""
    t, tb, v = f"tensor<{r}x{n}xf32>", f"tensor<{r}x{n}x{out}>", f"tensor<{r}xf32>"
    return f"""
func.func @f(%x: {t}) -> ({t}, {tb}) {{
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : {t}
  %eb = tensor.empty() : {tb}
  %r0 = tensor.empty() : {v}
  %mi = linalg.fill ins(%ninf : f32) outs(%r0 : {v}) -> {v}
  %m = linalg.generic {{indexing_maps = [{IJ}, {I}], iterator_types = ["parallel", "reduction"]}} ins(%x : {t}) outs(%mi : {v}) {{
  ^bb0(%p: f32, %o: f32):
    %y = arith.maximumf %o, %p : f32
    linalg.yield %y : f32
  }} -> {v}
  %c = linalg.generic {{indexing_maps = [{IJ}, {I}, {IJ}], iterator_types = ["parallel", "parallel"]}} ins(%x, %m : {t}, {v}) outs(%e0 : {t}) {{
  ^bb0(%p: f32, %q: f32, %o: f32):
    %d = arith.subf %p, %q : f32
    linalg.yield %d : f32
  }} -> {t}
  %b = linalg.generic {{indexing_maps = [{IJ}, {IJ}], iterator_types = ["parallel", "parallel"]}} ins(%c : {t}) outs(%eb : {tb}) {{
  ^bb0(%d: f32, %o: {out}):
    {cast_body}
  }} -> {tb}
  return %c, %b : {t}, {tb}
}}"""


TRUNC = "%y = arith.truncf %d : f32 to bf16\n    linalg.yield %y : bf16"
ROUND_TRIP = "%h = arith.truncf %d : f32 to bf16\n    %y = arith.extf %h : bf16 to f32\n    linalg.yield %y : f32"


def chains(text: str) -> int:
    module = FastParser(make_context(), text).parse_module()
    fuse_elementwise(module)
    return fuse_rows(module)


def hard_values(r: int, n: int) -> np.ndarray:
    """Random rows at several scales, one with a NaN, one all zeros, one with a -inf."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((r, n)) * np.logspace(-30, 30, r)[:, None]).astype(np.float32)
    x[2, 3] = np.nan
    x[3, :] = 0.0
    x[4, 1] = -np.inf
    return x


def run(text: str, x: np.ndarray, monkeypatch) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    cm = compile_text(text)
    monkeypatch.setattr(rows_run, "MIN_ELEMENTS", 0)
    with np.errstate(all="ignore"):
        monkeypatch.setenv("SHARDC_KERNELS", "numpy")
        ref = [np.asarray(a) for a in cm.call("f", x)]
        monkeypatch.setenv("SHARDC_KERNELS", "auto")
        before = rows_run.CALLS[0]
        got = [np.asarray(a) for a in cm.call("f", x)]
    return ref, got, rows_run.CALLS[0] - before


@pytest.mark.parametrize("n", [7, 130])
def test_truncf_joins_the_chain_and_rounds_as_ml_dtypes(n, monkeypatch):
    text = chain(8, n, TRUNC)
    assert chains(text) == 1  # the cast is a member: no pass of its own over the array
    x = hard_values(8, n)
    ref, got, calls = run(text, x, monkeypatch)
    assert calls == 1
    centred, cast = got
    assert cast.dtype == bfloat16() and cast.shape == (8, n)
    np.testing.assert_array_equal(centred.view(np.uint32), ref[0].view(np.uint32))
    want = centred.astype(bfloat16())  # ml_dtypes' rounding of the kernel's own f32 values
    same_bf16(cast, want)
    same_bf16(cast, ref[1])  # and the numpy path's


def same_bf16(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bits, except that a NaN need only be a NaN of the same sign (payloads are
    not kept alike by ml_dtypes and the bit rounding)."""
    g, w = got.view(np.uint16), want.view(np.uint16)
    nan = (w & 0x7FFF) > 0x7F80
    np.testing.assert_array_equal((g & 0x7FFF) > 0x7F80, nan)
    np.testing.assert_array_equal(g[nan] >> 15, w[nan] >> 15)
    np.testing.assert_array_equal(g[~nan], w[~nan])


def test_rounding_cases_bit_for_bit(monkeypatch):
    """Values at bf16's rounding boundaries (ties both ways, either side of a tie,
    subnormals, overflow to inf, infinities, -0), centred by a row max of 0 (exact)."""
    bits = np.array(
        [0x00000000, 0xBF808000, 0xBF818000, 0xBF808001, 0xBF807FFF, 0x80008000, 0x80018000, 0xFF7FFFFF, 0xFF7F8000, 0xFF7F7FFF, 0xFF800000, 0x80000000, 0x80000001, 0xBF7FC000, 0xC2F6E979, 0xB3D6BF95],
        np.uint32,
    )
    x = np.tile(bits.view(np.float32), (4, 1))
    x[3, 5] = np.nan  # a NaN row: NaN throughout
    text = chain(4, bits.size, TRUNC)
    ref, got, calls = run(text, x, monkeypatch)
    assert calls == 1
    centred, cast = got
    np.testing.assert_array_equal(centred[0].view(np.uint32), bits)  # x - 0 is x, -0 included
    same_bf16(cast, centred.astype(bfloat16()))
    same_bf16(cast, ref[1])


def test_extf_reads_the_bits_back(monkeypatch):
    text = chain(8, 64, ROUND_TRIP, out="f32")
    assert chains(text) == 1
    x = hard_values(8, 64)
    ref, got, calls = run(text, x, monkeypatch)
    assert calls == 1
    centred, back = got
    assert back.dtype == np.float32
    want = centred.astype(bfloat16()).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(back), np.isnan(want))
    np.testing.assert_array_equal(back[~np.isnan(back)], want[~np.isnan(want)])


def test_arithmetic_on_bf16_is_refused():
    body = "%h = arith.truncf %d : f32 to bf16\n    %y = arith.addf %h, %h : bf16\n    linalg.yield %y : bf16"
    assert chains(chain(8, 64, body)) == 0  # the chain is refused as a whole: its ops run
