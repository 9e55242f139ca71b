"""bf16 collectives under mpiexec: MPI has no bf16 datatype, so data moves as uint16
patterns and reductions run in float32, rounded to bf16 once (bf16_comm_main.py checks
every collective of MPIComm, and the mpi dialect's calls on MPIP2P)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from _mpiexec import run_ranks

import bf16_comm_main

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [2, 4])
def test_bf16_collectives(n: int) -> None:
    p = run_ranks(n, ["tests/mpi/bf16_comm_main.py"], 300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK") == n, p.stdout


@pytest.mark.parametrize("n", [2, 4])
def test_bf16_lowered_mpi_calls(n: int, tmp_path: Path) -> None:
    """shardc-opt's lowering of bf16 shard collectives (mpi.allreduce, reduce_scatter_block,
    allgather, isend/recv on bf16 memrefs) and hand-written mpi.send/irecv, run by the
    runtime on n ranks: every result bit for bit a float32 reduction rounded once."""
    src = tmp_path / "shard.mlir"
    src.write_text(bf16_comm_main.shard_program(n))
    lowered = tmp_path / "lowered.mlir"
    opt = subprocess.run([sys.executable, "-m", "shardc.tools.opt", str(src), "--convert-shard-to-mpi", "--canonicalize", "-o", str(lowered)], capture_output=True, text=True, timeout=120)
    assert opt.returncode == 0, opt.stderr
    text = lowered.read_text()
    assert re.search(r"mpi\.allreduce\(%\w+, %\w+, MPI_SUM, %\w+\) : memref<4x8xbf16>, memref<4x8xbf16>", text), text
    assert re.search(rf"mpi\.reduce_scatter_block\(.*\) : memref<4x8xbf16>, memref<{4 // n}x8xbf16>", text), text
    assert "mpi.allgather(" in text and "mpi.isend(" in text, text
    p = run_ranks(n, ["tests/mpi/bf16_comm_main.py", str(lowered)], 300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK") == n, p.stdout
