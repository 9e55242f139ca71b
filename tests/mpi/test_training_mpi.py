"""shardc-train under real mpiexec (MPIComm): the losses and final parameters of a few
policies equal the single-rank run of the unsharded IR on the same global batches."""

import argparse
import csv
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from shardc.tools.train import arg_parser
from shardc.training.gpt_source import configure
from shardc.training.trainer import reference_losses

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MPIEXEC = shutil.which("mpiexec")
MODEL = ["--n-layer", "1", "--n-head", "4", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2", "--steps", "3", "--lr", "1e-2", "--eval-every", "0", "--quiet"]


def _train(n: int, args: list[str], out, launch: bool = False, timeout: float = 240.0) -> subprocess.CompletedProcess:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    tool = [sys.executable, "-m", "shardc.tools.train"]
    cmd = [*tool, "--np", str(n), "--oversubscribe"] if launch else [MPIEXEC, "-n", str(n), *tool]  # 4 ranks on a 2-CPU CI machine
    return subprocess.run([*cmd, *args, "--out", str(out)], capture_output=True, text=True, timeout=timeout, env=env)


def _reference(n: int, args: list[str]):
    a: argparse.Namespace = arg_parser().parse_args(args)
    cfg, grid, _, train, _ = configure(a, n, n)
    return grid, reference_losses(cfg, train, grid)


@pytest.mark.parametrize(
    "n, policy, launch",
    [
        (2, ["--tp", "2", "--fsdp", "--accum", "2"], True),
        (4, ["--tp", "2", "--zero"], False),
        (4, ["--tp", "1", "--no-zero", "--accum", "2"], False),
    ],
)
def test_mpi_training_matches_single_rank(n, policy, launch, tmp_path):
    args = [*MODEL, *policy]
    p = _train(n, args, tmp_path, launch)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("shardc-train: loss") == 1  # rank 0 alone reports
    grid, (ref_losses, ref_params) = _reference(n, args)
    assert f"grid {grid}" in p.stdout
    losses = [float(r["loss"]) for r in csv.DictReader(open(tmp_path / "loss.csv"))]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-5)  # CSV keeps 6 decimals
    got = np.load(tmp_path / "params.npz")
    for path, ref in ref_params.items():
        np.testing.assert_allclose(got[path], ref, rtol=1e-4, atol=2e-5, err_msg=path)


def test_mpi_bad_tp_is_one_line_from_rank_0(tmp_path):
    p = _train(2, [*MODEL, "--tp", "3"], tmp_path, timeout=120)
    assert p.returncode != 0
    assert p.stderr.count("shardc-train: error: tp=3 does not divide the 2 ranks") == 1, p.stderr
