"""tm_tensor.scan split along its scan dimension under `mpiexec -n 2` and `-n 4`: the
shards' totals go through real MPI collectives (see scan_main.py)."""

from pathlib import Path

import pytest
from _mpiexec import run_ranks

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MAIN = Path(__file__).resolve().parent / "scan_main.py"


@pytest.mark.parametrize("n", [2, 4])
def test_split_scan_under_mpiexec(n: int) -> None:
    p = run_ranks(n, [str(MAIN)], 300.0)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count(": OK scan") == n
