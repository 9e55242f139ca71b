"""`shardc-train` (run as `python -m shardc.tools.train` / `main`): outputs, the emitted IR
of each stage, and one-line errors."""

import csv
import subprocess
import sys

import numpy as np
import pytest

from shardc.tools.train import main
from shardc.training.gpt import param_specs

SMALL = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2", "--quiet"]


@pytest.mark.slow
def test_simulated_run_writes_log_plot_params_and_ir(tmp_path, capsys):
    out, ir = tmp_path / "out", tmp_path / "ir"
    rc = main(["--simulate", "2", "--steps", "4", "--eval-every", "2", "--accum", "2", "--fsdp", *SMALL, "--out", str(out), "--emit-ir", str(ir)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "grid (batch=2, shard=1), policy tp=1 zero=True fsdp=True" in text
    assert "global batch: 2 per device x 2 data replicas x 2 accumulation steps = 8 sequences (64 tokens; microbatch 4)" in text
    assert "per-rank state: params" in text and "collectives in @train_step:" in text and "all_gather over batch" in text
    rows = list(csv.DictReader(open(out / "loss.csv")))
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4]
    assert [r["eval_loss"] != "" for r in rows] == [False, True, False, True]
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    params = np.load(out / "params.npz")
    vocab = len((out / "vocab.txt").read_text())
    assert params["wte"].shape[0] >= vocab and params["wte"].shape[0] % 8 == 0
    from shardc.training.gpt import GPTConfig

    cfg = GPTConfig(1, 2, 16, 8, params["wte"].shape[0])
    assert {s.path: s.shape for s in param_specs(cfg)} == {k: params[k].shape for k in params.files}
    stages = sorted(p.name for p in ir.iterdir())
    assert stages[0] == "00-input.mlir" and stages[-1] == "08-canonicalize.mlir" and "06-convert-shard-to-mpi.mlir" in stages
    assert "shard.shard" in (ir / "00-input.mlir").read_text()
    lowered = (ir / "08-canonicalize.mlir").read_text()
    assert "mpi.allgather" in lowered and "shard.all_gather" not in lowered


@pytest.mark.slow
def test_loss_falls_on_the_synthetic_corpus(tmp_path, capsys):
    rc = main(["--simulate", "1", "--steps", "25", "--lr", "1e-2", *SMALL, "--out", str(tmp_path)])
    assert rc == 0
    losses = [float(r["loss"]) for r in csv.DictReader(open(tmp_path / "loss.csv"))]
    assert np.mean(losses[-5:]) < losses[0] - 0.5


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["--tp", "0"], "--tp must be positive, got 0"),
        (["--simulate", "4", "--tp", "3"], "tp=3 does not divide the 4 ranks"),
        (["--fsdp", "--no-zero"], "--fsdp requires ZeRO: drop --no-zero"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--steps", "x"], "argument --steps: invalid int value: 'x'"),
        (["--data", "/nonexistent/file.txt"], "cannot read '/nonexistent/file.txt': No such file or directory"),
        (["--n-embd", "10", "--n-head", "4"], "n_embd (10) must be a multiple of n_head (4)"),
        (["--lr", "nan"], "--lr must be a positive number, got nan"),
        (
            ["--steps", "1", "--n-layer", "1", "--n-embd", "8", "--n-head", "2", "--block-size", "8", "--emit-ir", "/proc/no/such/dir"],
            "cannot write to '/proc/no/such/dir': No such file or directory",
        ),
        (
            ["--simulate", "8", "--tp", "2", "--fsdp", "--n-head", "2", "--n-embd", "8"],
            "state params/h.0.attn.c_attn.weight of shape (8, 3, 2, 4) with partition spec "
            "PartitionSpec(None, None, ('shard', 'batch'), None) does not fit grid (batch=4, shard=2): "
            "dimension 2 of size 2 is split 8 ways (and ",
        ),
    ],
)
def test_bad_flags_give_one_line_and_exit_1(args, message, capsys, tmp_path):
    assert main([*args, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("shardc-train: error: "), err
    assert message in err


def test_module_entry_point_exits_1_without_traceback():
    p = subprocess.run([sys.executable, "-m", "shardc.tools.train", "--accum", "0"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert p.stderr == "shardc-train: error: --accum must be positive, got 0\n"
