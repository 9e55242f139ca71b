"""The shard and mpi kernel tests of tests/unit/runtime, run under `mpiexec -n 2` and
`-n 4` through MPIComm (see kernels_main.py)."""

import subprocess
from pathlib import Path

import pytest
from _mpiexec import run_ranks

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MAIN = Path(__file__).resolve().parent / "kernels_main.py"


def _run(n: int, what: str, timeout: float = 240.0) -> subprocess.CompletedProcess:
    return run_ranks(n, [str(MAIN), what], timeout)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("what", ["shard", "mpi"])
def test_kernels_under_mpiexec(n, what):
    p = _run(n, what)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count(f": OK {what}") == n
