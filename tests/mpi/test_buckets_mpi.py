"""Bucketed small collectives under real mpiexec: bitwise the separate calls (2 and 4
ranks, buckets past MPICH's algorithm switches), and the training step's results, as
written (small collectives held) and scheduled, unchanged by bucketing, with fewer MPI
calls."""

import subprocess
from pathlib import Path

import pytest
from _mpiexec import run_ranks

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MAIN = Path(__file__).with_name("buckets_main.py")


def _run(n: int, mode: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    return run_ranks(n, [str(MAIN), mode], timeout, OPENBLAS_NUM_THREADS="1")


@pytest.mark.parametrize("n", [2, 4])
def test_held_collectives_are_bitwise_the_separate_calls(n):
    p = _run(n, "collectives")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK") == n


@pytest.mark.parametrize("n", [2, 4])
def test_training_step_bitwise_with_and_without_buckets(n):
    p = _run(n, "training")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK bitwise") == n, p.stdout
