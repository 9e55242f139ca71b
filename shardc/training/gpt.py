"""GPT (nanoGPT's architecture) written as tensor IR, readable top to bottom.

Weights are shaped for sharding, so no reshape stands between a weight and the dimension
a plan splits: the attention input projection is `[n_embd, 3, heads, head_dim]`, its
output projection `[heads, head_dim, n_embd]`, the MLP `[n_embd, n_mlp]` and
`[n_mlp, n_embd]`. Every parameter carries logical axis names (`ParamSpec.axes`), which
`shardc.training.axis` resolves against a grid. The LM head is tied to the token
embedding. Sequences are always `block_size` long (positions = the rows of `wpe`).

Einsum letters used below: b batch, t query position, u key position, c n_embd,
k q/k/v, h heads, d head_dim, m n_mlp, v vocab.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType, f32, f64
from xdsl.ir import Attribute

from shardc.training.ir_builder import FuncBuilder, Value, int_tensor, module_of


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    block_size: int = 16
    vocab_size: int = 64
    mlp_ratio: int = 4
    bias: bool = True
    ln_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def n_mlp(self) -> int:
        return self.mlp_ratio * self.n_embd


@dataclass(frozen=True)
class ParamSpec:
    """A parameter: its state path, shape, logical axes, whether AdamW decays it, and how
    it is initialised (normal | proj | zeros | ones)."""

    path: str
    shape: tuple[int, ...]
    axes: tuple[str, ...]
    decay: bool
    init: str = "normal"


def param_specs(cfg: GPTConfig) -> list[ParamSpec]:
    """Every parameter, in function-argument order."""
    C, H, D, M, V, T = cfg.n_embd, cfg.n_head, cfg.head_dim, cfg.n_mlp, cfg.vocab_size, cfg.block_size
    out = [
        ParamSpec("wte", (V, C), ("vocab", "n_embd"), True),
        ParamSpec("wpe", (T, C), ("block", "n_embd"), True),
    ]

    def ln(name: str) -> list[ParamSpec]:
        specs = [ParamSpec(f"{name}.weight", (C,), ("n_embd",), False, "ones")]
        if cfg.bias:
            specs.append(ParamSpec(f"{name}.bias", (C,), ("n_embd",), False, "zeros"))
        return specs

    def bias(name: str, shape: tuple[int, ...], axes: tuple[str, ...]) -> list[ParamSpec]:
        return [ParamSpec(name, shape, axes, False, "zeros")] if cfg.bias else []

    for i in range(cfg.n_layer):
        p = f"h.{i}"
        out += ln(f"{p}.ln_1")
        out.append(ParamSpec(f"{p}.attn.c_attn.weight", (C, 3, H, D), ("n_embd", "qkv", "heads", "head_dim"), True))
        out += bias(f"{p}.attn.c_attn.bias", (3, H, D), ("qkv", "heads", "head_dim"))
        out.append(ParamSpec(f"{p}.attn.c_proj.weight", (H, D, C), ("heads", "head_dim", "n_embd"), True, "proj"))
        out += bias(f"{p}.attn.c_proj.bias", (C,), ("n_embd",))
        out += ln(f"{p}.ln_2")
        out.append(ParamSpec(f"{p}.mlp.c_fc.weight", (C, M), ("n_embd", "n_mlp"), True))
        out += bias(f"{p}.mlp.c_fc.bias", (M,), ("n_mlp",))
        out.append(ParamSpec(f"{p}.mlp.c_proj.weight", (M, C), ("n_mlp", "n_embd"), True, "proj"))
        out += bias(f"{p}.mlp.c_proj.bias", (C,), ("n_embd",))
    out += ln("ln_f")
    return out


def init_params(cfg: GPTConfig, seed: int = 0, dtype: type = np.float32) -> dict[str, np.ndarray]:
    """nanoGPT's initialisation: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L))."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for s in param_specs(cfg):
        if s.init == "ones":
            a = np.ones(s.shape)
        elif s.init == "zeros":
            a = np.zeros(s.shape)
        else:
            std = 0.02 / math.sqrt(2 * cfg.n_layer) if s.init == "proj" else 0.02
            a = rng.normal(0.0, std, s.shape)
        out[s.path] = a.astype(dtype)
    return out


# ---------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------


def attention(fb: FuncBuilder, cfg: GPTConfig, x: Value, p: dict[str, Value], pre: str) -> Value:
    """Causal self-attention on x [b, t, c]; q, k and v come out of one projection."""
    qkv = fb.einsum("btc,ckhd->btkhd", x, p[f"{pre}.c_attn.weight"])
    if (bias := p.get(f"{pre}.c_attn.bias")) is not None:
        qkv = fb.add("btkhd,khd->btkhd", qkv, bias)
    q, k, v = fb.unstack("btkhd", qkv, axis="k")
    att = fb.unary("scale", "bhtu", fb.einsum("bthd,buhd->bhtu", q, k), 1.0 / math.sqrt(cfg.head_dim))
    att = fb.softmax("bhtu", fb.causal_mask("bhtu", att, query="t", key="u"), axis="u")
    y = fb.einsum("bhtu,buhd->bthd", att, v)
    out = fb.einsum("bthd,hdc->btc", y, p[f"{pre}.c_proj.weight"])
    if (b := p.get(f"{pre}.c_proj.bias")) is not None:
        out = fb.add("btc,c->btc", out, b)
    return out


def mlp(fb: FuncBuilder, x: Value, p: dict[str, Value], pre: str) -> Value:
    h = fb.einsum("btc,cm->btm", x, p[f"{pre}.c_fc.weight"])
    if (b := p.get(f"{pre}.c_fc.bias")) is not None:
        h = fb.add("btm,m->btm", h, b)
    out = fb.einsum("btm,mc->btc", fb.gelu("btm", h), p[f"{pre}.c_proj.weight"])
    if (b := p.get(f"{pre}.c_proj.bias")) is not None:
        out = fb.add("btc,c->btc", out, b)
    return out


def layernorm(fb: FuncBuilder, cfg: GPTConfig, x: Value, p: dict[str, Value], pre: str) -> Value:
    return fb.layernorm("btc", x, p[f"{pre}.weight"], p.get(f"{pre}.bias"), cfg.ln_eps)


def gpt_loss(fb: FuncBuilder, cfg: GPTConfig, p: dict[str, Value], tokens: Value, targets: Value, vocab_ids: Value) -> Value:
    """Mean next-token cross-entropy of the GPT on `tokens` [b, t] against `targets`."""
    return fb.cross_entropy("btv", gpt_logits(fb, cfg, p, tokens, vocab_ids), targets, vocab_ids)


def gpt_logits(fb: FuncBuilder, cfg: GPTConfig, p: dict[str, Value], tokens: Value, vocab_ids: Value) -> Value:
    """The next-token logits [b, t, v] of the GPT on `tokens` [b, t]."""
    x = fb.einsum("btv,vc->btc", fb.onehot("bt,v->btv", tokens, vocab_ids), p["wte"])
    x = fb.add("btc,tc->btc", x, p["wpe"])
    for i in range(cfg.n_layer):
        x = fb.add("btc,btc->btc", x, attention(fb, cfg, layernorm(fb, cfg, x, p, f"h.{i}.ln_1"), p, f"h.{i}.attn"))
        x = fb.add("btc,btc->btc", x, mlp(fb, layernorm(fb, cfg, x, p, f"h.{i}.ln_2"), p, f"h.{i}.mlp"))
    x = layernorm(fb, cfg, x, p, "ln_f")
    return fb.einsum("btc,vc->btv", x, p["wte"])


# ---------------------------------------------------------------------------------------
# Function signatures
# ---------------------------------------------------------------------------------------


def float_type(dtype: str | type) -> Attribute:
    return {"float32": f32, "float64": f64}[np.dtype(dtype).name]


def param_types(cfg: GPTConfig, ft: Attribute) -> list[tuple[str, Attribute]]:
    return [(s.path, TensorType(ft, list(s.shape))) for s in param_specs(cfg)]


def data_types(cfg: GPTConfig, batch: int) -> list[tuple[str, Attribute]]:
    """tokens, targets [batch, block_size] and the vocabulary ids [vocab] (an iota)."""
    bt = int_tensor([batch, cfg.block_size])
    return [("tokens", bt), ("targets", bt), ("vocab_ids", int_tensor([cfg.vocab_size]))]


def loss_builder(cfg: GPTConfig, batch: int, ft: Attribute, name: str = "loss", extra: Sequence[tuple[str, Attribute]] = ()) -> tuple[FuncBuilder, dict[str, Value], Value]:
    """A FuncBuilder with arguments (params..., *extra, tokens, targets, vocab_ids) and the
    forward pass built; returns it, the parameter values by path, and the loss."""
    ptypes = param_types(cfg, ft)
    fb = FuncBuilder(name, [*ptypes, *extra, *data_types(cfg, batch)], ft)
    params = {path: v for (path, _), v in zip(ptypes, fb.args)}
    tokens, targets, ids = fb.args[-3:]
    return fb, params, gpt_loss(fb, cfg, params, tokens, targets, ids)


def build_loss_module(cfg: GPTConfig, batch: int, dtype: str | type = "float32") -> ModuleOp:
    """`@loss(params..., tokens, targets, vocab_ids) -> tensor<f>`."""
    fb, _, loss = loss_builder(cfg, batch, float_type(dtype))
    fb.ret(loss)
    return module_of(fb.func)  # type: ignore[arg-type]
