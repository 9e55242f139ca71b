"""The two-rank reduce-scatter as one exchange (comm_pair.py) under mpiexec: the same
bits as MPI_Reduce_scatter_block over every layout pair_main.py makes, the runtime's
direct path without a copy of a column-block send, and nothing taken on 3 ranks."""

import pytest
from _mpiexec import run_ranks

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [2, 3])
def test_pair_reduce_scatter(n: int) -> None:
    p = run_ranks(n, ["tests/mpi/pair_main.py"], 300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK") == n, p.stdout + p.stderr
