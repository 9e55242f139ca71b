"""Runs the shard and mpi kernel tests of tests/unit/runtime under a real MPI job:
`mpiexec -n N python tests/mpi/kernels_main.py [shard] [mpi]` (both in one job by default).

The unit tests check every device's result against semantics computed from all
devices' inputs; here `run_prog` runs the program on this rank only (MPIComm) and
allgathers the results (pickled), so the same checks run unchanged on every rank.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

from shardc.runtime import compile_text
from shardc.runtime.execute.comm import abort_on_error

UNIT = Path(__file__).resolve().parent.parent / "unit" / "runtime"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, UNIT / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def mpi_run_prog(text, grid, per_rank):
    world = MPI.COMM_WORLD
    assert int(np.prod(grid)) == world.Get_size(), (grid, world.Get_size())
    cm = compile_text(text)
    with np.errstate(all="ignore"):
        mine = cm.call("f", *per_rank[world.Get_rank()])
    return world.allgather(mine)


def grids(n: int) -> list[tuple[int, ...]]:
    return [(n,)] + [(a, n // a) for a in range(2, n) if n % a == 0]


def shard_cases(m, n: int) -> int:
    gs = grids(n)
    cases = [(g, a) for g in gs for a in m.axes_subsets(g)]
    rooted = [(g, a) for g in gs for a in m.axes_subsets(g, nonempty=True)]
    count = 0
    for g, a in cases:
        for kind in m.REDUCE_REF:
            m.test_all_reduce(g, a, kind)
        for kind in ("sum", "max"):
            m.test_reduce_scatter(g, a, kind)
        m.test_all_gather(g, a)
        m.test_all_slice(g, a)
        m.test_all_to_all(g, a)
        count += 1
    for g, a in rooted:
        m.test_broadcast(g, a)
        m.test_gather(g, a)
        m.test_reduce(g, a)
        m.test_scatter(g, a)
        for s, off, rot in itertools.product(a, (1, -1), (True, False)):
            m.test_shift(g, a, s, off, rot)
        count += 1
    for g in gs:
        m.test_process_queries(g)
        for axis in range(len(g)):
            m.test_send_recv_ring(g, axis)
    m.send_recv_ring((n,), 0, 1 << 20)  # 8 MB, sent before received: buffered sends
    for kind in ("tensor", "memref"):
        m.test_update_halo((n,), ((0,),), (1, 2), (4 * n, 3), kind)
        if n == 4:
            m.test_update_halo((2, 2), ((0,), (1,)), (1, 1, 2, 1), (8, 6), kind)
    if n == 4:
        m.test_dynamic_root()
        m.test_all_reduce_converts_to_result_type()
    return count


def mpi_cases(m, n: int) -> int:
    for test in (m.test_world_ops, m.test_split_ops, m.test_p2p_ring, m.test_nonblocking_ring, m.test_send_before_recv_of_8mb_does_not_deadlock):
        test(n)
    if n == 2:
        m.test_buffered_send_copies_its_buffer()
    for op in m.REDUCTIONS:
        m.test_allreduce_ops(n, op)
    # comm_split's cache: the same compiled split run again (same and changed colors).
    cm = compile_text(m.SPLIT)
    rank = MPI.COMM_WORLD.Get_rank()
    for _ in range(3):
        srank, ssize, _s, _g = cm.call("f", np.array([rank, rank], np.int32))
        assert ssize == (n + 1 - rank % 2) // 2 and srank == sorted((q for q in range(n) if q % 2 == rank % 2), key=lambda q: -q).index(rank)
    return 1


def main(argv: list[str]) -> int:
    with abort_on_error():
        n = MPI.COMM_WORLD.Get_size()
        for what in argv or ["shard", "mpi"]:
            if what == "shard":
                m = load("test_shard_kernels")
                m.run_prog = mpi_run_prog
                count = shard_cases(m, n)
            else:
                m = load("test_mpi_kernels")
                m.run_prog = lambda text, n_, per_rank: mpi_run_prog(text, (n_,), per_rank)
                count = mpi_cases(m, n)
            print(f"rank {MPI.COMM_WORLD.Get_rank()}: OK {what} {count}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
