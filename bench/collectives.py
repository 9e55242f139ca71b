"""all_reduce / all_gather of 4 MB per rank under `mpiexec -n 2`: a shard program run by
shardc's runtime against the same collective called directly through mpi4py, side by
side in one run (interleaved, median of repeats). Prints runtime/direct ratios
(target: within 1.1x).

    python bench/collectives.py            # launches itself under mpiexec -n 2
    mpiexec -n 2 python bench/collectives.py
"""

from __future__ import annotations

import sys

import numpy as np
from _paired import compare, under_mpiexec  # bench/ is the script's folder

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
            mo, mt, bo, bt = compare(world, ours, theirs, x, REPEATS, rtol=1e-6)
            if rank == 0:
                print(
                    f"{name:11s} 4 MB x {n} ranks: runtime {mo * 1e3:7.3f} ms  mpi4py {mt * 1e3:7.3f} ms  "
                    f"ratio {mo / mt:5.3f}x (median), {bo / bt:5.3f}x (best)  target <= 1.1x",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    under_mpiexec(__file__)
    sys.exit(main())
