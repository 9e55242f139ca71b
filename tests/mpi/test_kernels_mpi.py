"""The shard and mpi kernel tests of tests/unit/runtime, run under `mpiexec -n 2` and
`-n 4` through MPIComm (see kernels_main.py)."""

import subprocess
from pathlib import Path

import pytest
from _mpiexec import run_ranks

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MAIN = Path(__file__).resolve().parent / "kernels_main.py"


_jobs: dict[int, subprocess.CompletedProcess] = {}


def _job(n: int, timeout: float = 400.0) -> subprocess.CompletedProcess:
    """One job per rank count runs both kinds (the ranks start, import and compile once)."""
    if n not in _jobs:
        _jobs[n] = run_ranks(n, [str(MAIN), "shard", "mpi"], timeout)
    return _jobs[n]


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("what", ["shard", "mpi"])
def test_kernels_under_mpiexec(n, what):
    p = _job(n)
    assert p.stdout.count(f": OK {what}") == n, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
