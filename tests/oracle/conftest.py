"""Fixtures for the mlir-opt cross-checks: the oracle binary, in-process shardc, chunks.

Every test here is marked `oracle` and skips with a visible reason when no mlir-opt is
installed. shardc parses and prints in-process (a `shardc-opt` process costs ~0.5 s of
start-up per call; mlir-opt ~50 ms).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import pytest

from shardc.testing.oracle import find_mlir_opt, run_mlir_opt

ROOT = Path(__file__).resolve().parents[2]
_SEPARATOR = re.compile(r"^// -----\s*$", re.MULTILINE)
_MARKER = re.compile(r"^\s*// ORACLE-(SKIP|XFAIL|GENERIC-XFAIL|FAILS):\s*(.*)$", re.MULTILINE)
"""`ORACLE-FAILS` is `ORACLE-XFAIL` for lit files, where lit reads any `XFAIL:` as its own."""


@dataclass(frozen=True)
class Chunk:
    """One `// -----` separated piece of a .mlir file."""

    path: Path
    line: int
    text: str

    @property
    def id(self) -> str:
        rel = self.path.relative_to(ROOT / "tests") if self.path.is_relative_to(ROOT / "tests") else self.path
        return f"{rel}:{self.line}"

    def marker(self, kind: str) -> str | None:
        """The reason of an `// ORACLE-<kind>: reason` line, if the chunk has one."""
        for m in _MARKER.finditer(self.text):
            if m.group(1) == kind:
                return m.group(2).strip() or "no reason given"
        return None


_TRUNK_SPELLINGS = (
    # shard.reduce_scatter / shard.scatter: trunk renamed the property.
    (re.compile(r"\bscatter_axis = "), "scatter_dim = "),
    # shard.shard's result: trunk names it `%sharded` (same numbering).
    (re.compile(r"%sharding_annotated\b"), "%sharded"),
    (re.compile(r"%sharding_annotated_(\d+)\b"), r"%sharded_\1"),
    # shard.grid visibility: trunk writes it before the name.
    (
        re.compile(r'shard\.grid @([\w$.-]+)\((shape = [^)]*)\) \{sym_visibility = ("\w+")\}'),
        r"shard.grid \3 @\1(\2)",
    ),
)


def to_trunk_spelling(text: str) -> str:
    """mlir-opt 22.1.8's output in the spellings trunk (and shardc) print instead."""
    for pattern, replacement in _TRUNK_SPELLINGS:
        text = pattern.sub(replacement, text)
    return text


_SPELLINGS_OF_22_1_8 = (
    (re.compile(r"\bscatter_dim = "), "scatter_axis = "),
    (
        re.compile(r'shard\.grid ("\w+") @([\w$.-]+)\((shape = [^)]*)\)$', re.MULTILINE),
        r"shard.grid @\2(\3) {sym_visibility = \1}",
    ),
)


def to_22_1_8_spelling(text: str) -> str:
    """shardc's (trunk's) output in the spellings mlir-opt 22.1.8 reads."""
    for pattern, replacement in _SPELLINGS_OF_22_1_8:
        text = pattern.sub(replacement, text)
    return text


def split_chunks(path: Path) -> list[Chunk]:
    text = path.read_text()
    chunks: list[Chunk] = []
    start, line = 0, 1
    for m in _SEPARATOR.finditer(text):
        chunks.append(Chunk(path, line, text[start : m.start()]))
        line += text[start : m.end()].count("\n") + 1
        start = m.end() + 1
    chunks.append(Chunk(path, line, text[start:]))
    return [c for c in chunks if _has_code(c.text)]


def _has_code(text: str) -> bool:
    return any(ln.strip() and not ln.strip().startswith("//") for ln in text.splitlines())


def chunk_params(paths: list[Path]) -> list[object]:
    """pytest params, one per chunk, id `file:line`, skipped by `ORACLE-SKIP` lines."""
    params: list[object] = []
    for path in paths:
        for chunk in split_chunks(path):
            marks = []
            if (reason := chunk.marker("SKIP")) is not None:
                marks.append(pytest.mark.skip(reason=f"ORACLE-SKIP: {reason}"))
            if (reason := chunk.marker("XFAIL") or chunk.marker("FAILS")) is not None:
                marks.append(pytest.mark.xfail(reason=f"ORACLE-XFAIL: {reason}", strict=False))
            params.append(pytest.param(chunk, id=chunk.id, marks=marks))
    return params


class MlirOpt:
    """The oracle, run on text."""

    def run(self, text: str, *flags: str) -> str:
        result = run_mlir_opt("-", "--allow-unregistered-dialect", *flags, stdin=text)
        if result.returncode:
            raise AssertionError(f"mlir-opt {' '.join(flags)} failed:\n{result.stderr}\ninput:\n{text}")
        return result.stdout


class Shardc:
    """shardc-opt's parse and print, in-process: the same parser (file locations, MLIR's
    affine expressions) and printer as the tool."""

    def __init__(self) -> None:
        from shardc.context import make_context

        self.ctx = make_context(allow_unregistered=True)

    def run(self, text: str, *, generic: bool = False, debuginfo: bool = False, name: str = "<stdin>") -> str:
        from shardc.ir.locations import LocatingParser
        from shardc.ir.printer import print_module

        module = LocatingParser(self.ctx, text, name).parse_module()
        module.verify()
        out = StringIO()
        print_module(module, out, generic=generic, debuginfo=debuginfo)
        return out.getvalue()


@pytest.fixture(scope="session")
def mlir_opt() -> MlirOpt:
    if find_mlir_opt() is None:
        pytest.skip("mlir-opt not found: pip install -e '.[oracle]' or set SHARDC_MLIR_OPT")
    return MlirOpt()


@pytest.fixture(scope="session")
def shardc() -> Shardc:
    return Shardc()
