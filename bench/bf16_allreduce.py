"""Two ways to sum bf16 buffers over MPI (which has no bf16 datatype), timed side by side:

- widen: cast to float32, MPI_Allreduce(MPI_FLOAT, MPI_SUM), round back to bf16 once
  (what `MPIComm` does: twice the bytes on the wire, MPI's built-in vectorised sum);
- user op: MPI_Allreduce on the uint16 patterns with a Python `MPI.Op` that views them
  as bf16 and adds in float32 (half the bytes; a Python callback per message chunk, and
  with more than 2 ranks each step rounds to bf16).

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
        print(f"# bf16 sum all_reduce on {world.size} ranks, best of {args.repeat} (ms)")
        print(f"{'elements':>10} {'widen f32':>10} {'user op':>10} {'shardc':>10}  agree")
    for size in args.sizes:
        x = (np.random.default_rng(world.rank).integers(-64, 64, size) / 8).astype(BF)

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
        for name, fn in (("widen", widen), ("user", user), ("shardc", shardc)):
            results[name] = fn()
            best = float("inf")
            for _ in range(args.repeat):
                world.Barrier()
                t = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - t)
            times[name] = world.allreduce(best, op=MPI.MAX)
        agree = all(np.array_equal(results[n].view(np.uint16), results["widen"].view(np.uint16)) for n in results)
        if world.rank == 0:
            print(f"{size:>10} {times['widen'] * 1e3:>10.3f} {times['user'] * 1e3:>10.3f} {times['shardc'] * 1e3:>10.3f}  {agree}")
    op.Free()


if __name__ == "__main__":
    main()
