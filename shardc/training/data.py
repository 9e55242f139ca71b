"""Training data: a synthetic corpus the project generates itself, character and byte
tokenizers (byte-level BPE is in `shardc.training.tokenizer`), and a batch iterator.

The synthetic corpus is a small seeded probabilistic grammar (sentences like "the red fox
sees a small bird ."): its words and agreement rules give a character model structure to
learn at several ranges (spelling within a word, word order within a sentence), so a tiny
GPT's loss falls visibly within a hundred steps, and it needs no download.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_DETS = ["the", "a", "one", "that"]
_ADJS = ["red", "small", "quick", "old", "green", "quiet"]
_NOUNS = ["fox", "bird", "cat", "dog", "tree", "river", "stone"]
_VERBS = ["sees", "finds", "likes", "follows", "hears"]
_INTRANS = ["sleeps", "runs", "waits", "sings"]
_ADVS = ["slowly", "again", "today", "there"]


def _noun_phrase(rng: np.random.Generator) -> str:
    words = [str(rng.choice(_DETS))]
    if rng.random() < 0.5:
        words.append(str(rng.choice(_ADJS)))
    words.append(str(rng.choice(_NOUNS)))
    return " ".join(words)


def _sentence(rng: np.random.Generator) -> str:
    subject = _noun_phrase(rng)
    if rng.random() < 0.6:
        s = f"{subject} {rng.choice(_VERBS)} {_noun_phrase(rng)}"
    else:
        s = f"{subject} {rng.choice(_INTRANS)}"
    if rng.random() < 0.3:
        s += f" {rng.choice(_ADVS)}"
    return s + " ."


def synthetic_corpus(n_chars: int = 20000, seed: int = 0) -> str:
    """At least `n_chars` characters of grammar sentences, one per line (deterministic)."""
    rng = np.random.default_rng(seed)
    lines: list[str] = []
    size = 0
    while size < n_chars:
        line = _sentence(rng)
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CharTokenizer:
    """One token per distinct character of a text (sorted), the vocabulary padded with
    unused ids up to `vocab_size` (a multiple that divides over the grid, say)."""

    chars: str
    vocab_size: int
    kind = "char"

    @property
    def n_tokens(self) -> int:
        return len(self.chars)

    @staticmethod
    def from_text(text: str, pad_to: int = 1) -> CharTokenizer:
        chars = "".join(sorted(set(text)))
        n = -(-len(chars) // pad_to) * pad_to
        return CharTokenizer(chars, n)

    def encode(self, text: str) -> np.ndarray:
        index = {c: i for i, c in enumerate(self.chars)}
        try:
            return np.array([index[c] for c in text], dtype=np.int32)
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the tokenizer's vocabulary") from None

    def decode(self, ids: np.ndarray) -> str:
        return "".join(self.chars[i] if i < len(self.chars) else "\ufffd" for i in np.asarray(ids).reshape(-1).tolist())

    def save(self, directory: str | Path) -> str:
        """The characters, in id order, as `vocab.txt`; returns the file name."""
        (Path(directory) / "vocab.txt").write_text(self.chars, encoding="utf-8")
        return "vocab.txt"


@dataclass(frozen=True)
class ByteTokenizer:
    """UTF-8 bytes, vocabulary 256: any file, no vocabulary to build."""

    vocab_size: int = 256

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32)

    def decode(self, ids: np.ndarray) -> str:
        return bytes(np.asarray(ids, dtype=np.uint8).tolist()).decode("utf-8", errors="replace")


def load_text(path: str | Path) -> str:
    return Path(path).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------


def batches(data: np.ndarray, batch: int, block_size: int, seed: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Endless (tokens, targets) pairs of shape [batch, block_size]: random windows of
    `data`, targets shifted by one token."""
    data = np.asarray(data, dtype=np.int32)
    if len(data) <= block_size:
        raise ValueError(f"the data ({len(data)} tokens) must be longer than block_size ({block_size})")
    rng = np.random.default_rng(seed)
    offsets = np.arange(block_size)
    while True:
        starts = rng.integers(0, len(data) - block_size, size=batch)
        idx = starts[:, None] + offsets[None, :]
        yield data[idx], data[idx + 1]


def split(data: np.ndarray, val_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    n = int(len(data) * (1 - val_fraction))
    return data[:n], data[n:]
