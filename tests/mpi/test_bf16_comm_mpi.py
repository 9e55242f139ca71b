"""bf16 collectives under mpiexec: MPI has no bf16 datatype, so data moves as uint16
patterns and reductions run in float32 (bf16_comm_main.py checks every collective)."""

import pytest
from _mpiexec import run_ranks

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [2, 4])
def test_bf16_collectives(n: int) -> None:
    p = run_ranks(n, ["tests/mpi/bf16_comm_main.py"], 300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK") == n, p.stdout
