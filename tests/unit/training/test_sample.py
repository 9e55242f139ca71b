"""Sampling from a trained model through the compiled, sharded `@logits`: reproducible
for a seed, the same tokens on any grid/policy as on one rank, nanoGPT's top-k and
temperature, padding never drawn; `shardc-train --sample`."""

import numpy as np
import pytest

from shardc.training.axis import ShardingPolicy
from shardc.training.data import CharTokenizer, split, synthetic_corpus
from shardc.training.gpt import GPTConfig, init_params, param_specs
from shardc.training.mesh import Grid
from shardc.training.sample import Sampler, build_logits_module, generate, pick, sample
from shardc.training.trainer import TrainingConfig, train_simulated

TEXT = synthetic_corpus(8000, seed=0)
TOK = CharTokenizer.from_text(TEXT, pad_to=8)
MODEL = GPTConfig(n_layer=1, n_head=4, n_embd=16, block_size=8, vocab_size=TOK.vocab_size)


@pytest.fixture(scope="module")
def trained():
    train, val = split(TOK.encode(TEXT))
    cfg = TrainingConfig(MODEL, per_device_batch=2, steps=15, lr=1e-2).shard(tp=2, fsdp=True)
    return train_simulated(cfg, train, world=4, val_data=val)


@pytest.mark.slow
def test_samples_are_reproducible_for_a_seed(trained):
    a = sample(trained, TOK, "the ", 12, seed=7)
    b = sample(trained, TOK, "the ", 12, seed=7)
    c = sample(trained, TOK, "the ", 12, seed=8)
    assert a == b and len(a) == 12 and a != c
    assert "\ufffd" not in a  # vocabulary padding is never drawn


def test_sharded_sampling_equals_one_rank(trained):
    """The TP+FSDP grid draws the same tokens as the unsharded model (longer than the
    block: the context window slides)."""
    sharded = Sampler.for_result(trained)
    single = Sampler(MODEL, Grid(1, 1), ShardingPolicy(1, False, False), trained.config.plan)
    prompt = list(TOK.encode("a red fox"))
    args = dict(temperature=0.0, top_k=None, seed=0, n_valid=TOK.n_tokens)
    ids = generate(sharded, trained.params, prompt, 10, **args)
    assert np.array_equal(ids, generate(single, trained.params, prompt, 10, **args))


def test_logits_module_gathers_logits_and_params():
    text = build_logits_module(MODEL, 2, Grid(2, 2), TrainingConfig().plan, ShardingPolicy(2, True, True))
    from shardc.ir.printer import module_to_string

    s = module_to_string(text)
    assert "func.func @logits" in s and "shard.grid @grid(shape = 2x2)" in s
    assert "split_axes = [[]]" in s  # the returned logits are replicated


def test_pick_top_k_temperature_and_padding():
    rng = np.random.default_rng(0)
    logits = np.array([0.0, 5.0, 4.0, 1.0, 100.0])
    assert pick(logits, 0.0, None, rng) == 4
    assert pick(logits, 0.0, None, rng, n_valid=4) == 1  # id 4 is padding
    draws = {pick(logits, 1.0, 2, rng, n_valid=4) for _ in range(200)}
    assert draws == {1, 2}  # top-2 of the valid ids
    assert {pick(logits, 0.01, None, rng, n_valid=4) for _ in range(50)} == {1}  # cold: the argmax


def test_untrained_model_samples_on_one_rank():
    params = init_params(MODEL, 0)
    s = Sampler(MODEL, Grid(1, 1), ShardingPolicy(1, False, False), TrainingConfig().plan)
    ids = generate(s, params, [1, 2], 5, seed=3, n_valid=TOK.n_tokens)
    assert ids.shape == (5,) and int(ids.max()) < TOK.n_tokens


@pytest.mark.slow
def test_shardc_train_sample_prints_reproducible_text(tmp_path, capsys):
    from shardc.tools.train import main

    args = ["--simulate", "2", "--tp", "2", "--steps", "3", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8",
            "--per-device-batch", "2", "--quiet", "--sample", "20", "--prompt", "the ", "--top-k", "5", "--sample-seed", "4"]
    outs = []
    for run in range(2):
        assert main([*args, "--out", str(tmp_path / str(run))]) == 0
        text = capsys.readouterr().out
        head, body = text.split("shardc-train: sample (20 tokens, temperature 0.8, top-k 5, seed 4):\n")
        outs.append(body)
    assert outs[0] == outs[1] and outs[0].startswith("the ") and len(outs[0]) == len("the ") + 20 + 1
    assert main([*args, "--prompt", "the Z", "--out", str(tmp_path)]) == 1
    assert "--prompt: character 'Z' is not in the tokenizer's vocabulary" in capsys.readouterr().err


def test_compiled_logits_match_the_numpy_reference(trained):
    """The compiled forward is the model that was trained: its logits give numpy's loss."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import numpy_gpt

    s = Sampler(MODEL, Grid(1, 1), ShardingPolicy(1, False, False), trained.config.plan)
    data = TOK.encode(TEXT)
    tokens, targets = data[None, 100 : 100 + MODEL.block_size], data[None, 101 : 101 + MODEL.block_size]
    p = trained.params
    ids = np.arange(MODEL.vocab_size, dtype=np.int32)
    logits = np.asarray(s.compiled.call("logits", *(p[spec.path] for spec in param_specs(MODEL)), tokens, ids))
    z = logits - logits.max(-1, keepdims=True)
    ce = -np.take_along_axis(z - np.log(np.exp(z).sum(-1, keepdims=True)), targets[..., None], -1).mean()
    np.testing.assert_allclose(ce, numpy_gpt.loss(MODEL, {k: v.astype(np.float64) for k, v in p.items()}, tokens, targets), rtol=1e-4)


@pytest.mark.slow
@pytest.mark.mpi
def test_mpi_sample_equals_the_simulated_one(tmp_path):
    """Under mpiexec every rank draws from the same gathered logits: the text equals the
    simulated ranks' (two ranks: the reductions add the same two numbers)."""
    import os
    import shutil
    import subprocess
    import sys

    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not on PATH")
    args = ["--tp", "2", "--steps", "3", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2",
            "--quiet", "--sample", "16", "--prompt", "the ", "--top-k", "10", "--sample-seed", "3"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    texts = []
    for ranks in (["--np", "2"], ["--simulate", "2"]):
        p = subprocess.run([sys.executable, "-m", "shardc.tools.train", *ranks, *args, "--out", str(tmp_path / ranks[0])],
                           capture_output=True, text=True, timeout=240, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.count("shardc-train: sample") == 1  # rank 0 alone prints it
        texts.append(p.stdout.split("shardc-train: sample (16 tokens, temperature 0.8, top-k 10, seed 3):\n")[1])
    assert texts[0] == texts[1] and texts[0].startswith("the ")
