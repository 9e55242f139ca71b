"""shardc prints exactly what mlir-opt prints, byte for byte, on the cases in `cases/`
(custom and generic form). A chunk with `// ORACLE-XFAIL: reason` is expected to fail
(xDSL lacks the op); `// ORACLE-GENERIC-XFAIL: reason` only in generic form."""

import pytest

from .conftest import ROOT, Chunk, MlirOpt, Shardc, chunk_params

pytestmark = pytest.mark.oracle

CASES = sorted((ROOT / "tests" / "oracle" / "cases").glob("*.mlir"))


@pytest.mark.parametrize("chunk", chunk_params(CASES))
def test_custom_form(chunk: Chunk, mlir_opt: MlirOpt, shardc: Shardc) -> None:
    assert shardc.run(chunk.text) == mlir_opt.run(chunk.text)


@pytest.mark.parametrize("chunk", chunk_params(CASES))
def test_generic_form(chunk: Chunk, mlir_opt: MlirOpt, shardc: Shardc) -> None:
    if (reason := chunk.marker("GENERIC-XFAIL")) is not None:
        pytest.xfail(f"ORACLE-GENERIC-XFAIL: {reason}")
    expected = mlir_opt.run(chunk.text, "--mlir-print-op-generic")
    assert shardc.run(chunk.text, generic=True) == expected


@pytest.mark.parametrize("chunk", chunk_params(CASES))
def test_mlir_output_reprints_identically(chunk: Chunk, mlir_opt: MlirOpt, shardc: Shardc) -> None:
    """mlir-opt's output is a fixed point of shardc's parse + print."""
    theirs = mlir_opt.run(chunk.text)
    assert shardc.run(theirs) == theirs
