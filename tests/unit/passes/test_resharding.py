"""The resharding planner, checked by running its plans on numpy.

Every pair of shardings of a rank-2 tensor on 1-D and 2-D grids (every assignment of grid
axes to dimensions, in every order) is planned; the plan is then executed on per-rank
numpy shards with a small model of each collective, and every rank must end up holding
exactly its part of the global array under the target sharding. Halos, uneven shards
(sharded_dims_offsets), the cost model, upstream's single-step choices, the emitted IR
(which must verify) and the errors are checked too.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from math import prod

import numpy as np
import pytest
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.ir import Block, Region
from xdsl.rewriter import InsertPoint

from shardc.dialects.shard import DYNAMIC, GridOp, Sharding
from shardc.passes.resharding import (
    AllGather,
    AllSlice,
    AllToAll,
    DropHalo,
    ReshardingError,
    Step,
    UpdateHalo,
    bytes_moved,
    emit_resharding,
    plan_resharding,
)

Rank = tuple[int, ...]
Layout = dict[Rank, np.ndarray]

# -----------------------------------------------------------------------------------------
# Enumerating shardings
# -----------------------------------------------------------------------------------------


def all_split_axes(rank: int, grid_rank: int) -> Iterator[tuple[tuple[int, ...], ...]]:
    """Every assignment of grid axes to tensor dims (or to none), in every order."""
    for owner in itertools.product(range(-1, rank), repeat=grid_rank):
        per_dim = [[a for a in range(grid_rank) if owner[a] == d] for d in range(rank)]
        for orders in itertools.product(*(itertools.permutations(p) for p in per_dim)):
            yield tuple(tuple(o) for o in orders)


def sharding(axes: Sequence[Sequence[int]], halos: Sequence[int] = (), offsets: Sequence[int] = ()) -> Sharding:
    return Sharding("grid", tuple(tuple(a) for a in axes), tuple(halos), tuple(offsets))


# -----------------------------------------------------------------------------------------
# The numpy model: layouts and collectives
# -----------------------------------------------------------------------------------------


def linear(rank: Rank, axes: Sequence[int], grid: Sequence[int]) -> int:
    index = 0
    for a in axes:
        index = index * grid[a] + rank[a]
    return index


def ranks(grid: Sequence[int]) -> list[Rank]:
    return list(itertools.product(*(range(g) for g in grid)))


def group(rank: Rank, axes: Sequence[int], grid: Sequence[int]) -> list[Rank]:
    """The ranks of `rank`'s group over `axes`, in the collectives' order."""
    members = [r for r in ranks(grid) if all(r[a] == rank[a] for a in range(len(grid)) if a not in axes)]
    return sorted(members, key=lambda r: linear(r, axes, grid))


def layout(glob: np.ndarray, s: Sharding, grid: Sequence[int]) -> Layout:
    """Each rank's local array; halo cells outside the tensor are NaN (don't care)."""
    axes = tuple(s.split_axes) + ((),) * (glob.ndim - len(s.split_axes))
    split_dims = [d for d, sub in enumerate(axes) if sub]
    out: Layout = {}
    for r in ranks(grid):
        index = []
        pos = 0
        for d, sub in enumerate(axes):
            size = glob.shape[d]
            if not sub:
                index.append(np.arange(size))
                continue
            n = prod(grid[a] for a in sub)
            i = linear(r, sub, grid)
            if s.static_sharded_dims_offsets:
                offs = s.static_sharded_dims_offsets[pos : pos + n + 1]
                pos += n + 1
                lo_end = (offs[i], offs[i + 1])
            else:
                lo_end = (i * (size // n), (i + 1) * (size // n))
            lo = hi = 0
            if s.static_halo_sizes:
                k = split_dims.index(d)
                lo, hi = s.static_halo_sizes[2 * k], s.static_halo_sizes[2 * k + 1]
            index.append(np.arange(lo_end[0] - lo, lo_end[1] + hi))
        padded = np.pad(glob, [(m, m) for m in [max(glob.shape)] * glob.ndim], constant_values=np.nan)
        shift = max(glob.shape)
        out[r] = padded[np.ix_(*[ix + shift for ix in index])]
    return out


def run_step(step: Step, data: Layout, grid: Sequence[int], glob: np.ndarray) -> Layout:
    out: Layout = {}
    for r, local in data.items():
        match step:
            case AllSlice():
                k = prod(grid[a] for a in step.grid_axes)
                out[r] = np.split(local, k, axis=step.slice_axis)[linear(r, step.grid_axes, grid)]
            case AllGather():
                members = group(r, step.grid_axes, grid)
                out[r] = np.concatenate([data[q] for q in members], axis=step.gather_axis)
            case AllToAll():
                members = group(r, step.grid_axes, grid)
                me = linear(r, step.grid_axes, grid)
                pieces = [np.split(data[q], len(members), axis=step.split_axis)[me] for q in members]
                out[r] = np.concatenate(pieces, axis=step.concat_axis)
            case DropHalo():
                out[r] = local[tuple(slice(o, o + n) for o, n in zip(step.core_in_offsets, step.out_shape))]
            case UpdateHalo():
                core = local[tuple(slice(o, o + n) for o, n in zip(step.core_in_offsets, step.core_shape))]
                fresh = np.full(step.out_shape, np.nan)
                fresh[tuple(slice(o, o + n) for o, n in zip(step.core_out_offsets, step.core_shape))] = core
                out[r] = fresh
            case _:
                raise AssertionError(step)
        if isinstance(step, AllGather | AllToAll | AllSlice):
            assert fits(step.collective_shape, out[r].shape), (step, out[r].shape)
    if isinstance(step, UpdateHalo):
        # update_halo: each halo cell gets its neighbour's core value; the cores must be
        # where the target sharding says, and then every rank holds the target layout.
        expected = layout(glob, step.target, grid)
        for r, local in out.items():
            core = tuple(slice(o, o + n) for o, n in zip(step.core_out_offsets, step.core_shape))
            assert_same(local[core], expected[r][core])
        out = expected
    for r, local in out.items():
        assert fits(step.out_shape, local.shape), (step, local.shape)
    return out


def fits(typed: Sequence[int], actual: Sequence[int]) -> bool:
    """A local array fits a tensor type (DYNAMIC matches any size)."""
    return len(typed) == len(actual) and all(t in (DYNAMIC, n) for t, n in zip(typed, actual))


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    mask = ~np.isnan(want)
    np.testing.assert_array_equal(got[mask], want[mask])


def check_plan(src: Sharding, tgt: Sharding, shape: Sequence[int], grid: Sequence[int]) -> list[Step]:
    plan = plan_resharding(src, tgt, shape, grid)
    glob = np.arange(prod(shape), dtype=float).reshape(shape)
    data = layout(glob, src, grid)
    for step in plan:
        data = run_step(step, data, grid, glob)
    want = layout(glob, tgt, grid)
    for r in ranks(grid):
        assert_same(data[r], want[r])
    if plan:
        assert plan[0].source == src and plan[-1].target == tgt
        assert plan[0].in_shape == src.shard_shape(shape, grid)
        assert plan[-1].out_shape == tgt.shard_shape(shape, grid)
    for a, b in zip(plan, plan[1:]):
        assert a.out_shape == b.in_shape and a.target == b.source
    return plan


# -----------------------------------------------------------------------------------------
# Every pair
# -----------------------------------------------------------------------------------------

GRIDS = [((4,), (8, 12)), ((2, 3), (12, 18)), ((2, 2), (4, 8))]


def test_enumeration_counts():
    assert len(list(all_split_axes(2, 1))) == 3
    assert len(list(all_split_axes(2, 2))) == 11


@pytest.mark.parametrize(("grid", "shape"), GRIDS, ids=lambda v: "x".join(map(str, v)))
def test_every_pair_moves_the_data(grid: tuple[int, ...], shape: tuple[int, ...]):
    shardings = [sharding(a) for a in all_split_axes(len(shape), len(grid))]
    for src, tgt in itertools.product(shardings, shardings):
        plan = check_plan(src, tgt, shape, grid)
        if src.split_axes == tgt.split_axes:
            assert plan == []


def test_pairs_on_a_3d_grid_sample():
    grid, shape = (2, 2, 2), (8, 8)
    shardings = [sharding(a) for a in all_split_axes(2, 3)]
    rng = random.Random(7)
    for _ in range(60):
        check_plan(rng.choice(shardings), rng.choice(shardings), shape, grid)


def test_rank3_sample():
    grid, shape = (2, 3), (6, 12, 6)
    shardings = [sharding(a) for a in all_split_axes(3, 2)]
    rng = random.Random(3)
    for _ in range(40):
        check_plan(rng.choice(shardings), rng.choice(shardings), shape, grid)


# -----------------------------------------------------------------------------------------
# Upstream's single steps and the cost model
# -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "tgt", "kind", "fields"),
    [
        ([[]], [[], [1]], AllSlice, {"grid_axes": (1,), "slice_axis": 1}),
        ([[0]], [[0, 1]], AllSlice, {"grid_axes": (1,), "slice_axis": 0}),
        ([[0, 1]], [[0]], AllGather, {"grid_axes": (1,), "gather_axis": 0}),
        ([[], [1]], [], AllGather, {"grid_axes": (1,), "gather_axis": 1}),
        ([[0]], [[], [0]], AllToAll, {"grid_axes": (0,), "split_axis": 1, "concat_axis": 0}),
        ([[0, 1], []], [[0], [1]], AllToAll, {"grid_axes": (1,), "split_axis": 1, "concat_axis": 0}),
    ],
)
def test_upstream_single_steps(src, tgt, kind, fields):
    (step,) = check_plan(sharding(src), sharding(tgt), (12, 18), (2, 3))
    assert isinstance(step, kind)
    for name, value in fields.items():
        assert getattr(step, name) == value


def test_cost_model():
    grid, shape = (2, 3), (12, 18)
    # all_gather over 3: (k-1)/k of the gathered 12x6 -> 2 * 72 elements
    (gather,) = plan_resharding(sharding([[], [1]]), sharding([]), shape, grid)
    assert gather.moved == 2 * 12 * 6
    assert bytes_moved([gather], f32) == 4 * 2 * 12 * 6
    assert bytes_moved([gather], "float64") == 8 * 2 * 12 * 6
    # all_to_all over 2: (k-1)/k of the local 6x18
    (a2a,) = plan_resharding(sharding([[0]]), sharding([[], [0]]), shape, grid)
    assert a2a.moved == 54
    (sl,) = plan_resharding(sharding([]), sharding([[0]]), shape, grid)
    assert sl.moved == 0 and bytes_moved([sl], 4) == 0


def test_swap_is_cheaper_than_gathering():
    grid, shape = (2, 3), (12, 18)
    plan = check_plan(sharding([[0], [1]]), sharding([[1], [0]]), shape, grid)
    naive = 18 * 12 - 6 * 6  # gather everything, then slice
    assert sum(s.moved for s in plan) < naive
    assert all(isinstance(s, AllToAll) for s in plan)


def test_reorder_axes_of_one_dim():
    check_plan(sharding([[0, 1]]), sharding([[1, 0]]), (12, 18), (2, 3))
    check_plan(sharding([[0], [1, 2]]), sharding([[0], [2, 1]]), (4, 8), (2, 2, 2))


# -----------------------------------------------------------------------------------------
# Halos and uneven shards
# -----------------------------------------------------------------------------------------

HALOS = [(), (1, 0), (0, 2), (1, 1)]


def test_halo_only_change_is_one_update_halo():
    (step,) = check_plan(sharding([[0]], (1, 2)), sharding([[0]], (2, 1)), (8, 12), (2,))
    assert isinstance(step, UpdateHalo)
    assert step.in_shape == (7, 12) and step.out_shape == (7, 12)
    assert step.core_shape == (4, 12) and step.core_in_offsets == (1, 0)
    assert step.core_out_offsets == (2, 0)
    assert step.moved == 3 * 12


def test_halo_pairs_on_1d_grid():
    grid, shape = (4,), (8, 12)
    options = [sharding(a) for a in all_split_axes(2, 1)]
    options += [sharding(a, h) for a in ([[0]], [[], [0]]) for h in HALOS[1:]]
    for src, tgt in itertools.product(options, options):
        check_plan(src, tgt, shape, grid)


def test_halo_on_second_split_dim():
    grid, shape = (2, 2), (8, 8)
    src = sharding([[0], [1]], (1, 0, 0, 2))
    tgt = sharding([[1], [0]], (0, 1, 1, 1))
    plan = check_plan(src, tgt, shape, grid)
    assert isinstance(plan[0], DropHalo) and isinstance(plan[-1], UpdateHalo)


def test_halo_on_indivisible_dim_is_allowed_when_only_halos_change():
    (step,) = plan_resharding(sharding([[0]], (1, 1)), sharding([[0]], (2, 2)), (10, 4), (4,))
    assert isinstance(step, UpdateHalo)


def test_even_offsets_are_plain_shards():
    grid, shape = (2, 2), (8, 6)
    src = sharding([[0], []], (), (0, 4, 8))
    check_plan(src, sharding([[], [0, 1]]), shape, (2, 3))
    check_plan(src, sharding([[1], [0]]), shape, grid)


def test_uneven_dim_is_kept_while_others_move():
    grid, shape = (2, 2), (10, 8)
    src = sharding([[0], []], (), (0, 3, 10))
    tgt = sharding([[0], [1]], (), (0, 3, 10, 0, 4, 8))
    plan = check_plan(src, tgt, shape, grid)
    assert [type(s) for s in plan] == [AllSlice]
    assert plan[0].out_shape == (DYNAMIC, 4)
    back = check_plan(tgt, src, shape, grid)
    assert [type(s) for s in back] == [AllGather]


# -----------------------------------------------------------------------------------------
# Errors
# -----------------------------------------------------------------------------------------


def test_indivisible_dimension_is_an_error():
    with pytest.raises(ReshardingError, match=r"cannot reshard %x of shape 10x12 from "
                       r"@grid split_axes = \[\[0\]\] to @grid split_axes = \[\[\], \[0\]\]: "
                       r"dimension 0 of size 10 does not split evenly into 4 shards"):
        plan_resharding(sharding([[0]]), sharding([[], [0]]), (10, 12), (4,), "%x")


def test_changing_uneven_shards_is_an_error():
    with pytest.raises(ReshardingError, match="uneven shards"):
        plan_resharding(sharding([[0]], (), (0, 3, 10)), sharding([]), (10, 8), (2,))


def test_other_grid_is_an_error():
    with pytest.raises(ReshardingError, match="different grids"):
        plan_resharding(Sharding("a", ((0,),)), Sharding("b", ()), (4,), (2,))


def test_same_or_replicated_is_empty():
    assert plan_resharding(sharding([[0]]), sharding([[0]]), (10,), (4,)) == []
    assert plan_resharding(sharding([]), sharding([[], []]), (10, 3), (4,)) == []


# -----------------------------------------------------------------------------------------
# Emission: the ops verify (the dialect checks every collective's shapes)
# -----------------------------------------------------------------------------------------


def emit_and_verify(src: Sharding, tgt: Sharding, shape, grid, fold: bool) -> ModuleOp:
    plan = plan_resharding(src, tgt, shape, grid)
    in_t = TensorType(f32, src.shard_shape(shape, grid))
    block = Block(arg_types=[in_t])
    result = emit_resharding(Builder(InsertPoint.at_end(block)), plan, block.args[0], fold=fold)
    block.add_op(func.ReturnOp(result))
    f = func.FuncOp("f", ((in_t,), (result.type,)), Region(block))
    module = ModuleOp([GridOp("grid", grid), f])
    module.verify()
    assert result.type == TensorType(f32, tgt.shard_shape(shape, grid))
    return module


@pytest.mark.parametrize(("grid", "shape"), GRIDS[1:], ids=lambda v: "x".join(map(str, v)))
def test_emitted_ops_verify(grid, shape):
    shardings = [sharding(a) for a in all_split_axes(len(shape), len(grid))]
    for i, (src, tgt) in enumerate(itertools.product(shardings, shardings)):
        emit_and_verify(src, tgt, shape, grid, fold=bool(i % 2))


def test_emitted_halo_ops_verify():
    emit_and_verify(sharding([[0], [1]], (1, 0, 0, 2)), sharding([[1], [0]], (0, 1, 1, 1)), (8, 8), (2, 2), False)
    emit_and_verify(sharding([[0]], (1, 2)), sharding([[0]], (0, 0)), (8, 8), (2,), True)


def test_halo_on_dynamic_dim_is_an_error_with_the_callers_shardings():
    src, tgt = sharding([[0]], (1, 1)), sharding([[], [0]], (1, 1))
    with pytest.raises(ReshardingError, match=r"from @grid split_axes = \[\[0\]\] halo_sizes = \[1, 1\] "
                       r"to @grid split_axes = \[\[\], \[0\]\] halo_sizes = \[1, 1\]: halo updates need static"):
        plan_resharding(src, tgt, (DYNAMIC, 8), (4,))
