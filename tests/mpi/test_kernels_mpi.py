"""The shard and mpi kernel tests of tests/unit/runtime, run under `mpiexec -n 2` and
`-n 4` through MPIComm (see kernels_main.py)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi

MPIEXEC = shutil.which("mpiexec")
MAIN = Path(__file__).resolve().parent / "kernels_main.py"


def _run(n: int, what: str, timeout: float = 240.0) -> subprocess.CompletedProcess:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(MAIN), what], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("what", ["shard", "mpi"])
def test_kernels_under_mpiexec(n, what):
    p = _run(n, what)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count(f": OK {what}") == n
