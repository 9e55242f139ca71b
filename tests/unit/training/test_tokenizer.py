"""Tokenizers: byte-level BPE trained locally with `tokenizers` round-trips any text,
pads the model's vocabulary for the grid, saves tokenizer.json; shardc-train on a
BPE-tokenized file learns (the loss falls)."""

import csv
import json

import numpy as np
import pytest

from shardc.tools.train import main
from shardc.training.data import CharTokenizer, synthetic_corpus
from shardc.training.tokenizer import BPETokenizer, make_tokenizer, tokenizer_from_json, tokenizer_to_json

TEXT = synthetic_corpus(20000, seed=3)


def test_bpe_round_trips_text_including_unseen_characters():
    tok = BPETokenizer.train(TEXT, vocab_size=320)
    ids = tok.encode(TEXT)
    assert ids.dtype == np.int32 and len(ids) < len(TEXT) / 2  # merges make tokens longer than a character
    assert tok.decode(ids) == TEXT
    other = "Grüße, 世界!\n\ttabs  and  spaces 🙂"  # never seen: falls back to bytes
    assert tok.decode(tok.encode(other)) == other
    assert int(ids.max()) < tok.n_tokens <= 320


def test_vocabulary_is_padded_for_the_grid_and_padding_decodes_to_replacement():
    tok = make_tokenizer("bpe", TEXT, 300, pad_to=24)
    assert tok.vocab_size % 24 == 0 and tok.vocab_size - 24 < tok.n_tokens <= tok.vocab_size
    assert tok.decode(np.array([*tok.encode("the fox"), tok.vocab_size - 1])) == "the fox\ufffd"


def test_training_is_deterministic_and_saved_tokenizer_reloads(tmp_path):
    a, b = BPETokenizer.train(TEXT, 300), BPETokenizer.train(TEXT, 300)
    assert a.to_json() == b.to_json()
    assert a.save(tmp_path) == "tokenizer.json"
    loaded = BPETokenizer.load(tmp_path / "tokenizer.json", pad_to=8)
    assert np.array_equal(loaded.encode(TEXT[:500]), a.encode(TEXT[:500]))
    assert json.loads((tmp_path / "tokenizer.json").read_text())["model"]["type"] == "BPE"
    back = tokenizer_from_json(tokenizer_to_json(loaded))
    assert back.vocab_size == loaded.vocab_size and np.array_equal(back.encode("a red fox"), loaded.encode("a red fox"))


def test_char_is_the_default_and_rejects_a_vocab_size():
    tok = make_tokenizer("char", "abcab", None, pad_to=8)
    assert isinstance(tok, CharTokenizer) and tok.vocab_size == 8 and tok.n_tokens == 3
    with pytest.raises(ValueError, match="--vocab-size applies to --tokenizer bpe"):
        make_tokenizer("char", "abc", 300)
    with pytest.raises(ValueError, match="at least 256"):
        make_tokenizer("bpe", "abc", 100)


SMALL = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "16", "--per-device-batch", "4", "--quiet"]


@pytest.mark.slow
def test_shardc_train_on_a_bpe_tokenized_file_learns(tmp_path, capsys):
    data = tmp_path / "corpus.txt"
    data.write_text(synthetic_corpus(30000, seed=5))
    out = tmp_path / "out"
    rc = main(["--simulate", "2", "--data", str(data), "--tokenizer", "bpe", "--vocab-size", "320", "--steps", "30", "--lr", "1e-2", *SMALL, "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    tok = BPETokenizer.load(out / "tokenizer.json")
    vocab = np.load(out / "params.npz")["wte"].shape[0]
    assert vocab % 8 == 0 and vocab - 8 < tok.n_tokens <= vocab  # rounded up for the grid
    assert f"vocab {vocab}" in text and not (out / "vocab.txt").exists()
    losses = [float(r["loss"]) for r in csv.DictReader(open(out / "loss.csv"))]
    assert np.mean(losses[-5:]) < losses[0] - 1.0, losses


@pytest.mark.parametrize(
    "args, message",
    [
        (["--vocab-size", "300"], "--vocab-size applies to --tokenizer bpe"),
        (["--tokenizer", "bpe", "--vocab-size", "10"], "--vocab-size must be at least 256"),
        (["--tokenizer", "words"], "argument --tokenizer: invalid choice: 'words'"),
    ],
)
def test_tokenizer_flag_errors_are_one_line(args, message, tmp_path, capsys):
    assert main([*args, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("shardc-train: error: ") and message in err, err
