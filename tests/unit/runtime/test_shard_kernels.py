"""Every shard op kernel on SimulatedComm, on 1-D and 2-D grids and every grid_axes
subset (in every order), against the semantics computed from all devices' data."""

import itertools

import numpy as np
import pytest

from shardc.runtime import compile_text
from shardc.runtime.execute.comm import RankFailed, run_simulated
from shardc.runtime.execute.sharding import RuntimeSharding

GRIDS = [(4,), (2, 3), (3, 2)]


def axes_subsets(grid, nonempty=False):
    return [s for k in range(1 if nonempty else 0, len(grid) + 1) for s in itertools.permutations(range(len(grid)), k)]


CASES = [(g, a) for g in GRIDS for a in axes_subsets(g)]
ROOTED = [(g, a) for g in GRIDS for a in axes_subsets(g, nonempty=True)]


def coords(r, grid):
    return tuple(int(c) for c in np.unravel_index(r, grid))


def group(r, grid, axes):
    """Brute force: devices sharing r's coordinates off `axes`, by row-major index over axes."""
    me = coords(r, grid)
    others = [a for a in range(len(grid)) if a not in axes]
    mem = [q for q in range(int(np.prod(grid))) if all(coords(q, grid)[a] == me[a] for a in others)]
    return sorted(mem, key=lambda q: np.ravel_multi_index([coords(q, grid)[a] for a in axes], [grid[a] for a in axes]) if axes else 0)


def gsize(grid, axes):
    return int(np.prod([grid[a] for a in axes])) if axes else 1


def grid_decl(grid):
    return f"shard.grid @g(shape = {'x'.join(map(str, grid))})"


def ga(axes):
    return f" grid_axes = [{', '.join(map(str, axes))}]" if axes else ""


def run_prog(text, grid, per_rank):
    cm = compile_text(text)
    n = int(np.prod(grid))
    return run_simulated(n, lambda *a: cm.call("f", *a), per_rank_args=per_rank)


def inputs(grid, shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    n = int(np.prod(grid))
    if np.dtype(dtype).kind == "f":
        return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]
    return [rng.integers(1, 9, shape).astype(dtype) for _ in range(n)]


def t(shape, ty):
    return f"tensor<{'x'.join(map(str, shape))}x{ty}>"


def unary_prog(grid, body, in_t, out_t):
    return f"""{grid_decl(grid)}
func.func @f(%x: {in_t}) -> {out_t} {{
  %r = {body} : {in_t} -> {out_t}
  return %r : {out_t}
}}"""


def rooted_prog(grid, body, in_t, out_t):
    return f"""{grid_decl(grid)}
func.func @f(%x: {in_t}) -> {out_t} {{
  %r = {body} : ({in_t}) -> {out_t}
  return %r : {out_t}
}}"""


REDUCE_REF = {
    "sum": lambda s: s.sum(0),
    "max": lambda s: s.max(0),
    "min": lambda s: s.min(0),
    "product": lambda s: s.prod(0),
    "average": lambda s: s.mean(0),
    "bitwise_and": lambda s: np.bitwise_and.reduce(s, 0),
    "bitwise_or": lambda s: np.bitwise_or.reduce(s, 0),
    "bitwise_xor": lambda s: np.bitwise_xor.reduce(s, 0),
}


@pytest.mark.parametrize("grid,axes", CASES)
@pytest.mark.parametrize("kind", list(REDUCE_REF))
def test_all_reduce(grid, axes, kind):
    ty, dt = ("i32", np.int32) if kind.startswith("bitwise") or kind == "average" else ("f64", np.float64)
    red = "" if kind == "sum" else f" reduction = {kind}"
    text = unary_prog(grid, f"shard.all_reduce %x on @g{ga(axes)}{red}", t((2, 3), ty), t((2, 3), ty))
    X = inputs(grid, (2, 3), dt)
    got = run_prog(text, grid, [(x,) for x in X])
    for r, y in enumerate(got):
        want = REDUCE_REF[kind](np.stack([X[q] for q in group(r, grid, axes)]))
        if kind == "average" and dt == np.int32:
            want = np.stack([X[q] for q in group(r, grid, axes)]).sum(0) // gsize(grid, axes)
        np.testing.assert_allclose(y, want)
        assert y.dtype == dt


def test_all_reduce_converts_to_result_type():
    grid = (2, 2)
    text = unary_prog(grid, "shard.all_reduce %x on @g grid_axes = [1, 0] reduction = max", t((3,), "f32"), t((3,), "f64"))
    X = inputs(grid, (3,), np.float32)
    for y in run_prog(text, grid, [(x,) for x in X]):
        assert y.dtype == np.float64
        np.testing.assert_array_equal(y, np.max(X, 0).astype(np.float64))


def test_all_reduce_memref():
    grid = (4,)
    text = unary_prog(grid, "shard.all_reduce %x on @g grid_axes = [0]", "memref<3xf32>", "memref<3xf32>")
    X = inputs(grid, (3,), np.float32)
    for y in run_prog(text, grid, [(x,) for x in X]):
        np.testing.assert_allclose(y, np.sum(X, 0), rtol=1e-6)


@pytest.mark.parametrize("grid,axes", CASES)
def test_all_gather(grid, axes):
    g = gsize(grid, axes)
    text = unary_prog(grid, f"shard.all_gather %x on @g{ga(axes)} gather_axis = 1", t((2, 3), "f64"), t((2, 3 * g), "f64"))
    X = inputs(grid, (2, 3))
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in X])):
        np.testing.assert_array_equal(y, np.concatenate([X[q] for q in group(r, grid, axes)], axis=1))


@pytest.mark.parametrize("grid,axes", CASES)
def test_all_slice(grid, axes):
    g = gsize(grid, axes)
    text = unary_prog(grid, f"shard.all_slice %x on @g{ga(axes)} slice_axis = 0", t((2 * g, 3), "f64"), t((2, 3), "f64"))
    X = inputs(grid, (2 * g, 3))
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in X])):
        me = group(r, grid, axes).index(r)
        np.testing.assert_array_equal(y, X[r][2 * me : 2 * me + 2])


@pytest.mark.parametrize("grid,axes", CASES)
def test_all_to_all(grid, axes):
    g = gsize(grid, axes)
    text = unary_prog(grid, f"shard.all_to_all %x on @g{ga(axes)} split_axis = 0 concat_axis = 1", t((2 * g, 3), "f64"), t((2, 3 * g), "f64"))
    X = inputs(grid, (2 * g, 3))
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in X])):
        mem = group(r, grid, axes)
        me = mem.index(r)
        np.testing.assert_array_equal(y, np.concatenate([X[q][2 * me : 2 * me + 2] for q in mem], axis=1))


@pytest.mark.parametrize("grid,axes", CASES)
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_reduce_scatter(grid, axes, kind):
    g = gsize(grid, axes)
    red = "" if kind == "sum" else f" reduction = {kind}"
    text = unary_prog(grid, f"shard.reduce_scatter %x on @g{ga(axes)}{red} scatter_axis = 1", t((2, 3 * g), "f64"), t((2, 3), "f64"))
    X = inputs(grid, (2, 3 * g))
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in X])):
        mem = group(r, grid, axes)
        me = mem.index(r)
        full = REDUCE_REF[kind](np.stack([X[q] for q in mem]))
        np.testing.assert_allclose(y, full[:, 3 * me : 3 * me + 3])


@pytest.mark.parametrize("axis", [0, 1])
def test_reduce_scatter_memref(axis):
    """Trunk's memref form: the result is a fresh buffer, the input is left as it was."""
    grid, axes = (2, 3), (1,)
    shape = (6, 4) if axis == 0 else (2, 6)
    part = (2, 4) if axis == 0 else (2, 2)
    text = unary_prog(grid, f"shard.reduce_scatter %x on @g{ga(axes)} scatter_dim = {axis}", f"memref<{shape[0]}x{shape[1]}xf32>", f"memref<{part[0]}x{part[1]}xf32>")
    X = inputs(grid, shape, np.float32)
    given = [x.copy() for x in X]
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in given])):
        mem = group(r, grid, axes)
        me = mem.index(r)
        full = np.sum(np.stack([X[q] for q in mem]), 0)
        want = np.split(full, 3, axis=axis)[me]
        np.testing.assert_allclose(y, want, rtol=1e-6)
        np.testing.assert_array_equal(given[r], X[r])


@pytest.mark.parametrize("axis", [0, 1])
def test_all_gather_memref(axis):
    grid, axes = (2, 2), (0, 1)
    out = (8, 3) if axis == 0 else (2, 12)
    text = unary_prog(grid, f"shard.all_gather %x on @g{ga(axes)} gather_axis = {axis}", "memref<2x3xi32>", f"memref<{out[0]}x{out[1]}xi32>")
    X = inputs(grid, (2, 3), np.int32)
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in X])):
        np.testing.assert_array_equal(y, np.concatenate([X[q] for q in group(r, grid, axes)], axis=axis))


def root_of(grid, axes):
    """The last in-group device, as multi-index over axes."""
    return [grid[a] - 1 for a in axes]


def root_rank(r, grid, axes):
    return group(r, grid, axes)[-1]


@pytest.mark.parametrize("grid,axes", ROOTED)
def test_broadcast(grid, axes):
    root = root_of(grid, axes)
    text = rooted_prog(grid, f"shard.broadcast %x on @g{ga(axes)} root = {root}", t((2, 3), "f64"), t((2, 3), "f64"))
    X = inputs(grid, (2, 3))
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in X])):
        np.testing.assert_array_equal(y, X[root_rank(r, grid, axes)])


@pytest.mark.parametrize("grid,axes", ROOTED)
def test_gather(grid, axes):
    g = gsize(grid, axes)
    root = root_of(grid, axes)
    text = rooted_prog(grid, f"shard.gather %x on @g{ga(axes)} gather_axis = 0 root = {root}", t((2, 3), "f64"), t((2 * g, 3), "f64"))
    X = inputs(grid, (2, 3))
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in X])):
        assert y.shape == (2 * g, 3)
        if r == root_rank(r, grid, axes):  # undefined elsewhere
            np.testing.assert_array_equal(y, np.concatenate([X[q] for q in group(r, grid, axes)]))


@pytest.mark.parametrize("grid,axes", ROOTED)
def test_reduce(grid, axes):
    root = root_of(grid, axes)
    text = rooted_prog(grid, f"shard.reduce %x on @g{ga(axes)} reduction = min root = {root}", t((2, 3), "f32"), t((2, 3), "f64"))
    X = inputs(grid, (2, 3), np.float32)
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in X])):
        assert y.dtype == np.float64
        if r == root_rank(r, grid, axes):
            np.testing.assert_array_equal(y, np.min([X[q] for q in group(r, grid, axes)], 0))


@pytest.mark.parametrize("grid,axes", ROOTED)
def test_scatter(grid, axes):
    g = gsize(grid, axes)
    root = root_of(grid, axes)
    text = rooted_prog(grid, f"shard.scatter %x on @g{ga(axes)} scatter_axis = 0 root = {root}", t((2 * g, 3), "f64"), t((2, 3), "f64"))
    X = inputs(grid, (2 * g, 3))
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in X])):
        me = group(r, grid, axes).index(r)
        np.testing.assert_array_equal(y, X[root_rank(r, grid, axes)][2 * me : 2 * me + 2])


def test_dynamic_root():
    grid = (2, 2)
    text = f"""{grid_decl(grid)}
func.func @f(%x: tensor<2xf64>, %i: index) -> tensor<2xf64> {{
  %r = shard.broadcast %x on @g grid_axes = [0, 1] root = [1, %i] : (tensor<2xf64>, index) -> tensor<2xf64>
  return %r : tensor<2xf64>
}}"""
    X = inputs(grid, (2,))
    for y in run_prog(text, grid, [(x, 0) for x in X]):
        np.testing.assert_array_equal(y, X[2])


@pytest.mark.parametrize("grid,axis", [((4,), 0), ((2, 3), 0), ((2, 3), 1), ((3, 2), 1)])
def test_send_recv_ring(grid, axis):
    send_recv_ring(grid, axis)


def test_send_recv_ring_of_8mb():
    send_recv_ring((2,), 0, 1 << 20)


def send_recv_ring(grid, axis, length=3):
    """Each device sends to the next along `axis`, then receives from the previous:
    sends are buffered, so this goes through whatever the message size."""
    n = grid[axis]
    t = f"tensor<{length}xf64>"
    text = f"""{grid_decl(grid)}
func.func @f(%x: {t}) -> {t} {{
  %i = shard.process_multi_index on @g axes = [{axis}] : index
  %c1 = arith.constant 1 : index
  %n = arith.constant {n} : index
  %j = arith.addi %i, %c1 : index
  %next = arith.remsi %j, %n : index
  %k = arith.addi %i, %n : index
  %k1 = arith.subi %k, %c1 : index
  %prev = arith.remsi %k1, %n : index
  %s = shard.send %x on @g grid_axes = [{axis}] destination = [%next] : ({t}, index) -> {t}
  %r = shard.recv %x on @g grid_axes = [{axis}] source = [%prev] : ({t}, index) -> {t}
  return %r : {t}
}}"""
    X = inputs(grid, (length,))
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in X])):
        c = list(coords(r, grid))
        c[axis] = (c[axis] - 1) % n
        np.testing.assert_array_equal(y, X[int(np.ravel_multi_index(c, grid))])


def test_recv_any_source():
    grid = (2,)
    text = f"""{grid_decl(grid)}
func.func @f(%x: tensor<2xf64>, %dst: index) -> tensor<2xf64> {{
  %s = shard.send %x on @g grid_axes = [0] destination = [%dst] : (tensor<2xf64>, index) -> tensor<2xf64>
  %r = shard.recv %x on @g grid_axes = [0] : (tensor<2xf64>) -> tensor<2xf64>
  return %r : tensor<2xf64>
}}"""
    X = inputs(grid, (2,))
    got = run_prog(text, grid, [(X[0], 1), (X[1], 0)])
    np.testing.assert_array_equal(got[0], X[1])
    np.testing.assert_array_equal(got[1], X[0])


SHIFT_CASES = [(g, a, s) for g in GRIDS for a in axes_subsets(g, nonempty=True) for s in a]


@pytest.mark.parametrize("grid,axes,shift_axis", SHIFT_CASES)
@pytest.mark.parametrize("offset", [1, -1, 2])
@pytest.mark.parametrize("rotate", [True, False])
def test_shift(grid, axes, shift_axis, offset, rotate):
    text = unary_prog(
        grid,
        f"shard.shift %x on @g{ga(axes)} shift_axis = {shift_axis} offset = {offset}{' rotate' if rotate else ''}",
        t((2,), "f64"),
        t((2,), "f64"),
    )
    X = inputs(grid, (2,))
    n = grid[shift_axis]
    for r, y in enumerate(run_prog(text, grid, [(x,) for x in X])):
        c = list(coords(r, grid))
        src = c[shift_axis] - offset  # like np.roll: i receives from i - offset
        if rotate:
            src %= n
        elif not 0 <= src < n:
            continue  # undefined
        c[shift_axis] = src
        np.testing.assert_array_equal(y, X[int(np.ravel_multi_index(c, grid))])


@pytest.mark.parametrize("grid", GRIDS)
def test_process_queries(grid):
    rank = len(grid)
    idx_t = ", ".join(["index"] * rank)
    axes = list(reversed(range(rank)))
    text = f"""{grid_decl(grid)}
func.func @f() -> ({idx_t}, {idx_t}, {idx_t}, index, index, index) {{
  %m:{rank} = shard.process_multi_index on @g : {idx_t}
  %p:{rank} = shard.process_multi_index on @g axes = [{', '.join(map(str, axes))}] : {idx_t}
  %s:{rank} = shard.grid_shape @g : {idx_t}
  %l = shard.process_linear_index on @g : index
  %d, %u = shard.neighbors_linear_indices on @g[{', '.join(f'%m#{i}' for i in range(rank))}] split_axes = [0] : index, index
  return {', '.join(f'%m#{i}' for i in range(rank))}, {', '.join(f'%p#{i}' for i in range(rank))}, {', '.join(f'%s#{i}' for i in range(rank))}, %l, %d, %u : {idx_t}, {idx_t}, {idx_t}, index, index, index
}}"""
    for r, y in enumerate(run_prog(text, grid, [() for _ in range(int(np.prod(grid)))])):
        c = coords(r, grid)
        assert y[:rank] == c
        assert y[rank : 2 * rank] == tuple(c[a] for a in axes)
        assert y[2 * rank : 3 * rank] == grid
        assert y[3 * rank] == r
        stride = int(np.prod(grid[1:]))
        assert y[3 * rank + 1] == (r - stride if c[0] > 0 else -1)
        assert y[3 * rank + 2] == (r + stride if c[0] < grid[0] - 1 else -1)


def test_dynamic_grid_resolved_from_world():
    text = """shard.grid @g(shape = 2x?)
func.func @f() -> (index, index) {
  %s:2 = shard.grid_shape @g : index, index
  return %s#0, %s#1 : index, index
}"""
    assert run_prog(text, (2, 3), [()] * 6) == [(2, 3)] * 6


def test_wrong_world_size_fails_with_message():
    text = unary_prog((2, 2), "shard.all_reduce %x on @g", t((2,), "f64"), t((2,), "f64"))
    with pytest.raises(RankFailed, match="grid of shape 2x2 has 4 devices but the world has 3 ranks"):
        run_prog(text, (3,), [(np.zeros(2),)] * 3)


def test_sharding_shard_shape_get_sharding():
    grid = (4,)
    text = f"""{grid_decl(grid)}
func.func @f(%x: tensor<4x14xf32>, %h: i64) -> (index, index, index, index, tensor<4x14xf32>) {{
  %s = shard.sharding @g split_axes = [[], [0]] sharded_dims_offsets = [0, 2, 5, 9, 14] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4x14xf32>
  %s2 = shard.get_sharding %a : tensor<4x14xf32> -> !shard.sharding
  %i = shard.process_linear_index on @g : index
  %z:2 = shard.shard_shape dims = [4, 14] sharding = %s2 device = [%i] : index, index
  %hs = shard.sharding @g split_axes = [[0]] halo_sizes = [1, %h] : !shard.sharding
  %e:2 = shard.shard_shape dims = [10, 3] sharding = %hs device = [%i] : index, index
  return %z#0, %z#1, %e#0, %e#1, %a : index, index, index, index, tensor<4x14xf32>
}}"""
    x = np.ones((4, 14), np.float32)
    got = run_prog(text, grid, [(x, 2)] * 4)
    assert [y[1] for y in got] == [2, 3, 4, 5]
    assert all(y[0] == 4 and y[3] == 3 for y in got)
    assert [y[2] for y in got] == [2 + 3, 2 + 3, 3 + 3, 3 + 3]  # 10 = 2+2+3+3, plus halos 1 and 2
    assert all(y[4] is x for y in got)


@pytest.mark.parametrize(
    "grid,split_axes,halos,gshape",
    [
        ((4,), ((0,),), (1, 2), (16, 3)),
        ((4,), ((), (0,)), (2, 1), (3, 12)),
        ((2, 3), ((0,), (1,)), (1, 1, 2, 1), (8, 9)),
        ((2, 3), ((1,), (0,)), (0, 2, 1, 0), (9, 8)),
        ((2, 3), ((0, 1),), (1, 1), (12, 2)),
    ],
)
@pytest.mark.parametrize("kind", ["tensor", "memref"])
def test_update_halo(grid, split_axes, halos, gshape, kind):
    sh = RuntimeSharding("g", grid, split_axes, halos)
    G = np.arange(np.prod(gshape), dtype=np.float64).reshape(gshape) + 1
    n = int(np.prod(grid))
    locals_ = []
    for r in range(n):
        full = sh.local_part(G, grid, coords(r, grid))
        inside = sh.local_part(np.ones(gshape, bool), grid, coords(r, grid))
        start = full.copy()
        core = np.zeros(full.shape, bool)
        core[tuple(slice(lo, s - hi) for s, (lo, hi) in zip(full.shape, [sh.halos(d) for d in range(full.ndim)]))] = True
        start[~core] = -1  # stale halos
        locals_.append((start, full, inside))
    lshape = locals_[0][0].shape
    ty = f"{kind}<{'x'.join(map(str, lshape))}xf64>"
    sa = "[" + ", ".join("[" + ", ".join(map(str, a)) + "]" for a in split_axes) + "]"
    text = f"""{grid_decl(grid)}
func.func @f(%x: {ty}) -> {ty} {{
  %r = shard.update_halo %x on @g split_axes = {sa} halo_sizes = [{', '.join(map(str, halos))}] : {ty}
  return %r : {ty}
}}"""
    got = run_prog(text, grid, [(s.copy(),) for s, _, _ in locals_])
    for y, (start, full, inside) in zip(got, locals_):
        np.testing.assert_array_equal(y[inside], full[inside])
        np.testing.assert_array_equal(y[~inside], start[~inside])  # no neighbour: untouched
