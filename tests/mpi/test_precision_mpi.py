"""`shardc-train --precision bf16` under real mpiexec (MPIComm, the bf16 all_gathers of
FSDP over MPI): the losses agree with one simulated rank on the same global batches to
bf16 tolerance: the built-in GPT (tests/unit/training/test_precision.py says why 0.02)
and a transformers Llama from its config (relative 2^-9, as
tests/unit/frontends/test_bf16_autocast.py derives; measured: 1e-6, the loss file's
last digit). `--grad-reduce bf16` under mpiexec is the simulated run's, bit for bit:
the runtime's bf16 sums over MPI (`bf16_sums`) and the simulated ranks' agree."""

import csv
import json
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


LLAMA = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
HF = ["--torch-model", "hf:LlamaForCausalLM", "--steps", "3", "--lr", "1e-2", "--block-size", "8", "--quiet", "--eval-every", "0", "--checkpoint-every", "0", "--precision", "bf16"]


def test_transformers_llama_bf16_fsdp_mpiexec_matches_one_rank(tmp_path):
    pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")
    pytest.importorskip("transformers", reason="needs transformers (the [torch] extra)")
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    (tmp_path / "cfg.json").write_text(json.dumps(LLAMA))
    model = [*HF, "--model-config", str(tmp_path / "cfg.json")]
    env = dict(os.environ, PYTHONUNBUFFERED="1", SHARDC_OVERSUBSCRIBE="1")
    p = subprocess.run(
        [MPIEXEC, "-n", "2", sys.executable, "-m", "shardc.tools.train", *model, "--fsdp", "--per-device-batch", "2", "--out", str(tmp_path / "mpi")],
        capture_output=True, text=True, timeout=400, env=env,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert main([*model, "--simulate", "1", "--per-device-batch", "4", "--out", str(tmp_path / "one")]) == 0
    got, want = _losses(tmp_path / "mpi"), _losses(tmp_path / "one")
    assert len(got) == 3
    np.testing.assert_allclose(got, want, rtol=2**-9, atol=0)


@pytest.mark.parametrize("n, policy", [(2, ["--fsdp"]), (4, ["--tp", "2", "--fsdp"])], ids=["fsdp2", "tp2-fsdp4"])
def test_grad_reduce_bf16_mpiexec_is_the_simulated_run(n, policy, tmp_path):
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    replicas = n // (2 if "--tp" in policy else 1)
    args = [*MODEL, *policy, "--grad-reduce", "bf16", "--per-device-batch", str(4 // replicas)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", SHARDC_OVERSUBSCRIBE="1")
    cmd = [MPIEXEC, "-n", str(n), *(["--oversubscribe"] if "Open MPI" in subprocess.run([MPIEXEC, "--version"], capture_output=True, text=True).stdout else [])]
    p = subprocess.run([*cmd, sys.executable, "-m", "shardc.tools.train", *args, "--out", str(tmp_path / "mpi")], capture_output=True, text=True, timeout=400, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert main(["--simulate", str(n), *args, "--out", str(tmp_path / "sim")]) == 0
    assert _losses(tmp_path / "mpi") == _losses(tmp_path / "sim")
    got, want = np.load(tmp_path / "mpi" / "params.npz"), np.load(tmp_path / "sim" / "params.npz")
    assert sorted(got.files) == sorted(want.files)
    for k in got.files:
        assert np.array_equal(got[k], want[k]), k
