"""`shardc-train --np 2 --auto` under real MPI: every rank plans alike, rank 0 prints the
plan and the measurement once, and the chosen policy trains as one rank does."""

import argparse
import csv
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from shardc.tools.train import arg_parser
from shardc.training.auto_plan import policy_name
from shardc.training.axis import ShardingPolicy
from shardc.training.gpt_source import configure
from shardc.training.trainer import reference_losses

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # an mpiexec job that compiles: about 15 s

MODEL = ["--n-layer", "1", "--n-head", "4", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2", "--steps", "4", "--lr", "1e-2", "--eval-every", "0", "--quiet"]


def test_np_auto_tight_budget_plans_once_and_trains_as_one_rank(tmp_path):
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not on PATH")
    tool = [sys.executable, "-m", "shardc.tools.train"]
    plan = subprocess.run([*tool, "--plan-only", "--world", "2", "--memory-budget", "1KB", *MODEL], capture_output=True, text=True, timeout=120)
    smallest = re.search(r"the smallest that fits is (\S+) ", plan.stderr).group(1)  # DP and ZeRO need more
    p = subprocess.run([*tool, "--np", "2", "--oversubscribe", "--auto", "--memory-budget", smallest, *MODEL, "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("auto plan for 2 ranks") == 1 and p.stdout.count("shardc-train: measured ") == 1, p.stdout
    chosen = re.search(r"chosen: (\S+) on grid", p.stdout).group(1)
    assert chosen not in ("dp", "zero")
    tp, zero, fsdp = re.search(r"policy tp=(\d+) zero=(\w+) fsdp=(\w+)", p.stdout).groups()
    policy = ShardingPolicy(int(tp), zero == "True", fsdp == "True")
    assert policy_name(policy) == chosen
    flags = ["--tp", tp, "--zero" if policy.zero else "--no-zero", *(["--fsdp"] if policy.fsdp else [])]
    a: argparse.Namespace = arg_parser().parse_args([*MODEL, *flags])
    cfg, grid, _, train, _ = configure(a, 2, 2)
    ref_losses, _ = reference_losses(cfg, train, grid)
    losses = [float(r["loss"]) for r in csv.DictReader(open(tmp_path / "loss.csv"))]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-5)  # CSV keeps 6 decimals


def test_np_auto_torch_model_plans_once_and_trains_as_its_hand_policy(tmp_path):
    """`--torch-model ... --auto` on 2 MPI ranks: planned alike on both, printed once,
    trained with the losses of the chosen policy given by hand on 2 simulated ranks."""
    pytest.importorskip("torch", reason="needs the [torch] extra")
    pytest.importorskip("torch_mlir", reason="needs the [torch] extra")
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not on PATH")
    from pathlib import Path

    from shardc.tools.train import main

    example = str(Path(__file__).resolve().parents[2] / "examples" / "torch_gpt.py") + ":make"
    common = ["--torch-model", example, "--block-size", "8", "--per-device-batch", "2", "--steps", "3", "--lr", "1e-2", "--eval-every", "0", "--checkpoint-every", "0", "--quiet"]
    tool = [sys.executable, "-m", "shardc.tools.train"]
    p = subprocess.run([*tool, "--np", "2", "--oversubscribe", "--auto", *common, "--out", str(tmp_path / "auto")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("auto plan for 2 ranks") == 1 and p.stdout.count("shardc-train: measured ") == 1, p.stdout
    tp, zero, fsdp = re.search(r"policy tp=(\d+) zero=(\w+) fsdp=(\w+)", p.stdout).groups()
    chosen = re.search(r"chosen: (\S+) on grid", p.stdout).group(1)
    assert chosen.split("[")[0] == policy_name(ShardingPolicy(int(tp), zero == "True", fsdp == "True"))  # a mix: its base policy, then `[group=kind,...]`
    flags = ["--tp", tp, "--zero" if zero == "True" else "--no-zero", *(["--fsdp"] if fsdp == "True" else [])]
    assert main(["--simulate", "2", *flags, *common, "--out", str(tmp_path / "hand")]) == 0
    def losses(out):
        return [float(r["loss"]) for r in csv.DictReader(open(out / "loss.csv"))]
    np.testing.assert_allclose(losses(tmp_path / "auto"), losses(tmp_path / "hand"), rtol=1e-5, atol=1e-5)
