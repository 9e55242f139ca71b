"""Overlapped collectives under real mpiexec: nonblocking calls bitwise equal to the
blocking ones, the training step's results unchanged by the schedule and by overlap,
and a rank failing while the others wait still ends the job."""

import subprocess
import time
from pathlib import Path

import pytest
from _mpiexec import run_ranks

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MAIN = Path(__file__).with_name("overlap_main.py")


def _run(n: int, mode: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    return run_ranks(n, [str(MAIN), mode], timeout, OPENBLAS_NUM_THREADS="1")


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
