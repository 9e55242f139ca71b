"""Small PyTorch models written the way PyTorch users write them, for tests and benchmarks
of the torch-mlir path: an MLP and a nanoGPT-style decoder (nn.Embedding, nn.LayerNorm,
nn.Linear, F.scaled_dot_product_attention, GELU, a head tied to the token embedding).

`python -m shardc.testing.torch_models DIR` writes their torch-mlir exports (the
fixtures under tests/data/torch_mlir: real IR for the tests that run without torch).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from shardc.frontends.torch import ExportedModule, export_module, require_torch

torch, _ = require_torch()
nn = torch.nn
F = torch.nn.functional


class MLP(nn.Module):
    def __init__(self, n_in: int = 16, n_hidden: int = 32, n_out: int = 8):
        super().__init__()
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.fc2 = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


@dataclass
class GPTConfig:
    vocab_size: int = 32
    block_size: int = 8
    n_layer: int = 1
    n_head: int = 2
    n_embd: int = 16


class SelfAttention(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.n_head = c.n_head
        self.qkv = nn.Linear(c.n_embd, 3 * c.n_embd)
        self.proj = nn.Linear(c.n_embd, c.n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        shape = (B, T, self.n_head, C // self.n_head)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd)
        self.attn = SelfAttention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd)
        self.fc = nn.Linear(c.n_embd, 4 * c.n_embd)
        self.out = nn.Linear(4 * c.n_embd, c.n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, c: GPTConfig = GPTConfig()):
        super().__init__()
        self.config = c
        self.wte = nn.Embedding(c.vocab_size, c.n_embd)
        self.wpe = nn.Embedding(c.block_size, c.n_embd)
        self.blocks = nn.ModuleList([Block(c) for _ in range(c.n_layer)])
        self.ln_f = nn.LayerNorm(c.n_embd)
        self.head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.head.weight = self.wte.weight  # tied

    def forward(self, idx):
        _, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def mlp_export(batch: int = 4, seed: int = 0) -> tuple[MLP, tuple, ExportedModule]:
    torch.manual_seed(seed)
    model = MLP()
    x = torch.randn(batch, 16)
    return model, (x,), export_module(model, (x,), func_name="mlp", input_names=["x"])


def gpt_export(config: GPTConfig = GPTConfig(), batch: int = 4, seed: int = 0) -> tuple[GPT, tuple, ExportedModule]:
    torch.manual_seed(seed)
    model = GPT(config)
    idx = torch.randint(0, config.vocab_size, (batch, config.block_size))
    return model, (idx,), export_module(model, (idx,), func_name="gpt", input_names=["idx"])


def mlp_baked_export(seed: int = 0) -> str:
    """An MLP with its weights baked in as `dense_resource` constants (torch-mlir's
    default when parameters are not arguments)."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4), nn.Softmax(-1))
    x = torch.randn(2, 8)
    return export_module(model, (x,), func_name="mlp_baked", params_as_args=False).text


def reference(model, inputs: tuple, exported: ExportedModule) -> dict:
    """The exported function's arguments by name and PyTorch's result (`result`)."""
    import numpy as np

    arrays = {n: t.detach().numpy() for n, t in zip(exported.input_names, inputs)}
    state = dict(model.named_parameters())
    state.update(model.named_buffers())
    arrays.update({n: state[n].detach().numpy() for n in exported.param_names})
    with torch.no_grad():
        arrays["result"] = model(*inputs).numpy()
    return {k: np.ascontiguousarray(v) for k, v in arrays.items()}


def main(argv: list[str]) -> int:
    """Write each model's export (NAME.mlir) and its arguments and PyTorch result
    (NAME.npz, by argument name, FQNs as written in the exported function's order)."""
    import numpy as np

    out = Path(argv[0] if argv else "tests/data/torch_mlir")
    out.mkdir(parents=True, exist_ok=True)
    cases = {
        "mlp": mlp_export(),
        "gpt": gpt_export(),
        "gpt_2layer": gpt_export(GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8)),
    }
    for name, (model, inputs, exported) in cases.items():
        (out / f"{name}.mlir").write_text(exported.text)
        np.savez(out / f"{name}.npz", **reference(model, inputs, exported))
    (out / "mlp_baked.mlir").write_text(mlp_baked_export())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
