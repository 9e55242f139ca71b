"""`shardc-run` under `mpiexec -n 2`: cold, rank 0 parses, runs the pipeline and compiles
once and rank 1 receives its entry; warm, rank 0 hits and rank 1 receives, and no rank
runs a pass. Counted from the cache's debug lines (`SHARDC_CACHE_DEBUG=1`) and from the
tool's `--timing` line; results equal. A program that fails to compile is reported once
by rank 0, as without the cache, and nothing is stored."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MPIEXEC = shutil.which("mpiexec")
ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], cache_dir: Path, **env: str) -> subprocess.CompletedProcess:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    e = {k: v for k, v in os.environ.items() if k != "SHARDC_CACHE"}
    e.update(PYTHONUNBUFFERED="1", SHARDC_CACHE_DEBUG="1", SHARDC_CACHE_DIR=str(cache_dir), **env)
    cmd = [MPIEXEC, "-n", "2", sys.executable, "-m", "shardc.tools.run", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=e, cwd=ROOT, stdin=subprocess.DEVNULL)


def _counts(stderr: str) -> dict[str, int]:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("shardc: compile cache: ")]
    return {kind: sum(f": {kind} " in ln for ln in lines) for kind in ("miss", "hit", "received")}


def _identity_now() -> str:
    code = "from shardc.runtime.codegen.cache import compiler_identity; print(compiler_identity())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout


def _program(tmp_path: Path, grid: str = "2") -> Path:
    p = tmp_path / "mlp2.mlir"
    p.write_text((ROOT / "examples" / "mlp.mlir").read_text().replace("shard.grid @grid(shape = 4)", f"shard.grid @grid(shape = {grid})"))
    return p


def test_shardc_run_cold_then_warm(tmp_path):
    prog = _program(tmp_path)
    inputs = ["--input", "x=random:seed=1", "--input", "w1=random:seed=2", "--input", "w2=random:seed=3", "--timing"]
    before = _identity_now()
    cold = _run([str(prog), *inputs, "--pipeline", "shard-to-mpi-pipeline", "--output", str(tmp_path / "cold")], tmp_path / "cache")
    assert cold.returncode == 0, cold.stderr
    assert _counts(cold.stderr) == {"miss": 1, "hit": 0, "received": 1}, cold.stderr
    assert "pipeline" in cold.stdout and "no pipeline" not in cold.stdout
    warm = _run([str(prog), *inputs, "--pipeline", "shard-to-mpi-pipeline", "--output", str(tmp_path / "warm")], tmp_path / "cache")
    assert warm.returncode == 0, warm.stderr
    if _identity_now() != before:
        pytest.skip("shardc's source files changed while the test ran (the key covers them)")
    assert _counts(warm.stderr) == {"miss": 0, "hit": 1, "received": 1}, warm.stderr
    assert "loaded the compiled program from the compile cache" in warm.stdout and "no parse, no pipeline" in warm.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "cold" / "result0.npy"), np.load(tmp_path / "warm" / "result0.npy"))
    assert len(list((tmp_path / "cache").rglob("*.entry"))) == 1


def test_shardc_run_error_reported_once_and_not_stored(tmp_path):
    prog = _program(tmp_path, grid="3")  # 64 does not split into 3 shards: shard-partition refuses
    args = [str(prog), "--input", "x=zeros", "--input", "w1=zeros", "--input", "w2=zeros"]
    runs = [_run(args, tmp_path / "cache") for _ in range(2)]
    off = _run(args, tmp_path / "cache", SHARDC_CACHE="0")
    strip = lambda err: [ln for ln in err.splitlines() if not ln.startswith("shardc: compile cache: ")]  # noqa: E731
    for p in (*runs, off):
        assert p.returncode == 1, p.stderr
        assert "does not split evenly into 3 shards" in p.stderr and "Traceback" not in p.stderr
        assert sum("error:" in ln for ln in p.stderr.splitlines()) == 1, p.stderr
    assert strip(runs[0].stderr) == strip(runs[1].stderr) == strip(off.stderr)
    assert not list((tmp_path / "cache").rglob("*.entry"))


TORCH_JOB = """
import numpy as np, torch, torch.nn.functional as F
from mpi4py import MPI
from shardc.frontends.torch_train import train_module
from shardc.testing import torch_models as tm
from shardc.training.axis import ShardingPlan, ShardingPolicy
torch.manual_seed(0)
model = tm.MLP()
rng = np.random.default_rng(0)
batches = [(rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)) for _ in range(2)]
axes = {r"fc1\\.weight": ("n_hidden", None), r"fc1\\.bias": ("n_hidden",), r"fc2\\.weight": (None, "n_hidden")}
result = train_module(model, batches, F.mse_loss, axes=axes, plan=ShardingPlan(tp_rules={"n_hidden": "shard"}),
                      policy=ShardingPolicy(tp=2, zero=False), world=None)
if MPI.COMM_WORLD.Get_rank() == 0:
    print(result.program.cached, " ".join(f"{x:.9g}" for x in result.losses))
"""


def test_torch_trainer_compiles_once_per_job_and_not_at_all_when_warm(tmp_path):
    pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
    pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    script = tmp_path / "job.py"
    script.write_text(TORCH_JOB)
    e = {k: v for k, v in os.environ.items() if k != "SHARDC_CACHE"}
    e.update(PYTHONUNBUFFERED="1", SHARDC_CACHE_DEBUG="1", SHARDC_CACHE_DIR=str(tmp_path / "cache"))
    before = _identity_now()
    cold, warm = (
        subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=e, cwd=ROOT, stdin=subprocess.DEVNULL)
        for _ in range(2)
    )
    assert cold.returncode == 0 and warm.returncode == 0, cold.stderr[-3000:] + warm.stderr[-3000:]
    assert _counts(cold.stderr) == {"miss": 1, "hit": 0, "received": 1}, cold.stderr
    if _identity_now() != before:
        pytest.skip("shardc's source files changed while the test ran (the key covers them)")
    assert _counts(warm.stderr) == {"miss": 0, "hit": 1, "received": 1}, warm.stderr
    (c_src, *c_losses), (w_src, *w_losses) = cold.stdout.split(), warm.stdout.split()
    assert (c_src, w_src) == ("compiled", "cache") and c_losses == w_losses


def test_shardc_train_sample_compiles_once_per_job_and_hits_when_warm(tmp_path):
    """`shardc-train --sample` under mpiexec: the sampler's `@logits` goes through the
    cache too (rank 0 compiles or hits, rank 1 receives); the text is the same."""
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    model = ["--n-layer", "1", "--n-head", "4", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2", "--steps", "1", "--eval-every", "0", "--quiet", "--tp", "2", "--sample", "5"]
    e = {k: v for k, v in os.environ.items() if k != "SHARDC_CACHE"}
    e.update(PYTHONUNBUFFERED="1", SHARDC_CACHE_DEBUG="1", SHARDC_CACHE_DIR=str(tmp_path / "cache"))
    before = _identity_now()
    runs = [
        subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "shardc.tools.train", *model, "--out", str(tmp_path / name)], capture_output=True, text=True, timeout=600, env=e, cwd=ROOT, stdin=subprocess.DEVNULL)
        for name in ("cold", "warm")
    ]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr[-3000:]
    logits = [_counts("\n".join(ln for ln in r.stderr.splitlines() if "(logits)" in ln)) for r in runs]
    assert logits[0] == {"miss": 1, "hit": 0, "received": 1}, runs[0].stderr
    if _identity_now() != before:
        pytest.skip("shardc's source files changed while the test ran (the key covers them)")
    assert logits[1] == {"miss": 0, "hit": 1, "received": 1}, runs[1].stderr
    sample = [r.stdout[r.stdout.index("sample (") :] for r in runs]
    assert sample[0] == sample[1]
