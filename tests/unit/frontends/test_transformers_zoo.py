"""Hugging Face `transformers` models exactly as their classes build them (small configs,
random init, no downloads) and as users call them, `model(input_ids)` without an
attention mask (image classifiers `model(pixel_values)`), through shardc's torch
frontend, against PyTorch's own numbers (float32).

- forward: unsharded, data parallel on 2 and 4 simulated ranks, Megatron tensor
  parallel on a 2x2 grid (attention and MLP input projections split by output features,
  their output projections by input features, over `shard`: one all_reduce per
  row-parallel projection); error relative to the output's magnitude;
- training (the decoders, BART, BERT's masked LM, ResNet, ConvNeXt): 3 AdamW steps on 1 rank and on 2 data-parallel ranks
  equal to `torch.optim.AdamW` (losses and parameters); the eager attention's imported
  step equal to PyTorch's loss and gradients;
- what the import had to learn: non-persistent buffers (rotary `inv_freq`, BERT's
  `position_ids`), a `ModelOutput` with a cache in it, every `attn_implementation`,
  Gemma's 0-d `embed_scale` buffer and its `gelu(approximate="tanh")`, transformers'
  data-dependent mask checks under the training import's `make_fx`, dropout (refused in
  one line), an op shardc cannot read or run (one line).

A family is one row of FAMILIES. The first rows carry Megatron axes written out (and the
number of all_reduce they give); the later ones take them from `derive_layouts`, as
`shardc-train --torch-model hf:...` does: OPT and RoBERTa (`cumsum` position ids:
`tm_tensor.scan`), Mistral, GPT-NeoX (fused `query_key_value`: its block kept whole),
Phi, DistilBERT, ViT (a patch-embedding convolution), ResNet and ConvNeXt (convolutions and
pooling, no attention: no Megatron grid). ResNet trains in eval mode (BatchNorm on its
running statistics, as shardc-train runs models; train-mode BatchNorm is another
engineer's); ConvNeXt (LayerNorm) trains as built. T5 is not called as `model(input_ids)` (it needs
`decoder_input_ids` or `labels` as keywords).
"""

from __future__ import annotations

import copy
import re
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")
transformers = pytest.importorskip("transformers", reason="needs transformers (the [torch] extra)")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from shardc.frontends.hf import derive_layouts  # noqa: E402
from shardc.frontends.torch import export_module  # noqa: E402
from shardc.frontends.torch_train import TorchTrainError, export_train_step, forward_module, sharded_forward, train_module  # noqa: E402
from shardc.training.axis import ShardingPlan, ShardingPolicy  # noqa: E402
from shardc.training.optimizer import AdamWConfig  # noqa: E402

BATCH, SEQ = 4, 8
FORWARD_TOL = 1e-5  # max |shardc - torch| / max |torch|, float32
MEGATRON_PLAN = ShardingPlan(tp_rules={"attn": "shard", "mlp": "shard"})

COLUMN, ROW = ("attn", None), (None, "attn")  # nn.Linear weights: [out, in]
MLP_COLUMN, MLP_ROW = ("mlp", None), (None, "mlp")


def _linear_axes(column: str, row: str, mlp_column: str, mlp_row: str, attn_bias: bool, mlp_bias: bool) -> dict[str, tuple]:
    """Megatron's split of nn.Linear layers named by regular expressions: attention
    q/k/v by output features and its output projection by input features; the MLP's
    input projections by output features and its output projection by input features
    (biases of the column-split layers with their outputs)."""
    axes = {rf".*\.({column})\.weight": COLUMN, rf".*\.({row})\.weight": ROW, rf".*\.({mlp_column})\.weight": MLP_COLUMN, rf".*\.({mlp_row})\.weight": MLP_ROW}
    if attn_bias:
        axes[rf".*\.({column})\.bias"] = ("attn",)
    if mlp_bias:
        axes[rf".*\.({mlp_column})\.bias"] = ("mlp",)
    return axes


LLAMA_AXES = _linear_axes("q_proj|k_proj|v_proj", "o_proj", "gate_proj|up_proj", "down_proj", attn_bias=False, mlp_bias=False)
QWEN2_AXES = _linear_axes("q_proj|k_proj|v_proj", "o_proj", "gate_proj|up_proj", "down_proj", attn_bias=True, mlp_bias=False)
# GPT-2's Conv1D weights are [in, out]; c_attn is q, k and v fused along its output.
GPT2_AXES = {
    r".*\.attn\.c_attn\.weight": (None, "attn"), r".*\.attn\.c_attn\.bias": ("attn",), r".*\.attn\.c_proj\.weight": ("attn", None),
    r".*\.mlp\.c_fc\.weight": (None, "mlp"), r".*\.mlp\.c_fc\.bias": ("mlp",), r".*\.mlp\.c_proj\.weight": ("mlp", None),
}
BERT_AXES = {
    r".*\.attention\.self\.(query|key|value)\.weight": COLUMN, r".*\.attention\.self\.(query|key|value)\.bias": ("attn",),
    r".*\.attention\.output\.dense\.weight": ROW,
    r".*\.intermediate\.dense\.weight": MLP_COLUMN, r".*\.intermediate\.dense\.bias": ("mlp",), r".*\.layer\.\d+\.output\.dense\.weight": MLP_ROW,
}
BART_AXES = _linear_axes("q_proj|k_proj|v_proj", "out_proj", "fc1", "fc2", attn_bias=True, mlp_bias=True)


@dataclass(frozen=True)
class Family:
    """One transformers family: how to build it (given an `attn_implementation`, None
    for the class default), the Megatron axes, its vocabulary, whether it trains here."""

    build: Callable[[str | None], Any]
    axes: dict[str, tuple] | None
    """Megatron's axes by FQN pattern; None: `derive_layouts`' (and its plan)."""
    split_weights: int | None
    """How many weights the written axes split (every attention and MLP projection)."""
    row_parallel: int | None
    """How many of them are split by input features (a partial sum: one all_reduce each)."""
    vocab: int
    trains: bool = True
    attn_implementations: tuple[str | None, ...] = (None,)
    image: int | None = None
    """Image classifiers: the images' side (3 channels, NUM_LABELS classes); inputs are
    `pixel_values`, targets labels."""
    megatron: bool = True
    """Whether it has attention projections to split over a 2x2 grid."""
    trains_in_eval: bool = False
    """Trained in eval mode (BatchNorm on its running statistics)."""


def _config(cls: type, attn: str | None, **kw: Any) -> Any:
    if attn is not None:
        kw["attn_implementation"] = attn
    return cls(**kw)


def _llama(attn):
    return transformers.LlamaForCausalLM(_config(
        transformers.LlamaConfig, attn, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    ))


def _qwen2(attn):
    return transformers.Qwen2ForCausalLM(_config(
        transformers.Qwen2Config, attn, vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    ))


def _gemma(attn):
    return transformers.GemmaForCausalLM(_config(
        transformers.GemmaConfig, attn, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
    ))


def _gpt2(attn):
    return transformers.GPT2LMHeadModel(_config(
        transformers.GPT2Config, attn, vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=16,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
    ))


def _bert(attn):
    return transformers.BertForMaskedLM(_config(
        transformers.BertConfig, attn, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    ))


def _bart(attn):
    return transformers.BartForConditionalGeneration(_config(
        transformers.BartConfig, attn, vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_position_embeddings=16, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
    ))


def _opt(attn):
    return transformers.OPTForCausalLM(_config(
        transformers.OPTConfig, attn, vocab_size=64, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=16, word_embed_proj_dim=32, dropout=0.0, attention_dropout=0.0, layerdrop=0.0,
        pad_token_id=1, bos_token_id=0, eos_token_id=0,
    ))


def _roberta(attn):
    return transformers.RobertaForMaskedLM(_config(
        transformers.RobertaConfig, attn, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=16, pad_token_id=1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    ))


def _mistral(attn):
    return transformers.MistralForCausalLM(_config(
        transformers.MistralConfig, attn, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    ))


def _neox(attn):
    return transformers.GPTNeoXForCausalLM(_config(
        transformers.GPTNeoXConfig, attn, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=64, attention_dropout=0.0, hidden_dropout=0.0,
    ))


def _phi(attn):
    return transformers.PhiForCausalLM(_config(
        transformers.PhiConfig, attn, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=64, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0,
    ))


def _distilbert(attn):
    return transformers.DistilBertForMaskedLM(_config(
        transformers.DistilBertConfig, attn, vocab_size=64, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
        max_position_embeddings=16, dropout=0.0, attention_dropout=0.0,
    ))


IMAGE, NUM_LABELS = 16, 10


def _vit(attn):
    return transformers.ViTForImageClassification(_config(
        transformers.ViTConfig, attn, image_size=IMAGE, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, num_labels=NUM_LABELS, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    ))


def _resnet(attn):
    return transformers.ResNetForImageClassification(_config(
        transformers.ResNetConfig, attn, num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
        layer_type="basic", num_labels=NUM_LABELS,
    ))


def _convnext(attn):
    return transformers.ConvNextForImageClassification(_config(
        transformers.ConvNextConfig, attn, num_channels=3, patch_size=2, num_stages=2, hidden_sizes=[8, 16], depths=[1, 1],
        image_size=IMAGE, num_labels=NUM_LABELS, drop_path_rate=0.0,
    ))


ATTN_ALL = (None, "eager", "sdpa")
FAMILIES = {
    "llama": Family(_llama, LLAMA_AXES, 2 * 7, 2 * 2, 64, attn_implementations=ATTN_ALL),  # GQA: 4 heads, 2 kv heads
    "qwen2": Family(_qwen2, QWEN2_AXES, 2 * 7, 2 * 2, 96),  # q/k/v biases
    "gemma": Family(_gemma, LLAMA_AXES, 2 * 7, 2 * 2, 64),  # 0-d embed_scale buffer, gelu(approximate="tanh")
    "gpt2": Family(_gpt2, GPT2_AXES, 2 * 4, 2 * 2, 64, attn_implementations=ATTN_ALL),  # fused Conv1D c_attn
    "bert": Family(_bert, BERT_AXES, 2 * 6, 2 * 2, 64),  # masked LM, encoder (its step scatters the token-type gradient)
    "bart": Family(_bart, BART_AXES, 6 + 10, 2 + 3, 64),  # encoder-decoder: decoder inputs shifted from input_ids
    # Axes derived by shardc.frontends.hf.derive_layouts:
    "opt": Family(_opt, None, None, None, 64),  # cumsum position ids
    "roberta": Family(_roberta, None, None, None, 64, trains=False),  # masked LM, cumsum position ids
    "mistral": Family(_mistral, None, None, None, 64),
    "gpt_neox": Family(_neox, None, None, None, 64, trains=False),  # fused query_key_value
    "phi": Family(_phi, None, None, None, 64, trains=False),  # partial rotary, parallel attention and MLP
    "distilbert": Family(_distilbert, None, None, None, 64, trains=False),
    "vit": Family(_vit, None, None, None, NUM_LABELS, image=IMAGE, trains=False),  # patch embedding: a strided conv
    "resnet": Family(_resnet, None, None, None, NUM_LABELS, image=IMAGE, megatron=False, trains_in_eval=True),  # conv, BatchNorm, pools
    "convnext": Family(_convnext, None, None, None, NUM_LABELS, image=IMAGE, megatron=False),  # depthwise conv, LayerNorm
}
TRAINED = [name for name, f in FAMILIES.items() if f.trains]
FORWARD_CASES = [(name, attn) for name, f in FAMILIES.items() for attn in f.attn_implementations]


def _ids(vocab: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (BATCH, SEQ), generator=torch.Generator().manual_seed(seed))


def _inputs(name: str, seed: int = 0) -> torch.Tensor:
    """Token ids, or an image classifier's pixel values [batch, 3, side, side]."""
    family = FAMILIES[name]
    if family.image is None:
        return _ids(family.vocab, seed)
    return torch.randn(BATCH, 3, family.image, family.image, generator=torch.Generator().manual_seed(seed))


def _targets(name: str, seed: int) -> torch.Tensor:
    """Target tokens, or an image classifier's labels [batch]."""
    family = FAMILIES[name]
    if family.image is None:
        return _ids(family.vocab, seed)
    return torch.randint(0, NUM_LABELS, (BATCH,), generator=torch.Generator().manual_seed(seed))


def _megatron_layout(name: str, model: Any) -> dict[str, Any]:
    """The Megatron axes and plan: written in the family's row, or derived."""
    family = FAMILIES[name]
    if family.axes is not None:
        return {"axes": family.axes, "plan": MEGATRON_PLAN}
    layouts = derive_layouts(model)
    assert any(r.startswith("column:") for r in layouts.roles.values()), name  # something is split
    return {"axes": {re.escape(k): v for k, v in layouts.axes.items()}, "plan": layouts.plan}


def _built(name: str, attn: str | None = None) -> Any:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return FAMILIES[name].build(attn)


# ---------------------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------------------


@dataclass
class ForwardCase:
    model: Any
    ids: torch.Tensor
    exported: Any
    want: list[np.ndarray]


_forward_cases: dict[tuple[str, str | None], ForwardCase] = {}


def _forward_case(name: str, attn: str | None) -> ForwardCase:
    """The model in eval mode (inference: no dropout), its one export (shared by every
    grid) and PyTorch's output tensors."""
    key = (name, attn)
    if key not in _forward_cases:
        model = _built(name, attn).eval()
        ids = _inputs(name)
        exported = export_module(model, (ids,))
        with torch.no_grad():
            out = model(ids)
        want = [out[k].numpy() for k in exported.result_names]
        _forward_cases[key] = ForwardCase(model, ids, exported, want)
    return _forward_cases[key]


def _assert_forward(case: ForwardCase, got: list[np.ndarray]) -> None:
    assert len(got) == len(case.want)
    for name, g, w in zip(case.exported.result_names, got, case.want):
        assert g.shape == w.shape, name
        err = float(np.abs(g - w).max() / np.abs(w).max())
        assert err < FORWARD_TOL, f"{name}: error {err:.2e} relative to the output's magnitude"


@pytest.mark.slow
@pytest.mark.parametrize("name, attn", FORWARD_CASES, ids=[f"{n}-{a or 'default'}" for n, a in FORWARD_CASES])
def test_forward_unsharded(name, attn):
    case = _forward_case(name, attn)
    assert case.exported.result_names[0] == "logits"
    _assert_forward(case, forward_module(case.model, [case.ids], world=1, exported=case.exported))


GRIDS = {
    # name: (world, policy, with the Megatron axes)
    "dp2": (2, ShardingPolicy(tp=1, zero=False), False),
    "dp4": (4, ShardingPolicy(tp=1, zero=False), False),
    "megatron-2x2": (4, ShardingPolicy(tp=2, zero=False), True),
}


SHARDED_CASES = [(name, grid) for name, f in FAMILIES.items() for grid, (_, _, megatron) in GRIDS.items() if f.megatron or not megatron]


@pytest.mark.slow
@pytest.mark.parametrize("name, grid", SHARDED_CASES, ids=[f"{n}-{g}" for n, g in SHARDED_CASES])
def test_forward_sharded(name, grid):
    world, policy, megatron = GRIDS[grid]
    case = _forward_case(name, None)
    layout: dict[str, Any] = {"policy": policy}
    if megatron:
        layout |= _megatron_layout(name, case.model)
    _assert_forward(case, forward_module(case.model, [case.ids], world=world, exported=case.exported, **layout))
    if megatron and FAMILIES[name].row_parallel is not None:  # each row-parallel product's partial sums all-reduced over `shard`
        counts = _collectives(case, world, layout)
        assert counts["shard.all_reduce[1]"] == FAMILIES[name].row_parallel, counts


def _collectives(case: ForwardCase, world: int, layout: dict[str, Any]) -> Counter[str]:
    """The forward's shard collectives after partitioning, keyed with their grid axes."""
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.training.pipeline import PIPELINE, count_collectives, run_pipeline

    text, _ = sharded_forward(case.model, [case.ids], world=world, exported=case.exported, **layout)
    module = LocatingParser(make_context(), text, "<forward>").parse_module()
    run_pipeline(module, PIPELINE[: PIPELINE.index("convert-shard-to-mpi")])
    return count_collectives(module, by_axes=True)[case.exported.func_name]


@pytest.mark.slow
def test_megatron_axes_split_every_projection():
    """The Megatron rows name real parameters: every attention and MLP projection
    weight of every layer is split, along the dimension its role says."""
    from shardc.frontends.torch_train import resolve_param_axes

    for name, family in FAMILIES.items():
        if family.axes is None:
            continue
        model = _built(name)
        named = list(model.named_parameters())
        infos = resolve_param_axes([n for n, _ in named], [tuple(p.shape) for _, p in named], family.axes, MEGATRON_PLAN)
        weights = [i for i in infos if i.path.endswith("weight") and any(a is not None for a in i.axes)]
        assert len(weights) == family.split_weights, (name, [i.path for i in weights])
        assert {a for i in weights for a in i.axes} == {None, "attn", "mlp"}, name


# ---------------------------------------------------------------------------------------
# What the import had to learn
# ---------------------------------------------------------------------------------------


def test_non_persistent_buffers_are_arguments():
    """BERT's `position_ids`/`token_type_ids` and Llama's rotary `inv_freq` are
    registered with persistent=False (not in the state dict): they are read-only
    arguments after the parameters, named by FQN, never baked constants."""
    for name, buffers in (("bert", {"bert.embeddings.position_ids", "bert.embeddings.token_type_ids"}), ("llama", {"model.rotary_emb.inv_freq"})):
        model = _forward_case(name, None).model
        assert buffers <= set(dict(model.named_buffers())) and not buffers & set(model.state_dict())
        exported = _forward_case(name, None).exported
        assert buffers <= set(exported.param_names[len(list(model.parameters())) :])


def test_cache_is_not_a_result():
    """A decoder with use_cache on (its default) returns a DynamicCache: the export's
    results are the output's tensors, the cache dropped; an encoder-decoder gives
    its logits and the encoder's last hidden state."""
    llama = _forward_case("llama", None)
    assert llama.model.config.use_cache
    with torch.no_grad():
        assert llama.model(llama.ids).past_key_values is not None
    assert llama.exported.result_names == ["logits"]
    assert _forward_case("bart", None).exported.result_names == ["logits", "encoder_last_hidden_state"]


@pytest.mark.slow
def test_training_import_sees_tracing_like_torch_export():
    """With no cache, transformers checks `padding_mask.all()` unless it is being
    traced: the training import traces as torch.export does, so the step has no
    data-dependent scalar; the tracing flags are back to false afterwards."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, use_cache=False,
    ))
    ids = _ids(64)
    step = export_train_step(model, [ids], [ids], _token_loss)
    assert "_local_scalar_dense" not in step.text and step.result_names[0] == "loss"
    assert not torch.compiler.is_compiling() and not torch.compiler.is_exporting()


def test_dropout_in_training_mode_is_refused_in_one_line():
    """GPT-2 as built (training mode, dropout 0.1) draws random numbers: one line that
    says what to change, for the forward and for the training step."""
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=4, n_positions=16))
    ids = _ids(64)
    with pytest.raises(TorchTrainError, match=r"the forward of GPT2LMHeadModel draws random numbers .* model\.eval\(\)"):
        forward_module(model, [ids], world=1)
    with pytest.raises(TorchTrainError, match=r"the training step of GPT2LMHeadModel draws random numbers .* dropout probabilities to 0"):
        export_train_step(model, [ids], [ids], _token_loss)


def test_op_shardc_cannot_read_is_one_line():
    """An op torch-mlir emits that shardc does not know (OPT's cumsum was one) is one
    line naming it and where it stands, not a parser traceback."""
    import dataclasses

    model = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    exported = export_module(model, (x,))
    assert "linalg.generic" in exported.text
    broken = dataclasses.replace(exported, text=exported.text.replace("linalg.generic", "tm_tensor.no_such_op", 1))
    with pytest.raises(TorchTrainError, match=r"^shardc cannot read torch-mlir's import of @forward: <torch-mlir>:\d+:\d+: error: custom op 'tm_tensor.no_such_op' is unknown$"):
        forward_module(model, [x], world=1, exported=broken)


def test_op_the_runtime_lacks_is_one_line():
    """A module whose forward sorts (`torch.sort`, `torch.topk`: torch-mlir's
    `tm_tensor.sort`, which shardc does not run) is refused in one line naming the op
    and where torch-mlir's import has it."""

    class TopK(torch.nn.Module):
        def forward(self, x):
            return torch.topk(x, 3).values

    with pytest.raises(TorchTrainError, match=r"^shardc cannot read torch-mlir's import of @forward: <torch-mlir>:\d+:\d+: error: custom op 'tm_tensor.sort' is unknown$"):
        forward_module(TopK(), [torch.randn(2, 8)], world=1)


def test_gelu_tanh_is_exact():
    """`gelu(approximate="tanh")` (Gemma's activation) imports with sqrt(2/pi) itself:
    torch-mlir's own lowering takes pi as 22/7, 5e-5 off at |x| = 4. Float64, forward
    and gradients."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(approximate="tanh")).double()
    x = torch.linspace(-4, 4, 32, dtype=torch.float64).reshape(4, 8)
    (got,) = forward_module(model, [x], world=1)
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=0, atol=1e-12)
    target = torch.zeros(4, 8, dtype=torch.float64)
    step = export_train_step(model, [x], [target], F.mse_loss)
    from shardc.launch import run_program

    loss, *grads = run_program(step.text, [x.numpy(), target.numpy(), *(p.detach().numpy() for p in model.parameters())], ranks=1)
    F.mse_loss(model(x), target).backward()
    for g, p in zip(grads, model.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------
# Training against torch.optim.AdamW
# ---------------------------------------------------------------------------------------

STEPS, LR = 3, 1e-2
# AdamW with eps=1e-6 on both sides (torch's default is 1e-8): in float32 a gradient
# element of the order of eps (Llama's MLP has dozens at this init) carries rounding
# noise of its own size, which Adam's normalisation turns into a visible fraction of a
# step; a larger eps keeps the comparison about the arithmetic. Parameters must agree to
# PARAM_TOL, a 500th of one step (a wrong gradient element moves by a whole step).
OPT = AdamWConfig(beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.01)
LOSS_RTOL, PARAM_TOL = 1e-5, LR / 500


def _token_loss(out, targets):
    """Cross-entropy of the output's logits against target tokens (a causal LM's next
    tokens; BART's decoder reads input_ids shifted right; a masked LM's every position),
    or of an image classifier's logits against its labels."""
    if out.logits.ndim == 2:
        return F.cross_entropy(out.logits, targets)
    return F.cross_entropy(out.logits.flatten(0, 1), targets.flatten())


def _batches(name: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(_inputs(name, 10 + s), _targets(name, 20 + s)) for s in range(STEPS)]


def _built_for_training(name: str) -> Any:
    model = _built(name)  # as built: training mode, use_cache on
    return model.eval() if FAMILIES[name].trains_in_eval else model


_references: dict[str, tuple[list[float], dict[str, np.ndarray]]] = {}


def _reference(name: str) -> tuple[list[float], dict[str, np.ndarray]]:
    """The model trained by torch.optim.AdamW with OPT's settings."""
    if name not in _references:
        model = _built_for_training(name)
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(OPT.beta1, OPT.beta2), eps=OPT.eps, weight_decay=OPT.weight_decay)
        losses = []
        for ids, targets in _batches(name):
            opt.zero_grad()
            loss = _token_loss(model(ids), targets)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        _references[name] = losses, {k: v.detach().numpy().copy() for k, v in model.named_parameters()}
    return _references[name]


EAGER_STEPS = [name for name in TRAINED if "eager" in FAMILIES[name].attn_implementations]


@pytest.mark.slow
@pytest.mark.parametrize("name", EAGER_STEPS)
def test_training_step_with_eager_attention(name):
    """The training runs below use the class default (SDPA); the imported step of the
    eager attention gives PyTorch's loss and gradients too (float32, relative to each
    gradient's magnitude)."""
    from shardc.launch import run_program

    model = _built(name, "eager")
    ids, targets = _batches(name)[0]
    step = export_train_step(model, [ids], [targets], _token_loss)
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    loss, *grads = run_program(step.text, [ids.numpy(), targets.numpy(), *(state[n].detach().numpy() for n in step.param_names + step.buffer_names)], ranks=1)
    want = _token_loss(model(ids), targets)
    want.backward()
    assert abs(float(loss) - want.item()) < LOSS_RTOL * abs(want.item())
    for n, g in zip(step.param_names, grads):
        w = state[n].grad.numpy()
        assert float(np.abs(g - w).max()) < 1e-5 * float(np.abs(w).max()), n


@pytest.mark.slow
@pytest.mark.parametrize("world", [1, 2], ids=["1rank", "dp2"])
@pytest.mark.parametrize("name", TRAINED)
def test_training_equals_torch_adamw(name, world):
    model = _built_for_training(name)
    before = copy.deepcopy(model.state_dict())
    result = train_module(
        model, _batches(name), _token_loss, world=world, policy=ShardingPolicy(tp=1, zero=False),
        steps=STEPS, lr=LR, opt=OPT,
    )
    want_losses, want = _reference(name)
    np.testing.assert_allclose(result.losses, want_losses, rtol=LOSS_RTOL)
    assert set(result.params) == set(want)
    for k, w in want.items():
        np.testing.assert_allclose(result.params[k], w, rtol=0, atol=PARAM_TOL, err_msg=k)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # the module is not changed
    # Every buffer, non-persistent and 0-d ones included (Gemma's embed_scale reaches
    # each rank's step as shape ()), is an argument of the step with its own shape.
    step = result.program.exported
    assert dict(zip(step.buffer_names, step.buffer_shapes)) == {k: tuple(b.shape) for k, b in model.named_buffers()}
