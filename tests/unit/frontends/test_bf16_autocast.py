"""bf16 training against PyTorch's own bf16: `precision="bf16"` (the mixed-precision
pass) on the example GPT against PyTorch eager under `torch.autocast("cpu",
dtype=torch.bfloat16)`, a module that calls `torch.autocast` in its forward (the
importer keeps its casts), a transformers Llama from its config against its float32
run, and bf16 parameters or inputs refused in one line.

Tolerance, BF16_REL_TOL = 2^-9 (0.2%) of the loss: bf16 keeps 8 significant bits, so one
rounding moves a value by at most 2^-9 of itself. Both runs round the same float32
masters to bf16 the same way (to nearest even) and accumulate products in float32; they
differ in which activations they keep in bf16 (autocast: every linear's output; shardc's
policy: the products' operands) and in float32 summation order. Each such difference is
a bf16 rounding of a logit's inputs, and cross entropy moves by at most the change of
the logits, so over 3 steps the losses stay within one bf16 rounding of each other.
Measured on the development machine (AMX, MKL's bf16 GEMM), losses near 3.47 and 2.1:
example GPT vs autocast 1.3e-4 relative (4.5e-4 absolute; autocast itself is 1.0e-4
from float32); the autocast-calling module vs PyTorch 1.2e-5 (autocast vs float32:
3.3e-4); Llama bf16 vs float32 3.0e-5."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from shardc.frontends.torch_train import TorchTrainError, TorchTraining, load_task, train_module  # noqa: E402

BF16_REL_TOL = 2**-9
EXAMPLE = str(Path(__file__).resolve().parents[3] / "examples" / "torch_gpt.py")
SMALL = dict(vocab_size=32, block_size=8, n_layer=1, n_head=2, n_embd=16)
LR = 1e-2


def _eager(model, batches, loss_fn, autocast: bool) -> list[float]:
    """3 steps of torch.optim.AdamW (the defaults shardc's TORCH_ADAMW matches), the
    forward and loss under CPU autocast to bf16 when asked."""
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=LR)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _close(got, want) -> bool:
    return bool(np.allclose(got, want, rtol=BF16_REL_TOL, atol=0))


@pytest.mark.slow
def test_example_gpt_bf16_matches_pytorch_autocast():
    task = load_task(f"{EXAMPLE}:make", **SMALL)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, 32, (4, 8), generator=g), torch.randint(0, 32, (4, 8), generator=g)) for _ in range(3)]
    job = TorchTraining.prepare(copy.deepcopy(task.model), batches, task.loss_fn, axes=task.axes, plan=task.plan, steps=3, lr=LR, precision="bf16")
    got = job.run(None)
    autocast = _eager(task.model, batches, task.loss_fn, True)
    f32 = _eager(task.model, batches, task.loss_fn, False)
    assert len(got.losses) == 3 and _close(got.losses, autocast), (got.losses, autocast)
    assert not np.allclose(got.losses, f32, rtol=1e-6, atol=0)  # bf16 products ran (shardc float32 equals PyTorch's to 1e-7)
    assert all(p.dtype == np.float32 for p in got.params.values())  # float32 masters


class _AutocastMLP(nn.Module):
    """What a user writes to run a block in bf16: autocast inside the forward."""

    def __init__(self, autocast: bool = True):
        super().__init__()
        self.a, self.b, self.autocast = nn.Linear(16, 64), nn.Linear(64, 8), autocast

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            return self.b(F.gelu(self.a(x))).float()


def _mlp_batches():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(8, 16, generator=g), torch.randint(0, 8, (8,), generator=g)) for _ in range(3)]


@pytest.mark.slow
def test_module_calling_autocast_trains_as_pytorch():
    """The import keeps autocast's casts (bf16 linears, float32 elsewhere): 3 AdamW steps
    give PyTorch eager's losses, nearer to them on the first step than autocast is to
    float32."""
    torch.manual_seed(0)
    model, batches = _AutocastMLP(), _mlp_batches()
    got = train_module(copy.deepcopy(model), batches, F.cross_entropy, steps=3, lr=LR)
    want = _eager(model, batches, F.cross_entropy, False)  # the module's own autocast
    plain = copy.deepcopy(model)
    plain.autocast = False
    f32 = _eager(plain, batches, F.cross_entropy, False)
    assert _close(got.losses, want), (got.losses, want)
    assert abs(got.losses[0] - want[0]) < abs(want[0] - f32[0]) / 4, (got.losses, want, f32)


def test_bf16_parameters_or_inputs_are_refused_in_one_line():
    """shardc trains float32 masters: a module with bf16 parameters, or bf16 batches, get
    one line saying what to do instead (before anything is imported)."""
    model = _AutocastMLP(autocast=False).to(torch.bfloat16)
    with pytest.raises(TorchTrainError, match=r"^parameter a\.weight is torch\.bfloat16: shardc trains float32 parameters; keep them float32 and use --precision bf16"):
        train_module(model, _mlp_batches(), F.cross_entropy, steps=1)
    batches = [(x.to(torch.bfloat16), y) for x, y in _mlp_batches()]
    with pytest.raises(TorchTrainError, match="^a batch tensor is bfloat16 or float16: pass float32 inputs"):
        train_module(_AutocastMLP(), batches, F.cross_entropy, steps=1)


LLAMA = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
HF_ARGS = ["--torch-model", "hf:LlamaForCausalLM", "--steps", "3", "--lr", "1e-2", "--block-size", "8", "--quiet", "--eval-every", "0", "--checkpoint-every", "0"]


def hf_losses(out: Path) -> list[float]:
    return [float(r["loss"]) for r in csv.DictReader(open(out / "loss.csv"))]


@pytest.mark.slow
def test_transformers_llama_bf16_close_to_float32(tmp_path, capsys):
    """A transformers LlamaForCausalLM from its config (random init, no download) trained
    by `shardc-train --torch-model hf:... --precision bf16`: within bf16 tolerance of its
    float32 run, not equal to it; 2 simulated ranks with FSDP equal 1 rank to it."""
    pytest.importorskip("transformers", reason="needs transformers (the [torch] extra)")
    from shardc.tools.train import main

    (tmp_path / "cfg.json").write_text(json.dumps(LLAMA))
    losses = {}
    runs = {  # one global batch of 4 sequences per step in every run
        "f32": ["--precision", "f32", "--simulate", "1", "--per-device-batch", "4"],
        "bf16": ["--precision", "bf16", "--simulate", "1", "--per-device-batch", "4"],
        "bf16-fsdp2": ["--precision", "bf16", "--simulate", "2", "--fsdp", "--per-device-batch", "2"],
    }
    for name, extra in runs.items():
        assert main([*HF_ARGS, "--model-config", str(tmp_path / "cfg.json"), *extra, "--out", str(tmp_path / name)]) == 0, capsys.readouterr().err
        losses[name] = hf_losses(tmp_path / name)
    assert "precision bf16: bf16 products into float32" in capsys.readouterr().out
    assert _close(losses["bf16"], losses["f32"]) and losses["bf16"] != losses["f32"], losses
    assert _close(losses["bf16-fsdp2"], losses["bf16"]), losses
