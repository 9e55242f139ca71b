"""What the GPT step keeps from its forward for its backward (issue #15: peak memory).

Attention keeps q, k, v and a logsumexp per score row: the backward recomputes the
probabilities, so no [batch, heads, t, t] array lives from the forward to the
backward. GELU and the contraction after it keep GELU's input alone (the derivative
recomputes the tanh and GELU's output); a layernorm and the contraction after it keep
xhat and rstd (the derivative makes the output again). These tests count the arrays
the compiled @train_step holds while it runs, and check values and gradients against
the layers written apart and against PyTorch autograd, in float64.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from xdsl.dialects.builtin import TensorType, f64

from shardc.runtime import compile_module
from shardc.training.autodiff import grad
from shardc.training.gpt import GPTConfig, init_params, param_specs
from shardc.training.ir_builder import FuncBuilder, module_of

B = 3


def _live_peaks(cfg: GPTConfig, shapes: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """Run the 1-rank @train_step as the trainer compiles it (whole pipeline, CSE,
    fusion) and return, per named shape, the most distinct arrays of that shape the
    generated function's frame held at any one line."""
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    prog = StepProgram.build(cfg, B, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN)
    state = RankState(prog, 0, init_params(cfg, 0))
    rng = np.random.default_rng(0)
    tokens, targets = (rng.integers(0, cfg.vocab_size, (B, cfg.block_size)).astype(np.int32) for _ in range(2))
    code = prog.compiled["train_step"].__code__  # type: ignore[attr-defined]
    peaks = dict.fromkeys(shapes, 0)

    def root(a: np.ndarray) -> np.ndarray:
        while isinstance(a.base, np.ndarray):
            a = a.base
        return a

    def on_line(frame, event, arg):  # noqa: ANN001, ANN202
        if event == "line":
            live: dict[str, set[int]] = {k: set() for k in shapes}
            for v in frame.f_locals.values():
                if isinstance(v, np.ndarray):
                    for k, shape in shapes.items():
                        if v.shape == shape:
                            live[k].add(id(root(v)))
            for k, ids in live.items():
                peaks[k] = max(peaks[k], len(ids))
        return on_line

    sys.settrace(lambda frame, event, arg: on_line if frame.f_code is code else None)
    try:
        state.train_step([(tokens, targets)], 1e-3)
    finally:
        sys.settrace(None)
    return peaks


@pytest.mark.slow
def test_no_score_arrays_kept_per_layer():
    """Per layer the step keeps no [b, h, t, t] array (the most alive at once does not
    grow with depth: softmax recorded whole kept one per layer, and CSE with a
    recompute written like the forward would keep the scores too), one [b, t, n_mlp]
    array (GELU's input: chains of maps kept five, GELU then its contraction two) and
    two [b, t, c] arrays (each layernorm's xhat, not also its output)."""

    def peaks(n_layer: int) -> dict[str, int]:
        cfg = GPTConfig(n_layer=n_layer, n_head=2, n_embd=16, block_size=8, vocab_size=32)
        return _live_peaks(cfg, {"scores": (B, 2, 8, 8), "mlp": (B, 8, 4 * 16), "embd": (B, 8, 16)})

    two, four = peaks(2), peaks(4)  # both peak in a backward: p, dp, ds and two inits
    assert four["scores"] == two["scores"] <= 5, (two, four)
    assert four["mlp"] - two["mlp"] == 2 * 1, (two, four)
    assert four["embd"] - two["embd"] == 2 * 2, (two, four)


def _attention_grads(use_layer: bool, scale: float, seed: int = 0) -> list[np.ndarray]:
    """Loss sum(attention(q, k, v) * c) and its gradients w.r.t. q, k, v, in float64:
    with `FuncBuilder.attention` or written as scale, causal mask and softmax."""
    shape = [2, 5, 3, 4]  # b, t, h, d
    fb = FuncBuilder("f", [(n, TensorType(f64, shape)) for n in ("q", "k", "v", "c")], f64)
    q, k, v, c = fb.args
    if use_layer:
        y = fb.attention(q, k, v, scale)
    else:
        att = fb.unary("scale", "bhtu", fb.einsum("bthd,buhd->bhtu", q, k), scale)
        att = fb.softmax("bhtu", fb.causal_mask("bhtu", att, query="t", key="u"), axis="u")
        y = fb.einsum("bhtu,buhd->bthd", att, v)
    loss = fb.einsum("bthd,bthd->", y, c)
    fb.ret(y, *grad(fb, loss, [q, k, v]))
    rng = np.random.default_rng(seed)
    return list(compile_module(module_of(fb.func)).call("f", *(rng.normal(size=shape) for _ in range(4))))  # type: ignore[arg-type]


@pytest.mark.parametrize("scale", [0.5, 1 / math.sqrt(3)])
def test_attention_layer_equals_the_softmax_formulation(scale):
    """Output and gradients of the recomputing layer equal the softmax chain's (float64,
    1e-12), for a power-of-two scale and another."""
    for got, want in zip(_attention_grads(True, scale), _attention_grads(False, scale)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def test_attention_node_saves_only_a_row_statistic():
    """On the tape: one attention node over (q, k, v) whose saved values are the
    logsumexp [b, h, t]; the backward reads no [b, h, t, u] value of the forward."""
    shape = [2, 5, 3, 4]
    fb = FuncBuilder("f", [(n, TensorType(f64, shape)) for n in ("q", "k", "v")], f64)
    q, k, v = fb.args
    y = fb.attention(q, k, v, 0.5)
    (node,) = [n for n in fb.tape if n.kind == "attention"]
    assert node.inputs == (q, k, v) and node.output is y
    assert {n: s.shape for n, s in node.attrs["saved"].items()} == {"lse": (2, 3, 5)}  # type: ignore[union-attr]
    forward = set(fb.block.ops)
    grad(fb, fb.einsum("bthd->", y), [q, k, v])
    reads = [o for op in fb.block.ops if op not in forward for o in op.operands if o.owner in forward]
    assert not [o for o in reads if isinstance(o.type, TensorType) and tuple(o.type.get_shape()) == (2, 3, 5, 5)]


@pytest.mark.slow
def test_step_gradients_equal_pytorch_autograd_float64():
    """@train_step's loss and gradients against PyTorch autograd on the same GPT written
    with torch.einsum (tanh GELU, causal softmax, tied head), float64, within 1e-9."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (the [torch] extra)")
    from shardc.training.step import build_step_module

    cfg = GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=32)
    rng = np.random.default_rng(1)
    params = {k: v + rng.normal(0, 0.1, v.shape) for k, v in init_params(cfg, 1, np.float64).items()}
    tokens, targets = (rng.integers(0, cfg.vocab_size, (B, cfg.block_size)) for _ in range(2))
    specs = param_specs(cfg)
    cm = compile_module(build_step_module(cfg, B, "float64"))
    loss, *grads = cm.call("train_step", *(params[s.path] for s in specs), *(np.zeros(s.shape) for s in specs), tokens, targets, np.arange(cfg.vocab_size))

    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}

    def ln(x, pre):  # noqa: ANN001, ANN202
        return torch.nn.functional.layer_norm(x, (cfg.n_embd,), p[f"{pre}.weight"], p[f"{pre}.bias"], cfg.ln_eps)

    T = cfg.block_size
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = p["wte"][torch.tensor(tokens)] + p["wpe"]
    for i in range(cfg.n_layer):
        a = f"h.{i}.attn"
        qkv = torch.einsum("btc,ckhd->btkhd", ln(x, f"h.{i}.ln_1"), p[f"{a}.c_attn.weight"]) + p[f"{a}.c_attn.bias"]
        q, k, v = qkv.unbind(2)
        att = torch.einsum("bthd,buhd->bhtu", q, k) / math.sqrt(cfg.head_dim)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = torch.einsum("bhtu,buhd->bthd", att, v)
        x = x + torch.einsum("bthd,hdc->btc", y, p[f"{a}.c_proj.weight"]) + p[f"{a}.c_proj.bias"]
        m = f"h.{i}.mlp"
        h = torch.nn.functional.gelu(ln(x, f"h.{i}.ln_2") @ p[f"{m}.c_fc.weight"] + p[f"{m}.c_fc.bias"], approximate="tanh")
        x = x + h @ p[f"{m}.c_proj.weight"] + p[f"{m}.c_proj.bias"]
    logits = ln(x, "ln_f") @ p["wte"].T
    want = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size), torch.tensor(targets).reshape(-1))
    want.backward()
    np.testing.assert_allclose(loss, want.item(), rtol=1e-12)
    for s, g in zip(specs, grads):
        ref = p[s.path].grad.numpy()
        np.testing.assert_allclose(g, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max(), err_msg=s.path)


@pytest.mark.parametrize("layer", ["layernorm_einsum", "layernorm_einsum_no_bias", "gelu_einsum"])
def test_fused_layers_equal_their_composition(layer):
    """layernorm then a contraction, and GELU then a contraction, recorded as one layer
    (their derivatives make the intermediate output again): values and gradients equal
    the two layers recorded apart, float64 within 1e-12."""
    bias = layer != "layernorm_einsum_no_bias"

    def run(fused: bool) -> list[np.ndarray]:
        args = [("x", TensorType(f64, [2, 5, 6])), ("w", TensorType(f64, [6])), ("b", TensorType(f64, [6])), ("m", TensorType(f64, [6, 4])), ("c", TensorType(f64, [2, 5, 4]))]
        fb = FuncBuilder("f", args, f64)
        x, w, b, m, c = fb.args
        if layer == "gelu_einsum":
            y = fb.gelu_einsum("bti,ij->btj", x, m) if fused else fb.einsum("bti,ij->btj", fb.gelu("bti", x), m)
        elif fused:
            y = fb.layernorm_einsum("bti", x, w, b if bias else None, "bti,ij->btj", m)
        else:
            y = fb.einsum("bti,ij->btj", fb.layernorm("bti", x, w, b if bias else None), m)
        loss = fb.einsum("btj,btj->", y, c)
        fb.ret(y, *grad(fb, loss, [x, w, b, m]))
        rng = np.random.default_rng(2)
        vals = [rng.normal(size=(2, 5, 6)), 1 + 0.1 * rng.normal(size=6), rng.normal(size=6), rng.normal(size=(6, 4)), rng.normal(size=(2, 5, 4))]
        return list(compile_module(module_of(fb.func)).call("f", *vals))  # type: ignore[arg-type]

    for got, want in zip(run(True), run(False)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * (np.abs(want).max() + 1e-300))
