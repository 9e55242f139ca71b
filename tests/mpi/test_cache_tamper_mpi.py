"""A tampered cache under `mpiexec -n 2` (issue 32, item 2): a forged compile-cache entry
with every checksum recomputed, and numba index and data files replaced by pickles that
would create a canary, run nothing; the job warns, rebuilds and gives the same result,
and the next job hits the rebuilt entry and kernels without a warning."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shardc.runtime.codegen.cache import DiskCache, Entry

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MPIEXEC = shutil.which("mpiexec")
ROOT = Path(__file__).resolve().parents[2]
T = "tensor<64x1024xf32>"  # large enough for a numba kernel (fused_run.MIN_ELEMENTS)
PROGRAM = f"""func.func @f(%x: {T}) -> {T} {{
  %e = tensor.empty() : {T}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x : {T}) outs(%e : {T}) {{
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    %s = arith.addf %m, %a : f32
    linalg.yield %s : f32
  }} -> {T}
  return %r : {T}
}}
"""


def _run(tmp_path: Path) -> subprocess.CompletedProcess:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    env = {k: v for k, v in os.environ.items() if k not in ("SHARDC_CACHE", "SHARDC_KERNELS", "SHARDC_CACHE_DEBUG")}
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), SHARDC_CACHE_DIR=str(tmp_path / "cache"), SHARDC_CACHE_KEY=str(tmp_path / "config" / "cache.key"))
    prog = tmp_path / "k.mlir"
    prog.write_text(PROGRAM)
    cmd = [MPIEXEC, "-n", "2", sys.executable, "-m", "shardc.tools.run", str(prog), "--input", "x=ones"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT, stdin=subprocess.DEVNULL)


class _Plant:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _plant(canary: Path) -> bytes:
    """A pickle that creates `canary` when loaded (it names only `builtins.open`)."""
    return pickle.dumps(_Plant(str(canary)))


def test_forged_entry_and_replaced_numba_index_run_nothing(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    cold = _run(tmp_path)
    assert cold.returncode == 0, cold.stderr
    results = sorted(line for line in cold.stdout.splitlines() if line.startswith("result0"))
    assert len(results) == 2 and all("min 2  max 2" in line for line in results), cold.stdout
    cache = tmp_path / "cache"
    (entry_path,) = cache.rglob("*.entry")
    pycache = cache / "kernels" / "__pycache__"
    index, data = sorted(pycache.glob("k_*.nbi")), sorted(pycache.glob("k_*.nbc"))
    assert index and data
    canary = tmp_path / "canary"
    plant = _plant(canary)
    pickle.loads(plant).close()
    assert canary.exists()  # the plant is live
    canary.unlink()
    # the forger: every checksum recomputed, the payload the issue reports
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(cache))
    monkeypatch.setenv("SHARDC_CACHE_KEY", str(tmp_path / "config" / "cache.key"))
    key = entry_path.name.removesuffix(".entry")
    entry = Entry.decode(DiskCache.default().unsealed(entry_path), key)
    evil = tmp_path / "evil.npy"
    evil.write_bytes(plant)
    entry.source = f"def {entry.functions['f']}(x):\n    return _np.load({str(evil)!r}, allow_pickle=True)\n"
    entry_path.write_bytes(entry.encode())
    import numba

    for p in index:
        p.write_bytes(pickle.dumps(numba.__version__) + plant)  # numba's own cache would load it
    for p in data:
        p.write_bytes(plant)
    tampered = _run(tmp_path)
    assert tampered.returncode == 0, tampered.stderr
    assert not canary.exists()
    assert sorted(line for line in tampered.stdout.splitlines() if line.startswith("result0")) == results
    warnings = [line for line in tampered.stderr.splitlines() if line.startswith("shardc: warning:")]
    assert f"shardc: warning: compile cache: ignoring corrupt entry {entry_path} (not sealed by this user's shardc); rebuilding it" in warnings
    assert any(line.startswith("shardc: warning: kernel cache: ignoring ") and "not sealed" in line for line in warnings), tampered.stderr
    assert "Traceback" not in tampered.stderr
    again = _run(tmp_path)  # rebuilt and resealed: a quiet hit
    assert again.returncode == 0 and not canary.exists()
    assert not [line for line in again.stderr.splitlines() if line.startswith("shardc: warning:")], again.stderr
