"""Runs the lit/FileCheck suite once and reports each lit test as its own pytest test.

The quick tier (`-m quick`) runs the files in QUICK alone (one lit run over the selected
files); the rest are marked slow."""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parent / "filecheck"
LIT_FILES = sorted(
    p.relative_to(SUITE).as_posix()
    for p in SUITE.rglob("*.mlir")
    if "Inputs" not in p.parts
)
QUICK = {
    "dialects/shard/ops.mlir",
    "dialects/mpi/ops_invalid.mlir",
    "lowering/shard-to-mpi-collectives.mlir",
    "passes/sharding-propagation.mlir",
    "passes/shard-partition.mlir",
    "tools/smoke.mlir",
}
"""A few files that cover each folder (dialects, lowering, passes, tools) in the quick tier."""


@pytest.fixture(scope="session")
def lit_results(request, tmp_path_factory) -> dict[str, str | None]:
    """Run lit in parallel over the lit files this session selected (all of them when
    every one is); map file -> failure text (None: passed)."""
    xml = tmp_path_factory.mktemp("lit") / "lit.xml"
    selected = sorted({item.callspec.params["test_file"] for item in request.session.items
                       if getattr(item, "originalname", None) == "test_lit"})
    paths = [str(SUITE)] if len(selected) == len(LIT_FILES) else [str(SUITE / f) for f in selected]
    subprocess.run(
        [sys.executable, "-c", "import lit.main; lit.main.main()", "-q", f"-j{os.cpu_count() or 2}",
         f"--xunit-xml-output={xml}", *paths],
        capture_output=True, text=True,
    )
    results: dict[str, str | None] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        # lit reports "suite.dir.sub" as classname and the file name as name.
        _, _, folder = case.get("classname", "").partition(".")
        name = "/".join([*folder.split("."), case.get("name", "")]) if folder else case.get("name", "")
        failure = case.find("failure")
        results[name] = None if failure is None else (failure.text or "failed")
    return results


@pytest.mark.parametrize("test_file", [f if f in QUICK else pytest.param(f, marks=pytest.mark.slow) for f in LIT_FILES])
def test_lit(test_file: str, lit_results: dict[str, str | None]):
    assert test_file in lit_results, f"lit did not run {test_file}"
    failure = lit_results[test_file]
    if failure is not None:
        pytest.fail(failure, pytrace=False)
