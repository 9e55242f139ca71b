"""What a `--precision bf16` step holds between its forward and its backward: a product's
epilogue (linear + bias) kept for a later reader as a bf16 copy
(`mixed_precision.save_epilogues_in_bf16`), `tensor.empty` inits read only for their
shape emitted as zero-stride views (`codegen.kernels.tensor.only_shapes_inits`), and
the compiled bf16 GPT step's traced live bytes per layer and beyond the layers."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from shardc.context import make_context
from shardc.ir.fast_parser import FastParser
from shardc.passes.mixed_precision import MixedPrecisionPass
from shardc.runtime.codegen import remake_casts
from shardc.runtime.codegen.compile import compile_module
from shardc.testing.live_peak import live_peak

MM = '[affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]'
ID = "affine_map<(i, j) -> (i, j)>"
ROW = "affine_map<(i, j) -> (j)>"
EW = 'iterator_types = ["parallel", "parallel"]'


def _product(a: str, b: str, out: str, m: int, k: int, n: int) -> str:
    return f"""
    %{out}e = tensor.empty() : tensor<{m}x{n}xf32>
    %{out}z = linalg.fill ins(%zero : f32) outs(%{out}e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
    %{out} = linalg.generic {{indexing_maps = {MM}}} ins(%{a}, %{b} : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%{out}z : tensor<{m}x{n}xf32>) {{
    ^bb0(%p: f32, %q: f32, %acc: f32):
      %pq = arith.mulf %p, %q : f32
      %s = arith.addf %acc, %pq : f32
      linalg.yield %s : f32
    }} -> tensor<{m}x{n}xf32>"""


def _module(between: bool) -> str:
    """`v = x @ w + b`; `t = tanh(v)` (its first reader); with `between`, a product
    `t @ w2` before `r = g * v` (a later reader, the backward's); without, after it."""
    later = f"""
    %r = linalg.generic {{indexing_maps = [{ID}, {ID}, {ID}], {EW}}} ins(%g, %v : tensor<6x4xf32>, tensor<6x4xf32>) outs(%e64 : tensor<6x4xf32>) {{
    ^bb0(%a: f32, %c: f32, %o: f32):
      %m = arith.mulf %a, %c : f32
      linalg.yield %m : f32
    }} -> tensor<6x4xf32>"""
    second = _product("t", "w2", "z", 6, 4, 5)
    return f"""
func.func @step(%x: tensor<6x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>, %w2: tensor<4x5xf32>, %g: tensor<6x4xf32>) -> (tensor<6x5xf32>, tensor<6x4xf32>) {{
    %zero = arith.constant 0.0 : f32
    {_product("x", "w", "y", 6, 8, 4)}
    %e64 = tensor.empty() : tensor<6x4xf32>
    %v = linalg.generic {{indexing_maps = [{ID}, {ROW}, {ID}], {EW}}} ins(%y, %b : tensor<6x4xf32>, tensor<4xf32>) outs(%e64 : tensor<6x4xf32>) {{
    ^bb0(%a: f32, %c: f32, %o: f32):
      %s = arith.addf %a, %c : f32
      linalg.yield %s : f32
    }} -> tensor<6x4xf32>
    %t = linalg.generic {{indexing_maps = [{ID}, {ID}], {EW}}} ins(%v : tensor<6x4xf32>) outs(%e64 : tensor<6x4xf32>) {{
    ^bb0(%a: f32, %o: f32):
      %h = math.tanh %a : f32
      linalg.yield %h : f32
    }} -> tensor<6x4xf32>
    {second + later if between else later + second}
    func.return %z, %r : tensor<6x5xf32>, tensor<6x4xf32>
}}
"""


def _lowered(between: bool):
    module = FastParser(make_context(), _module(between)).parse_module()
    MixedPrecisionPass().apply(make_context(), module)
    return module


def _generic_named(module, name: str):
    f = next(iter(module.ops))
    return [op for op in f.body.blocks.first.ops if op.name == "linalg.generic" and any(r.name_hint == name for r in op.results)]


def _cast_kinds(v) -> list[str]:
    """The casts `v` went through, outermost first (`extf`, `truncf`), back to a value
    that is not a cast's result."""
    kinds = []
    while v.owner.name == "linalg.generic" and [o.name for o in v.owner.body.block.ops][0] in ("arith.extf", "arith.truncf"):
        kinds.append(v.owner.body.block.ops.first.name)
        v = v.owner.inputs[0]
    return kinds


def test_a_reader_past_another_product_reads_the_epilogue_rounded_to_bf16():
    module = _lowered(between=True)
    (v,) = [op.results[0] for op in _generic_named(module, "v")]
    (t,) = _generic_named(module, "t")
    (r,) = _generic_named(module, "r")
    assert t.inputs[0] is v  # the forward's reader: the float32 value
    assert _cast_kinds(r.inputs[1]) == ["arith.extf", "arith.truncf"]  # the backward's: the bf16 copy, extended
    assert len(list(v.uses)) == 2  # the first reader and the copy: no float32 kept for `r`


def test_a_reader_before_any_other_product_keeps_the_float32_value():
    module = _lowered(between=False)
    (v,) = [op.results[0] for op in _generic_named(module, "v")]
    (r,) = _generic_named(module, "r")
    assert r.inputs[1] is v


def test_the_later_reader_computes_on_the_rounded_value():
    rng = np.random.default_rng(1)
    x, w, b, w2, g = (rng.standard_normal(s).astype(np.float32) for s in ((6, 8), (8, 4), (4,), (4, 5), (6, 4)))
    got_z, got_r = compile_module(_lowered(between=True), "epilogue").call("step", x, w, b, w2, g)
    bf = ml_dtypes.bfloat16

    def rnd(a: np.ndarray) -> np.ndarray:
        return a.astype(bf).astype(np.float32)

    v = rnd(x) @ rnd(w) + b
    np.testing.assert_allclose(got_z, rnd(np.tanh(v)) @ rnd(w2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_r, g * rnd(v), rtol=1e-6, atol=1e-6)
    assert not np.allclose(got_r, g * v, rtol=1e-6, atol=0)  # rounded, not the float32 value


def test_an_init_read_only_for_its_shape_is_a_zero_stride_view():
    module = FastParser(make_context(), _module(between=True)).parse_module()
    cm = compile_module(module, "shapes", fuse=False)
    # %e64 is read by the bias add, tanh and `r`, none of whose bodies read their init;
    # the products' empties by `linalg.fill`, which does not either
    assert "_np.broadcast_to(_np.empty((), " in cm.source
    assert "_np.empty((6, 4)" not in cm.source and "_np.empty((6, 5)" not in cm.source
    x, w, b, w2, g = (np.full(s, 0.5, np.float32) for s in ((6, 8), (8, 4), (4,), (4, 5), (6, 4)))
    z, r = cm.call("step", x, w, b, w2, g)
    np.testing.assert_allclose(r, g * (x @ w + b), rtol=1e-6)
    np.testing.assert_allclose(z, np.tanh(x @ w + b) @ w2, rtol=1e-5)


def _live_peak_bytes(fn, call) -> int:
    """The most bytes of arrays `fn`'s frame holds at once (not its arguments)."""
    return sum(b.nbytes for _, b in live_peak(fn, call))


B, T, C = 4, 32, 64


def _gpt_step_peak(n_layer: int) -> int:
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    cfg = GPTConfig(n_layer=n_layer, n_head=4, n_embd=C, block_size=T, vocab_size=48)
    prog = StepProgram.build(cfg, B, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN, precision="bf16")
    state = RankState(prog, 0, init_params(cfg, 0))
    rng = np.random.default_rng(0)
    x, y = (rng.integers(0, cfg.vocab_size, (B, T)).astype(np.int32) for _ in range(2))
    state.train_step([(x, y)], 1e-3)
    return _live_peak_bytes(prog.compiled.functions["train_step"], lambda: state.train_step([(x, y)], 1e-3))


def test_bf16_gpt_step_keeps_less_per_layer_than_autocast_and_no_unread_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    # the activations a layer keeps, without the parameters' bf16 copies: a model this
    # small keeps those from the forward to the backward (`remake_casts.KEEP_MAX_BYTES`;
    # 12 more bytes per token and channel here, where autocast's cast cache keeps them too)
    monkeypatch.setattr(remake_casts, "KEEP_MAX_BYTES", 0)
    monkeypatch.setenv("SHARDC_CACHE", "0")  # the limit is read at compile time, not in the cache's key
    two, four = _gpt_step_peak(2), _gpt_step_peak(4)
    unit = B * T * C  # bytes of one bf16-free activation element per token and channel
    per_layer = (four - two) / 2 / unit
    # kept per layer: both layernorms' normalized inputs (float32, 4 + 4), q, k, v and the
    # attention output (bf16, 6 + 2), the MLP's pre-activation (bf16, 8), row statistics
    # (0.7): 24.7 measured. autocast keeps about 36 (its linear outputs and GELU's in bf16,
    # layernorm inputs in float32); with the pre-activation in float32 it was 32.7.
    assert per_layer <= 28, f"{per_layer:.1f} bytes per token and channel kept per layer"
    # beyond the layers (the logits and loss chain, the backward's transients): 64
    # measured; with the step's `tensor.empty` buffers allocated (one per type, held
    # from the forward to the backward) it was 132
    rest = two / unit - 2 * per_layer
    assert rest <= 80, f"{rest:.1f} bytes per token and channel beyond the layers"


def _producer_with_copy(consumer_reads_copy: bool) -> str:
    """`t = tanh(x)` yielded with its bf16 copy (a product's operand made in the same pass),
    then a consumer of `t` (float32) or of the copy (bf16, extended)."""
    if consumer_reads_copy:
        consumer = f"""
    %y = linalg.generic {{indexing_maps = [{ID}, {ID}], {EW}}} ins(%p#1 : tensor<6x4xbf16>) outs(%e : tensor<6x4xf32>) {{
    ^bb0(%a: bf16, %o: f32):
      %w = arith.extf %a : bf16 to f32
      %m = arith.mulf %w, %w : f32
      linalg.yield %m : f32
    }} -> tensor<6x4xf32>"""
    else:
        consumer = f"""
    %y = linalg.generic {{indexing_maps = [{ID}, {ID}], {EW}}} ins(%p#0 : tensor<6x4xf32>) outs(%e : tensor<6x4xf32>) {{
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %a : f32
      linalg.yield %m : f32
    }} -> tensor<6x4xf32>"""
    return f"""
func.func @step(%x: tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<6x4xbf16>) {{
    %e = tensor.empty() : tensor<6x4xf32>
    %eb = tensor.empty() : tensor<6x4xbf16>
    %p:2 = linalg.generic {{indexing_maps = [{ID}, {ID}, {ID}], {EW}}} ins(%x : tensor<6x4xf32>) outs(%e, %eb : tensor<6x4xf32>, tensor<6x4xbf16>) {{
    ^bb0(%a: f32, %o: f32, %ob: bf16):
      %t = math.tanh %a : f32
      %tb = arith.truncf %t : f32 to bf16
      linalg.yield %t, %tb : f32, bf16
    }} -> (tensor<6x4xf32>, tensor<6x4xbf16>)
    {consumer}
    func.return %y, %p#1 : tensor<6x4xf32>, tensor<6x4xbf16>
}}
"""


def test_a_producer_yielding_a_bf16_copy_fuses_into_a_float32_consumer():
    from shardc.runtime.codegen.fusion import fuse_elementwise

    fused = FastParser(make_context(), _producer_with_copy(False)).parse_module()
    assert fuse_elementwise(fused) == 1  # one kernel writes the copy and the consumer's result
    (op,) = [o for o in next(iter(fused.ops)).body.blocks.first.ops if o.name == "linalg.generic"]
    assert sorted(str(r.type) for r in op.results) == ["tensor<6x4xbf16>", "tensor<6x4xf32>"]
    apart = FastParser(make_context(), _producer_with_copy(True)).parse_module()
    assert fuse_elementwise(apart) == 0  # a consumer reading the bf16 copy stays apart
    x = np.random.default_rng(2).standard_normal((6, 4)).astype(np.float32)
    y, copy = compile_module(FastParser(make_context(), _producer_with_copy(False)).parse_module(), "copy").call("step", x)
    np.testing.assert_allclose(y, np.tanh(x) ** 2, rtol=1e-6)
    np.testing.assert_array_equal(copy.view(np.uint16), np.tanh(x).astype(ml_dtypes.bfloat16).view(np.uint16))
