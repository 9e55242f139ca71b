"""The communication benchmarks' options run: `bench/step_profile.py --free-comm` under
mpiexec (the step with real and with free collectives, both reported), and
`bench/step_pair.py --env` (this tree with a variable against without)."""

import subprocess
import sys
from pathlib import Path

import pytest
from _mpiexec import run_ranks

pytestmark = pytest.mark.slow  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.mpi
def test_free_comm_bound_reports_both_steps():
    p = run_ranks(2, [str(BENCH / "step_profile.py"), "--free-comm", "--steps", "2"], 400.0, OPENBLAS_NUM_THREADS="1")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "tp=1: 2 ranks" in p.stdout and p.stdout.count("real communication") == 2, p.stdout


def test_env_pair_runs_this_tree_against_itself():
    cmd = [sys.executable, str(BENCH / "step_pair.py"), "--env", "SHARDC_BUCKET_BYTES=0", "--ranks", "1", "--pairs", "1", "--steps", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "base/this median" in p.stdout, p.stdout
