"""A transformers decoder as its class builds it, under `mpiexec -n 2`: the forward
data parallel and Megatron tensor parallel over the MPI world, then 3 AdamW steps data
parallel, each against PyTorch on this process (float32). Every rank prints one line per
check, `OK` or `DIFFER`, and the driver exits 1 on a difference:
`mpiexec -n 2 python transformers_zoo_main.py llama gpt2 opt vit` (any of them, in one job:
torch and transformers are imported once per rank, not once per model; each line names its
model). OPT and ViT take the
Megatron axes `shardc.frontends.hf.derive_layouts` gives; ViT learns labels of images."""

from __future__ import annotations

import re
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F
import transformers

from shardc.frontends.hf import derive_layouts
from shardc.frontends.torch_train import forward_module, train_module
from shardc.training.axis import ShardingPlan, ShardingPolicy
from shardc.training.optimizer import AdamWConfig

VOCAB, BATCH, SEQ, STEPS, LR = 64, 4, 8, 3, 1e-2
IMAGE, LABELS = 16, 10
OPT = AdamWConfig(beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.01)  # eps: see tests/unit/frontends/test_transformers_zoo.py
PLAN = ShardingPlan(tp_rules={"attn": "shard", "mlp": "shard"})
MODELS = {
    "llama": (
        lambda: transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64,
        )),
        {
            r".*\.(q_proj|k_proj|v_proj)\.weight": ("attn", None), r".*\.o_proj\.weight": (None, "attn"),
            r".*\.(gate_proj|up_proj)\.weight": ("mlp", None), r".*\.down_proj\.weight": (None, "mlp"),
        },
    ),
    "gpt2": (
        lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=16, resid_pdrop=0.0, embd_pdrop=0.0,
            attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
        )),
        {
            r".*\.attn\.c_attn\.weight": (None, "attn"), r".*\.attn\.c_attn\.bias": ("attn",), r".*\.attn\.c_proj\.weight": ("attn", None),
            r".*\.mlp\.c_fc\.weight": (None, "mlp"), r".*\.mlp\.c_fc\.bias": ("mlp",), r".*\.mlp\.c_proj\.weight": ("mlp", None),
        },
    ),
    "opt": (  # cumsum position ids
        lambda: transformers.OPTForCausalLM(transformers.OPTConfig(
            vocab_size=VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=16,
            word_embed_proj_dim=32, dropout=0.0, attention_dropout=0.0, layerdrop=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=0,
        )),
        None,
    ),
    "vit": (  # a patch-embedding convolution
        lambda: transformers.ViTForImageClassification(transformers.ViTConfig(
            image_size=IMAGE, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, num_labels=LABELS, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        )),
        None,
    ),
}


def ids(seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(seed))


def inputs_of(name: str, seed: int) -> torch.Tensor:
    if name == "vit":
        return torch.randn(BATCH, 3, IMAGE, IMAGE, generator=torch.Generator().manual_seed(seed))
    return ids(seed)


def targets_of(name: str, seed: int) -> torch.Tensor:
    if name == "vit":
        return torch.randint(0, LABELS, (BATCH,), generator=torch.Generator().manual_seed(seed))
    return ids(seed)


def loss_fn(out, targets):
    if out.logits.ndim == 2:  # an image classifier's logits
        return F.cross_entropy(out.logits, targets)
    return F.cross_entropy(out.logits.flatten(0, 1), targets.flatten())


def report(rank: int, what: str, err: float, tol: float) -> bool:
    ok = err < tol
    print(f"rank {rank} {what}: {'OK' if ok else 'DIFFER'} (error {err:.2e})", flush=True)
    return ok


def main(names: list[str]) -> int:
    return max(check(name) for name in names)


def check(name: str) -> int:
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    build, axes = MODELS[name]
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build()
    ok = True
    plan = PLAN
    if axes is None:
        derived = derive_layouts(model)
        axes, plan = {re.escape(k): v for k, v in derived.axes.items()}, derived.plan

    model.eval()
    x = inputs_of(name, 0)
    with torch.no_grad():
        want = model(x).logits.numpy()
    for what, layout in (("forward dp", {}), ("forward megatron", {"axes": axes, "plan": plan, "policy": ShardingPolicy(tp=2, zero=False)})):
        (got,) = forward_module(model, [x], world=None, **layout)
        ok &= report(rank, f"{name} {what}", float(np.abs(got - want).max() / np.abs(want).max()), 1e-5)

    model.train()
    batches = [(inputs_of(name, 10 + s), targets_of(name, 20 + s)) for s in range(STEPS)]
    result = train_module(model, batches, loss_fn, world=None, steps=STEPS, lr=LR, opt=OPT)
    torch.manual_seed(0)  # the same initial state: rebuilt from the same seed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = build()
    opt = torch.optim.AdamW(ref.parameters(), lr=LR, betas=(OPT.beta1, OPT.beta2), eps=OPT.eps, weight_decay=OPT.weight_decay)
    losses = []
    for inputs, targets in batches:
        opt.zero_grad()
        loss = loss_fn(ref(inputs), targets)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ok &= report(rank, f"{name} training losses", float(np.abs(np.array(result.losses) - losses).max() / np.abs(losses).max()), 1e-5)
    err = max(float(np.abs(result.params[k] - p.detach().numpy()).max()) for k, p in ref.named_parameters())
    ok &= report(rank, f"{name} training parameters", err, LR / 500)  # a 500th of one step
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
