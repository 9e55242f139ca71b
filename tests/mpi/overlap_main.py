"""Run under mpiexec by tests/mpi/test_overlap_mpi.py: `python overlap_main.py MODE`.

collectives  every nonblocking call (MPIComm and the mpi dialect's backend) against its
             blocking call, bitwise, over sizes on both sides of MPI's algorithm switches
training     a small GPT's step compiled as written, and scheduled: blocking and
             overlapped give bitwise the same losses and parameters (dp=N, ZeRO and not)
fail-wait    rank 1 fails while the others wait for a collective it never joins
"""

from __future__ import annotations

import os
import sys

import numpy as np

from shardc.runtime.execute.comm import MPIComm, abort_on_error

SIZES = (1, 3, 64, 1000, 4096, 20000, 65536, 300000)


def check_collectives(comm: MPIComm) -> int:
    from mpi4py import MPI

    n, r = comm.size, comm.rank
    grid, axes = (n,), (0,)
    p2p = comm.mpi_backend()
    world = MPI.COMM_WORLD
    checks = 0
    for size in SIZES:
        rng = np.random.default_rng(100 * r + size)
        x = (rng.standard_normal(size * n) * np.exp2(rng.integers(-10, 10, size * n))).astype(np.float32)
        for kind in ("sum", "max", "product"):
            assert np.array_equal(comm.iall_reduce(x, grid, axes, kind).wait(), comm.all_reduce(x, grid, axes, kind)), (size, kind)
        assert np.array_equal(comm.ireduce_scatter(x, grid, axes, 0).wait(), comm.reduce_scatter(x, grid, axes, 0))
        assert np.array_equal(comm.iall_gather(x[:size], grid, axes, 0).wait(), comm.all_gather(x[:size], grid, axes, 0))
        # the mpi dialect's backend: in place, into a buffer, into a strided view
        a, b = x.copy(), x.copy()
        p2p.allreduce(world, a, a, "MPI_SUM")
        p2p.iallreduce(world, b, b, "MPI_SUM").wait()
        assert np.array_equal(a, b), size
        ra, rb = np.empty(size, np.float32), np.empty((size, 2), np.float32)[:, 0]
        p2p.reduce_scatter_block(world, x, ra, "MPI_SUM")
        p2p.ireduce_scatter_block(world, x, rb, "MPI_SUM").wait()
        assert np.array_equal(ra, rb), size
        ga, gb = np.empty(size * n, np.float32), np.empty(size * n, np.float32)
        p2p.allgather(world, x[:size], ga)
        p2p.iallgather(world, x[:size], gb).wait()
        assert np.array_equal(ga, gb), size
        checks += 1
    # several in flight, waited for in the reverse order
    xs = [np.full(1000, r + k, np.float64) for k in range(5)]
    pend = [comm.iall_reduce(v, grid, axes) for v in xs]
    for k, p in reversed(list(enumerate(pend))):
        assert np.array_equal(p.wait(), np.full(1000, sum(q + k for q in range(n)), np.float64))
    comm.barrier()
    return checks


def check_training(n: int) -> str:
    from mpi4py import MPI

    from shardc.runtime.codegen import overlap
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.data import batches
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    os.environ["SHARDC_CACHE"] = "0"  # the unscheduled program must not be stored
    cfg = GPTConfig(n_layer=2, n_head=4, n_embd=32, block_size=16, vocab_size=64)
    rank = MPI.COMM_WORLD.Get_rank()
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 4000).astype(np.int32)
    out = []
    for zero in (True, False):
        build = lambda: StepProgram.build(cfg, 8, make_grid(n, 1), ShardingPolicy(1, zero=zero, fsdp=False), GPT_PLAN)  # noqa: E731
        overlap.SCHEDULE = True
        prog = build()
        overlap.SCHEDULE = False
        base = build()
        overlap.SCHEDULE = True
        assert "start_" in prog.compiled.source and "start_" not in base.compiled.source
        results = []
        for p, flag in ((base, "0"), (prog, "0"), (prog, "1")):
            os.environ["SHARDC_OVERLAP"] = flag
            st = RankState(p, rank, init_params(cfg, 0))
            it = batches(data, 8, cfg.block_size, 0)
            losses = [st.train_step([next(it)], 1e-2) for _ in range(2)]
            results.append((losses, [x.copy() for x in st.params]))
            assert overlap.in_flight() == 0
        (l0, p0), *rest = results
        for losses, params in rest:
            assert losses == l0, (losses, l0)
            assert all(np.array_equal(a, b) for a, b in zip(p0, params))
        out.append(f"{'zero' if zero else 'plain'} {l0[-1]:.6f}")
    return ", ".join(out)


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "collectives"
    comm = MPIComm()
    with abort_on_error():
        if mode == "collectives":
            print(f"rank {comm.rank}: OK {check_collectives(comm)} sizes", flush=True)
        elif mode == "training":
            print(f"rank {comm.rank}: OK bitwise {check_training(comm.size)}", flush=True)
        elif mode == "fail-wait":
            p = comm.mpi_backend()
            from mpi4py import MPI

            if comm.rank == 1:
                raise ValueError("deliberate failure on rank 1")
            buf = np.ones(1 << 16, np.float32)
            p.iallreduce(MPI.COMM_WORLD, buf, buf, "MPI_MAX").wait()  # the others wait here (MAX: no probe first)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
