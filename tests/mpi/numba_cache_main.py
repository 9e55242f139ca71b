"""One job of tests/mpi/test_numba_cache_mpi.py: `mpiexec -n N python numba_cache_main.py
CACHE OUT [private]`. Every rank runs the same fused kernels (an exp/tanh chain, and a
horizontal group longer than `horizontal.CHUNK`) over the kernels' cache in CACHE, at
once; with `private`, ranks other than 0 get a cache directory others may write, which
is refused (kernels compile in memory). Rank 0 checks that every rank got bitwise the
same results and writes them and each rank's `kernel_stats` to OUT (.npz and .json)."""

from __future__ import annotations

import json
import os
import sys

from mpi4py import MPI

world = MPI.COMM_WORLD
rank = world.Get_rank()
cache, out = sys.argv[1], sys.argv[2]
if len(sys.argv) > 3 and sys.argv[3] == "private" and rank > 0:
    cache = os.path.join(os.path.dirname(out), f"shared-{rank}")
    os.makedirs(os.path.join(cache, "kernels"), exist_ok=True)
    os.chmod(os.path.join(cache, "kernels"), 0o777)  # refused: nothing read or written there
os.environ["SHARDC_CACHE_DIR"] = cache  # read at every kernel compile

import numpy as np  # noqa: E402

from shardc.runtime.codegen import horizontal  # noqa: E402
from shardc.runtime.execute import horizontal_run
from shardc.runtime.codegen.compile import compile_text  # noqa: E402
from shardc.runtime.codegen.kernels import fused  # noqa: E402

horizontal_run.MIN_GROUP_ELEMENTS = 0  # the run time's threshold
T = "tensor<64x1024xf32>"
CHAIN = f"""
func.func @chain(%x: {T}, %y: {T}) -> {T} {{
  %e = tensor.empty() : {T}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x, %y : {T}, {T}) outs(%e : {T}) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %x2 = math.exp %m : f32
    %t2 = math.tanh %x2 : f32
    %s = arith.addf %t2, %b : f32
    linalg.yield %s : f32
  }} -> {T}
  return %r : {T}
}}
"""
N, V = 11, "tensor<256xf32>"
ops = "".join(
    f"""
  %e{k} = tensor.empty() : {V}
  %r{k} = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}} ins(%x{k}, %s : {V}, f32) outs(%e{k} : {V}) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %c = arith.constant 0.5 : f32
    %m = arith.mulf %a, %b : f32
    %q = math.sqrt %m : f32
    %r = arith.addf %q, %c : f32
    linalg.yield %r : f32
  }} -> {V}"""
    for k in range(N)
)
GROUP = f"""
func.func @group({", ".join(f"%x{k}: {V}" for k in range(N))}, %s: f32) -> ({", ".join([V] * N)}) {{{ops}
  return {", ".join(f"%r{k}" for k in range(N))} : {", ".join([V] * N)}
}}
"""
rng = np.random.default_rng(0)
x, y = (rng.standard_normal((64, 1024)).astype(np.float32) for _ in range(2))
xs = [np.abs(rng.standard_normal(256)).astype(np.float32) for _ in range(N)]
got = [compile_text(CHAIN).call("chain", x, y)]
cm = compile_text(GROUP)
got += list(cm.call("group", *xs, np.float32(2)))
(g,) = [v for v in cm.functions["group"].__globals__.values() if isinstance(v, horizontal.Group)]
stats = {**fused.kernel_stats(), "group_calls": g.calls, "cached": fused.cache_dir() is not None}
every = world.gather((got, stats), root=0)
if rank == 0:
    assert every is not None
    for r, (theirs, _) in enumerate(every):
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, theirs)), f"rank {r} differs"
    np.savez(out + ".npz", *got)
    with open(out + ".json", "w") as f:
        json.dump([s for _, s in every], f)
    print("OK", flush=True)
