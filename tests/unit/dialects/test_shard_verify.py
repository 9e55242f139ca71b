"""Every shard verifier message, checked without the CLI: each chunk of
tests/filecheck/dialects/shard/ops_invalid.mlir is parsed with the shardc context and
verified, and the exception text must be exactly the `expected-error` text (MLIR's)."""

import re
from pathlib import Path

import pytest
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from shardc.context import make_context

INVALID = Path(__file__).parents[2] / "filecheck" / "dialects" / "shard" / "ops_invalid.mlir"
EXPECTED = re.compile(r"// expected-error @\+1 \{\{(.*)\}\}")


def _cases() -> list[tuple[str, str]]:
    cases = []
    for chunk in INVALID.read_text().split("// -----"):
        messages = EXPECTED.findall(chunk)
        if messages:
            assert len(messages) == 1, chunk
            cases.append((messages[0], chunk))
    return cases


CASES = _cases()


def _verify(text: str) -> None:
    Parser(make_context(), text).parse_module().verify()


def test_every_case_found():
    assert len(CASES) >= 60


@pytest.mark.parametrize(("message", "chunk"), CASES, ids=[m[:60] for m, _ in CASES])
def test_message(message: str, chunk: str):
    with pytest.raises(VerifyException) as info:
        _verify(chunk)
    assert str(info.value) == message


def test_valid_file_verifies():
    ops = INVALID.with_name("ops.mlir").read_text()
    for chunk in ops.split("// -----"):
        _verify(chunk)


def test_grid_in_nested_symbol_table_is_found():
    _verify(
        """
        builtin.module @inner {
          shard.grid @g(shape = 2)
          func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
            %0 = shard.all_reduce %a on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
            return %0 : tensor<4xf32>
          }
        }
        """
    )
