"""The fused kernels' disk cache under `mpiexec`: ranks of a host compiling the same
kernels (and their helpers) into one cache directory at once leave every kernel there and
get bitwise the same results; the next job loads them all and compiles nothing; a rank
whose cache directory is refused compiles in memory and still gets the same results.
The job is numba_cache_main.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shardc.runtime.codegen.kernels import fused
from shardc.runtime.execute.kernels import fused_run

pytestmark = [pytest.mark.mpi, pytest.mark.slow, pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")]

MPIEXEC = shutil.which("mpiexec")
MAIN = Path(__file__).resolve().parent / "numba_cache_main.py"


def _job(tmp_path: Path, n: int, name: str, *extra: str) -> tuple[list[dict], list[np.ndarray]]:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    env = {k: v for k, v in os.environ.items() if k not in ("SHARDC_KERNELS", "SHARDC_CACHE")}
    out = tmp_path / name
    p = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(MAIN), str(tmp_path / "cache"), str(out), *extra], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0 and "OK" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    with np.load(f"{out}.npz") as z:
        arrays = [z[k] for k in sorted(z.files, key=lambda k: int(k.split("_")[1]))]
    return json.loads(Path(f"{out}.json").read_text()), arrays


def test_ranks_share_the_kernel_cache(tmp_path):
    cold, r_cold = _job(tmp_path, 2, "cold")
    assert all(s["cached"] and s["called"] == 2 and s["group_calls"] == 1 for s in cold)
    assert sum(s["compiled"] for s in cold) >= 2  # every kernel compiled by one rank at least
    kernels = tmp_path / "cache" / "kernels"
    assert len(list(kernels.glob("k_*.py"))) == 2 and len(list(kernels.glob("h_*.py"))) == 1
    assert not list(kernels.glob("*.tmp"))
    warm, r_warm = _job(tmp_path, 2, "warm")
    assert all(s["compiled"] == 0 and s["loaded"] == 2 and s["helpers_compiled"] == 0 for s in warm)
    assert all(np.array_equal(a, b) for a, b in zip(r_cold, r_warm))


def test_a_rank_without_the_cache_still_runs(tmp_path):
    _, r_shared = _job(tmp_path, 2, "shared")
    stats, r_private = _job(tmp_path, 2, "private", "private")
    assert stats[0]["cached"] and stats[0]["compiled"] == 0  # rank 0: the cache the first job left
    assert not stats[1]["cached"] and stats[1]["compiled"] == 2  # rank 1: in memory
    assert list((tmp_path / "shared-1" / "kernels").iterdir()) == []
    assert all(np.array_equal(a, b) for a, b in zip(r_shared, r_private))
