"""The mpi dialect on bf16 buffers over simulated ranks: the lowered program and the
backend calls tests/mpi/bf16_comm_main.py runs under mpiexec, on SimulatedMPI, which
reduces bf16 as MPIP2P does (float32, rounded once)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.passes import all_passes
from shardc.runtime import compile_module
from shardc.runtime.execute.comm import RankFailed, current_comm, mpi_reduce_list, run_simulated

_MAIN = Path(__file__).resolve().parents[2] / "mpi" / "bf16_comm_main.py"
_spec = importlib.util.spec_from_file_location("bf16_comm_main_sim", _MAIN)
assert _spec is not None and _spec.loader is not None
main = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(main)
BF = main.BF


def _lowered(n: int):
    ctx = make_context()
    module = LocatingParser(ctx, main.shard_program(n), "shard.mlir").parse_module()
    table = all_passes()
    for name in ("convert-shard-to-mpi", "canonicalize"):
        table[name]()().apply(ctx, module)
    module.verify()
    return compile_module(module, "lowered.mlir")


@pytest.mark.parametrize("n", [1, 2, 4])
def test_lowered_bf16_mpi_calls_simulated(n: int) -> None:
    program, p2p = _lowered(n), main.compile_text(main.P2P, "p2p.mlir")
    results = run_simulated(n, lambda: main.check_lowered(program, p2p, current_comm().rank, n))  # type: ignore[attr-defined]
    assert results == [[]] * n


def test_bf16_reference_reduction_rounds_once() -> None:
    parts = [np.array([256.0], np.float32).astype(BF), *[np.array([1.0], np.float32).astype(BF)] * 2]
    assert float(mpi_reduce_list(parts, "MPI_SUM")[0]) == 258.0  # bf16 steps: 256 + 1 = 256, twice
    assert mpi_reduce_list(parts, "MPI_MAX").dtype == np.dtype(BF)


@pytest.mark.parametrize("op", ["MPI_BOR", "MPI_LAND"])
def test_integer_mpi_op_on_bf16_is_refused(op: str) -> None:
    def body() -> None:
        b = current_comm().mpi_backend()
        x = np.zeros(2, BF)
        b.allreduce(b.comm_world(), x, x.copy(), op)

    with pytest.raises(RankFailed, match=f"CommError: .*{op} needs an integer element type, got bfloat16"):
        run_simulated(2, body)
