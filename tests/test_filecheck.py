"""Runs the lit/FileCheck suite once and reports each lit test as its own pytest test."""

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


@pytest.fixture(scope="session")
def lit_results(tmp_path_factory) -> dict[str, str | None]:
    """Run lit over the whole suite in parallel; map file -> failure text (None: passed)."""
    xml = tmp_path_factory.mktemp("lit") / "lit.xml"
    subprocess.run(
        [sys.executable, "-c", "import lit.main; lit.main.main()", "-q", f"-j{os.cpu_count() or 2}",
         f"--xunit-xml-output={xml}", str(SUITE)],
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


@pytest.mark.parametrize("test_file", LIT_FILES)
def test_lit(test_file: str, lit_results: dict[str, str | None]):
    assert test_file in lit_results, f"lit did not run {test_file}"
    failure = lit_results[test_file]
    if failure is not None:
        pytest.fail(failure, pytrace=False)
