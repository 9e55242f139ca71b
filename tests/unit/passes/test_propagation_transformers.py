"""Sharding propagation on transformers models as `from_config` builds them, imported
through torch-mlir with the axes `shardc.frontends.hf.derive_layouts` derives, on a 2x2
(batch, shard) grid and under pure data parallelism; the collectives are counted per
grid axis on the partitioned forward and training step.

What must hold, with training's propagation (forward first) and with the default
`sharding-propagation` (backward-forward, which traverses these functions forward first:
torch-mlir's reshapes are beyond upstream): the batch split reaches every activation (no
collective over `batch` in a forward, nothing gathered); Megatron attention stays split by
heads from q/k/v through o_proj, key/value groups included (Llama's GQA, eager and sdpa),
so the TP axis sees only the all-reduce after each row-parallel layer; under pure data
parallelism a forward needs no collective even when batch x seq equals the hidden size
(torch-mlir's shared `tensor.empty`s, `shardc.passes.split_shared_inits`); T5's mask,
indexed by `arange(B)`, stays split (`shardc.passes.iota_operands_as_indices`); and the
sharded numbers are PyTorch's."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("torch_mlir", reason="needs torch-mlir (the [torch] extra)")
transformers = pytest.importorskip("transformers", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402

from shardc.frontends.hf import causal_lm_loss, derive_layouts  # noqa: E402
from shardc.frontends.torch import export_module  # noqa: E402
from shardc.frontends.torch_train import TorchStepProgram, export_train_step, forward_module, sharded_forward  # noqa: E402
from shardc.tools.cli import parse_module  # noqa: E402
from shardc.training.axis import ShardingPolicy  # noqa: E402
from shardc.training.mesh import make_grid  # noqa: E402
from shardc.training.pipeline import PIPELINE, count_collectives, run_pipeline  # noqa: E402

B, T, HIDDEN = 4, 8, 32  # batch x seq == hidden: torch-mlir shares one empty between weights and activations
DECODER = dict(vocab_size=64, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4)


def _build(name: str, attn: str = "eager"):
    torch.manual_seed(0)
    if name == "llama":  # grouped-query attention: repeat_kv between k/v and the products
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**DECODER, num_key_value_heads=2, attn_implementation=attn))
    if name == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**DECODER, num_key_value_heads=2, attn_implementation=attn))
    if name == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=64, n_embd=HIDDEN, n_layer=1, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0,
                                      attn_implementation=attn)
        return transformers.GPT2LMHeadModel(cfg)
    if name == "bert":
        return transformers.BertForMaskedLM(transformers.BertConfig(**DECODER, attn_implementation=attn))
    if name == "distilbert":
        cfg = transformers.DistilBertConfig(vocab_size=64, dim=HIDDEN, hidden_dim=64, n_layers=1, n_heads=4, attn_implementation=attn)
        return transformers.DistilBertForMaskedLM(cfg)
    if name == "neox":
        return transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**DECODER, attn_implementation=attn))
    if name == "phi":
        return transformers.PhiForCausalLM(transformers.PhiConfig(**DECODER, attn_implementation=attn))
    if name == "vit":  # 4 patches and the class token: batch x seq == 20 == hidden
        cfg = transformers.ViTConfig(image_size=8, patch_size=4, num_channels=3, hidden_size=B * 5, num_hidden_layers=1,
                                     num_attention_heads=4, intermediate_size=40, attn_implementation=attn)
        return transformers.ViTModel(cfg, add_pooling_layer=False)
    assert name == "t5"
    return transformers.T5ForConditionalGeneration(transformers.T5Config(vocab_size=64, d_model=HIDDEN, d_kv=8, d_ff=64, num_layers=1,
                                                                         num_heads=4, decoder_start_token_id=0))


def _ids(seed: int = 0):
    return torch.randint(0, 64, (B, T), generator=torch.Generator().manual_seed(seed))


_CASES: dict[tuple[str, str], tuple] = {}


def _case(name: str, attn: str = "eager"):
    """(model, inputs, derived layouts, torch-mlir's import), built once per module."""
    key = (name, attn)
    if key not in _CASES:
        model = _build(name, attn).eval()
        ids = _ids()
        inputs = [ids, torch.ones_like(ids), ids] if name == "t5" else [ids]
        if name == "vit":
            inputs = [torch.randn(B, 3, 8, 8, generator=torch.Generator().manual_seed(0))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = export_module(model, tuple(inputs))
        _CASES[key] = (model, inputs, derive_layouts(model), exported)
    return _CASES[key]


PROPAGATIONS = [PIPELINE[0], "sharding-propagation"]
"""Training's propagation (forward first) and the pass as a user runs it (upstream's
default order, backward first: torch-mlir's reshapes are beyond upstream, so the
completion traverses the function forward first all the same)."""


def _forward_collectives(name: str, attn: str = "eager", tp: int = 2, derived: bool = True,
                         propagation: str = PIPELINE[0]) -> Counter[str]:
    """Shard collectives, keyed by grid axes, of the forward partitioned by `propagation`
    and partition on 4 ranks (tp=2: the 2x2 grid)."""
    model, inputs, layouts, exported = _case(name, attn)
    text, _ = sharded_forward(model, inputs, axes=layouts.axes if derived else {}, plan=layouts.plan,
                              policy=ShardingPolicy(tp=tp, zero=False), world=4, exported=exported)
    module = parse_module(text, "<forward>")
    run_pipeline(module, [propagation, "shard-partition"])
    return sum(count_collectives(module, by_axes=True).values(), Counter())


def _row_parallel(layouts) -> int:
    """Blocks (an attention, an MLP) whose column-parallel layers split heads or hidden
    features: each ends in one all-reduce over `shard`, where its output layer sums
    over the split (row-parallel, or a replicated weight each rank slices, Phi's
    attention `dense`)."""
    return len({fqn.rpartition(".")[0] for fqn, role in layouts.roles.items() if role.startswith("column:")})


def _batch_slices(model) -> Counter[str]:
    """What a forward may do over `batch` without moving data: BERT broadcasts its
    `token_type_ids` buffer ([T], replicated) to [B, T] and looks it up whole before
    the sum with the split word embeddings slices it (propagation reads the broadcast
    dimension of a replicated operand as unsplit)."""
    buffers = dict(model.named_buffers())
    return Counter({"shard.all_slice[0]": 1}) if any(n.endswith("token_type_ids") for n in buffers) else Counter()


def _on_batch(counts: Counter[str]) -> Counter[str]:
    return Counter({k: n for k, n in counts.items() if k.endswith("[0]")})


def _moving(counts: Counter[str]) -> Counter[str]:
    """The collectives that move data (an all_slice keeps a rank's own block)."""
    return Counter({k: n for k, n in counts.items() if not k.startswith("shard.all_slice")})


MEGATRON = [("llama", "eager"), ("llama", "sdpa"), ("qwen2", "eager"), ("gpt2", "eager"), ("bert", "eager"),
            ("distilbert", "eager"), ("neox", "eager"), ("phi", "sdpa")]


@pytest.mark.slow
@pytest.mark.parametrize("propagation", PROPAGATIONS)
@pytest.mark.parametrize(("name", "attn"), MEGATRON, ids=[f"{n}-{a}" for n, a in MEGATRON])
def test_megatron_forward_keeps_batch_and_heads_split(name, attn, propagation):
    counts = _forward_collectives(name, attn, propagation=propagation)
    layouts = _case(name, attn)[2]
    # Only the row-parallel layers' all-reduces over `shard`: no gather of q/k/v, of
    # an o_proj weight or of the batch; nothing at all over `batch`.
    assert _moving(counts) == Counter({"shard.all_reduce[1]": _row_parallel(layouts)}), counts
    assert _on_batch(counts) == _batch_slices(_case(name, attn)[0]), counts


@pytest.mark.slow
@pytest.mark.parametrize("propagation", PROPAGATIONS)
def test_t5_attention_stays_split_by_heads(propagation):
    counts = _forward_collectives("t5", propagation=propagation)
    layouts = _case("t5")[2]
    assert not any(k.startswith("shard.all_gather") and k.endswith("[1]") for k in counts), counts
    assert counts["shard.all_reduce[1]"] == _row_parallel(layouts), counts
    # The attention mask, indexed by `arange(B)` (`shardc.passes.iota_operands_as_indices`),
    # stays split like the batch: nothing over `batch`.
    assert _on_batch(counts) == Counter(), counts


DATA_PARALLEL = ["bert", "qwen2", "distilbert", "phi", "neox", "gpt2", "llama"]


@pytest.mark.slow
@pytest.mark.parametrize("propagation", PROPAGATIONS)
@pytest.mark.parametrize("name", DATA_PARALLEL)
def test_data_parallel_forward_needs_no_collective(name, propagation):
    # batch x seq == hidden: torch-mlir gives weight transposes and activations one
    # tensor.empty; neither may take the other's split.
    assert B * T == HIDDEN
    assert _forward_collectives(name, tp=1, derived=False, propagation=propagation) == _batch_slices(_case(name)[0])


@pytest.mark.slow
@pytest.mark.parametrize("propagation", PROPAGATIONS)
@pytest.mark.parametrize("tp", [1, 2])
def test_vit_moves_nothing_over_batch(tp, propagation):
    # Pure DP (batch x seq == hidden, no axes) and the 2x2 grid: the class token and the
    # position embeddings ([1, ...], replicated) are sliced to the batch, nothing moves.
    counts = _forward_collectives("vit", tp=tp, derived=tp > 1, propagation=propagation)
    want = Counter({"shard.all_reduce[1]": _row_parallel(_case("vit")[2])}) if tp > 1 else Counter()
    assert _moving(counts) == want, counts


@pytest.mark.slow
@pytest.mark.parametrize(("name", "tp", "derived"), [("llama", 2, True), ("gpt2", 2, True), ("bert", 1, False), ("t5", 2, True)])
@pytest.mark.parametrize("pipeline", ["shard-to-mpi-pipeline{traversal=forward-backward}", "shard-to-mpi-pipeline"])
def test_sharded_forward_is_pytorchs(name, tp, derived, pipeline):
    model, inputs, layouts, exported = _case(name)
    with torch.no_grad():
        want = model(*inputs).logits.numpy()
    (got, *_) = forward_module(model, inputs, world=4, exported=exported, axes=layouts.axes if derived else {},
                               plan=layouts.plan, policy=ShardingPolicy(tp=tp, zero=False), pipeline=pipeline)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_llama_training_step_gathers_no_activation():
    model, (ids,), layouts, _ = _case("llama")
    model.train()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            step = export_train_step(model, [ids], [ids], causal_lm_loss)
    finally:
        model.eval()
    prog = TorchStepProgram.build(step, layouts.axes, layouts.plan, ShardingPolicy(2, False), make_grid(4, 2))
    counts = prog.shard_collectives["train_step"]
    assert not any(k.startswith(("shard.all_gather", "shard.all_to_all")) for k in counts), counts
    # Over `shard`: each row-parallel layer's output (forward) and each column-parallel
    # layer's input gradient (backward); over `batch`: the gradients and loss sums.
    assert set(counts) <= {"shard.all_reduce[0]", "shard.all_reduce[1]", "shard.all_slice[0]", "shard.all_slice[1]"}, counts
