"""One compile per job under `mpiexec -n 4`: rank 0 compiles (or loads from the compile
cache) and the other ranks take its result; counted from the cache's debug lines
(`SHARDC_CACHE_DEBUG=1`: one line per lookup on every rank's stderr)."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MPIEXEC = shutil.which("mpiexec")
ROOT = Path(__file__).resolve().parents[2]
MODEL = ["--n-layer", "1", "--n-head", "4", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2", "--steps", "2", "--lr", "1e-2", "--eval-every", "0", "--quiet", "--tp", "2"]


def _mpi(n: int, cmd: list[str], cache_dir: Path, timeout: float = 300.0, **env: str) -> subprocess.CompletedProcess:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    e = {k: v for k, v in os.environ.items() if k != "SHARDC_CACHE"}
    e.update(PYTHONUNBUFFERED="1", SHARDC_CACHE_DEBUG="1", SHARDC_CACHE_DIR=str(cache_dir), **env)
    return subprocess.run([MPIEXEC, "-n", str(n), *cmd], capture_output=True, text=True, timeout=timeout, env=e, cwd=ROOT, stdin=subprocess.DEVNULL)


def _counts(stderr: str) -> dict[str, int]:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("shardc: compile cache: ")]
    return {kind: sum(f": {kind} " in ln for ln in lines) for kind in ("miss", "hit", "received")}


def _train(tmp_path: Path, name: str, **env: str) -> subprocess.CompletedProcess:
    return _mpi(4, [sys.executable, "-m", "shardc.tools.train", *MODEL, "--out", str(tmp_path / name)], tmp_path / "cache", **env)


def _losses(out: Path) -> list[str]:
    return [r["loss"] for r in csv.DictReader(open(out / "loss.csv"))]


def _identity_now() -> str:
    code = "from shardc.runtime.codegen.cache import compiler_identity; print(compiler_identity())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout


def test_training_compiles_once_per_job_and_not_at_all_when_warm(tmp_path):
    before = _identity_now()
    cold = _train(tmp_path, "cold")
    assert cold.returncode == 0, cold.stderr
    assert _counts(cold.stderr) == {"miss": 1, "hit": 0, "received": 3}, cold.stderr
    assert "compiled the step through 8 passes" in cold.stdout
    (entry,) = (tmp_path / "cache").rglob("*.entry")
    warm = _train(tmp_path, "warm")
    assert warm.returncode == 0, warm.stderr
    if _identity_now() != before:
        pytest.skip("shardc's source files changed while the test ran (the key covers them)")
    assert _counts(warm.stderr) == {"miss": 0, "hit": 1, "received": 3}, warm.stderr
    assert "loaded the compiled step from the compile cache" in warm.stdout
    assert _losses(tmp_path / "cold") == _losses(tmp_path / "warm")
    assert list((tmp_path / "cache").rglob("*.entry")) == [entry]


def test_cache_off_still_compiles_once_per_job(tmp_path):
    """SHARDC_CACHE=0 keeps nothing on disk; the ranks still share rank 0's compile."""
    p = _train(tmp_path, "off", SHARDC_CACHE="0")
    assert p.returncode == 0, p.stderr
    assert _counts(p.stderr) == {"miss": 1, "hit": 0, "received": 3}, p.stderr
    assert not (tmp_path / "cache").exists()


def test_run_program_compiles_once_per_job(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np
        from mpi4py import MPI
        from shardc.launch import run_program
        text = open({str(ROOT / "examples" / "mlp.mlir")!r}).read()
        rng = np.random.default_rng(0)
        inputs = {{k: rng.standard_normal(s).astype(np.float32) for k, s in (("x", (16, 32)), ("w1", (32, 64)), ("w2", (64, 32)))}}
        (out,) = run_program(text, inputs, ranks=None, pipeline="shard-to-mpi-pipeline")
        x, w1, w2 = (inputs[k] for k in ("x", "w1", "w2"))
        want = np.maximum(x @ w1, 0) @ w2
        assert np.allclose(out, want, rtol=1e-4, atol=1e-3), abs(out - want).max()
        if MPI.COMM_WORLD.Get_rank() == 0:
            print("ok")
    """))
    p = _mpi(4, [sys.executable, str(script)], tmp_path / "cache")
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr
    assert _counts(p.stderr) == {"miss": 1, "hit": 0, "received": 3}, p.stderr
