"""shardc-verify under a real `mpiexec -n 4`: generated programs partitioned and lowered,
one process per rank, agree with their unsharded run; failures are reported once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shardc.testing.gen_exec_programs import generate_exec_program

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MPIEXEC = shutil.which("mpiexec")
GRIDS_OF_4 = ((4,), (2, 2))


def _verify(n: int, path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(
        [MPIEXEC, "-n", str(n), sys.executable, "-m", "shardc.tools.verify", str(path), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.mark.parametrize("seed", [3, 11, 26, 40])
def test_generated_program_under_mpiexec(tmp_path: Path, seed: int) -> None:
    path = tmp_path / f"seed{seed}.mlir"
    path.write_text(generate_exec_program(seed, grids=GRIDS_OF_4))
    p = _verify(4, path, "--stage", "all", "--seed", str(seed))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("OK: ") == 1  # rank 0 alone reports
    assert "(partitioned, lowered, 4 ranks)" in p.stdout


def test_rejection_reported_once(tmp_path: Path) -> None:
    text = generate_exec_program(3, grids=GRIDS_OF_4)
    # A second annotation of %arg0: a block argument must have a single use.
    first = next(line for line in text.splitlines() if "= shard.shard %arg0 to" in line)
    path = tmp_path / "bad.mlir"
    path.write_text(text.replace(first, first + "\n" + first.replace("%a", "%dup", 1)))
    p = _verify(4, path, "--pipeline", "builtin.module(shard-partition)")
    assert p.returncode == 1
    assert p.stderr.count("error: Cannot partition: expected a single use for block argument 0") == 1, p.stderr
    assert "Traceback" not in p.stderr


def test_world_size_must_fit_the_grid(tmp_path: Path) -> None:
    path = tmp_path / "p.mlir"
    path.write_text(generate_exec_program(3, grids=((2, 2),)))
    p = _verify(2, path)
    assert p.returncode == 1
    assert p.stderr.count("shardc-verify: error:") == 1
    assert "has 4 devices but the world has 2 ranks" in p.stderr
