"""Issue #19 under a real `mpiexec -n 2`: hostile names in the IR run nothing on any
rank, the results are correct and land only in the --output files named by position.

The programs and the canary come from tests/unit/security/test_hostile_ir_fuzz.py:
the payloads would create the file named by SHARDC_HOSTILE_CANARY.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

HERE = Path(__file__).resolve().parent
MPIEXEC = shutil.which("mpiexec")


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("hostile_ir_fuzz", HERE.parent / "unit/security/test_hostile_ir_fuzz.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


F = _fuzz_module()


def _run(tmp_path: Path, name: str, text: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    prog = tmp_path / f"{name}.mlir"
    prog.write_text(text)
    out, canary = tmp_path / f"out-{name}", tmp_path / f"canary-{name}"
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{F.ENV: str(canary)})
    p = subprocess.run(
        [MPIEXEC, "-n", "2", sys.executable, "-m", "shardc.tools.run", str(prog), "--output", str(out), *args],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )
    assert not canary.exists(), "a payload from the IR ran under mpiexec"
    assert "Traceback" not in p.stderr, p.stderr
    return p, out, canary


def test_issue_19_program_under_mpiexec(tmp_path: Path) -> None:
    """The report's program (triple quotes closing the docstring) on two MPI ranks: one
    result file per rank with the input, nothing run."""
    text = f"func.func @{F.q(F.HOSTILE[0])}(%a: tensor<4xf32>) -> tensor<4xf32> {{\n  return %a : tensor<4xf32>\n}}\n"
    p, out, _ = _run(tmp_path, "issue", text, "--input", "a=ones", "--emit-python", str(tmp_path / "gen.py"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(f.name for f in out.iterdir()) == ["result0.rank0.npy", "result0.rank1.npy"]
    for f in out.iterdir():
        np.testing.assert_array_equal(np.load(f, allow_pickle=False), np.ones(4, np.float32))
    assert sorted(f.name for f in tmp_path.iterdir()) == ["gen.py", "issue.mlir", "out-issue"]


@pytest.mark.parametrize("k", [1, 4, 10, len(F.HOSTILE) - 1])
def test_hostile_grid_and_symbols_lowered_under_mpiexec(tmp_path: Path, k: int) -> None:
    """A grid named by a hostile string, lowered to MPI in shardc-run; and the
    functions whose names differ only in dropped characters."""
    s = F.HOSTILE[k]
    p, out, _ = _run(tmp_path, "sharded", F.sharded_program(s), "--pipeline", "shard-to-mpi-pipeline", "--input", "a=ones")
    assert p.returncode == 0, p.stdout + p.stderr
    np.testing.assert_array_equal(np.load(out / "result0.npy", allow_pickle=False), np.full(4, 2.0, np.float32))
    p, out, _ = _run(tmp_path, "plain", F.plain_program(s), "--input", "a=ones")
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(2):
        np.testing.assert_array_equal(np.load(out / f"result0.rank{r}.npy", allow_pickle=False), F.PLAIN_RESULT)


def test_unknown_op_name_is_one_diagnostic_under_mpiexec(tmp_path: Path) -> None:
    p, out, _ = _run(tmp_path, "unknown", F.unknown_op_program(F.HOSTILE[2]), "--input", "a=ones")
    assert p.returncode == 1 and "error:" in p.stderr, p.stdout + p.stderr
    assert not out.exists()
