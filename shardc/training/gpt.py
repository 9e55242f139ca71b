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

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the IR parts import xDSL where they run: a compile-cache hit needs none
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Attribute

    from shardc.training.ir_builder import FuncBuilder, Value


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
        largest = self.n_embd * max(self.vocab_size, self.block_size, 3 * self.n_embd, self.mlp_ratio * self.n_embd)
        if largest >= 1 << 32:  # what `normal_piece`'s counter-based generator can number
            raise ValueError(f"the model is too large: its largest parameter has {largest} elements (at most 2**32 - 1; lower n_embd)")

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


def init_std(cfg: GPTConfig, spec: ParamSpec) -> float:
    """nanoGPT's: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L))."""
    return 0.02 / math.sqrt(2 * cfg.n_layer) if spec.init == "proj" else 0.02


def init_piece(cfg: GPTConfig, spec: ParamSpec, seed: int = 0, dtype: type | np.dtype = np.float32, index: Sequence[slice] | None = None) -> np.ndarray:
    """The initial value of `spec` at `index` (slices with steps of 1; None: the whole
    tensor). A piece equals that slice of the whole tensor exactly, so each rank makes
    only what it holds, on any grid."""
    shape = spec.shape
    sl = [slice(*s.indices(n)[:2]) for s, n in zip(index or (), shape)] + [slice(0, n) for n in shape[len(index or ()) :]]
    local = tuple(max(0, s.stop - s.start) for s in sl)
    if spec.init == "ones":
        return np.ones(local, dtype)
    if spec.init == "zeros":
        return np.zeros(local, dtype)
    out = normal_piece(f"{seed}:{spec.path}", shape, sl, init_std(cfg, spec))
    return out if np.dtype(dtype) == np.float32 else out.astype(dtype)


class InitialParams(Mapping[str, np.ndarray]):
    """`init_params`' result: each tensor made on first access (then kept), and `piece`
    making any slice without the whole. Values may be replaced (`params[k] = ...`)."""

    def __init__(self, cfg: GPTConfig, seed: int, dtype: type | np.dtype):
        self.cfg, self.seed, self.dtype = cfg, seed, np.dtype(dtype)
        self.specs = {s.path: s for s in param_specs(cfg)}
        self._made: dict[str, np.ndarray] = {}

    def __getitem__(self, path: str) -> np.ndarray:
        got = self._made.get(path)
        if got is None:
            got = self._made[path] = init_piece(self.cfg, self.specs[path], self.seed, self.dtype)
        return got

    def __setitem__(self, path: str, value: np.ndarray) -> None:
        if path not in self.specs:
            raise KeyError(path)
        self._made[path] = value

    def __iter__(self) -> Iterator[str]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    def piece(self, path: str, index: Sequence[slice], dtype: type | np.dtype | None = None) -> np.ndarray:
        """A new array holding `self[path][index]` (as `dtype`), made without the whole
        tensor unless it was already made or replaced."""
        dt = self.dtype if dtype is None else np.dtype(dtype)
        made = self._made.get(path)
        if made is not None:
            return np.array(made[tuple(index)], dtype=dt, order="C")
        return init_piece(self.cfg, self.specs[path], self.seed, np.dtype(self.dtype), index).astype(dt, copy=False)


def init_params(cfg: GPTConfig, seed: int = 0, dtype: type | np.dtype = np.float32) -> InitialParams:
    """nanoGPT's initialisation (`init_std`; layernorm weights 1, biases 0), every
    normal tensor drawn by `normal_piece` keyed by the seed and the state path: the
    numbers do not depend on the dtype (float64 gets the float32 draws), on the grid,
    or on which tensors are made first."""
    return InitialParams(cfg, seed, dtype)


# A counter-based normal generator: element i of a tensor is a function of (key, i)
# alone, two 32-bit hashes of i (Wellons' lowbias32 and a second good pair from his
# hash-prospector) giving two 24-bit uniforms and one Box-Muller normal, all vectorized
# numpy in float32 over chunks that stay in cache. Any slice can start anywhere, and no
# float64 draws or casts are made (3-4x faster than `Generator.normal` then astype).
_CHUNK = 1 << 16
_GOLDEN = np.uint32(0x9E3779B9)
_H1 = (np.uint32(16), np.uint32(0x7FEB352D), np.uint32(15), np.uint32(0x846CA68B), np.uint32(16))
_H2 = (np.uint32(16), np.uint32(0x21F0AAAD), np.uint32(15), np.uint32(0xD35A2D97), np.uint32(15))
_U24 = np.float32(2.0**-24)
_TWO_PI_U24 = np.float32(2.0 * math.pi * 2.0**-24)


def normal_piece(key: str, shape: Sequence[int], index: Sequence[slice], std: float) -> np.ndarray:
    """float32 N(0, std) draws of the tensor named `key` of `shape`, at `index` (one
    slice per dimension, with start and stop, step 1); equal to the whole tensor's
    values there, whatever the slices."""
    size = math.prod(shape)
    if size >= 1 << 32:
        raise ValueError(f"cannot initialise {key}: {size} elements, the generator counts to 2**32")
    d = hashlib.blake2b(key.encode(), digest_size=8).digest()
    keys = (np.uint32(int.from_bytes(d[:4], "little")), np.uint32(int.from_bytes(d[4:], "little")))
    strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    offs = [np.arange(s.start, s.stop, dtype=np.uint32) * np.uint32(st) for s, st in zip(index, strides)]
    out = np.empty(tuple(len(o) for o in offs), np.float32)
    if out.size:
        _fill(out, offs, 0, keys, np.float32(std))
    return out


def _fill(out: np.ndarray, offs: list[np.ndarray], base: int, keys: tuple[np.uint32, np.uint32], std: np.float32) -> None:
    """Fill `out` (C-contiguous) with the draws at flat indices base + sum of `offs`
    (one offset vector per dimension), in blocks of whole rows of about _CHUNK."""
    if out.ndim == 0:
        out[...] = _draw(np.array([base], np.uint32), keys, std)[0]
        return
    n = out.shape[0]
    inner = out.size // n
    if inner > _CHUNK:
        for r in range(n):
            _fill(out[r], offs[1:], base + int(offs[0][r]), keys, std)
        return
    tail = offs[-1]
    for o in reversed(offs[1:-1]):
        tail = np.add.outer(o, tail)
    rows = max(1, _CHUNK // inner)
    flat = out.reshape(n, inner)
    for r in range(0, n, rows):
        head = offs[0][r : r + rows] + np.uint32(base)
        idx = np.add.outer(head, tail).ravel() if out.ndim > 1 else head
        flat[r : r + rows] = _draw(idx, keys, std).reshape(-1, inner)


def _hash(x: np.ndarray, h: tuple[np.uint32, ...], tmp: np.ndarray) -> np.ndarray:
    """x -> lowbias32-style mix, in place (x ^= x >> a; x *= m; x ^= x >> b; x *= n; x ^= x >> c)."""
    a, m, b, k, c = h
    for shift, mul in ((a, m), (b, k)):
        np.right_shift(x, shift, out=tmp)
        np.bitwise_xor(x, tmp, out=x)
        np.multiply(x, mul, out=x)
    np.right_shift(x, c, out=tmp)
    np.bitwise_xor(x, tmp, out=x)
    return x


def _draw(idx: np.ndarray, keys: tuple[np.uint32, np.uint32], std: np.float32) -> np.ndarray:
    """std * sqrt(-2 ln u1) * cos(2 pi u2), u1 in (0, 1] and u2 in [0, 1) 24-bit
    uniforms from two hashes of each index."""
    x = np.multiply(idx, _GOLDEN)
    tmp = np.empty_like(x)
    h1 = _hash(np.bitwise_xor(x, keys[0]), _H1, tmp)
    h2 = _hash(np.bitwise_xor(x, keys[1], out=x), _H2, tmp)
    np.right_shift(h1, np.uint32(8), out=h1)
    np.add(h1, np.uint32(1), out=h1)
    u = h1.view(np.int32).astype(np.float32)
    np.multiply(u, _U24, out=u)
    np.log(u, out=u)
    np.multiply(u, np.float32(-2.0), out=u)
    np.sqrt(u, out=u)
    np.right_shift(h2, np.uint32(8), out=h2)
    t = h2.view(np.int32).astype(np.float32)
    np.multiply(t, _TWO_PI_U24, out=t)
    np.cos(t, out=t)
    np.multiply(u, t, out=u)
    np.multiply(u, std, out=u)
    return u


# ---------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------


def attention(fb: FuncBuilder, cfg: GPTConfig, x: Value, p: dict[str, Value], pre: str, ln: str) -> Value:
    """Causal self-attention on layernorm `ln` of x [b, t, c]; q, k and v come out of
    one projection."""
    qkv = layernorm_einsum(fb, cfg, x, p, ln, "btc,ckhd->btkhd", p[f"{pre}.c_attn.weight"])
    if (bias := p.get(f"{pre}.c_attn.bias")) is not None:
        qkv = fb.add("btkhd,khd->btkhd", qkv, bias)
    q, k, v = fb.unstack("btkhd", qkv, axis="k")
    y = fb.attention(q, k, v, scale=1.0 / math.sqrt(cfg.head_dim))  # keeps no [b, h, t, u] array for the backward
    out = fb.einsum("bthd,hdc->btc", y, p[f"{pre}.c_proj.weight"])
    if (b := p.get(f"{pre}.c_proj.bias")) is not None:
        out = fb.add("btc,c->btc", out, b)
    return out


def mlp(fb: FuncBuilder, cfg: GPTConfig, x: Value, p: dict[str, Value], pre: str, ln: str) -> Value:
    """The MLP on layernorm `ln` of x [b, t, c]."""
    h = layernorm_einsum(fb, cfg, x, p, ln, "btc,cm->btm", p[f"{pre}.c_fc.weight"])
    if (b := p.get(f"{pre}.c_fc.bias")) is not None:
        h = fb.add("btm,m->btm", h, b)
    out = fb.gelu_einsum("btm,mc->btc", h, p[f"{pre}.c_proj.weight"])  # keeps h, not gelu(h)
    if (b := p.get(f"{pre}.c_proj.bias")) is not None:
        out = fb.add("btc,c->btc", out, b)
    return out


def layernorm_einsum(fb: FuncBuilder, cfg: GPTConfig, x: Value, p: dict[str, Value], pre: str, spec: str, w: Value) -> Value:
    """einsum(spec, layernorm `pre` of x, w): one layer, so that the backward keeps
    xhat alone, not also the normalised x (`FuncBuilder.layernorm_einsum`)."""
    return fb.layernorm_einsum("btc", x, p[f"{pre}.weight"], p.get(f"{pre}.bias"), spec, w, cfg.ln_eps)


def gpt_loss(fb: FuncBuilder, cfg: GPTConfig, p: dict[str, Value], tokens: Value, targets: Value, vocab_ids: Value) -> Value:
    """Mean next-token cross-entropy of the GPT on `tokens` [b, t] against `targets`."""
    return fb.cross_entropy("btv", gpt_logits(fb, cfg, p, tokens, vocab_ids), targets, vocab_ids)


def gpt_logits(fb: FuncBuilder, cfg: GPTConfig, p: dict[str, Value], tokens: Value, vocab_ids: Value) -> Value:
    """The next-token logits [b, t, v] of the GPT on `tokens` [b, t]."""
    x = fb.einsum("btv,vc->btc", fb.onehot("bt,v->btv", tokens, vocab_ids), p["wte"])
    x = fb.add("btc,tc->btc", x, p["wpe"])
    for i in range(cfg.n_layer):
        x = fb.add("btc,btc->btc", x, attention(fb, cfg, x, p, f"h.{i}.attn", ln=f"h.{i}.ln_1"))
        x = fb.add("btc,btc->btc", x, mlp(fb, cfg, x, p, f"h.{i}.mlp", ln=f"h.{i}.ln_2"))
    return layernorm_einsum(fb, cfg, x, p, "ln_f", "btc,vc->btv", p["wte"])


# ---------------------------------------------------------------------------------------
# Function signatures
# ---------------------------------------------------------------------------------------


def float_type(dtype: str | type) -> Attribute:
    from xdsl.dialects.builtin import f32, f64

    return {"float32": f32, "float64": f64}[np.dtype(dtype).name]


def param_types(cfg: GPTConfig, ft: Attribute) -> list[tuple[str, Attribute]]:
    from xdsl.dialects.builtin import TensorType

    return [(s.path, TensorType(ft, list(s.shape))) for s in param_specs(cfg)]


def data_types(cfg: GPTConfig, batch: int) -> list[tuple[str, Attribute]]:
    """tokens, targets [batch, block_size] and the vocabulary ids [vocab] (an iota)."""
    from shardc.training.ir_builder import int_tensor

    bt = int_tensor([batch, cfg.block_size])
    return [("tokens", bt), ("targets", bt), ("vocab_ids", int_tensor([cfg.vocab_size]))]


def loss_builder(cfg: GPTConfig, batch: int, ft: Attribute, name: str = "loss", extra: Sequence[tuple[str, Attribute]] = ()) -> tuple[FuncBuilder, dict[str, Value], Value]:
    """A FuncBuilder with arguments (params..., *extra, tokens, targets, vocab_ids) and the
    forward pass built; returns it, the parameter values by path, and the loss."""
    ptypes = param_types(cfg, ft)
    from shardc.training.ir_builder import FuncBuilder

    fb = FuncBuilder(name, [*ptypes, *extra, *data_types(cfg, batch)], ft)
    params = {path: v for (path, _), v in zip(ptypes, fb.args)}
    tokens, targets, ids = fb.args[-3:]
    return fb, params, gpt_loss(fb, cfg, params, tokens, targets, ids)


def build_loss_module(cfg: GPTConfig, batch: int, dtype: str | type = "float32") -> ModuleOp:
    """`@loss(params..., tokens, targets, vocab_ids) -> tensor<f>`."""
    fb, _, loss = loss_builder(cfg, batch, float_type(dtype))
    fb.ret(loss)
    from shardc.training.ir_builder import module_of

    return module_of(fb.func)  # type: ignore[arg-type]
