"""A bf16 input that a body only widens (`arith.extf` to f32: a product's epilogue saved
in bf16 for the backward, `mixed_precision.save_epilogues_in_bf16`) fuses with the
elementwise op that reads the widened value, and the fused kernel loads its bits
(`kernels/fused.py`'s BF16_BITS, a ("bits", k) parameter of `FusedKernel`): the
widening costs no pass of its own. The results are bit for bit the numpy path's and
the unfused module's; bf16 read by anything but a widening keeps the ops apart."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.linalg.ops import GenericOp

from shardc.context import make_context
from shardc.ir.fast_parser import FastParser
from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.codegen import fusion
from shardc.runtime.codegen.fusion import fuse_elementwise
from shardc.runtime.codegen.kernels.fused import FusedKernel, build_kernel
from shardc.runtime.execute.kernels import fused_run
from shardc.runtime.execute.kernels.bf16_run import bfloat16

R, N = 6, 40


def widen_then_gelu_grad(h_type: str, h_map: str, widened_use: str = "arith.extf %p : bf16 to f32") -> str:
    """@f(h, g) -> g * d/dx tanh(x) at x = extf(h): the widening of a saved bf16 value
    in a generic of its own, then the elementwise op reading it (the GPT backward's
    GELU derivative, cut down). `h_map`: how the loops (i, j) read h."""
    t = f"tensor<{R}x{N}xf32>"
    return f"""
func.func @f(%h: {h_type}, %g: {t}) -> {t} {{
  %one = arith.constant 1.0 : f32
  %e0 = tensor.empty() : {t}
  %e1 = tensor.empty() : {t}
  %x = linalg.generic {{indexing_maps = [affine_map<(i, j) -> ({h_map})>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%h : {h_type}) outs(%e0 : {t}) {{
  ^bb0(%p: bf16, %o: f32):
    %w = {widened_use}
    linalg.yield %w : f32
  }} -> {t}
  %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x, %g : {t}, {t}) outs(%e1 : {t}) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %th = math.tanh %a : f32
    %t2 = arith.mulf %th, %th : f32
    %d = arith.subf %one, %t2 : f32
    %r = arith.mulf %b, %d : f32
    linalg.yield %r : f32
  }} -> {t}
  return %y : {t}
}}"""


def parse(text: str):
    return FastParser(make_context(), text).parse_module()


def generics(module) -> list[GenericOp]:
    return [op for op in module.walk() if isinstance(op, GenericOp)]


def operands(h_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    h = (rng.standard_normal(h_shape) * 3).astype(bfloat16())
    h.reshape(-1)[:3] = np.array([np.nan, np.inf, -0.0], np.float32).astype(bfloat16())
    return h, rng.standard_normal((R, N)).astype(np.float32)


def expected(h: np.ndarray, g: np.ndarray, h_map: str) -> np.ndarray:
    x = h.astype(np.float32)
    x = x.T if h_map == "j, i" else np.broadcast_to(x, (R, N))
    return g * (np.float32(1.0) - np.tanh(x) ** 2)


CASES = {  # h's type, the loops' map into it, its shape
    "same layout": (f"tensor<{R}x{N}xbf16>", "i, j", (R, N)),
    "transposed": (f"tensor<{N}x{R}xbf16>", "j, i", (N, R)),
    "broadcast rows": (f"tensor<{N}xbf16>", "j", (N,)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_widening_fuses_into_its_reader(case):
    h_type, h_map, _ = CASES[case]
    module = parse(widen_then_gelu_grad(h_type, h_map))
    assert fuse_elementwise(module) == 1
    (op,) = generics(module)
    assert [str(v.type) for v in op.inputs][0] == h_type  # the fused op reads the bf16 value itself


def refusing_bf16_inputs(rule):
    """Fusion's rule as it was: no producer or consumer with a bf16 input."""
    return lambda op: not any(isinstance(v.type, TensorType) and v.type.element_type.name == "bf16" for v in op.inputs) and rule(op)


@pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")
@pytest.mark.parametrize("case", list(CASES))
def test_the_kernel_loads_the_bits_and_computes_what_the_unfused_ops_did(case, monkeypatch):
    h_type, h_map, shape = CASES[case]
    text = widen_then_gelu_grad(h_type, h_map)
    module = parse(text)
    fuse_elementwise(module)
    (op,) = generics(module)
    block = op.body.block
    yields = list(block.last_op.operands)  # type: ignore[union-attr]
    kernel = build_kernel(block, len(op.inputs), yields, [True] * len(op.operands), 2)
    assert isinstance(kernel, FusedKernel)
    assert ("bits", 0) in kernel.params
    assert "<< np.uint32(16)" in kernel.source  # widened on load, in the nest

    h, g = operands(shape)
    monkeypatch.setattr(fused_run, "MIN_ELEMENTS", 0)
    monkeypatch.setenv("SHARDC_CACHE", "0")  # the two compiles of one text differ by the rule
    monkeypatch.setenv("SHARDC_KERNELS", "auto")
    fused_now = compile_text(text)
    with monkeypatch.context() as m:
        m.setattr(fusion, "_bf16_only_cast", refusing_bf16_inputs(fusion._bf16_only_cast))
        apart = compile_text(text)
    with np.errstate(all="ignore"):
        before = fused_run.kernel_stats()["signatures"]
        got = np.asarray(fused_now.call("f", h, g))
        assert fused_run.kernel_stats()["signatures"] > before  # the fused kernel ran
        was = np.asarray(apart.call("f", h, g))
        want = expected(h, g, h_map)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), was.view(np.uint32))  # the widening is exact: same bits
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_bf16_read_by_arithmetic_keeps_the_ops_apart(monkeypatch):
    """The producer's body adds in bf16 before widening: not a widening of its input, so
    it stays a generic of its own, and the module still computes the same."""
    text = widen_then_gelu_grad(f"tensor<{R}x{N}xbf16>", "i, j", "arith.addf %p, %p : bf16\n    %w2 = arith.extf %w : bf16 to f32")
    text = text.replace("linalg.yield %w : f32", "linalg.yield %w2 : f32")
    module = parse(text)
    assert fuse_elementwise(module) == 0
    assert len(generics(module)) == 2
    h, g = operands((R, N))
    monkeypatch.setattr(fused_run, "MIN_ELEMENTS", 0)
    with np.errstate(all="ignore"):
        got = np.asarray(compile_text(text).call("f", h, g))
        doubled = (h.astype(np.float32) * 2).astype(bfloat16()).astype(np.float32)
        want = g * (np.float32(1.0) - np.tanh(doubled) ** 2)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_bf16_gpt_step_widens_its_saved_epilogues_inside_the_gelu_derivative(monkeypatch):
    """The bf16 GPT step saves each MLP's pre-activation in bf16 for the backward: its
    widening now runs inside the GELU derivative's op (one structured call fewer per
    layer), with the same losses bit for bit, fused kernels on (the MLP's 256 x 256
    elements are past `MIN_ELEMENTS`)."""
    from shardc.runtime.codegen import structured
    from shardc.runtime.execute import structured_run
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    monkeypatch.setenv("SHARDC_CACHE", "0")  # the two builds differ by fusion's rule, not by their key
    monkeypatch.setenv("SHARDC_KERNELS", "auto")
    cfg = GPTConfig(n_layer=2, n_head=4, n_embd=64, block_size=64, vocab_size=64)
    rng = np.random.default_rng(1)
    batches = [tuple(rng.integers(0, cfg.vocab_size, (4, cfg.block_size)).astype(np.int32) for _ in range(2)) for _ in range(3)]
    real = structured.run_structured
    calls = [0]

    def counting(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    counting.__module__, counting.__name__, counting.__qualname__ = real.__module__, real.__name__, real.__qualname__
    monkeypatch.setattr(structured, "run_structured", counting)
    monkeypatch.setattr(structured_run, "run_structured", counting)

    def run(rule) -> tuple[list[float], int]:
        with monkeypatch.context() as m:
            m.setattr(fusion, "_bf16_only_cast", rule)
            prog = StepProgram.build(cfg, 4, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN, precision="bf16")
        state = RankState(prog, 0, init_params(cfg, 0))
        losses = []
        for b in batches:
            before = calls[0]
            losses.append(float(state.train_step([b], 1e-3)))
            per_step = calls[0] - before
        return losses, per_step

    fused_losses, fused_calls = run(fusion._bf16_only_cast)
    apart_losses, apart_calls = run(refusing_bf16_inputs(fusion._bf16_only_cast))
    assert fused_losses == apart_losses
    assert apart_calls - fused_calls == cfg.n_layer
