"""The helpers fused kernels call (exp32, tanh32, erf32) are cached on disk as the kernels
are: a process compiling a new kernel loads them from the cache instead of compiling
them again, a process loading a cached kernel compiles none of them, and results are
bitwise the same cold, warm, and without a usable cache directory. Each run is a fresh
process (numba's cache is per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from shardc.runtime.codegen.kernels import fused
from shardc.runtime.execute.kernels import fused_run

pytestmark = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")

_CHILD = r"""
import json, sys
import numpy as np
from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.codegen.kernels import fused
from shardc.runtime.execute.kernels import fused_run

op, out = sys.argv[1], sys.argv[2]
t = "tensor<64x1024xf32>"
text = f'''
func.func @f(%x: {t}, %y: {t}) -> {t} {{
  %e = tensor.empty() : {t}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x, %y : {t}, {t}) outs(%e : {t}) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.{op} %a, %b : f32
    %x2 = math.exp %m : f32
    %t2 = math.tanh %x2 : f32
    %s = arith.addf %t2, %b : f32
    linalg.yield %s : f32
  }} -> {t}
  return %r : {t}
}}
'''
rng = np.random.default_rng(0)
x, y = (rng.standard_normal((64, 1024)).astype(np.float32) for _ in range(2))
r = compile_text(text).call("f", x, y)
np.save(out, r)
fns = fused_run.kernel_helpers()[1]
helpers = {k: [sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values()), len(f.signatures)] for k, f in fns.items()}
(kernel,) = fused_run._COMPILED.values()
print(json.dumps({"helpers": helpers, "kernel": [sum(kernel.stats.cache_hits.values()), sum(kernel.stats.cache_misses.values())], "cached": fused.cache_dir() is not None}))
"""


def _run(tmp_path, cache: str, op: str, name: str) -> tuple[dict, np.ndarray]:
    env = {k: v for k, v in os.environ.items() if k not in ("SHARDC_KERNELS", "SHARDC_CACHE")}
    env["SHARDC_CACHE_DIR"] = cache
    out = str(tmp_path / f"{name}.npy")
    p = subprocess.run([sys.executable, "-c", _CHILD, op, out], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1]), np.load(out)


@pytest.mark.slow
def test_helpers_cached_between_processes_results_bitwise(tmp_path):
    cache = str(tmp_path / "cache")
    cold, r_cold = _run(tmp_path, cache, "mulf", "cold")
    assert cold["cached"] and cold["kernel"] == [0, 1]
    assert cold["helpers"]["exp32"] == [0, 1, 1] and cold["helpers"]["tanh32"] == [0, 1, 1]  # compiled, and saved
    assert sorted(p.name[:2] for p in (tmp_path / "cache" / "kernels").glob("*.py")) == ["h_", "k_"]
    # a new kernel calling the same helpers: they load from the cache, only the kernel compiles
    other, _ = _run(tmp_path, cache, "subf", "other")
    assert other["kernel"] == [0, 1]
    assert other["helpers"]["exp32"] == [1, 0, 1] and other["helpers"]["tanh32"] == [1, 0, 1]
    # the first kernel again: loaded whole (its machine code holds the helpers'), none compiled
    warm, r_warm = _run(tmp_path, cache, "mulf", "warm")
    assert warm["kernel"] == [1, 0]
    assert all(h == [0, 0, 0] for h in warm["helpers"].values())
    assert r_cold.dtype == r_warm.dtype == np.float32 and np.array_equal(r_cold, r_warm)


@pytest.mark.slow
def test_without_a_usable_cache_directory_kernels_compile_in_memory(tmp_path):
    """A cache directory that others may write is refused: nothing is read or written
    there, kernels and helpers compile in memory, with the same results."""
    shared = tmp_path / "shared"
    (shared / "kernels").mkdir(parents=True)
    os.chmod(shared / "kernels", 0o777)
    mem, r_mem = _run(tmp_path, str(shared), "mulf", "mem")
    assert not mem["cached"] and mem["kernel"] == [0, 1]  # compiled, never a hit
    assert list((shared / "kernels").iterdir()) == []
    _, r_disk = _run(tmp_path, str(tmp_path / "private"), "mulf", "disk")
    assert np.array_equal(r_mem, r_disk)
