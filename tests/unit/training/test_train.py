"""Data pipeline and single-rank training: the loss falls on the synthetic corpus."""

import numpy as np
import pytest

from shardc.training.data import ByteTokenizer, CharTokenizer, batches, synthetic_corpus
from shardc.training.gpt import GPTConfig
from shardc.training.train import TrainConfig, main, train


def test_synthetic_corpus_is_deterministic_and_structured():
    a, b = synthetic_corpus(2000, seed=3), synthetic_corpus(2000, seed=3)
    assert a == b and len(a) >= 2000 and a != synthetic_corpus(2000, seed=4)
    assert all(line.endswith(" .") for line in a.splitlines())


def test_tokenizers_roundtrip():
    text = "the fox sees a bird .\n"
    tok = CharTokenizer.from_text(text, pad_to=8)
    assert tok.vocab_size == 16 and len(tok.chars) == 15
    assert tok.decode(tok.encode(text)) == text
    with pytest.raises(ValueError, match="character 'z' is not in the tokenizer's vocabulary"):
        tok.encode("z")
    bt = ByteTokenizer()
    assert bt.decode(bt.encode("héllo")) == "héllo" and bt.encode("é").tolist() == [195, 169]


def test_batches_shift_targets_by_one():
    data = np.arange(100, dtype=np.int32)
    x, y = next(batches(data, 4, 8, seed=1))
    assert x.shape == y.shape == (4, 8) and x.dtype == np.int32
    np.testing.assert_array_equal(y, x + 1)
    x2, _ = next(batches(data, 4, 8, seed=1))
    np.testing.assert_array_equal(x, x2)


@pytest.mark.slow
def test_loss_falls_on_the_synthetic_corpus():
    text = synthetic_corpus(20000, seed=0)
    tok = CharTokenizer.from_text(text, pad_to=8)
    model = GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=tok.vocab_size)
    tc = TrainConfig(batch_size=8, steps=40, lr=1e-2, min_lr=1e-3, warmup_steps=5)
    trainer, losses = train(model, tc, tok.encode(text))
    assert losses[0] == pytest.approx(np.log(tok.vocab_size), abs=0.3)  # starts near uniform
    assert np.mean(losses[-5:]) < 0.7 * losses[0]
    assert trainer.step == 40


@pytest.mark.slow
def test_gradient_accumulation_runs(capsys):
    text = synthetic_corpus(3000, seed=0)
    tok = CharTokenizer.from_text(text)
    model = GPTConfig(n_layer=1, n_head=1, n_embd=8, block_size=8, vocab_size=tok.vocab_size)
    trainer, losses = train(model, TrainConfig(batch_size=2, accum_steps=3, steps=2), tok.encode(text))
    assert len(losses) == 2 and trainer.global_batch == 6


def test_cli_reports_unreadable_file(capsys, tmp_path):
    assert main(["--text", str(tmp_path / "missing.txt"), "--steps", "1"]) == 1
    assert "error: cannot read" in capsys.readouterr().err
