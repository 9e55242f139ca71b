"""A nanoGPT-style decoder in plain PyTorch, trained by shardc through torch-mlir.

    shardc-train --torch-model examples/torch_gpt.py:make --np 4 --tp 2 --fsdp

The model is what a PyTorch user writes (nn.Embedding, nn.LayerNorm, nn.Linear,
F.scaled_dot_product_attention, GELU, a head tied to the token embedding); nothing in it
knows about sharding. `make()` is the factory the `--torch-model FILE.py:FACTORY`
contract asks for (`task` is the same function under its earlier name): called as
`make(vocab_size=, block_size=, seed=)`, it returns a `TorchTask` with the module, its
loss, the logical axes of its parameters by FQN pattern, the plan that splits them
(Megatron-style: attention heads and the MLP hidden units over `shard`, the vocabulary
too over `batch` for ZeRO), the parameters trained without weight decay (biases and
LayerNorm gains, nanoGPT's two parameter groups) and a `generate` hook for `--sample`.

q, k and v are three projections rather than nanoGPT's fused `c_attn`: each one's output
features are `heads x head_dim` in that order, so splitting them splits whole heads and
attention runs on local heads with no communication (a fused `[3 * n_embd]` output would
split across the q/k/v boundary).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from shardc.frontends.torch_train import TorchTask
from shardc.training.axis import ShardingPlan


@dataclass
class GPTConfig:
    vocab_size: int = 64
    block_size: int = 16
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 32


class CausalSelfAttention(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.n_head = c.n_head
        self.q = nn.Linear(c.n_embd, c.n_embd)
        self.k = nn.Linear(c.n_embd, c.n_embd)
        self.v = nn.Linear(c.n_embd, c.n_embd)
        self.proj = nn.Linear(c.n_embd, c.n_embd)

    def forward(self, x):
        B, T, C = x.shape
        heads = (B, T, self.n_head, C // self.n_head)
        q, k, v = (f(x).view(heads).transpose(1, 2) for f in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(c.n_embd, 4 * c.n_embd)
        self.proj = nn.Linear(4 * c.n_embd, c.n_embd)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.config = c
        self.wte = nn.Embedding(c.vocab_size, c.n_embd)
        self.wpe = nn.Embedding(c.block_size, c.n_embd)
        self.h = nn.ModuleList([Block(c) for _ in range(c.n_layer)])
        self.ln_f = nn.LayerNorm(c.n_embd)
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        """nanoGPT's: N(0, 0.02) weights, zero biases (the tied table's default N(0, 1)
        would start the loss far above ln(vocab))."""
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx):
        _, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


# Logical axes of the parameters, by FQN pattern (unnamed ones are replicated). A Linear's
# weight is [out_features, in_features].
AXES = {
    r"wte\.weight": ("vocab", None),
    r"h\.\d+\.attn\.[qkv]\.weight": ("n_attn", None),
    r"h\.\d+\.attn\.[qkv]\.bias": ("n_attn",),
    r"h\.\d+\.attn\.proj\.weight": (None, "n_attn"),
    r"h\.\d+\.mlp\.fc\.weight": ("n_mlp", None),
    r"h\.\d+\.mlp\.fc\.bias": ("n_mlp",),
    r"h\.\d+\.mlp\.proj\.weight": (None, "n_mlp"),
}
PLAN = ShardingPlan(
    tp_rules={"n_attn": "shard", "n_mlp": "shard"},
    zero_rules={"n_attn": "batch", "n_mlp": "batch", "vocab": "batch"},
)


# nanoGPT's second parameter group: no weight decay on biases and LayerNorm gains.
NO_DECAY = (r".*\.bias", r"(.*\.)?ln_(\d+|f)\.weight")


@torch.no_grad()
def generate(model, prompt, n_tokens, *, temperature=0.8, top_k=None, seed=0, n_valid=None):
    """nanoGPT's sampling loop: the last `block_size` tokens in, the next one drawn from
    the softmax of the last position's logits (ids from `n_valid` on are padding)."""
    g = torch.Generator().manual_seed(seed)
    model.eval()
    idx = torch.tensor([list(prompt)], dtype=torch.long)
    for _ in range(n_tokens):
        logits = model(idx[:, -model.config.block_size :])[0, -1].double()
        if n_valid is not None:
            logits[n_valid:] = -float("inf")
        if temperature <= 0:
            nxt = int(torch.argmax(logits))
        else:
            logits = logits / temperature
            if top_k is not None and top_k < int(torch.isfinite(logits).sum()):
                kth = torch.topk(logits, top_k).values[-1]
                logits[logits < kth] = -float("inf")
            nxt = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=g))
        idx = torch.cat([idx, torch.tensor([[nxt]])], dim=1)
    return idx[0, len(prompt) :].tolist()


def make(vocab_size: int = 64, block_size: int = 16, seed: int = 0, **config) -> TorchTask:
    """The `--torch-model` factory: a seeded model for the tokenizer's vocabulary."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=vocab_size, block_size=block_size, **config))
    return TorchTask(model, loss_fn, AXES, PLAN, kind="lm", no_decay=NO_DECAY, generate=generate)


task = make  # the factory's earlier name
