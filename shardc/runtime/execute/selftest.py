"""Self-test of MPIComm, run under mpiexec: `mpiexec -n N python -m shardc.runtime.execute.selftest
[collectives|fail|mismatch]`. Every rank builds all ranks' inputs from one seed, so it can
check its own results against the semantics computed from the global data."""

from __future__ import annotations

import itertools
import sys

import numpy as np

from shardc.runtime.execute.comm import MPIComm, abort_on_error, delinearize, linearize


def _grids(n: int) -> list[tuple[int, ...]]:
    out = [(n,)]
    for a in range(2, n):
        if n % a == 0:
            out.append((a, n // a))
    return out


def _group(r: int, grid: tuple[int, ...], axes: tuple[int, ...]) -> list[int]:
    me = delinearize(r, grid)
    others = [a for a in range(len(grid)) if a not in axes]
    mem = [q for q in range(int(np.prod(grid))) if all(delinearize(q, grid)[a] == me[a] for a in others)]
    return sorted(mem, key=lambda q: linearize([delinearize(q, grid)[a] for a in axes], [grid[a] for a in axes]))


def check_collectives(comm: MPIComm) -> int:
    n, r = comm.size, comm.rank
    checks = 0
    for grid in _grids(n):
        for k in range(len(grid) + 1):
            for axes in itertools.permutations(range(len(grid)), k):
                mem = _group(r, grid, axes)
                g = len(mem)
                me = mem.index(r)
                rng = np.random.default_rng(7)
                X = [rng.standard_normal((2 * g, 3)) for _ in range(n)]
                I = [rng.integers(-9, 9, (2 * g,)).astype(np.int32) for _ in range(n)]
                x = X[r]
                np.testing.assert_allclose(comm.all_reduce(x, grid, axes, "sum"), sum(X[q] for q in mem))
                np.testing.assert_array_equal(comm.all_reduce(I[r], grid, axes, "max"), np.max([I[q] for q in mem], axis=0))
                np.testing.assert_array_equal(comm.all_reduce(I[r], grid, axes, "bitwise_xor"), np.bitwise_xor.reduce([I[q] for q in mem]))
                np.testing.assert_allclose(comm.all_reduce(x, grid, axes, "average"), sum(X[q] for q in mem) / g)
                np.testing.assert_array_equal(comm.all_gather(x, grid, axes, 1), np.concatenate([X[q] for q in mem], axis=1))
                np.testing.assert_array_equal(comm.all_slice(x, grid, axes, 0), np.split(x, g)[me])
                np.testing.assert_array_equal(comm.all_to_all(x, grid, axes, 0, 1), np.concatenate([np.split(X[q], g)[me] for q in mem], axis=1))
                np.testing.assert_allclose(comm.reduce_scatter(x, grid, axes, 0, "sum"), np.split(sum(X[q] for q in mem), g)[me])
                if axes:
                    root = list(delinearize(g - 1, [grid[a] for a in axes]))
                    rr = mem[g - 1]
                    np.testing.assert_array_equal(comm.broadcast(x, grid, axes, root), X[rr])
                    ga = comm.gather(x, grid, axes, 0, root)
                    re = comm.reduce(x, grid, axes, root, "min")
                    if r == rr:
                        np.testing.assert_array_equal(ga, np.concatenate([X[q] for q in mem]))
                        np.testing.assert_array_equal(re, np.min([X[q] for q in mem], axis=0))
                    np.testing.assert_array_equal(comm.scatter(x, grid, axes, 0, root), np.split(X[rr], g)[me])
                    shift_axis = axes[0]
                    got = comm.shift(np.array([r], np.int64), grid, axes, shift_axis, 1, True)
                    c = list(delinearize(r, grid))
                    c[shift_axis] = (c[shift_axis] - 1) % grid[shift_axis]
                    assert got[0] == linearize(c, grid), (got, c)
                checks += 1
    comm.barrier()
    return checks


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "collectives"
    comm = MPIComm()
    with abort_on_error():
        if mode == "collectives":
            n = check_collectives(comm)
            print(f"rank {comm.rank}: OK {n} groups", flush=True)
        elif mode == "fail":
            if comm.rank == 1:
                raise ValueError("deliberate failure on rank 1")
            comm.all_reduce(np.ones(3), (comm.size,), (0,))  # the others block here
        elif mode == "mismatch":
            comm.all_reduce(np.ones(2 + comm.rank), (comm.size,), (0,))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
