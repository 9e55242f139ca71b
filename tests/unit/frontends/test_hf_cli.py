"""`shardc-train --torch-model hf:...`: a transformers causal LM built from a config or
loaded from a save_pretrained directory, trained end to end (under mpiexec and on
simulated ranks), its output loaded back with `from_pretrained`; `--show-layouts` of the
derived axes; bad input as one line."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")
transformers = pytest.importorskip("transformers", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402

from shardc.tools.train import main  # noqa: E402

DISTIL_CFG = dict(dim=32, hidden_dim=64, n_layers=1, n_heads=4, max_position_embeddings=16)
LLAMA = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
VIT = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, image_size=16, patch_size=8, num_labels=4)
SMALL = ["--per-device-batch", "2", "--block-size", "8", "--quiet", "--eval-every", "0"]


def _cli(*args):
    return subprocess.run(["shardc-train", *args], capture_output=True, text=True, timeout=300)


def _losses(out):
    return [float(r.split(",")[1]) for r in (out / "loss.csv").read_text().splitlines()[1:]]


def _first_batch(block, micro, seed=0):
    """The first (tokens, next tokens) batch shardc-train draws: the synthetic corpus, the
    char tokenizer padded to 8, the seeded stream (`shardc.training.checkpoint.BatchStream`)."""
    from shardc.training.checkpoint import BatchStream
    from shardc.training.data import split, synthetic_corpus
    from shardc.training.tokenizer import make_tokenizer

    text = synthetic_corpus(60000, seed)
    tok = make_tokenizer("char", text, None, pad_to=8)
    train, _ = split(tok.encode(text), 0.1)
    x, y = next(BatchStream(train, micro, block, seed))
    return torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64)), tok.vocab_size


def _logits(model, ids):
    with torch.no_grad():
        return model(ids).logits.numpy()


def _check_output(out, cls):
    """OUT loads with from_pretrained, holds the trained parameters (params.npz) under
    transformers' names, and gives the logits of a model holding those parameters."""
    loaded = cls.from_pretrained(str(out), local_files_only=True)
    params = np.load(out / "params.npz")
    named = dict(loaded.named_parameters())
    assert set(named) == set(params.files)
    for name, p in named.items():
        np.testing.assert_array_equal(p.detach().numpy(), params[name])
    fresh = cls(loaded.config)
    fresh.load_state_dict({k: torch.from_numpy(params[k]) for k in params.files}, strict=False)
    ids = torch.randint(0, loaded.config.vocab_size, (2, 8), generator=torch.Generator().manual_seed(0))
    np.testing.assert_array_equal(_logits(loaded.eval(), ids), _logits(fresh.eval(), ids))
    return loaded


@pytest.mark.slow
def test_llama_from_a_config_under_mpiexec(tmp_path):
    """The issue's command: LlamaForCausalLM (4 query, 2 key-value heads) from cfg.json on
    2 MPI ranks, Megatron tp=2 (one key-value head per rank); the first loss is PyTorch's
    on the first batch, the losses fall, the output loads back."""
    (tmp_path / "cfg.json").write_text(json.dumps(LLAMA))
    out = tmp_path / "out"
    res = _cli("--torch-model", "hf:LlamaForCausalLM", "--model-config", str(tmp_path / "cfg.json"), "--steps", "3", "--np", "2",
               "--tp", "2", "--lr", "1e-2", *SMALL, "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "LlamaForCausalLM from hf:LlamaForCausalLM, 2 ranks, grid (batch=1, shard=2)" in res.stdout
    assert "all_reduce over shard" in res.stdout
    assert "dropout" not in res.stdout  # Llama's attention_dropout is 0
    assert f"wrote {out / 'config.json'} (LlamaForCausalLM.from_pretrained('{out}') loads the trained model)" in res.stdout
    losses = _losses(out)
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    x, y, vocab = _first_batch(8, 2)
    torch.manual_seed(0)
    initial = transformers.LlamaForCausalLM(transformers.LlamaConfig(**LLAMA, vocab_size=vocab)).eval()
    with torch.no_grad():
        want = torch.nn.functional.cross_entropy(initial(x).logits.reshape(-1, vocab), y.reshape(-1)).item()
    assert losses[0] == pytest.approx(want, rel=1e-5)
    loaded = _check_output(out, transformers.LlamaForCausalLM)
    assert loaded.config.vocab_size == vocab and loaded.config.num_key_value_heads == 2
    assert not np.array_equal(loaded.model.embed_tokens.weight.detach().numpy(), initial.model.embed_tokens.weight.detach().numpy())


@pytest.mark.slow
def test_gpt2_from_a_save_pretrained_directory_with_tp(tmp_path):
    """hf:DIR: a GPT-2 (tied head, Conv1D, fused c_attn) saved by save_pretrained, trained
    with tp=2 and FSDP on 4 simulated ranks starting from the saved weights; the output
    (tied table written once) loads back with from_pretrained."""
    x, y, vocab = _first_batch(8, 2)
    torch.manual_seed(1)
    saved = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=vocab, n_embd=32, n_layer=1, n_head=4, n_positions=16,
                                                                  bos_token_id=0, eos_token_id=0)).eval()
    saved.save_pretrained(str(tmp_path / "saved"))
    out = tmp_path / "out"
    res = _cli("--torch-model", f"hf:{tmp_path / 'saved'}", "--simulate", "4", "--tp", "2", "--fsdp", "--steps", "2", *SMALL,
               "--per-device-batch", "1", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "grid (batch=2, shard=2), policy tp=2 zero=True fsdp=True" in res.stdout
    assert "all_reduce over shard" in res.stdout and "all_gather over batch" in res.stdout  # row-parallel c_proj; FSDP
    assert "  note: trained without dropout (resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1, ...)" in res.stdout
    assert res.stderr == ""
    losses = _losses(out)
    with torch.no_grad():
        want = torch.nn.functional.cross_entropy(saved(x).logits.reshape(-1, vocab), y.reshape(-1)).item()
    assert losses[0] == pytest.approx(want, rel=1e-5) and math.isfinite(losses[1])
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert "transformer.wte.weight" in keys and "lm_head.weight" not in keys
    loaded = _check_output(out, transformers.GPT2LMHeadModel)
    assert loaded.lm_head.weight.data_ptr() == loaded.transformer.wte.weight.data_ptr()


def test_show_layouts_of_derived_axes(tmp_path, capsys):
    (tmp_path / "cfg.json").write_text(json.dumps({"n_embd": 32, "n_layer": 1, "n_head": 4, "n_positions": 16}))
    rc = main(["--torch-model", "hf:GPT2LMHeadModel", "--model-config", str(tmp_path / "cfg.json"), "--np", "4", "--tp", "2",
               "--show-layouts", "--block-size", "8"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "GPT2LMHeadModel from hf:GPT2LMHeadModel, 4 ranks, grid (batch=2, shard=2)" in out
    assert "logical axes derived from the module types and names" in out
    assert "note: transformer.h.0.attn.c_attn fuses several projections in its output features" in out
    assert "transformer.h.0.mlp.c_fc.weight  [32, 128]  axes (-, mlp)" in out
    assert "transformer.h.0.mlp.c_proj.weight  [128, 32]  axes (mlp, -)" in out
    assert "transformer.h.0.attn.c_attn.weight  [32, 96]  axes (-, fused)\n  storage = compute: replicated" in out
    assert "imported" not in out and "compiled" not in out


@pytest.mark.parametrize(
    "spec, config, extra, message",
    [
        ("hf:LlamaForCasualLM", LLAMA, [], "--torch-model hf:LlamaForCasualLM: no transformers model class LlamaForCasualLM (did you mean LlamaForCausalLM"),
        ("hf:LlamaForCausalLM", {**LLAMA, "hidden_size": 30}, [], "LlamaConfig rejects it: "),
        ("hf:LlamaForCausalLM", {**LLAMA, "hiden_size": 30}, [], "'hiden_size' is not a LlamaConfig field (did you mean 'hidden_size'?)"),
        ("hf:LlamaForCausalLM", {**LLAMA, "vocab_size": 8}, [], "the config's vocab_size 8 is smaller than the tokenizer's "),
        ("hf:LlamaForCausalLM", {**LLAMA, "max_position_embeddings": 4}, [], "the config's max_position_embeddings is 4, less than --block-size 8"),
        ("hf:LlamaForCausalLM", {**LLAMA, "num_key_value_heads": 1}, ["--simulate", "2", "--tp", "2"],
         "LlamaForCausalLM: tp=2 does not divide num_key_value_heads=1: each rank must hold whole attention heads"),
        ("hf:LlamaForCausalLM", {**LLAMA, "vocab_size": 36}, ["--simulate", "8"], "does not fit grid (batch=8, shard=1)"),
        ("hf:LlamaForCausalLM", None, [], "--torch-model hf:LlamaForCausalLM needs --model-config CONFIG.json"),
        ("hf:BertModel", {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 64}, [],
         "--torch-model hf:BertModel: shardc-train trains causal language models from transformers"),
        ("hf:DistilBertForMaskedLM", {**DISTIL_CFG, "vocab_size": 16}, [], "the config's vocab_size 16 is smaller than the tokenizer's "),
        ("hf:ResNetForImageClassification", {"hidden_sizes": [8], "depths": [1], "embedding_size": 8}, [],
         'ResNetConfig names no image_size: the synthetic images need one (add "image_size": SIDE to the --model-config JSON)'),
        ("hf:ViTForImageClassification", {**VIT, "num_attention_heads": 1}, ["--simulate", "2", "--tp", "2"],
         "ViTForImageClassification: tp=2 does not divide num_attention_heads=1: each rank must hold whole attention heads"),
        ("hf:{tmp}/empty", None, [], "--torch-model hf:{tmp}/empty: {tmp}/empty has no config.json"),
        ("hf:{tmp}/noweights", None, [], "--torch-model hf:{tmp}/noweights: {tmp}/noweights has no safetensors weights (model.safetensors)"),
        ("hf:{tmp}/nothere", None, [], "--torch-model hf:{tmp}/nothere: no directory {tmp}/nothere"),
        ("{tmp}/m.py:make", LLAMA, [], "--model-config goes with --torch-model hf:CLASS"),
        (None, LLAMA, [], "--model-config goes with --torch-model hf:CLASS (a transformers model's config)"),
    ],
    ids=["unknown-class", "config-rejected", "unknown-field", "vocab-too-small", "positions", "heads-cut", "does-not-divide",
         "no-config", "not-a-causal-lm", "masked-lm-vocab", "image-without-size", "vit-heads-cut", "dir-without-config", "dir-without-weights", "no-dir", "config-without-hf",
         "config-without-torch-model"],
)
def test_bad_input_is_one_line(spec, config, extra, message, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "noweights").mkdir()
    transformers.LlamaConfig(**LLAMA, architectures=["LlamaForCausalLM"]).save_pretrained(str(tmp_path / "noweights"))
    (tmp_path / "m.py").write_text("def make(**kw):\n    raise AssertionError('never called')\n")
    message = message.replace("{tmp}", str(tmp_path))
    model = [] if spec is None else ["--torch-model", spec.replace("{tmp}", str(tmp_path))]
    args = [*model, *extra, "--steps", "1", *SMALL, "--out", str(tmp_path / "o")]
    if config is not None:
        (tmp_path / "cfg.json").write_text(json.dumps(config))
        args += ["--model-config", str(tmp_path / "cfg.json")]
    for show in ([], ["--show-layouts"]):
        rc = main(args + show)
        err = capsys.readouterr().err
        assert rc == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert message in err, err
    assert not (tmp_path / "o").exists()


DISTIL = DISTIL_CFG


def test_masking_rule_is_berts():
    """15% chosen; of those 80% the mask id, 10% a random token, 10% unchanged; nothing
    else touched; labels are the tokens; the same batch masks the same way."""
    from shardc.frontends.hf import MaskingRule

    rule = MaskingRule(mask_id=40, n_tokens=40, seed=3)
    tokens = np.random.default_rng(0).integers(0, 40, size=(64, 256)).astype(np.int64)
    masked, labels, weights = rule(tokens, tokens)
    chosen = weights == 1
    assert weights.dtype == np.float32 and set(np.unique(weights)) <= {0.0, 1.0}
    np.testing.assert_array_equal(labels, tokens)
    np.testing.assert_array_equal(masked[~chosen], tokens[~chosen])
    assert abs(chosen.mean() - 0.15) < 0.01
    as_mask = (masked == 40)[chosen].mean()
    kept = (masked == tokens)[chosen].mean()  # 10% kept + random draws that hit the same token
    assert abs(as_mask - 0.8) < 0.02 and abs(kept - (0.1 + 0.1 / 40)) < 0.02
    assert masked.max() <= 40 and masked.min() >= 0
    again = rule(tokens.copy(), tokens)
    assert all(np.array_equal(a, b) for a, b in zip(again, (masked, labels, weights)))
    other = MaskingRule(mask_id=40, n_tokens=40, seed=4)(tokens, tokens)
    assert not np.array_equal(other[2], weights)


def test_masked_lm_loss_is_transformers():
    """masked_lm_loss equals the loss BertForMaskedLM computes itself from labels with
    -100 at the unmasked positions."""
    from shardc.frontends.hf import MaskingRule, masked_lm_loss

    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(transformers.BertConfig(vocab_size=48, hidden_size=32, intermediate_size=64,
                                                                 num_hidden_layers=1, num_attention_heads=4)).eval()
    tokens = np.random.default_rng(1).integers(0, 40, size=(4, 16)).astype(np.int64)
    masked, labels, weights = (torch.from_numpy(a) for a in MaskingRule(40, 40)(tokens))
    with torch.no_grad():
        ours = masked_lm_loss(model(masked), labels, weights)
        theirs = model(masked, labels=torch.where(weights > 0, labels, torch.tensor(-100))).loss
    assert weights.sum() > 0
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=0)


@pytest.mark.slow
def test_distilbert_masked_lm_with_tp(tmp_path):
    """DistilBertForMaskedLM from a config, tp=2 on 2 simulated ranks: the first loss is
    transformers' own masked-LM loss of the initial model on the first batch masked by the
    rule; the output loads back with from_pretrained."""
    from shardc.frontends.hf import MaskingRule

    (tmp_path / "cfg.json").write_text(json.dumps(DISTIL))
    out = tmp_path / "out"
    res = _cli("--torch-model", "hf:DistilBertForMaskedLM", "--model-config", str(tmp_path / "cfg.json"), "--simulate", "2",
               "--tp", "2", "--steps", "2", *SMALL, "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "all_reduce over shard" in res.stdout
    x, _, vocab = _first_batch(8, 2)
    from shardc.training.data import synthetic_corpus
    from shardc.training.tokenizer import make_tokenizer

    n_tokens = make_tokenizer("char", synthetic_corpus(60000, 0), None, pad_to=8).n_tokens
    masked, labels, weights = (torch.from_numpy(a) for a in MaskingRule(n_tokens, n_tokens, seed=0)(x.numpy()))
    torch.manual_seed(0)
    initial = transformers.DistilBertForMaskedLM(transformers.DistilBertConfig(**DISTIL, vocab_size=vocab if vocab > n_tokens else 2 * vocab)).eval()
    with torch.no_grad():
        want = initial(masked, labels=torch.where(weights > 0, labels, torch.tensor(-100))).loss.item()
    losses = _losses(out)
    assert losses[0] == pytest.approx(want, rel=1e-5) and math.isfinite(losses[1])
    _check_output(out, transformers.DistilBertForMaskedLM)


def test_synthetic_images_are_learnable_and_seeded():
    """Labels from the first tokens, in range; each image nearest its class's template;
    the same batch gives the same images; another seed other templates."""
    from shardc.frontends.hf import SyntheticImages

    images = SyntheticImages(3, 8, 8, num_labels=4, seed=1)
    tokens = np.random.default_rng(0).integers(0, 40, size=(64, 8)).astype(np.int64)
    pixels, labels = images(tokens, tokens)
    assert pixels.shape == (64, 3, 8, 8) and pixels.dtype == np.float32 and labels.dtype == np.int64
    np.testing.assert_array_equal(labels, tokens[:, 0] % 4)
    templates = np.stack([images(np.full((1, 8), c, dtype=np.int64))[0][0] for c in range(4)])  # noisy, still nearest
    nearest = np.argmin(((pixels[:, None] - templates[None]) ** 2).sum(axis=(2, 3, 4)), axis=1)
    assert (nearest == labels).mean() > 0.9
    np.testing.assert_array_equal(images(tokens.copy())[0], pixels)
    assert not np.allclose(SyntheticImages(3, 8, 8, num_labels=4, seed=2)(tokens)[0], pixels)


@pytest.mark.slow
def test_image_classification_loss_is_transformers(tmp_path):
    """The hf: task of ViTForImageClassification: its loss on its synthetic batch equals
    the loss the model computes itself from labels."""
    from shardc.frontends.hf import hf_task

    (tmp_path / "cfg.json").write_text(json.dumps(VIT))
    task = hf_task("ViTForImageClassification", model_config=str(tmp_path / "cfg.json"), vocab_size=32, seed=0)
    tokens = np.random.default_rng(0).integers(0, 32, size=(4, 8)).astype(np.int64)
    pixels, labels = (torch.from_numpy(a) for a in task.make_batch(tokens, tokens))
    assert pixels.shape == (4, 3, 16, 16) and int(labels.max()) < 4
    with torch.no_grad():
        ours = task.loss_fn(task.model(pixels), labels)
        theirs = task.model(pixel_values=pixels, labels=labels).loss
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=0)
    assert task.axes[r"vit\.layers\.0\.mlp\.fc1\.weight"] == ("mlp", None) and task.generate is None


RESNET = dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", num_labels=4, image_size=16)


@pytest.mark.slow
def test_resnet_image_classifier_end_to_end(tmp_path):
    """ResNetForImageClassification from a config (convolutions, max pooling, BatchNorm
    on its running statistics: the model runs in eval mode), 2 data-parallel simulated
    ranks, 2 steps: the first loss is the initial model's on the first synthetic image
    batch, and the output loads back with from_pretrained holding the trained parameters."""
    from shardc.frontends.hf import hf_task

    (tmp_path / "cfg.json").write_text(json.dumps(RESNET))
    out = tmp_path / "out"
    res = _cli("--torch-model", "hf:ResNetForImageClassification", "--model-config", str(tmp_path / "cfg.json"), "--simulate", "2",
               "--steps", "2", *SMALL, "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "ResNetForImageClassification from hf:ResNetForImageClassification, 2 ranks, grid (batch=2, shard=1)" in res.stdout
    x, _, vocab = _first_batch(8, 4)  # 2 per device x 2 replicas
    task = hf_task("ResNetForImageClassification", model_config=str(tmp_path / "cfg.json"), vocab_size=vocab, seed=0)
    pixels, labels = (torch.from_numpy(a) for a in task.make_batch(x.numpy(), None))
    with torch.no_grad():
        want = task.loss_fn(task.model.eval()(pixels), labels).item()
    losses = _losses(out)
    assert losses[0] == pytest.approx(want, rel=1e-5) and math.isfinite(losses[1])
    loaded = transformers.ResNetForImageClassification.from_pretrained(str(out), local_files_only=True)
    params = np.load(out / "params.npz")
    named = dict(loaded.named_parameters())
    assert set(named) == set(params.files)
    for name, p in named.items():
        np.testing.assert_array_equal(p.detach().numpy(), params[name])
    assert not all(np.array_equal(params[n], p.detach().numpy()) for n, p in task.model.named_parameters())  # it trained


_OVERRIDE = """
import json
from shardc.frontends.hf import hf_task

def make(vocab_size, block_size, seed):
    # The derived layouts but the MLP's down projection kept whole.
    return hf_task("LlamaForCausalLM", model_config=CONFIG, vocab_size=vocab_size, block_size=block_size, seed=seed,
                   axes={r"model\\.layers\\.\\d+\\.mlp\\.down_proj\\.weight": (None, None)})
"""


@pytest.mark.slow
def test_a_factory_overrides_the_derived_axes(tmp_path, capsys):
    (tmp_path / "cfg.json").write_text(json.dumps(LLAMA))
    (tmp_path / "m.py").write_text(f"CONFIG = {str(tmp_path / 'cfg.json')!r}\n" + _OVERRIDE)
    rc = main(["--torch-model", f"{tmp_path}/m.py:make", "--simulate", "2", "--tp", "2", "--show-layouts", "--block-size", "8"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "model.layers.0.mlp.down_proj.weight  [32, 64]  axes (-, -)" in out
    assert "model.layers.0.mlp.up_proj.weight  [64, 32]  axes (mlp, -)" in out
