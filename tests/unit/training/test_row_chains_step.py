"""The GPT step with its row chains (softmax, the attention backward's probabilities
with ds, layernorm forward and backward, cross-entropy) run as row kernels: loss and
gradients equal PyTorch autograd's (float64) and the step without row chains (float32,
within float32 rounding), and the kernels ran."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shardc.runtime import compile_module
from shardc.runtime.codegen import row_fusion
from shardc.runtime.execute.kernels import fused_run
from shardc.runtime.execute.kernels import rows_run
from shardc.training.gpt import GPTConfig, init_params, param_specs

pytestmark = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")

B = 3
CFG = GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=32)


def _step(dtype: str, rows: bool, monkeypatch):
    from shardc.training.step import build_step_module

    monkeypatch.setattr(row_fusion, "ENABLED", rows)
    monkeypatch.setattr(rows_run, "MIN_ELEMENTS", 0)
    counted: list[int] = []
    real = row_fusion.fuse_rows
    monkeypatch.setattr(row_fusion, "fuse_rows", lambda m: counted.append(real(m)) or counted[-1])
    cm = compile_module(build_step_module(CFG, B, dtype))
    return cm, sum(counted)


def _args(dtype):
    rng = np.random.default_rng(1)
    params = {k: (v + rng.normal(0, 0.1, v.shape)).astype(dtype) for k, v in init_params(CFG, 1, np.float64).items()}
    tokens, targets = (rng.integers(0, CFG.vocab_size, (B, CFG.block_size)) for _ in range(2))
    specs = param_specs(CFG)
    return params, specs, [*(params[s.path] for s in specs), *(np.zeros(s.shape, dtype) for s in specs), tokens, targets, np.arange(CFG.vocab_size)], tokens, targets


@pytest.mark.slow
def test_step_with_row_kernels_equals_pytorch_float64(monkeypatch):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (the [torch] extra)")
    cm, n_chains = _step("float64", True, monkeypatch)
    assert n_chains >= 10  # per layer: softmax, its backward, two layernorms and theirs; the loss
    params, specs, args, tokens, targets = _args(np.float64)
    before = rows_run.CALLS[0]
    loss, *grads = cm.call("train_step", *args)
    assert rows_run.CALLS[0] - before >= 10

    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}

    def ln(x, pre):  # noqa: ANN001, ANN202
        return torch.nn.functional.layer_norm(x, (CFG.n_embd,), p[f"{pre}.weight"], p[f"{pre}.bias"], CFG.ln_eps)

    T = CFG.block_size
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = p["wte"][torch.tensor(tokens)] + p["wpe"]
    for i in range(CFG.n_layer):
        a, m = f"h.{i}.attn", f"h.{i}.mlp"
        qkv = torch.einsum("btc,ckhd->btkhd", ln(x, f"h.{i}.ln_1"), p[f"{a}.c_attn.weight"]) + p[f"{a}.c_attn.bias"]
        q, k, v = qkv.unbind(2)
        att = torch.einsum("bthd,buhd->bhtu", q, k) / math.sqrt(CFG.head_dim)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + torch.einsum("bthd,hdc->btc", torch.einsum("bhtu,buhd->bthd", att, v), p[f"{a}.c_proj.weight"]) + p[f"{a}.c_proj.bias"]
        h = torch.nn.functional.gelu(ln(x, f"h.{i}.ln_2") @ p[f"{m}.c_fc.weight"] + p[f"{m}.c_fc.bias"], approximate="tanh")
        x = x + h @ p[f"{m}.c_proj.weight"] + p[f"{m}.c_proj.bias"]
    logits = ln(x, "ln_f") @ p["wte"].T
    want = torch.nn.functional.cross_entropy(logits.reshape(-1, CFG.vocab_size), torch.tensor(targets).reshape(-1))
    want.backward()
    np.testing.assert_allclose(loss, want.item(), rtol=1e-12)
    for s, g in zip(specs, grads):
        ref = p[s.path].grad.numpy()
        np.testing.assert_allclose(g, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max(), err_msg=s.path)


@pytest.mark.slow
def test_step_with_row_kernels_equals_the_step_without_float32(monkeypatch):
    on, n_on = _step("float32", True, monkeypatch)
    off, n_off = _step("float32", False, monkeypatch)
    assert n_on >= 10 and n_off == 0
    *_, args, _, _ = _args(np.float32)
    before = rows_run.CALLS[0]
    with np.errstate(all="ignore"):
        got = on.call("train_step", *args)
        ran = rows_run.CALLS[0] - before
        want = off.call("train_step", *args)
    assert ran >= 10 and rows_run.CALLS[0] - before == ran
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5 * np.abs(w).max())
