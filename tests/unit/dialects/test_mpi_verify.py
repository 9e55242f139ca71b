"""Each invalid case of the mpi dialect fails with exactly MLIR's message.

The cases are the chunks of tests/filecheck/dialects/mpi/ops_invalid.mlir (each with
one `expected-error`), parsed and verified in Python; a few parse errors that
--verify-diagnostics cannot check against mlir-opt are added here.
"""

import re
from pathlib import Path

import pytest
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException

from shardc.context import make_context

INVALID = Path(__file__).parents[2] / "filecheck" / "dialects" / "mpi" / "ops_invalid.mlir"
_EXPECTED = re.compile(r"// expected-error @\+1 \{\{(.*)\}\}")


def _cases() -> list[tuple[str, str]]:
    cases = []
    for chunk in INVALID.read_text().split("// -----"):
        (message,) = _EXPECTED.findall(chunk)
        name = re.search(r"func\.func @(\w+)", chunk)
        assert name is not None
        cases.append(pytest.param(chunk, message, id=name.group(1)))
    return cases


def _error_of(text: str) -> str:
    """The message of the error that parsing and verifying `text` raises."""
    try:
        Parser(make_context(), text).parse_module().verify()
    except VerifyException as exc:
        return str(exc)
    except ParseError as exc:
        # xDSL renders `file:line:col`, the source line and a caret above the message.
        return str(exc).rstrip("\n").splitlines()[-1].strip()
    pytest.fail("no error raised")


@pytest.mark.parametrize(("text", "message"), _cases())
def test_invalid_case_reports_mlir_message(text: str, message: str):
    assert _error_of(text) == message


def test_every_chunk_is_a_case():
    assert len(_cases()) == INVALID.read_text().count("// -----") + 1


def test_unknown_error_class_is_a_parse_error():
    text = """
    func.func @f(%rv: !mpi.retval) {
      %ok = mpi.retval_check %rv = <MPI_ERR_NOPE> : i1
      return
    }"""
    message = _error_of(text)
    assert message.startswith(
        "expected ::mlir::mpi::MPI_ErrorClassEnum to be one of: MPI_SUCCESS, MPI_ERR_ACCESS,"
    )
    assert message.endswith("MPI_ERR_WIN, MPI_ERR_LASTCODE")


def test_error_class_attribute_outside_an_op():
    text = 'func.func private @f() attributes {c = #mpi.errclass<MPI_ERR_X>}'
    assert _error_of(text).startswith("expected ::mlir::mpi::MPI_ErrorClassEnum to be one of:")


def test_parse_error_points_at_the_enum_keyword():
    text = "func.func @f(%b: memref<4xf32>, %c: !mpi.comm) {\n" \
        "  mpi.allreduce(%b, %b, MPI_AVG, %c) : memref<4xf32>, memref<4xf32>\n  return\n}"
    with pytest.raises(ParseError) as info:
        Parser(make_context(), text).parse_module()
    # MLIR reports the error at the keyword: line 2, column 25.
    assert ":2:25" in str(info.value).splitlines()[0]
