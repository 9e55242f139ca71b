"""MPIComm under mpiexec: all collectives against global semantics, and failure modes."""

import os
import shutil
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.mpi

MPIEXEC = shutil.which("mpiexec")


def _run(n: int, mode: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(
        [MPIEXEC, "-n", str(n), sys.executable, "-m", "shardc.runtime.selftest", mode],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.mark.parametrize("n", [2, 4])
def test_collectives(n):
    p = _run(n, "collectives")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK") == n


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
