"""Logical axes derived for transformers models as `from_config` builds them (Llama with
GQA, Qwen2 with q/k/v biases, Mistral, GPT-2's fused Conv1D, BERT): each split dimension
must be the one the module's weight layout says (nn.Linear [out, in], Conv1D [in, out]),
checked against the modules themselves, and the layouts must fit a grid; nothing is
imported through torch-mlir here."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
transformers = pytest.importorskip("transformers", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch.nn as nn  # noqa: E402
from transformers.pytorch_utils import Conv1D  # noqa: E402

from shardc.frontends.hf import FUSED, HEADS, KV_HEADS, MLP, VOCAB, check_whole_heads, derive_layouts, hf_task  # noqa: E402
from shardc.frontends.torch_train import TorchTrainError, plan_state  # noqa: E402
from shardc.training.axis import ShardingPlan, ShardingPolicy  # noqa: E402
from shardc.training.mesh import make_grid  # noqa: E402

DECODER = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)


def _llama(**kw):
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**DECODER, **kw}))


def _qwen2():
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**DECODER))


def _mistral():
    return transformers.MistralForCausalLM(transformers.MistralConfig(**DECODER))


def _gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=48, bos_token_id=0, eos_token_id=0))


def _bert():
    return transformers.BertForMaskedLM(transformers.BertConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4))


def _out_in(m):
    """(output features, input features) and the weight's dimension of each."""
    if isinstance(m, Conv1D):
        return (m.weight.shape[1], 1), (m.weight.shape[0], 0)
    return (m.out_features, 0), (m.in_features, 1)


def _split_dims(model, layouts):
    """{module FQN: ("out" | "in", axis)} for every weight the derived axes split."""
    out = {}
    for fqn, m in model.named_modules():
        w = getattr(m, "weight", None)
        if not isinstance(m, (nn.Linear, Conv1D)) or f"{fqn}.weight" not in layouts.axes:
            continue
        ax = layouts.axes[f"{fqn}.weight"]
        (n_out, d_out), (n_in, d_in) = _out_in(m)
        named = [d for d, a in enumerate(ax) if a is not None]
        assert len(named) == 1 and w.ndim == 2, (fqn, ax)
        out[fqn] = ("out" if named[0] == d_out else "in", ax[named[0]])
    return out


@pytest.mark.parametrize("build", [_llama, _qwen2, _mistral], ids=["llama", "qwen2", "mistral"])
def test_decoders_split_like_megatron(build):
    model = build()
    layouts = derive_layouts(model)
    dims = _split_dims(model, layouts)
    for i in range(2):
        a, m = f"model.layers.{i}.self_attn", f"model.layers.{i}.mlp"
        assert dims[f"{a}.q_proj"] == ("out", HEADS)
        assert dims[f"{a}.k_proj"] == dims[f"{a}.v_proj"] == ("out", KV_HEADS)
        assert dims[f"{a}.o_proj"] == ("in", HEADS)
        assert dims[f"{m}.gate_proj"] == dims[f"{m}.up_proj"] == ("out", MLP)
        assert dims[f"{m}.down_proj"] == ("in", MLP)
    assert layouts.axes["model.embed_tokens.weight"] == (VOCAB, None) and layouts.axes["lm_head.weight"] == (VOCAB, None)
    # Biases (Qwen2's q/k/v) follow their output features; norm gains are replicated and not decayed.
    for name, p in model.named_parameters():
        if name.endswith("_proj.bias"):
            assert layouts.axes[name] == layouts.axes[name.replace(".bias", ".weight")][:1]
        if "norm" in name:
            assert name not in layouts.axes and name in layouts.no_decay
    assert not [n for n in layouts.no_decay if n.endswith("_proj.weight")]
    assert VOCAB not in layouts.plan.tp_rules and layouts.plan.zero()[VOCAB] == "batch"


def test_derived_layouts_fit_a_grid_and_split_gqa_heads():
    """tp=2, FSDP on 4 ranks, Llama with 4 query / 2 key-value heads: every layout is valid
    on the grid, and each rank's share of q_proj and k_proj is whole heads."""
    import re

    from shardc.training.axis import resolve

    model = _llama()
    layouts = derive_layouts(model)
    policy = ShardingPolicy(2, True, True)
    params, _ = plan_state(model, {re.escape(k): v for k, v in layouts.axes.items()}, layouts.plan, policy, make_grid(4, 2))
    by = {p.path: p for p in params}
    head_dim = model.config.hidden_size // model.config.num_attention_heads
    for name in ("q_proj", "k_proj"):
        p = by[f"model.layers.0.self_attn.{name}.weight"]
        compute = resolve(p.axes, layouts.plan, policy).compute
        assert compute[0] in ("shard", ("shard",)) and compute[1] is None
        assert (p.shape[0] // 2) % head_dim == 0


def test_tied_head_is_named_once():
    """Llama with tie_word_embeddings: one table, axes on the FQN named_parameters lists."""
    model = _llama(tie_word_embeddings=True)
    layouts = derive_layouts(model)
    names = [n for n, _ in model.named_parameters()]
    assert "lm_head.weight" not in names and layouts.axes["model.embed_tokens.weight"] == (VOCAB, None)
    assert set(layouts.axes) <= set(names)


def test_gpt2_fused_attention_is_not_split_for_tp():
    """Conv1D stores [in, out]: c_fc's output features are dim 1, the MLP's c_proj input
    features dim 0; c_attn fuses q|k|v, so its block (c_attn, attn.c_proj) is ZeRO-only."""
    model = _gpt2()
    layouts = derive_layouts(model)
    dims = _split_dims(model, layouts)
    for i in range(2):
        h = f"transformer.h.{i}"
        assert dims[f"{h}.mlp.c_fc"] == ("out", MLP) and dims[f"{h}.mlp.c_proj"] == ("in", MLP)
        assert layouts.axes[f"{h}.mlp.c_fc.weight"] == (None, MLP)  # Conv1D: [in, out]
        assert dims[f"{h}.attn.c_attn"][1] == dims[f"{h}.attn.c_proj"][1] == FUSED
    assert FUSED not in layouts.plan.tp_rules and layouts.plan.zero()[FUSED] == "batch"
    assert any("attn.c_attn fuses several projections" in n for n in layouts.notes)
    assert layouts.axes["transformer.wte.weight"] == (VOCAB, None) and "transformer.wpe.weight" not in layouts.axes
    assert "lm_head.weight" not in layouts.axes  # tied to wte
    # Under tp=2 the fused projection keeps every feature on every rank.
    import re

    params, _ = plan_state(model, {re.escape(k): v for k, v in layouts.axes.items()}, layouts.plan, ShardingPolicy(2, False, False), make_grid(2, 2))
    from shardc.training.axis import resolve

    by = {p.path: p for p in params}
    assert all(x is None for x in resolve(by["transformer.h.0.attn.c_attn.weight"].axes, layouts.plan, ShardingPolicy(2, False, False)).compute)


def test_bert_encoder_layouts():
    model = _bert()
    layouts = derive_layouts(model)
    dims = _split_dims(model, layouts)
    e = "bert.encoder.layer.0"
    assert dims[f"{e}.attention.self.query"] == ("out", HEADS)
    assert dims[f"{e}.attention.self.key"] == dims[f"{e}.attention.self.value"] == ("out", KV_HEADS)
    assert dims[f"{e}.attention.output.dense"] == ("in", HEADS)
    assert dims[f"{e}.intermediate.dense"] == ("out", MLP) and dims[f"{e}.output.dense"] == ("in", MLP)
    assert "cls.predictions.transform.dense.weight" not in layouts.axes  # the head's transform: replicated
    assert layouts.axes["bert.embeddings.word_embeddings.weight"] == (VOCAB, None)
    assert layouts.axes["cls.predictions.bias"] == (VOCAB,)  # the decoder's bias, under the name state_dict lists first


def test_a_tp_that_cuts_heads_is_refused():
    model = _llama(num_key_value_heads=1)
    layouts = derive_layouts(model)
    check_whole_heads(model, layouts, 1)
    with pytest.raises(TorchTrainError, match=r"tp=2 does not divide num_key_value_heads=1: each rank must hold whole attention heads"):
        check_whole_heads(model, layouts, 2)


def test_user_axes_override_the_derived_ones(tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({k: v for k, v in DECODER.items() if k != "vocab_size"}))
    task = hf_task("LlamaForCausalLM", model_config=str(cfg), vocab_size=64, block_size=8,
                   axes={r"model\.layers\.\d+\.mlp\.down_proj\.weight": (None, None)})
    assert task.axes[r"model\.layers\.\d+\.mlp\.down_proj\.weight"] == (None, None)
    assert not [p for p in task.axes if "down_proj" in p and p != r"model\.layers\.\d+\.mlp\.down_proj\.weight"]
    assert task.axes[r"model\.layers\.0\.mlp\.up_proj\.weight"] == (MLP, None)
    assert type(task.model).__name__ == "LlamaForCausalLM" and task.model.config.vocab_size == 64
    other = hf_task("LlamaForCausalLM", model_config=str(cfg), vocab_size=64, block_size=8, plan=ShardingPlan())
    assert other.plan == ShardingPlan()


def test_seed_gives_the_same_model(tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(DECODER))
    a, b, c = (hf_task("hf:LlamaForCausalLM", model_config=str(cfg), seed=s).model for s in (3, 3, 4))
    w = "model.layers.0.mlp.up_proj.weight"
    sd = [m.state_dict()[w] for m in (a, b, c)]
    assert sd[0].equal(sd[1]) and not sd[0].equal(sd[2])


@pytest.mark.slow
def test_qwen2_trains_on_derived_layouts_like_torch_adamw(tmp_path):
    """Qwen2 (q/k/v biases split with their features, GQA) trained 3 steps on the derived
    axes, tp=2 with ZeRO on 4 simulated ranks, equals torch.optim.AdamW on the same module
    (transformers' Trainer groups: no decay on biases and norms), in float64."""
    import copy

    import numpy as np
    import torch

    from shardc.frontends.torch_train import TORCH_ADAMW, train_module

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({**DECODER, "num_hidden_layers": 1}))
    task = hf_task("Qwen2ForCausalLM", model_config=str(cfg), vocab_size=64, block_size=8, seed=0, tp=2)
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, 64, (4, 8), generator=g), torch.randint(0, 64, (4, 8), generator=g)) for _ in range(3)]
    model = task.model.double()  # float64 (the rotary angles stay float32, in transformers' code too)
    reference = copy.deepcopy(model)
    result = train_module(model, batches, task.loss_fn, axes=task.axes, plan=task.plan, no_decay=task.no_decay,
                          policy=ShardingPolicy(2, True, False), world=4, steps=3, lr=1e-2)
    no_decay = {n for n in (p.replace("\\", "") for p in task.no_decay)}
    groups = [
        {"params": [p for n, p in reference.named_parameters() if n not in no_decay], "weight_decay": TORCH_ADAMW.weight_decay},
        {"params": [p for n, p in reference.named_parameters() if n in no_decay], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=1e-2)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = task.loss_fn(reference(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # The losses after two updates agree to rounding. Parameters agree less closely: the
    # rotary angles are float32 (in transformers' code), and AdamW's first steps move an
    # entry whose gradient is below eps (1e-8) by lr * g / eps, so float32 noise in such
    # a gradient shows up 1e6 times larger; a wrong split would be off by O(1).
    np.testing.assert_allclose(result.losses, losses, rtol=1e-7)
    for n, p in reference.named_parameters():
        want = p.detach().numpy()
        err = np.abs(result.params[n] - want).max() / np.abs(want).max()
        assert err < 2e-3, f"{n}: error {err:.1e} relative to the parameter's magnitude"


def test_legacy_config_fields_pass(tmp_path):
    """Fields a config.json from an older transformers carries (rope_theta, torch_dtype)
    are taken as the class takes them; only a near-miss of a real field is refused."""
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({**DECODER, "rope_theta": 5000.0, "torch_dtype": "float32"}))
    task = hf_task("LlamaForCausalLM", model_config=str(cfg))
    assert task.model.config.rope_parameters["rope_theta"] == 5000.0
    cfg.write_text(json.dumps({**DECODER, "num_key_value_head": 2}))
    with pytest.raises(TorchTrainError, match=r"'num_key_value_head' is not a LlamaConfig field \(did you mean 'num_key_value_heads'\?\)"):
        hf_task("LlamaForCausalLM", model_config=str(cfg))
