"""MPIComm under mpiexec: all collectives against global semantics, and failure modes."""

import subprocess
import time

import pytest
from _mpiexec import run_ranks

pytestmark = pytest.mark.mpi


def _run(n: int, mode: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    return run_ranks(n, ["-m", "shardc.runtime.execute.selftest", mode], timeout)


@pytest.mark.parametrize("n", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_collectives(n):
    p = _run(n, "collectives")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK") == n


@pytest.mark.slow
def test_failing_rank_aborts_job_quickly():
    t0 = time.monotonic()
    p = _run(4, "fail", timeout=60)
    assert p.returncode != 0
    assert "rank 1: ValueError: deliberate failure on rank 1" in p.stderr
    assert time.monotonic() - t0 < 30


def test_mismatched_shapes_reported():
    p = _run(2, "mismatch", timeout=60)
    assert p.returncode != 0
    assert "all_reduce: mismatched inputs across the group" in p.stderr
