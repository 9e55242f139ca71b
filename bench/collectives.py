"""all_reduce / all_gather of 4 MB per rank under `mpiexec -n 2`: a shard program run by
shardc's runtime against the same collective called directly through mpi4py, side by
side in one run (interleaved, median of repeats). Prints runtime/direct ratios
(target: within 1.1x).

    python bench/collectives.py            # launches itself under mpiexec -n 2
    mpiexec -n 2 python bench/collectives.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

N_BYTES = 4 * 1024 * 1024
REPEATS = 60

PROGRAM = """shard.grid @g(shape = {n})
func.func @all_reduce(%x: tensor<{e}xf32>) -> tensor<{e}xf32> {{
  %r = shard.all_reduce %x on @g grid_axes = [0] : tensor<{e}xf32> -> tensor<{e}xf32>
  return %r : tensor<{e}xf32>
}}
func.func @all_gather(%x: tensor<{e}xf32>) -> tensor<{g}xf32> {{
  %r = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<{e}xf32> -> tensor<{g}xf32>
  return %r : tensor<{g}xf32>
}}
"""


def _bench(comm, fn, x) -> float:
    comm.Barrier()
    t0 = time.perf_counter()
    fn(x)
    comm.Barrier()
    return time.perf_counter() - t0


def main() -> int:
    from mpi4py import MPI

    from shardc.runtime import compile_text
    from shardc.runtime.comm import MPIComm, abort_on_error, use_comm

    world = MPI.COMM_WORLD
    n, rank = world.Get_size(), world.Get_rank()
    e = N_BYTES // 4
    with abort_on_error(world), use_comm(MPIComm(world)):
        cm = compile_text(PROGRAM.format(n=n, e=e, g=e * n))
        x = np.random.default_rng(rank).standard_normal(e).astype(np.float32)

        def direct_allreduce(a):
            out = np.empty_like(a)
            world.Allreduce(a, out, op=MPI.SUM)
            return out

        def direct_allgather(a):
            out = np.empty(n * a.size, a.dtype)
            world.Allgather(a, out)
            return out

        cases = {
            "all_reduce": (lambda a: cm.call("all_reduce", a), direct_allreduce),
            "all_gather": (lambda a: cm.call("all_gather", a), direct_allgather),
        }
        for name, (ours, theirs) in cases.items():
            np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-6)  # same result, and warm-up
            t_ours, t_theirs = [], []
            for k in range(REPEATS):  # alternate who goes first: no order bias
                if k % 2:
                    t_ours.append(_bench(world, ours, x))
                    t_theirs.append(_bench(world, theirs, x))
                else:
                    t_theirs.append(_bench(world, theirs, x))
                    t_ours.append(_bench(world, ours, x))
            mo, mt = statistics.median(t_ours), statistics.median(t_theirs)
            bo, bt = min(t_ours), min(t_theirs)
            mo, mt, bo, bt = (world.allreduce(v, op=MPI.MAX) for v in (mo, mt, bo, bt))
            if rank == 0:
                print(
                    f"{name:11s} 4 MB x {n} ranks: runtime {mo * 1e3:7.3f} ms  mpi4py {mt * 1e3:7.3f} ms  "
                    f"ratio {mo / mt:5.3f}x (median), {bo / bt:5.3f}x (best)  target <= 1.1x",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    if not any(v in os.environ for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")):
        mpiexec = shutil.which("mpiexec")
        if mpiexec is None:
            sys.exit("bench/collectives.py: mpiexec is not on PATH")
        sys.exit(subprocess.call([mpiexec, "-n", "2", sys.executable, os.path.abspath(__file__)]))
    sys.exit(main())
