"""Ways to sum bf16 buffers over MPI (which has no bf16 datatype), timed side by side
against the float32 sum of the same elements (what `--grad-reduce f32` moves):

- f32: MPI_Allreduce / MPI_Reduce_scatter_block of float32 buffers of the same length;
- widen: cast to float32, MPI_Allreduce(MPI_FLOAT, MPI_SUM), round back to bf16 once
  (the runtime's bf16 sum before `bf16_sums`: twice the bytes on the wire);
- user op: MPI_Allreduce on the uint16 patterns with a Python `MPI.Op` that views them
  as bf16 and adds in float32 (half the bytes; a Python callback per message chunk, and
  with more than 2 ranks each step rounds to bf16);
- shardc: `MPIComm`'s sum, now `runtime/execute/bf16_sums.py` (an all-to-all of the
  16-bit blocks, float32 sums, an all-gather of the rounded blocks; the reduce-scatter
  is the all-to-all and the sums).

    mpiexec -n 2 python bench/bf16_allreduce.py [--sizes 4096 262144 4194304] [--repeat 20]
"""

from __future__ import annotations

import argparse
import time

import ml_dtypes
import numpy as np
from mpi4py import MPI

from shardc.runtime.execute.comm import MPIComm

BF = np.dtype(ml_dtypes.bfloat16)


def _bf16_sum(inbuf, inoutbuf, datatype) -> None:  # noqa: ANN001  (mpi4py's callback signature)
    a = np.frombuffer(inbuf, np.uint16).view(BF)
    b = np.frombuffer(inoutbuf, np.uint16).view(BF)
    np.copyto(b, (a.astype(np.float32) + b.astype(np.float32)).astype(BF))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 262144, 4194304])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    comm = MPIComm(world, checked=False)
    op = MPI.Op.Create(_bf16_sum, commute=True)
    if world.rank == 0:
        print(f"# bf16 sums on {world.size} ranks, best of {args.repeat} (ms); x f32: shardc's time over the float32 collective's")
        print(f"{'elements':>10} {'f32 AR':>9} {'widen':>9} {'user op':>9} {'shardc AR':>10} {'x f32':>6} {'f32 RS':>9} {'shardc RS':>10} {'x f32':>6}  agree")
    n = world.size
    for size in args.sizes:
        size -= size % n
        x = (np.random.default_rng(world.rank).integers(-64, 64, size) / 8).astype(BF)
        x32 = x.astype(np.float32)

        def f32_allreduce() -> np.ndarray:
            out = np.empty(size, np.float32)
            world.Allreduce(x32, out, op=MPI.SUM)
            return out.astype(BF)

        def f32_reduce_scatter() -> np.ndarray:
            out = np.empty(size // n, np.float32)
            world.Reduce_scatter_block(x32, out, op=MPI.SUM)
            return out.astype(BF)

        def shardc_reduce_scatter() -> np.ndarray:
            return comm.reduce_scatter(x, (n,), (0,), 0, "sum")

        def widen() -> np.ndarray:
            out = np.empty(size, np.float32)
            world.Allreduce(x.astype(np.float32), out, op=MPI.SUM)
            return out.astype(BF)

        def user() -> np.ndarray:
            out = np.empty(size, np.uint16)
            world.Allreduce(x.view(np.uint16), out, op=op)
            return out.view(BF)

        def shardc() -> np.ndarray:
            return comm.all_reduce(x, (world.size,), (0,), "sum")

        times = {}
        results = {}
        for name, fn in (("f32", f32_allreduce), ("widen", widen), ("user", user), ("shardc", shardc), ("f32 rs", f32_reduce_scatter), ("shardc rs", shardc_reduce_scatter)):
            results[name] = fn()
            best = float("inf")
            for _ in range(args.repeat):
                world.Barrier()
                t = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - t)
            times[name] = world.allreduce(best, op=MPI.MAX)
        agree = all(np.array_equal(results[k].view(np.uint16), results["widen"].view(np.uint16)) for k in ("user", "shardc"))
        agree = agree and np.array_equal(results["shardc rs"].view(np.uint16), results["f32 rs"].view(np.uint16))
        if world.rank == 0:
            ms = {k: v * 1e3 for k, v in times.items()}
            print(
                f"{size:>10} {ms['f32']:>9.3f} {ms['widen']:>9.3f} {ms['user']:>9.3f} {ms['shardc']:>10.3f} {ms['shardc'] / ms['f32']:>6.2f} "
                f"{ms['f32 rs']:>9.3f} {ms['shardc rs']:>10.3f} {ms['shardc rs'] / ms['f32 rs']:>6.2f}  {agree}"
            )
    op.Free()


if __name__ == "__main__":
    main()
