"""Resharding: the collectives that move a tensor from one sharding to another.

Two halves, kept apart so that `shard-partition` and the `test-grid-resharding-partition`
pass share them:

* `plan_resharding` is pure: over value types only (`Sharding`, shapes), it returns a list
  of `Step`s, each one collective with its local shapes and shardings before and after;
* `emit_resharding` creates the ops of a plan (shard.all_slice / all_gather / all_to_all /
  update_halo, and the tensor ops upstream uses around them) with an xDSL `Builder`.

Pairs that upstream MLIR reshards in one pattern (move / split / unsplit the last split
axis, change halo sizes only) get exactly upstream's single step. Every other pair is
planned by a shortest-path search over split-axes assignments, weighted by the elements
each rank receives (`Step.moved`, `bytes_moved`). The design is explained in
`resharding.md`.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from math import prod
from typing import TypeAlias

from xdsl.builder import Builder
from xdsl.dialects import tensor
from xdsl.dialects.builtin import IndexType, IntegerAttr, SymbolRefAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from shardc.dialects.shard import (
    DYNAMIC,
    AllGatherOp,
    AllSliceOp,
    AllToAllOp,
    Sharding,
    UpdateHaloOp,
    grid_axes_attr,
)

Axes: TypeAlias = tuple[tuple[int, ...], ...]
"""Split axes padded to the tensor rank: one tuple of grid axes per dimension."""

Shape: TypeAlias = tuple[int, ...]
"""A shape; DYNAMIC (i64 min) marks an unknown dimension."""

Fail: TypeAlias = Callable[[str], "ReshardingError"]
"""Makes the error for a reason, with the value, shape and shardings in front."""

UNKNOWN_SIZE = 2
"""Stand-in for an unknown (dynamic) dimension or grid size in the cost model only."""


class ReshardingError(DiagnosticException):
    """A source/target pair no sequence of shard collectives can connect."""


# =========================================================================================
# Steps
# =========================================================================================


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step of a plan: the data goes from `source` to `target` sharding; the local
    tensor from `in_shape` to `out_shape`. `moved` is the number of elements each rank
    receives (the cost model of the planner)."""

    source: Sharding
    target: Sharding
    in_shape: Shape
    out_shape: Shape
    moved: Fraction = Fraction(0)

    @property
    def grid(self) -> str:
        return self.source.grid


@dataclass(frozen=True, kw_only=True)
class AllSlice(Step):
    """Each rank keeps its part of `slice_axis`: `grid_axes` are appended to that dim."""

    grid_axes: tuple[int, ...]
    slice_axis: int
    collective_shape: Shape


@dataclass(frozen=True, kw_only=True)
class AllGather(Step):
    """The trailing `grid_axes` of `gather_axis` are gathered; `collective_shape` is the
    all_gather's result type, cast to `out_shape` as upstream does."""

    grid_axes: tuple[int, ...]
    gather_axis: int
    collective_shape: Shape


@dataclass(frozen=True, kw_only=True)
class AllToAll(Step):
    """The trailing `grid_axes` of `concat_axis` move to the end of `split_axis`."""

    grid_axes: tuple[int, ...]
    split_axis: int
    concat_axis: int
    collective_shape: Shape


@dataclass(frozen=True, kw_only=True)
class UpdateHalo(Step):
    """Same split axes, new halo sizes: the core (local part without halos) is copied at
    `core_in_offsets` out of the source into a fresh tensor at `core_out_offsets`, whose
    halos `shard.update_halo` then fills from the neighbours."""

    core_shape: Shape
    core_in_offsets: tuple[int, ...]
    core_out_offsets: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class DropHalo(Step):
    """Same split axes, halos removed: just the core is kept (no communication)."""

    core_in_offsets: tuple[int, ...]


Plan: TypeAlias = list[Step]


def bytes_moved(plan: Sequence[Step], dtype: Attribute | int | str) -> float:
    """Bytes each rank receives in `plan`, for elements of `dtype` (an xDSL type with a
    bitwidth, a numpy dtype name such as "float32", or a size in bytes)."""
    return float(sum((step.moved for step in plan), Fraction(0)) * _element_bytes(dtype))


def _element_bytes(dtype: Attribute | int | str) -> Fraction:
    if isinstance(dtype, int):
        return Fraction(dtype)
    if isinstance(dtype, str):
        import numpy as np

        return Fraction(np.dtype(dtype).itemsize)
    bitwidth = getattr(dtype, "bitwidth", None)
    if not isinstance(bitwidth, int):
        raise ValueError(f"no element size known for {dtype}")
    return Fraction(max(bitwidth, 8), 8)


# =========================================================================================
# Describing shardings in messages
# =========================================================================================


def describe_sharding(sharding: Sharding) -> str:
    """MLIR's `shard.sharding` syntax for a sharding (dynamic entries as `?`)."""

    def ints(values: Sequence[int]) -> str:
        return ", ".join("?" if v == DYNAMIC else str(v) for v in values)

    axes = ", ".join(f"[{ints(sub)}]" for sub in sharding.split_axes or ((),))
    text = f"@{sharding.grid} split_axes = [{axes}]"
    if sharding.static_halo_sizes:
        text += f" halo_sizes = [{ints(sharding.static_halo_sizes)}]"
    if sharding.static_sharded_dims_offsets:
        text += f" sharded_dims_offsets = [{ints(sharding.static_sharded_dims_offsets)}]"
    return text


def describe_shape(shape: Sequence[int]) -> str:
    return "x".join("?" if d == DYNAMIC else str(d) for d in shape) or "scalar"


# =========================================================================================
# Planning
# =========================================================================================


@dataclass(frozen=True)
class _Problem:
    """What a plan is searched over: fixed shapes and the dimensions with uneven shards
    (their axes and offsets, which no step may touch)."""

    grid: str
    global_shape: Shape
    grid_shape: tuple[int, ...]
    uneven: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=dict[int, tuple[tuple[int, ...], tuple[int, ...]]]
    )

    @property
    def rank(self) -> int:
        return len(self.global_shape)

    def shards(self, axes: Sequence[int]) -> int:
        """Number of shards along `axes` (DYNAMIC if any grid axis is dynamic)."""
        sizes = [self.grid_shape[a] for a in axes]
        return DYNAMIC if DYNAMIC in sizes else prod(sizes)

    def indivisible(self, axes: Axes) -> tuple[int, int] | None:
        """The first (dim, shards) whose even split does not divide the dimension."""
        for dim, sub in enumerate(axes):
            if dim in self.uneven or not sub:
                continue
            size, n = self.global_shape[dim], self.shards(sub)
            if size != DYNAMIC and n != DYNAMIC and size % n:
                return dim, n
        return None

    def local_shape(self, axes: Axes) -> Shape:
        out: list[int] = []
        for dim, sub in enumerate(axes):
            size, n = self.global_shape[dim], self.shards(sub)
            if dim in self.uneven or size == DYNAMIC or n == DYNAMIC:
                out.append(DYNAMIC if sub else size)
            else:
                out.append(size // n)
        return tuple(out)

    def local_elements(self, axes: Axes) -> Fraction:
        """Elements of the largest local shard (the cost model's unit)."""
        total = Fraction(1)
        for dim, sub in enumerate(axes):
            size = self.global_shape[dim]
            if dim in self.uneven:
                offs = self.uneven[dim][1]
                total *= max(b - a for a, b in zip(offs, offs[1:]))
                continue
            size = UNKNOWN_SIZE if size == DYNAMIC else size
            total *= Fraction(size, self.cost_shards(sub))
        return total

    def cost_shards(self, axes: Sequence[int]) -> int:
        return prod(UNKNOWN_SIZE if self.grid_shape[a] == DYNAMIC else self.grid_shape[a]
                    for a in axes)

    def sharding(self, axes: Axes) -> Sharding:
        """The sharding of a halo-free state; offsets for every split dim when some dim is
        uneven (MLIR wants offsets for all split dims or none)."""
        if not self.uneven:
            return Sharding(self.grid, axes)
        offsets: list[int] = []
        for dim, sub in enumerate(axes):
            if not sub:
                continue
            if dim in self.uneven:
                offsets.extend(self.uneven[dim][1])
            else:
                n, size = self.shards(sub), self.global_shape[dim]
                offsets.extend(i * (size // n) for i in range(n + 1))
        return Sharding(self.grid, axes, static_sharded_dims_offsets=tuple(offsets))


def _pad(axes: Axes, rank: int) -> Axes:
    return tuple(axes) + ((),) * (rank - len(axes))


def _normalise_shape(shape: Sequence[int | None]) -> Shape:
    return tuple(DYNAMIC if d is None or d == DYNAMIC else d for d in shape)


def plan_resharding(
    source: Sharding,
    target: Sharding,
    global_shape: Sequence[int | None],
    grid_shape: Sequence[int | None],
    value_name: str = "value",
) -> Plan:
    """The steps that reshard a tensor of `global_shape` on a grid of `grid_shape` from
    `source` to `target`: upstream's single step where upstream has one, else the plan
    receiving the fewest bytes per rank (then the fewest steps). Raises a
    `ReshardingError` naming `value_name` when no plan exists."""
    shape = _normalise_shape(global_shape)
    gshape = _normalise_shape(grid_shape)
    rank = len(shape)

    prefix = (
        f"cannot reshard {value_name} of shape {describe_shape(shape)} from "
        f"{describe_sharding(source)} to {describe_sharding(target)}"
    )

    def fail(reason: str) -> ReshardingError:
        return ReshardingError(f"{prefix}: {reason}")

    if source.grid != target.grid:
        raise fail("the shardings are on different grids")
    for sharding in (source, target):
        for dim, sub in enumerate(sharding.split_axes):
            if dim >= rank:
                raise fail(f"the sharding splits dimension {dim} of a rank-{rank} tensor")
            for axis in sub:
                if not 0 <= axis < len(gshape):
                    raise fail(f"grid axis {axis} is out of range")
    if source == target or (source.is_fully_replicated and target.is_fully_replicated):
        return []
    if source.dynamic_halo_sizes or target.dynamic_halo_sizes:
        raise fail("dynamic halo sizes are not supported")
    if source.dynamic_sharded_dims_offsets or target.dynamic_sharded_dims_offsets:
        raise fail("dynamic sharded dims offsets are not supported")

    if (
        source.split_axes == target.split_axes
        and not source.static_sharded_dims_offsets
        and not target.static_sharded_dims_offsets
    ):
        return [_halo_step(source, target, shape, gshape, fail)]

    problem, src_axes, tgt_axes = _problem(source, target, shape, gshape, fail)
    for axes, sharding in ((src_axes, source), (tgt_axes, target)):
        if bad := problem.indivisible(axes):
            dim, n = bad
            raise fail(
                f"dimension {dim} of size {shape[dim]} does not split evenly into {n} "
                f"shards (grid axes {list(axes[dim])}) and "
                f"{describe_sharding(sharding)} gives no sharded_dims_offsets"
            )

    plan: Plan = []
    if _has_halo(source):
        core = _drop_halo_sharding(source)
        plan.append(_halo_step(source, core, shape, gshape, fail))
        source = core
    if not (source.static_halo_sizes or target.static_halo_sizes):
        single = _upstream_step(problem, source, target, src_axes)
        if single is not None:
            return [*plan, single]
    target_core = _drop_halo_sharding(target) if target.static_halo_sizes else target
    path = _cached_search(
        problem.grid, shape, gshape, tuple(sorted(problem.uneven.items())), src_axes, tgt_axes
    )
    plan.extend(_with_endpoints(problem, path, source, target_core))
    if target.static_halo_sizes:
        plan.append(_halo_step(target_core, target, shape, gshape, fail))
    return plan


def _has_halo(sharding: Sharding) -> bool:
    return bool(sharding.static_halo_sizes)


def _drop_halo_sharding(sharding: Sharding) -> Sharding:
    return Sharding(sharding.grid, sharding.split_axes)


def _problem(
    source: Sharding, target: Sharding, shape: Shape, gshape: tuple[int, ...], fail: Fail
) -> tuple[_Problem, Axes, Axes]:
    """The search problem; uneven dims (offsets that are not an even split) must be the
    same in source and target, since no collective moves unequal shards."""
    rank = len(shape)
    src_axes, tgt_axes = _pad(source.split_axes, rank), _pad(target.split_axes, rank)
    src_uneven = _uneven_dims(source, src_axes, shape, gshape, fail)
    tgt_uneven = _uneven_dims(target, tgt_axes, shape, gshape, fail)
    for dim in sorted(src_uneven.keys() | tgt_uneven.keys()):
        if src_uneven.get(dim) != tgt_uneven.get(dim):
            raise fail(
                f"dimension {dim} has uneven shards (sharded_dims_offsets) that differ "
                "between the shardings; the shard collectives move equal shards only"
            )
    return _Problem(source.grid, shape, gshape, src_uneven), src_axes, tgt_axes


def _uneven_dims(
    sharding: Sharding, axes: Axes, shape: Shape, gshape: tuple[int, ...], fail: Fail
) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Split dims whose offsets are not the even split, with their axes and offsets."""
    offsets = sharding.static_sharded_dims_offsets
    if not offsets:
        return {}
    if DYNAMIC in gshape:
        raise fail("sharded dims offsets need a static grid")
    uneven: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    pos = 0
    for dim, sub in enumerate(axes):
        if not sub:
            continue
        n = prod(gshape[a] for a in sub)
        if len(sub) > 1 and sum(gshape[a] for a in sub) != n:
            raise fail(
                f"sharded dims offsets on dimension {dim}, split along several grid axes, "
                "are not supported"
            )
        offs = tuple(offsets[pos : pos + n + 1])
        pos += n + 1
        if len(offs) != n + 1:
            raise fail("sharded dims offsets has wrong size")
        size = shape[dim]
        even = size != DYNAMIC and size % n == 0 and offs == tuple(
            i * (size // n) for i in range(n + 1)
        )
        if not even:
            uneven[dim] = (sub, offs)
    return uneven


# -----------------------------------------------------------------------------------------
# Upstream's single-step patterns
# -----------------------------------------------------------------------------------------


def _upstream_step(
    problem: _Problem, source: Sharding, target: Sharding, src_axes: Axes
) -> Step | None:
    """Upstream's patterns, tried in its order (move last axis, split last axis, unsplit
    last axis); a pattern counts only if it reaches `target` in one step."""
    if source.static_sharded_dims_offsets or target.static_sharded_dims_offsets:
        return None
    rank = problem.rank
    src, tgt = _pad(source.split_axes, rank), _pad(target.split_axes, rank)
    candidates: list[Axes] = []
    if move := _detect_move_last(src, tgt):
        s, t = move
        candidates.append(_moved(src, s, t, 1))
    if split := _detect_split_last(src, tgt):
        candidates.append(_replaced(src, split, (*src[split], tgt[split][-1])))
    if unsplit := _detect_unsplit_last(src, tgt):
        candidates.append(_replaced(src, unsplit, src[unsplit][:-1]))
    if not candidates or candidates[0] != tgt:
        return None
    step = next(
        (e for e in _edges(problem, src_axes) if e[0] == tgt and _is_single_axis(e[1])),
        None,
    )
    if step is None:
        return None
    shape, gshape = problem.global_shape, problem.grid_shape
    return _make_step(problem, src_axes, step[1], source, target,
                      source.shard_shape(shape, gshape), target.shard_shape(shape, gshape))


def _detect_move_last(src: Axes, tgt: Axes) -> tuple[int, int] | None:
    for s, t in itertools.product(range(len(src)), range(len(tgt))):
        if s == t or not src[s] or not tgt[t] or src[s][-1] != tgt[t][-1]:
            continue
        if src[s][:-1] == tgt[t][:-1]:
            return s, t
    return None


def _detect_split_last(src: Axes, tgt: Axes) -> int | None:
    for dim in range(len(tgt)):
        if len(src[dim]) + 1 == len(tgt[dim]) and src[dim] == tgt[dim][:-1]:
            return dim
    return None


def _detect_unsplit_last(src: Axes, tgt: Axes) -> int | None:
    for dim in range(len(src)):
        if len(src[dim]) == len(tgt[dim]) + 1 and src[dim][:-1] == tgt[dim]:
            return dim
    return None


def _replaced(axes: Axes, dim: int, sub: tuple[int, ...]) -> Axes:
    return tuple(sub if d == dim else a for d, a in enumerate(axes))


def _moved(axes: Axes, s: int, t: int, count: int) -> Axes:
    moving = axes[s][len(axes[s]) - count :]
    out = list(axes)
    out[s] = axes[s][: len(axes[s]) - count]
    out[t] = (*axes[t], *moving)
    return tuple(out)


# -----------------------------------------------------------------------------------------
# The search over split-axes assignments
# -----------------------------------------------------------------------------------------

# A move of the search: ("slice", dim, axes) | ("gather", dim, axes) | ("a2a", s, t, axes).
Move: TypeAlias = tuple[object, ...]


def _is_single_axis(move: Move) -> bool:
    axes = move[-1]
    return isinstance(axes, tuple) and len(axes) == 1


def _edges(problem: _Problem, axes: Axes) -> Iterator[tuple[Axes, Move, Fraction]]:
    """Every state one collective away from `axes`, with the move and its cost."""
    free_dims = [d for d in range(problem.rank) if d not in problem.uneven]
    used = {a for sub in axes for a in sub}
    unused = [a for a in range(len(problem.grid_shape)) if a not in used]
    elements = problem.local_elements(axes)
    for dim in free_dims:
        for count in range(1, len(axes[dim]) + 1):
            group = axes[dim][len(axes[dim]) - count :]
            k = problem.cost_shards(group)
            yield (
                _replaced(axes, dim, axes[dim][: len(axes[dim]) - count]),
                ("gather", dim, group),
                elements * (k - 1),
            )
    for s, t in itertools.permutations(free_dims, 2):
        for count in range(1, len(axes[s]) + 1):
            group = axes[s][len(axes[s]) - count :]
            k = problem.cost_shards(group)
            yield _moved(axes, s, t, count), ("a2a", s, t, group), elements * (k - 1) / k
    for dim in free_dims:
        for count in range(1, len(unused) + 1):
            for group in itertools.permutations(unused, count):
                yield _replaced(axes, dim, (*axes[dim], *group)), ("slice", dim, group), Fraction(0)


@functools.lru_cache(maxsize=4096)
def _cached_search(
    grid: str,
    shape: Shape,
    gshape: tuple[int, ...],
    uneven: tuple[tuple[int, tuple[tuple[int, ...], tuple[int, ...]]], ...],
    start: Axes,
    goal: Axes,
) -> tuple[tuple[Axes, Move, Axes], ...]:
    """`_search`, remembered: a partitioned program reshards the same pairs many times."""
    return tuple(_search(_Problem(grid, shape, gshape, dict(uneven)), start, goal))


def _search(problem: _Problem, start: Axes, goal: Axes) -> list[tuple[Axes, Move, Axes]]:
    """Dijkstra over valid (evenly dividing) states: fewest elements received, then
    fewest steps; ties go to the first move in `_edges` order."""
    best: dict[Axes, tuple[Fraction, int]] = {start: (Fraction(0), 0)}
    back: dict[Axes, tuple[Axes, Move]] = {}
    counter = itertools.count()
    heap: list[tuple[Fraction, int, int, Axes]] = [(Fraction(0), 0, next(counter), start)]
    done: set[Axes] = set()
    while heap:
        cost, steps, _, state = heapq.heappop(heap)
        if state in done:
            continue
        done.add(state)
        if state == goal:
            break
        for nxt, move, price in _edges(problem, state):
            if nxt in done or problem.indivisible(nxt) is not None:
                continue
            key = (cost + price, steps + 1)
            if nxt not in best or key < best[nxt]:
                best[nxt] = key
                back[nxt] = (state, move)
                heapq.heappush(heap, (*key, next(counter), nxt))
    if goal not in done:  # unreachable for valid endpoints: replication connects all
        raise AssertionError("no resharding path")
    path: list[tuple[Axes, Move, Axes]] = []
    state = goal
    while state != start:
        prev, move = back[state]
        path.append((prev, move, state))
        state = prev
    return path[::-1]


def _with_endpoints(
    problem: _Problem, path: Sequence[tuple[Axes, Move, Axes]], source: Sharding, target: Sharding
) -> Plan:
    """Steps of a searched path; the first and last carry the caller's shardings and
    their local types are MLIR's `shardShapedType` of those shardings."""
    steps: Plan = []
    in_shape = source.shard_shape(problem.global_shape, problem.grid_shape)
    for i, (before, move, after) in enumerate(path):
        last = i == len(path) - 1
        src = source if i == 0 else problem.sharding(before)
        tgt = target if last else problem.sharding(after)
        out_shape = (
            target.shard_shape(problem.global_shape, problem.grid_shape)
            if last
            else problem.local_shape(after)
        )
        steps.append(_make_step(problem, before, move, src, tgt, in_shape, out_shape))
        in_shape = out_shape
    return steps


def _make_step(
    problem: _Problem,
    before: Axes,
    move: Move,
    source: Sharding,
    target: Sharding,
    in_shape: Shape,
    out_shape: Shape,
) -> Step:
    """The step of one move, with upstream's result types: the collective's type follows
    from its operand type; a cast to `out_shape` follows where upstream has one."""
    elements = problem.local_elements(before)
    kind, *rest = move
    common = {"source": source, "target": target, "in_shape": in_shape, "out_shape": out_shape}
    if kind == "slice":
        dim, group = rest
        result = _with_dim(in_shape, dim, _shard_dim(in_shape[dim], problem.shards(group)))
        return AllSlice(**common, grid_axes=group, slice_axis=dim, collective_shape=result)
    if kind == "gather":
        dim, group = rest
        result = _with_dim(in_shape, dim, _gather_dim(in_shape[dim], problem.shards(group)))
        return AllGather(**common, moved=elements * (problem.cost_shards(group) - 1),
                         grid_axes=group, gather_axis=dim, collective_shape=result)
    s, t, group = rest
    k = problem.shards(group)
    result = _with_dim(in_shape, s, _gather_dim(in_shape[s], k))
    result = _with_dim(result, t, _shard_dim(result[t], k))
    kc = problem.cost_shards(group)
    return AllToAll(**common, moved=elements * (kc - 1) / kc,
                    grid_axes=group, split_axis=t, concat_axis=s, collective_shape=result)


def _with_dim(shape: Shape, dim: int, size: int) -> Shape:
    return tuple(size if d == dim else s for d, s in enumerate(shape))


def _shard_dim(size: int, shards: int) -> int:
    return DYNAMIC if DYNAMIC in (size, shards) else size // shards


def _gather_dim(size: int, shards: int) -> int:
    return DYNAMIC if DYNAMIC in (size, shards) else size * shards


# -----------------------------------------------------------------------------------------
# Halo steps
# -----------------------------------------------------------------------------------------


def _halo_pairs(sharding: Sharding, rank: int) -> dict[int, tuple[int, int]]:
    """Per split dim, its (low, high) halo; halo sizes are listed per split dim."""
    halos = sharding.static_halo_sizes
    pairs: dict[int, tuple[int, int]] = {}
    split_dims = [d for d, sub in enumerate(_pad(sharding.split_axes, rank)) if sub]
    for ordinal, dim in enumerate(split_dims):
        pairs[dim] = (halos[2 * ordinal], halos[2 * ordinal + 1]) if halos else (0, 0)
    return pairs


def _halo_step(
    source: Sharding, target: Sharding, shape: Shape, gshape: tuple[int, ...], fail: Fail
) -> Step:
    """Upstream's halo change: the core moves into a tensor with the target's halos,
    whose halo regions update_halo fills; to a sharding without halos, just the core."""
    rank = len(shape)
    in_shape = source.shard_shape(shape, gshape)
    if DYNAMIC in in_shape:
        raise fail("halo updates need static local shapes")
    src, tgt = _halo_pairs(source, rank), _halo_pairs(target, rank)
    core = list(in_shape)
    in_offs, out_offs, out_shape = [0] * rank, [0] * rank, list(in_shape)
    for dim, (lo, hi) in src.items():
        core[dim] -= lo + hi
        in_offs[dim] = lo
        out_offs[dim] = tgt[dim][0]
        out_shape[dim] = core[dim] + sum(tgt[dim])
    if not target.static_halo_sizes:
        return DropHalo(source=source, target=target, in_shape=in_shape,
                        out_shape=tuple(core), core_in_offsets=tuple(in_offs))
    received = prod(out_shape) - prod(core)
    return UpdateHalo(source=source, target=target, in_shape=in_shape,
                      out_shape=tuple(out_shape), moved=Fraction(received),
                      core_shape=tuple(core), core_in_offsets=tuple(in_offs),
                      core_out_offsets=tuple(out_offs))


# =========================================================================================
# Emission
# =========================================================================================


def emit_resharding(
    builder: Builder, plan: Sequence[Step], value: SSAValue, fold: bool = False
) -> SSAValue:
    """Create the ops of `plan` on the local tensor `value`; returns the resharded local
    tensor. Each step is emitted as upstream emits it (all_gather and all_to_all followed
    by a tensor.cast to the target's local type). With `fold`, ops that MLIR's folders
    would remove (identity casts and slices) are not created."""
    for step in plan:
        value = _emit_step(builder, step, value, fold)
    return value


def reshard(
    builder: Builder,
    source: Sharding,
    target: Sharding,
    global_type: TensorType,
    grid_shape: Sequence[int | None],
    value: SSAValue,
    value_name: str = "value",
    fold: bool = False,
) -> SSAValue:
    """Plan and emit in one call (what `shard-partition` needs per annotated pair):
    `value` is the local tensor under `source`; returns it under `target`."""
    plan = plan_resharding(source, target, global_type.get_shape(), grid_shape, value_name)
    return emit_resharding(builder, plan, value, fold)


def _emit_step(builder: Builder, step: Step, value: SSAValue, fold: bool) -> SSAValue:
    element = _element_type(value)
    grid = SymbolRefAttr(step.grid)

    def collective(op_type: type[Operation], shape: Shape, **props: Attribute) -> SSAValue:
        op = op_type.create(
            operands=[value],
            result_types=[TensorType(element, shape)],
            properties={"grid": grid, **props},
        )
        builder.insert(op)
        return op.results[0]

    def cast(result: SSAValue, shape: Shape) -> SSAValue:
        if fold and tuple(result.type.get_shape()) == shape:  # pyright: ignore
            return result
        return builder.insert(tensor.CastOp(result, TensorType(element, shape))).dest

    match step:
        case AllSlice():
            result = collective(AllSliceOp, step.collective_shape,
                                grid_axes=grid_axes_attr(step.grid_axes),
                                slice_axis=_index(step.slice_axis))
            # upstream casts nothing here: its slice type is already the target's
            if step.collective_shape == step.out_shape:
                return result
            return cast(result, step.out_shape)
        case AllGather():
            result = collective(AllGatherOp, step.collective_shape,
                                grid_axes=grid_axes_attr(step.grid_axes),
                                gather_axis=_index(step.gather_axis))
            return cast(result, step.out_shape)
        case AllToAll():
            result = collective(AllToAllOp, step.collective_shape,
                                grid_axes=grid_axes_attr(step.grid_axes),
                                split_axis=_index(step.split_axis),
                                concat_axis=_index(step.concat_axis))
            return cast(result, step.out_shape)
        case UpdateHalo():
            return _emit_update_halo(builder, step, value, element, fold)
        case DropHalo():
            return _extract(builder, value, step.core_in_offsets, step.out_shape, element, fold)
        case _:
            raise AssertionError(f"unknown step {step}")


def _emit_update_halo(
    builder: Builder, step: UpdateHalo, value: SSAValue, element: Attribute, fold: bool
) -> SSAValue:
    out_type = TensorType(element, step.out_shape)
    empty: SSAValue | None = None
    covers = step.core_shape == step.out_shape and not any(step.core_out_offsets)
    if not (fold and covers):
        empty = builder.insert(tensor.EmptyOp([], out_type)).tensor
    core = _extract(builder, value, step.core_in_offsets, step.core_shape, element, fold)
    if empty is not None:
        core = builder.insert(
            tensor.InsertSliceOp.from_static_parameters(
                core, empty, step.core_out_offsets, step.core_shape
            )
        ).result
    halo = UpdateHaloOp(
        core, step.grid, step.source.split_axes, list(step.target.static_halo_sizes)
    )
    return builder.insert(halo).result


def _extract(
    builder: Builder,
    value: SSAValue,
    offsets: Sequence[int],
    shape: Shape,
    element: Attribute,
    fold: bool,
) -> SSAValue:
    if fold and not any(offsets) and tuple(value.type.get_shape()) == shape:  # pyright: ignore
        return value
    return builder.insert(
        tensor.ExtractSliceOp.from_static_parameters(value, offsets, shape)
    ).result


def _element_type(value: SSAValue) -> Attribute:
    if not isinstance(value.type, TensorType):
        raise ReshardingError(f"expected a ranked tensor to reshard, got {value.type}")
    return value.type.get_element_type()


def _index(value: int) -> IntegerAttr:
    return IntegerAttr(value, IndexType())
