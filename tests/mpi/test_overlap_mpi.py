"""Overlapped collectives under real mpiexec: nonblocking calls bitwise equal to the
blocking ones, the training step's results unchanged by the schedule and by overlap,
and a rank failing while the others wait still ends the job."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi

MPIEXEC = shutil.which("mpiexec")
MAIN = Path(__file__).with_name("overlap_main.py")


def _run(n: int, mode: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    env = dict(os.environ, PYTHONUNBUFFERED="1", OPENBLAS_NUM_THREADS="1")
    return subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(MAIN), mode], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("n", [2, 4])
def test_nonblocking_collectives_are_bitwise_blocking(n):
    p = _run(n, "collectives")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK") == n


@pytest.mark.parametrize("n", [2, 4])
def test_training_step_bitwise_with_and_without_overlap(n):
    p = _run(n, "training")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK bitwise") == n


def test_rank_failing_while_others_wait_ends_the_job():
    t0 = time.monotonic()
    p = _run(4, "fail-wait", timeout=60)
    assert p.returncode != 0
    assert "rank 1: ValueError: deliberate failure on rank 1" in p.stderr
    assert time.monotonic() - t0 < 30
