"""Every collective on SimulatedComm against semantics computed from all ranks' inputs,
for 1-D and 2-D grids and every grid_axes subset (in every order)."""

import itertools

import numpy as np
import pytest

from shardc.runtime.execute.comm import CommError, RankFailed, current_comm, run_simulated

GRIDS = [(4,), (2, 3), (3, 2)]


def axes_choices(grid):
    out = []
    for k in range(len(grid) + 1):
        for sub in itertools.permutations(range(len(grid)), k):
            out.append(sub)
    return out


CASES = [(g, a) for g in GRIDS for a in axes_choices(g)]


def coords(r, grid):
    return tuple(int(c) for c in np.unravel_index(r, grid))


def group(r, grid, axes):
    """Brute force: ranks sharing coords outside axes, ordered by row-major index over axes."""
    me = coords(r, grid)
    others = [a for a in range(len(grid)) if a not in axes]
    mem = [q for q in range(int(np.prod(grid))) if all(coords(q, grid)[a] == me[a] for a in others)]
    key = lambda q: np.ravel_multi_index([coords(q, grid)[a] for a in axes], [grid[a] for a in axes]) if axes else 0
    return sorted(mem, key=key)


def inputs(grid, shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    n = int(np.prod(grid))
    if np.dtype(dtype).kind == "f":
        return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]
    return [rng.integers(-50, 50, shape).astype(dtype) for _ in range(n)]


def run(grid, fn):
    n = int(np.prod(grid))
    return run_simulated(n, lambda r: fn(current_comm(), r), per_rank_args=[(r,) for r in range(n)])


@pytest.mark.parametrize("grid,axes", CASES)
@pytest.mark.parametrize("kind", ["sum", "max", "min", "product", "average"])
def test_all_reduce(grid, axes, kind):
    X = inputs(grid, (2, 3))
    got = run(grid, lambda c, r: c.all_reduce(X[r], grid, axes, kind))
    ops = {"sum": np.sum, "max": np.max, "min": np.min, "product": np.prod, "average": np.mean}
    for r in range(len(X)):
        exp = ops[kind](np.stack([X[q] for q in group(r, grid, axes)]), axis=0)
        np.testing.assert_allclose(got[r], exp)


@pytest.mark.parametrize("kind,ref", [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor)])
def test_all_reduce_bitwise(kind, ref):
    grid, axes = (2, 3), (1,)
    X = inputs(grid, (4,), np.int32)
    got = run(grid, lambda c, r: c.all_reduce(X[r], grid, axes, kind))
    for r in range(6):
        assert got[r].tolist() == ref.reduce(np.stack([X[q] for q in group(r, grid, axes)])).tolist()


@pytest.mark.parametrize("grid,axes", CASES)
def test_all_gather_slice_to_all(grid, axes):
    n = int(np.prod([grid[a] for a in axes])) if axes else 1
    X = inputs(grid, (2, 6 * n if n else 6))
    g = run(grid, lambda c, r: c.all_gather(X[r], grid, axes, 1))
    s = run(grid, lambda c, r: c.all_slice(X[r], grid, axes, 1))
    a2a = run(grid, lambda c, r: c.all_to_all(X[r], grid, axes, 1, 0))
    for r in range(len(X)):
        mem = group(r, grid, axes)
        me = mem.index(r)
        np.testing.assert_array_equal(g[r], np.concatenate([X[q] for q in mem], axis=1))
        np.testing.assert_array_equal(s[r], np.split(X[r], len(mem), axis=1)[me])
        np.testing.assert_array_equal(a2a[r], np.concatenate([np.split(X[q], len(mem), axis=1)[me] for q in mem], axis=0))


@pytest.mark.parametrize("grid,axes", CASES)
def test_reduce_scatter(grid, axes):
    n = int(np.prod([grid[a] for a in axes])) if axes else 1
    X = inputs(grid, (2 * n, 3), np.int64)
    got = run(grid, lambda c, r: c.reduce_scatter(X[r], grid, axes, 0, "sum"))
    for r in range(len(X)):
        mem = group(r, grid, axes)
        total = sum(X[q] for q in mem)
        np.testing.assert_array_equal(got[r], np.split(total, len(mem), axis=0)[mem.index(r)])


def _roots(grid, axes):
    return [list(t) for t in itertools.product(*(range(grid[a]) for a in axes))]


@pytest.mark.parametrize("grid,axes", [c for c in CASES if c[1]])
def test_rooted_collectives(grid, axes):
    n = int(np.prod([grid[a] for a in axes]))
    X = inputs(grid, (n, 2))
    for root in _roots(grid, axes)[:: max(1, n // 2)]:
        ridx = int(np.ravel_multi_index(root, [grid[a] for a in axes]))
        b = run(grid, lambda c, r: c.broadcast(X[r], grid, axes, root))
        ga = run(grid, lambda c, r: c.gather(X[r], grid, axes, 0, root))
        re = run(grid, lambda c, r: c.reduce(X[r], grid, axes, root, "max"))
        sc = run(grid, lambda c, r: c.scatter(X[r], grid, axes, 0, root))
        for r in range(len(X)):
            mem = group(r, grid, axes)
            root_rank = mem[ridx]
            np.testing.assert_array_equal(b[r], X[root_rank])
            np.testing.assert_array_equal(sc[r], np.split(X[root_rank], n, axis=0)[mem.index(r)])
            if r == root_rank:  # undefined elsewhere
                np.testing.assert_array_equal(ga[r], np.concatenate([X[q] for q in mem], axis=0))
                np.testing.assert_array_equal(re[r], np.max(np.stack([X[q] for q in mem]), axis=0))


@pytest.mark.parametrize("rotate", [True, False])
@pytest.mark.parametrize("offset", [1, 2, -1])
def test_shift(rotate, offset):
    grid, axes = (2, 4), (1,)
    X = [np.array([r], np.int32) for r in range(8)]
    got = run(grid, lambda c, r: c.shift(X[r], grid, axes, 1, offset, rotate))
    for r in range(8):
        i, j = coords(r, grid)
        src = j - offset
        if rotate:
            src %= 4
        if 0 <= src < 4:
            assert got[r][0] == i * 4 + src
        else:
            assert got[r][0] == r  # undefined: we keep the local input


def test_send_recv_and_process_index():
    grid, axes = (2, 2), (0,)

    def fn(c, r):
        mi = c.process_multi_index(grid)
        x = np.full(3, r, np.float32)
        if mi[0] == 0:
            c.send(x, grid, axes, [1])
            return mi, None
        return mi, c.recv(x, grid, axes, [0])

    got = run(grid, fn)
    assert [g[0] for g in got] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert got[2][1].tolist() == [0, 0, 0] and got[3][1].tolist() == [1, 1, 1]


def test_mismatched_shapes_are_reported():
    grid = (2,)
    with pytest.raises(RankFailed, match=r"all_reduce: mismatched inputs across the group") as ei:
        run(grid, lambda c, r: c.all_reduce(np.zeros(2 + r), grid, (0,)))
    assert isinstance(ei.value.__cause__, CommError)


def test_failing_rank_is_named_and_others_do_not_hang():
    grid = (3,)

    def fn(c, r):
        if r == 1:
            raise ValueError("boom")
        return c.all_reduce(np.ones(2), grid, (0,))

    with pytest.raises(RankFailed, match=r"rank 1: ValueError: boom"):
        run(grid, fn)


def test_indivisible_dimension_is_an_error():
    grid = (3,)
    with pytest.raises(RankFailed, match="not divisible by the group size 3"):
        run(grid, lambda c, r: c.reduce_scatter(np.ones(4), grid, (0,), 0))
