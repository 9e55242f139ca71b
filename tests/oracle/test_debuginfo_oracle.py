"""`--mlir-print-debuginfo` output is mlir-opt's, byte for byte: `#locN` aliases (those
a block argument reaches before the IR, the others after it), `loc(#locN)` on ops,
block argument locations inline, every kind of location."""

import pytest

from .conftest import ROOT, Chunk, MlirOpt, Shardc, chunk_params

pytestmark = pytest.mark.oracle

CASES = [ROOT / "tests" / "oracle" / "cases" / name for name in ("debuginfo.mlir", "scf.mlir", "linalg.mlir")]


@pytest.mark.parametrize("chunk", chunk_params(CASES))
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_debuginfo(chunk: Chunk, generic: bool, mlir_opt: MlirOpt, shardc: Shardc) -> None:
    if generic and (reason := chunk.marker("GENERIC-XFAIL")) is not None:
        pytest.xfail(f"ORACLE-GENERIC-XFAIL: {reason}")
    flags = ("--mlir-print-debuginfo", *(("--mlir-print-op-generic",) if generic else ()))
    assert shardc.run(chunk.text, generic=generic, debuginfo=True) == mlir_opt.run(chunk.text, *flags)


@pytest.mark.parametrize("chunk", chunk_params(CASES[:1]))
def test_debuginfo_output_reprints_identically(chunk: Chunk, mlir_opt: MlirOpt, shardc: Shardc) -> None:
    """mlir-opt's debuginfo output (forward `#loc` aliases) parses back to the same."""
    theirs = mlir_opt.run(chunk.text, "--mlir-print-debuginfo")
    assert shardc.run(theirs, debuginfo=True) == theirs
