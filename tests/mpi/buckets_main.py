"""Run under mpiexec by tests/mpi/test_buckets_mpi.py: `python buckets_main.py MODE`.

collectives  held (bucketed) allreduces, reduce-scatters and all-gathers on MPI, bitwise
             the separate calls, with buckets small and large (past MPICH's algorithm
             switches, where the probe decides on 4 ranks)
training     the GPT step, as written (small collectives held) and scheduled, with and
             without buckets: bitwise equal losses and parameters, fewer MPI calls
             (dp=N ZeRO; tp=2 on 4 ranks)
"""

from __future__ import annotations

import os
import sys

import numpy as np

from shardc.runtime.execute.comm import MPIComm, abort_on_error, held_count, hold


def check_collectives(comm: MPIComm) -> int:
    from mpi4py import MPI

    n, r = comm.size, comm.rank
    b = comm.mpi_backend()
    world = MPI.COMM_WORLD
    checks = 0
    for sizes in ((1, 3, 64), (1000, 2048, 4096) * 3, (4096,) * 24):  # s * n floats a call: <= 64 KiB at n = 4
        rng = np.random.default_rng(7 * r + len(sizes))
        xs = [(rng.standard_normal(s * n) * np.exp2(rng.integers(-10, 10, s * n))).astype(np.float32) for s in sizes]
        for kind in ("allreduce", "reduce_scatter_block", "allgather"):
            outs = [np.empty(x.size if kind == "allreduce" else x.size // n if kind == "reduce_scatter_block" else x.size * n, np.float32) for x in xs]
            op = None if kind == "allgather" else "MPI_SUM"
            pend = [hold(kind, b, world, x, o, op) for x, o in zip(xs, outs)]
            assert all(p is not None for p in pend), kind
            pend[-1].wait()
            assert held_count() == 0
            for x, o in zip(xs, outs):
                ref = np.empty_like(o)
                if kind == "allgather":
                    b.allgather(world, x, ref)
                else:
                    getattr(b, kind)(world, x, ref, op)
                assert np.array_equal(o, ref), (kind, sizes[:3], len(sizes))
            checks += 1
    return checks


def check_training(n: int) -> str:
    from mpi4py import MPI

    from shardc.runtime.execute import comm as comm_mod
    from shardc.runtime.codegen import overlap
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.data import batches
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    os.environ["SHARDC_CACHE"] = "0"
    overlap.SCHEDULE = True
    cfg = GPTConfig(n_layer=2, n_head=4, n_embd=32, block_size=16, vocab_size=64)
    rank = MPI.COMM_WORLD.Get_rank()
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 4000).astype(np.int32)
    calls = [0]
    for name in ("allreduce", "allgather", "reduce_scatter_block"):
        real = getattr(comm_mod.MPIP2P, name)

        def counted(*a, _real=real):
            calls[0] += 1
            return _real(*a)

        setattr(comm_mod.MPIP2P, name, staticmethod(counted))
    out = []
    for scheduled in (False, True):
        overlap.SCHEDULE = scheduled
        for tp in (1, 2) if n == 4 else (1,):
            prog = StepProgram.build(cfg, 8, make_grid(n, tp), ShardingPolicy(tp, zero=True, fsdp=False), GPT_PLAN)
            results = []
            for overlapped, size in (("0", "0"), ("0", "65536"), ("1", "65536")):
                os.environ["SHARDC_OVERLAP"], os.environ["SHARDC_BUCKET_BYTES"] = overlapped, size
                st = RankState(prog, rank, init_params(cfg, 0))
                it = batches(data, 8, cfg.block_size, 0)
                calls[0] = 0
                losses = [st.train_step([next(it)], 1e-2) for _ in range(2)]
                results.append((losses, [x.copy() for x in st.params], calls[0]))
                assert held_count() == 0 and overlap.in_flight() == 0
            (l0, p0, c0), (l1, p1, c1), (l2, p2, _) = results
            assert l1 == l0 and l2 == l0, (l0, l1, l2)
            assert all(np.array_equal(a, b) and np.array_equal(a, c) for a, b, c in zip(p0, p1, p2))
            assert c1 < c0, (scheduled, tp, c0, c1)
            out.append(f"{'scheduled' if scheduled else 'as written'} tp={tp} {l0[-1]:.6f} calls {c0} -> {c1}")
    return ", ".join(out)


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "collectives"
    comm = MPIComm()
    with abort_on_error():
        if mode == "collectives":
            print(f"rank {comm.rank}: OK {check_collectives(comm)} buckets", flush=True)
        elif mode == "training":
            print(f"rank {comm.rank}: OK bitwise {check_training(comm.size)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
