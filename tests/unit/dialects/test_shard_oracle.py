"""The shard invalid-input files are checked against mlir-opt itself: every chunk must
pass `mlir-opt --verify-diagnostics` (same errors, same lines) unless it says why not
with `// ORACLE-SKIP: reason` (mlir-opt 22.1.8 lacks the check or crashes)."""

import re
from pathlib import Path

import pytest

from shardc.testing.oracle import find_mlir_opt, run_mlir_opt

HERE = Path(__file__).parents[2] / "filecheck" / "dialects" / "shard"
FILES = ("ops_invalid.mlir", "parse_invalid.mlir")
_SEPARATOR = re.compile(r"^// -----\s*$", re.MULTILINE)


def _chunks() -> list[object]:
    params: list[object] = []
    for name in FILES:
        text = (HERE / name).read_text()
        line = 1
        for chunk in _SEPARATOR.split(text):
            if "expected-error" in chunk:
                marks = [pytest.mark.skip(reason="ORACLE-SKIP")] if "ORACLE-SKIP" in chunk else []
                # Pad with newlines so that mlir-opt reports the file's line numbers.
                params.append(pytest.param("\n" * (line - 1) + chunk, id=f"{name}:{line}", marks=marks))
            line += chunk.count("\n")
    return params


@pytest.mark.skipif(find_mlir_opt() is None, reason="mlir-opt not installed")
@pytest.mark.parametrize("chunk", _chunks())
def test_mlir_opt_agrees(chunk: str) -> None:
    result = run_mlir_opt("-", "--verify-diagnostics", stdin=chunk)
    assert result.returncode == 0, result.stderr
