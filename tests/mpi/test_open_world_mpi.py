"""Open-world programs (`shardc.testing.gen_open_programs`: multi-use values, unannotated
arguments, conflicting annotations, reshapes, gathers, ...) under a real `mpiexec -n 4`:
propagated, partitioned and lowered, one process per rank, they agree with their
unsharded run. Ten programs go through one MPI job (`verify_mpi` on each), one through
the `shardc-verify` command line.

    mpiexec -n 4 python tests/mpi/test_open_world_mpi.py DIR    # verify DIR/*.mlir
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MPIEXEC = shutil.which("mpiexec")
GRIDS_OF_4 = ((4,), (2, 2))
SEEDS = tuple(range(100, 110))


def _features() -> frozenset[str]:
    from shardc.testing.gen_open_programs import FEATURES, NOT_YET_WORKING

    return FEATURES - NOT_YET_WORKING


def _mpiexec(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([MPIEXEC, "-n", "4", sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_open_programs_under_mpiexec(tmp_path: Path) -> None:
    from shardc.testing.gen_open_programs import generate_open_program

    features = _features()
    for seed in SEEDS:
        (tmp_path / f"seed{seed}.mlir").write_text(generate_open_program(seed, features, grids=GRIDS_OF_4))
    p = _mpiexec(__file__, str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [line for line in p.stdout.splitlines() if line.startswith("seed")]
    assert len(lines) == len(SEEDS), p.stdout + p.stderr  # rank 0 alone reports
    assert all("OK: " in line and "(partitioned, lowered, 4 ranks)" in line for line in lines), p.stdout


def test_shardc_verify_under_mpiexec(tmp_path: Path) -> None:
    from shardc.testing.gen_open_programs import generate_open_program

    path = tmp_path / "open.mlir"
    path.write_text(generate_open_program(7, _features(), grids=((2, 2),)))
    p = _mpiexec("-m", "shardc.tools.verify", str(path), "--stage", "all", "--seed", "7")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("OK: ") == 1 and "(partitioned, lowered, 4 ranks)" in p.stdout, p.stdout


def main(directory: str) -> int:
    """Every rank verifies each program of `directory`; rank 0 prints one line each
    (with the program when it fails) and the job fails if any did."""
    from mpi4py import MPI

    from shardc.tools.verification import verify_mpi

    rank = MPI.COMM_WORLD.Get_rank()
    failed = 0
    for path in sorted(Path(directory).glob("*.mlir")):
        text = path.read_text()
        seed = int(path.stem.removeprefix("seed"))
        report = verify_mpi(text, stage="all", seed=seed, atol=1e-4, name=path.name)
        if rank == 0:
            print(f"{path.stem}: {report.summary()}" + ("" if report.ok else f"\n{text}"), flush=True)
        failed += not report.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
