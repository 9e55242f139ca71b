"""bf16 sums move bf16 (`runtime/execute/bf16_sums.py`, `--grad-reduce bf16`'s
collectives): on 2, 3 and 4 ranks every bf16 all-reduce and reduce-scatter of the
runtime hands MPI only 16-bit elements and gives the float32 sum in rank order rounded
once (bf16_sums_main.py)."""

import pytest
from _mpiexec import run_ranks

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [2, 3, 4])
def test_bf16_sums_move_sixteen_bits(n: int) -> None:
    p = run_ranks(n, ["tests/mpi/bf16_sums_main.py"], 300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK") == n, p.stdout
