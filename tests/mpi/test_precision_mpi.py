"""`shardc-train --precision bf16` under real mpiexec (MPIComm, the bf16 all_gathers of
FSDP over MPI): the losses agree with one simulated rank on the same global batches to
bf16 tolerance (tests/unit/training/test_precision.py says why 0.02)."""

import csv
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from shardc.tools.train import main

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

MPIEXEC = shutil.which("mpiexec")
MODEL = ["--n-layer", "1", "--n-head", "4", "--n-embd", "32", "--block-size", "8", "--steps", "3", "--eval-every", "0", "--checkpoint-every", "0", "--quiet", "--precision", "bf16"]


def _losses(out) -> list[float]:
    return [float(r["loss"]) for r in csv.DictReader(open(out / "loss.csv"))]


@pytest.mark.parametrize("n, policy", [(2, ["--fsdp"]), (4, ["--tp", "2", "--fsdp"])], ids=["fsdp2", "tp2-fsdp4"])
def test_bf16_mpiexec_matches_one_rank(n, policy, tmp_path):
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    replicas = n // (2 if "--tp" in policy else 1)
    env = dict(os.environ, PYTHONUNBUFFERED="1", SHARDC_OVERSUBSCRIBE="1")
    cmd = [MPIEXEC, "-n", str(n), *(["--oversubscribe"] if "Open MPI" in subprocess.run([MPIEXEC, "--version"], capture_output=True, text=True).stdout else [])]
    p = subprocess.run(
        [*cmd, sys.executable, "-m", "shardc.tools.train", *MODEL, *policy, "--per-device-batch", str(4 // replicas), "--out", str(tmp_path / "mpi")],
        capture_output=True, text=True, timeout=400, env=env,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert main(["--simulate", "1", *MODEL, "--per-device-batch", "4", "--out", str(tmp_path / "one")]) == 0
    got, want = _losses(tmp_path / "mpi"), _losses(tmp_path / "one")
    assert len(got) == 3
    np.testing.assert_allclose(got, want, rtol=0, atol=0.02)
