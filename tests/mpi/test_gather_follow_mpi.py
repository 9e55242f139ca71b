"""Gathers whose table stays split along a loop-indexed dimension (see
tests/unit/passes/test_gather_follow.py), under a real `mpiexec -n 4`: generated
programs whose partitioned lookups read a split table, propagated, partitioned and
lowered, one process per rank, agree with their unsharded run."""

from __future__ import annotations

import re
import sys
from io import StringIO
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_open_world_mpi import GRIDS_OF_4, _features, _mpiexec  # noqa: E402

_EXTRACT = re.compile(r"tensor\.extract %\w+\[[^\]]*\] : (tensor<\d+x\d+xf32>)")


def _reads_a_split_table(text: str) -> bool:
    """Whether the partitioned program reads a table of a type the global one lacks."""
    from shardc.ir import diagnostics
    from shardc.ir.diagnostics import DiagnosticEngine
    from shardc.ir.printer import module_to_string
    from shardc.tools.cli import apply_passes, parse_module, pipeline_passes

    with diagnostics.engine_scope(DiagnosticEngine(stream=StringIO())):
        module = parse_module(text, "gather.mlir")
        apply_passes(module, pipeline_passes("sharding-propagation,shard-partition"))
    return bool(set(_EXTRACT.findall(module_to_string(module))) - set(_EXTRACT.findall(text)))


def test_split_table_lookups_under_mpiexec(tmp_path: Path) -> None:
    from shardc.testing.gen_open_programs import generate_open_program

    features = _features()
    chosen: list[int] = []
    for seed in range(1000):
        text = generate_open_program(seed, features, grids=GRIDS_OF_4)
        if "tensor.extract %a" in text and _reads_a_split_table(text):
            (tmp_path / f"seed{seed}.mlir").write_text(text)
            chosen.append(seed)
            if len(chosen) == 6:
                break
    assert len(chosen) == 6, chosen
    p = _mpiexec(str(Path(__file__).resolve().parent / "test_open_world_mpi.py"), str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [line for line in p.stdout.splitlines() if line.startswith("seed")]
    assert len(lines) == len(chosen), p.stdout + p.stderr
    assert all("OK: " in line and "(partitioned, lowered, 4 ranks)" in line for line in lines), p.stdout
