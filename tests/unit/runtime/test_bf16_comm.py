"""bf16 collectives on simulated ranks: the checks tests/mpi/bf16_comm_main.py makes under
mpiexec, on SimulatedComm (which reduces bf16 in float32 too, rounding once)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from shardc.runtime.execute.comm import current_comm, run_simulated

_MAIN = Path(__file__).resolve().parents[2] / "mpi" / "bf16_comm_main.py"
_spec = importlib.util.spec_from_file_location("bf16_comm_main", _MAIN)
assert _spec is not None and _spec.loader is not None
bf16_comm_main = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bf16_comm_main)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_bf16_collectives_simulated(n: int) -> None:
    def body(rank: int) -> list[str]:
        return bf16_comm_main.check(current_comm(), rank, n)

    results = run_simulated(n, lambda: body(current_comm().rank))  # type: ignore[attr-defined]
    assert results == [[]] * n


def test_bitwise_reduction_of_bf16_is_refused() -> None:
    def body() -> None:
        x = np.zeros(2, bf16_comm_main.BF)
        current_comm().all_reduce(x, (2,), (0,), "bitwise_or")

    with pytest.raises(Exception, match="needs an integer element type"):
        run_simulated(2, body)
