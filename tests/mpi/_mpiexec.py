"""Starting a test driver on n ranks, shared by the multi-rank tests: they differ only in
the driver, its arguments and how long it may take."""

import os
import shutil
import subprocess
import sys

import pytest

MPIEXEC = shutil.which("mpiexec")


def run_ranks(n: int, args: list[str], timeout: float, **env: str) -> subprocess.CompletedProcess:
    """`mpiexec -n N python ARGS...` with unbuffered output (so a failing rank's last lines
    arrive), skipped with a reason where mpiexec is absent."""
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    full_env = dict(os.environ, PYTHONUNBUFFERED="1", **env)
    return subprocess.run([MPIEXEC, "-n", str(n), sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=full_env)
