"""The GPT step with the run-time path's per-layout decisions kept equals, bitwise, the
step that decides at every call: on 1 rank, and under `mpiexec -n 2` for dp=2 and tp=2
(see call_site_main.py)."""

import subprocess
import sys
from pathlib import Path

import pytest
from _mpiexec import run_ranks

pytestmark = pytest.mark.slow  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MAIN = Path(__file__).resolve().parent / "call_site_main.py"


def test_cached_decisions_equal_fresh_ones_on_one_rank():
    p = subprocess.run([sys.executable, str(MAIN), "3"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count(": OK") == 1


@pytest.mark.mpi
def test_cached_decisions_equal_fresh_ones_on_two_ranks():
    p = run_ranks(2, [str(MAIN), "3"], 400.0)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count("tp 1: OK") == 2 and p.stdout.count("tp 2: OK") == 2, p.stdout[-3000:]
