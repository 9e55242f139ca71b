"""Tokenizers for `shardc-train`: characters (the default) or a byte-level BPE trained on
the user's text with Hugging Face `tokenizers`, locally (nothing is downloaded).

The model's vocabulary is the tokenizer's rounded up to a multiple of `pad_to` (the
trainer passes lcm(8, data replicas), so the embedding's vocab dimension divides over
the grid under ZeRO/FSDP). The padding ids are never produced by `encode`, so the model
learns to give them low probability; `sample` masks them out all the same, and
`decode` of a padding id gives U+FFFD.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from shardc.training.data import CharTokenizer

BYTE_ALPHABET = 256  # byte-level BPE starts from every byte
DEFAULT_BPE_VOCAB = 512
MAX_BPE_VOCAB = 2**24
"""The largest BPE vocabulary trained (the largest in use are about 2**18)."""


class TextTokenizer(Protocol):
    """What the trainer and the sampler need of a tokenizer."""

    kind: str

    @property
    def vocab_size(self) -> int: ...  # the model's (padded) vocabulary

    @property
    def n_tokens(self) -> int: ...  # ids the tokenizer itself produces: 0 .. n_tokens-1

    def encode(self, text: str) -> np.ndarray: ...

    def decode(self, ids: np.ndarray) -> str: ...

    def save(self, directory: str | Path) -> str: ...  # the file name written


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


@dataclass(frozen=True)
class BPETokenizer:
    """A byte-level BPE (`tokenizers.Tokenizer`) with the model's padded vocabulary."""

    tokenizer: Any = field(repr=False, compare=False)
    vocab_size: int
    kind: str = "bpe"

    @staticmethod
    def train(text: str, vocab_size: int = DEFAULT_BPE_VOCAB, pad_to: int = 1) -> BPETokenizer:
        """Learn merges on `text` until the vocabulary has `vocab_size` entries (fewer
        when the text has no more pairs to merge)."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        if vocab_size < BYTE_ALPHABET:
            raise ValueError(f"--vocab-size must be at least {BYTE_ALPHABET} (the byte alphabet of byte-level BPE), got {vocab_size}")
        if vocab_size > MAX_BPE_VOCAB:
            # The trainer allocates by the requested size: 2e9 asks for 140 GB, and past
            # 2**32 it panics with a page of Rust backtrace.
            raise ValueError(f"--vocab-size must be at most {MAX_BPE_VOCAB}, got {vocab_size}")
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False, special_tokens=[]
        )
        lines = text.splitlines(keepends=True)
        tok.train_from_iterator((lines[i : i + 1000] for i in range(0, len(lines), 1000)), trainer, length=len(lines))
        return BPETokenizer(tok, _round_up(tok.get_vocab_size(), pad_to))

    @staticmethod
    def from_json(text: str, pad_to: int = 1) -> BPETokenizer:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_str(text)
        return BPETokenizer(tok, _round_up(tok.get_vocab_size(), pad_to))

    @staticmethod
    def load(path: str | Path, pad_to: int = 1) -> BPETokenizer:
        return BPETokenizer.from_json(Path(path).read_text(encoding="utf-8"), pad_to)

    def to_json(self) -> str:
        return self.tokenizer.to_str()

    @property
    def n_tokens(self) -> int:
        return int(self.tokenizer.get_vocab_size())

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self.tokenizer.encode(text).ids, dtype=np.int32)

    def decode(self, ids: np.ndarray) -> str:
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        out, run = [], []
        for i in ids:  # padding ids are outside the tokenizer: U+FFFD, as CharTokenizer does
            if i < self.n_tokens:
                run.append(i)
                continue
            out.append(self.tokenizer.decode(run))
            out.append("\ufffd")
            run = []
        out.append(self.tokenizer.decode(run))
        return "".join(out)

    def save(self, directory: str | Path) -> str:
        self.tokenizer.save(str(Path(directory) / "tokenizer.json"))
        return "tokenizer.json"


def make_tokenizer(kind: str, text: str, vocab_size: int | None = None, pad_to: int = 1) -> TextTokenizer:
    """`char` (`vocab_size` must be None: the text's characters decide) or `bpe`."""
    if kind == "char":
        if vocab_size is not None:
            raise ValueError("--vocab-size applies to --tokenizer bpe (a char vocabulary is the text's characters)")
        return CharTokenizer.from_text(text, pad_to)
    if kind == "bpe":
        return BPETokenizer.train(text, DEFAULT_BPE_VOCAB if vocab_size is None else vocab_size, pad_to)
    raise ValueError(f"unknown tokenizer {kind!r} (expected char or bpe)")


def tokenizer_to_json(tok: TextTokenizer) -> str:
    """A string that `tokenizer_from_json` turns back into `tok` (to send it to ranks)."""
    if isinstance(tok, BPETokenizer):
        return json.dumps({"kind": "bpe", "vocab_size": tok.vocab_size, "tokenizer": tok.to_json()})
    assert isinstance(tok, CharTokenizer)
    return json.dumps({"kind": "char", "vocab_size": tok.vocab_size, "chars": tok.chars})


def tokenizer_from_json(text: str) -> TextTokenizer:
    d = json.loads(text)
    if d["kind"] == "bpe":
        bpe = BPETokenizer.from_json(d["tokenizer"])
        return BPETokenizer(bpe.tokenizer, int(d["vocab_size"]))
    return CharTokenizer(d["chars"], int(d["vocab_size"]))


__all__ = ["BPETokenizer", "TextTokenizer", "make_tokenizer", "tokenizer_from_json", "tokenizer_to_json"]
