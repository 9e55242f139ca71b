"""Lowered shard collectives on 4 MB per rank under `mpiexec -n 2`: each shard op goes
through `convert-shard-to-mpi --canonicalize`, and the lowered program (mpi dialect on
mpi4py) is timed against the same collective called directly through mpi4py, side by
side in one run (interleaved, median of repeats). Prints lowered/direct ratios
(target: within 1.15x).

all_gather and reduce_scatter lower to their MPI calls; the mpi dialect has no
alltoall/bcast, so all_to_all is a pairwise exchange (isend to every peer, recv from
every peer: the bytes of MPI_Alltoall), broadcast the root's isends (n - 1 messages,
where MPI_Bcast may use a tree) and shift one isend + one recv per rank (vs Sendrecv).

    python bench/lowered_collectives.py [op ...]      # launches itself under mpiexec -n 2
    mpiexec -n 2 python bench/lowered_collectives.py [op ...]
    SHARDC_BENCH_REPEATS=200 python bench/lowered_collectives.py all_to_all

The compiled functions are called as `cm[name](x)` inside `np.errstate`, what
`CompiledModule.call` does after checking its arguments (a fixed cost per call, the
same for every program, that is not the lowering's).
"""

from __future__ import annotations

import os
import sys

import numpy as np
from _paired import compare, under_mpiexec  # bench/ is the script's folder

N_BYTES = 4 * 1024 * 1024
COLS = 256
REPEATS = int(os.environ.get("SHARDC_BENCH_REPEATS", "40"))

PROGRAM = """shard.grid @g(shape = {n})
func.func @all_gather(%x: tensor<{r}x{c}xf32>) -> tensor<{rn}x{c}xf32> {{
  %y = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<{r}x{c}xf32> -> tensor<{rn}x{c}xf32>
  return %y : tensor<{rn}x{c}xf32>
}}
func.func @reduce_scatter(%x: tensor<{r}x{c}xf32>) -> tensor<{rd}x{c}xf32> {{
  %y = shard.reduce_scatter %x on @g grid_axes = [0] scatter_axis = 0 : tensor<{r}x{c}xf32> -> tensor<{rd}x{c}xf32>
  return %y : tensor<{rd}x{c}xf32>
}}
func.func @all_to_all(%x: tensor<{r}x{c}xf32>) -> tensor<{r}x{c}xf32> {{
  %y = shard.all_to_all %x on @g grid_axes = [0] split_axis = 0 concat_axis = 0 : tensor<{r}x{c}xf32> -> tensor<{r}x{c}xf32>
  return %y : tensor<{r}x{c}xf32>
}}
func.func @broadcast(%x: tensor<{r}x{c}xf32>) -> tensor<{r}x{c}xf32> {{
  %y = shard.broadcast %x on @g grid_axes = [0] root = [0] : (tensor<{r}x{c}xf32>) -> tensor<{r}x{c}xf32>
  return %y : tensor<{r}x{c}xf32>
}}
func.func @shift(%x: tensor<{r}x{c}xf32>) -> tensor<{r}x{c}xf32> {{
  %y = shard.shift %x on @g grid_axes = [0] shift_axis = 0 offset = 1 rotate : tensor<{r}x{c}xf32> -> tensor<{r}x{c}xf32>
  return %y : tensor<{r}x{c}xf32>
}}
"""



def lowered_module(text: str):
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.passes import all_passes

    ctx = make_context()
    module = LocatingParser(ctx, text, "bench.mlir").parse_module()
    for name in ("convert-shard-to-mpi", "canonicalize"):
        all_passes()[name]()().apply(ctx, module)
    module.verify()
    return module


def main() -> int:
    from mpi4py import MPI

    from shardc.runtime import compile_module
    from shardc.runtime.execute.comm import MPIComm, abort_on_error, use_comm

    world = MPI.COMM_WORLD
    n, rank = world.Get_size(), world.Get_rank()
    rows = N_BYTES // 4 // COLS
    text = PROGRAM.format(n=n, r=rows, c=COLS, rn=rows * n, rd=rows // n)
    with abort_on_error(world), use_comm(MPIComm(world)):
        cm = compile_module(lowered_module(text), "lowered.mlir")
        x = np.random.default_rng(rank).standard_normal((rows, COLS)).astype(np.float32)

        def lowered(name):
            fn = cm[name]

            def call(a):
                with np.errstate(all="ignore"):
                    return fn(a)

            return call

        def direct_allgather(a):
            out = np.empty((n * a.shape[0], a.shape[1]), a.dtype)
            world.Allgather(a, out)
            return out

        def direct_reduce_scatter(a):
            out = np.empty((a.shape[0] // n, a.shape[1]), a.dtype)
            world.Reduce_scatter_block(a, out, op=MPI.SUM)
            return out

        def direct_alltoall(a):
            out = np.empty_like(a)
            world.Alltoall(a, out)
            return out

        def direct_bcast(a):
            out = a.copy() if rank == 0 else np.empty_like(a)
            world.Bcast(out, root=0)
            return out

        def direct_shift(a):
            out = np.empty_like(a)
            world.Sendrecv(a, dest=(rank + 1) % n, recvbuf=out, source=(rank - 1) % n)
            return out

        cases = {
            "all_gather": (lowered("all_gather"), direct_allgather),
            "reduce_scatter": (lowered("reduce_scatter"), direct_reduce_scatter),
            "all_to_all": (lowered("all_to_all"), direct_alltoall),
            "broadcast": (lowered("broadcast"), direct_bcast),
            "shift": (lowered("shift"), direct_shift),
        }
        only = sys.argv[1:]
        unknown = set(only) - set(cases)
        if unknown:
            raise SystemExit(f"unknown op(s) {sorted(unknown)}; choose from {list(cases)}")
        for name, (ours, theirs) in cases.items():
            if only and name not in only:
                continue
            mo, mt, bo, bt = compare(world, ours, theirs, x, REPEATS, rtol=1e-5)
            if rank == 0:
                print(
                    f"{name:14s} 4 MB x {n} ranks: lowered {mo * 1e3:7.3f} ms  mpi4py {mt * 1e3:7.3f} ms  "
                    f"ratio {mo / mt:5.3f}x (median), {bo / bt:5.3f}x (best)  target <= 1.15x",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    under_mpiexec(__file__)
    sys.exit(main())
