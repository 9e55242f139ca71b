"""Ranks whose own measurement of the faster BLAS differs (here: each reads a different
kept answer, as two hosts with their own cache directories would) run rank 0's after
`blas.agree`, the call every multi-rank entry point makes before its first step."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _mpiexec import MPIEXEC

from shardc.runtime.execute.kernels import blas, blas_choice

pytestmark = pytest.mark.slow  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MAIN = Path(__file__).resolve().parent / "blas_agree_main.py"


@pytest.mark.mpi
def test_every_rank_runs_rank_0s_library(tmp_path):
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    if any(blas._loaded(n) is None for n in blas.LIBRARIES):  # pyright: ignore[reportPrivateUsage]
        pytest.skip("needs both MKL (the [fast] extra) and numpy's OpenBLAS loadable")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDC_BLAS")}
    env["PYTHONUNBUFFERED"] = "1"
    cmd = [MPIEXEC]
    for rank, choice in ((0, "mkl"), (1, "openblas")):
        d = tmp_path / f"host{rank}"
        d.mkdir(mode=0o700)
        (d / f"blas-choice-{blas_choice.key(blas.library_files())}.json").write_text(json.dumps({"choice": choice}))
        cmd += [*([":"] if rank else []), "-n", "1", "env", f"SHARDC_CACHE_DIR={d}", sys.executable, str(MAIN)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    lines = sorted(line for line in p.stdout.splitlines() if line.startswith("rank "))
    assert lines == ["rank 0: alone mkl, agreed mkl", "rank 1: alone openblas, agreed mkl"], p.stdout
