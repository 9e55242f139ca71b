"""Bounded-time fuzzing of shardc-opt: mutated lit inputs must end in exit code 0, or
exit code 1 with a diagnostic; never a traceback nor a top-level internal error.

Inputs are the chunks of `tests/filecheck/**/*.mlir`, broken by token deletion,
duplication, swapping, truncation, number tweaks and random bytes, and run in-process
(`main(argv)` with captured streams). The seed is fixed; `SHARDC_FUZZ_SECONDS` (default
25) and `SHARDC_FUZZ_SEED` widen the search. Python exceptions that dialect or pass
code raised, which shardc-opt turned into `internal error in ...` diagnostics, are
collected and printed (they are bugs to fix in that code, not failures of the driver).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS_DIR = ROOT / "tests" / "filecheck"
TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[%@#^!]?[\w.$-]+|\s+|.', re.S)
INTERESTING = ["-1", "0", "?", "9223372036854775807", "-9223372036854775808", "x", "[]", "{}", "<>", "()", ",", "%0", "@g", "i1", "f32", "tensor<?xf32>", "!shard.sharding", "index", "loc(unknown)", "\"\"", "[[]]", "// -----"]
FLAG_SETS = [
    [],
    ["--allow-unregistered-dialect"],
    ["--mlir-print-op-generic"],
    ["--mlir-print-debuginfo", "--allow-unregistered-dialect"],
    ["-cse"],
    ["-canonicalize"],
    ["-inline"],
    ["--verify-diagnostics"],
    ["--split-input-file", "--verify-diagnostics"],
]


def corpus() -> list[str]:
    chunks: list[str] = []
    for path in sorted(CORPUS_DIR.rglob("*.mlir")):
        if "Output" in path.parts:
            continue
        text = path.read_text(errors="replace")
        chunks.extend(c for c in text.split("// -----") if c.strip())
    return chunks


def mutate(rng: random.Random, text: str) -> bytes:
    tokens = TOKEN.findall(text)
    for _ in range(rng.choice([1, 1, 1, 2, 3, 5])):
        if not tokens:
            break
        i = rng.randrange(len(tokens))
        kind = rng.randrange(8)
        if kind == 0:
            del tokens[i]
        elif kind == 1:
            tokens.insert(i, tokens[i])
        elif kind == 2:
            j = rng.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif kind == 3:
            tokens = tokens[:i]
        elif kind == 4:
            tokens[i] = rng.choice(INTERESTING)
        elif kind == 5 and re.fullmatch(r"-?\d+", tokens[i]):
            tokens[i] = str(int(tokens[i]) + rng.choice([-2, -1, 1, 7, 1 << 40]))
        elif kind == 6:
            tokens.insert(i, rng.choice(tokens))
        else:
            data = "".join(tokens).encode()
            pos = rng.randrange(len(data) + 1)
            noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4)))
            return data[:pos] + noise + data[pos:]
    return "".join(tokens).encode()


def run_in_process(data: bytes, flags: list[str]) -> tuple[int, str, str]:
    from shardc.tools.opt import main

    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(data))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["-", *flags])
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_fuzz_never_crashes():
    seconds = float(os.environ.get("SHARDC_FUZZ_SECONDS", "25"))
    rng = random.Random(int(os.environ.get("SHARDC_FUZZ_SEED", "20261129")))
    inputs = corpus()
    assert inputs, "no lit inputs to mutate"
    deadline = time.monotonic() + seconds
    runs = 0
    codes: Counter[int] = Counter()
    crashes: Counter[str] = Counter()
    while time.monotonic() < deadline:
        data = mutate(rng, rng.choice(inputs))
        flags = rng.choice(FLAG_SETS)
        code, _, err = run_in_process(data, flags)
        runs += 1
        codes[code] += 1
        context = f"flags={flags} input={data[:2000]!r}"
        assert code in (0, 1), context
        assert "Traceback" not in err, context + "\n" + err
        assert "shardc-opt: internal error" not in err, context + "\n" + err
        if code == 1:
            assert "error:" in err or err.startswith("shardc-opt: "), context + "\n" + err
        for line in err.splitlines():
            if ": error: internal error in " in line:
                where = line.split(": error: internal error in ", 1)[1]
                crashes[re.sub(r"\d+", "N", where)[:160]] += 1
    print(f"\nfuzz: {runs} runs, exit codes {dict(codes)}")
    for where, count in crashes.most_common():
        print(f"fuzz: {count:5d} x internal error in {where}")
    assert runs >= 50
