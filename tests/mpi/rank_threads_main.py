"""Where a rank's CPU time goes while it runs bf16 training steps under mpiexec: each rank
is one process on one core, so its products (oneDNN, MKL, OpenBLAS) must run on its
own thread. A library's thread team (an OpenMP team whose workers spin between
parallel regions, MKL's or OpenBLAS's pool) takes the core of the other rank on a
machine with as many cores as ranks: two ranks then run slower than one.

Run as `mpiexec -n N python rank_threads_main.py`: every rank times steps of a dp=N
ZeRO GPT step with --precision bf16 and prints one line, `rank R: OK ...` or
`rank R: FAIL ...`, with the CPU seconds of its main thread and of all its other
threads (read from /proc/self/task/*/stat, so a thread that came and went between two
reads is missed: the library teams persist). SHARDC_BLAS_THREADS=2 makes the libraries
use a team (test_rank_threads_mpi.py runs that as the control that the check sees one).
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

TICK = os.sysconf("SC_CLK_TCK")
HELPER_SHARE = 0.05
"""The most of a rank's CPU time its other threads may take (MPICH's progress thread
and Python's are idle; a library team takes tens of percent)."""


def thread_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each thread of this process, by thread id."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended between the listing and the read
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    return out


def main() -> None:
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, use_comm
    from shardc.runtime.execute.kernels import onednn_matmul
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.data import batches
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram
    from shardc.training.train import set_blas_threads

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    set_blas_threads(1)  # as shardc-train does (numpy's own OpenBLAS)
    cfg = GPTConfig(n_layer=2, n_head=4, n_embd=256, block_size=64, vocab_size=256)
    batch = 4 * world
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 8000).astype(np.int32)
    it = batches(data, batch, cfg.block_size, 0)
    with use_comm(MPIComm(comm)):
        prog = StepProgram.build(cfg, batch, make_grid(world, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN, precision="bf16")
        state = RankState(prog, rank, init_params(cfg, 0))
        state.train_step([next(it)], 1e-3)  # the first step loads the kernels
        comm.Barrier()
        before, wall = thread_cpu(), time.perf_counter()
        for _ in range(6):
            state.train_step([next(it)], 1e-3)
        after, wall = thread_cpu(), time.perf_counter() - wall
    main_id = threading.get_native_id()
    own = after.get(main_id, 0.0) - before.get(main_id, 0.0)
    helpers = sum(t - before.get(tid, 0.0) for tid, t in after.items() if tid != main_id)
    total = own + helpers
    ok = helpers <= max(HELPER_SHARE * total, 2.0 / TICK)
    print(
        f"rank {rank}: {'OK' if ok else 'FAIL'} main thread {own:.2f} s, other threads {helpers:.2f} s "
        f"({len(after)} threads, wall {wall:.2f} s, oneDNN {'loaded' if onednn_matmul.available() else 'absent'})",
        flush=True,
    )


if __name__ == "__main__":
    main()
