"""The run time of the `shard` dialect's ops: what the code `codegen/kernels/shard.py`
emits calls, one function per op (collectives through the current Comm, grid queries,
halo updates), its static attributes passed as literals.

Where MLIR leaves a result undefined (gather/reduce on non-root devices, shift without a
source) the comm returns zeros (gather) or the local input (reduce, shift)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shardc.runtime.execute.comm import Comm, CommError, Pending, current_comm, group_members, in_group_index
from shardc.runtime.execute import overlap_run
from shardc.runtime.execute.sharding import RuntimeSharding, resolve_grid


GridShape = tuple[int | None, ...]



def _comm(trusted: bool) -> Comm:
    c = current_comm()
    return c.trusted() if trusted else c


def _grid(shape: GridShape) -> tuple[int, ...]:
    return resolve_grid(shape, current_comm().size)


def grid_shape(shape: GridShape, axes: tuple[int, ...]) -> tuple[int, ...]:
    g = _grid(shape)
    return tuple(g[a] for a in axes) if axes else g


def process_multi_index(shape: GridShape, axes: tuple[int, ...]) -> tuple[int, ...]:
    c = current_comm()
    return c.process_multi_index(resolve_grid(shape, c.size), axes or None)


def process_linear_index(shape: GridShape) -> int:
    c = current_comm()
    return c.process_linear_index(resolve_grid(shape, c.size))


def neighbors(shape: GridShape, device: Sequence[int], axes: tuple[int, ...]) -> tuple[int, int]:
    """World ranks of the previous and next device of `device` along `axes` (-1: none)."""
    g = _grid(shape)
    if len(device) != len(g):
        raise CommError(f"neighbors_linear_indices: {len(device)} indices for a grid of rank {len(g)}")
    k = in_group_index(g, axes, device)
    members = group_members(g, axes, device)
    down = members[k - 1] if k > 0 else -1
    up = members[k + 1] if k + 1 < len(members) else -1
    return down, up


def make_sharding(grid: str, shape: GridShape, split_axes: tuple[tuple[int, ...], ...], halos: Sequence[int], offsets: Sequence[int]) -> RuntimeSharding:
    return RuntimeSharding(grid, shape, split_axes, tuple(int(h) for h in halos), tuple(int(o) for o in offsets))


def shard_shape(dims: Sequence[int], sharding: RuntimeSharding, device: Sequence[int]) -> tuple[int, ...]:
    g = _grid(sharding.grid_shape)
    return sharding.local_shape([int(d) for d in dims], g, [int(d) for d in device])


def all_reduce(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], kind: str, dt: np.dtype, trusted: bool = False) -> np.ndarray:
    c = _comm(trusted)
    return c.all_reduce(np.asarray(x).astype(dt, copy=False), resolve_grid(shape, c.size), axes, kind)


def all_gather(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], axis: int, trusted: bool = False) -> np.ndarray:
    c = _comm(trusted)
    return c.all_gather(x, resolve_grid(shape, c.size), axes, axis)


def all_slice(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], axis: int) -> np.ndarray:
    c = current_comm()
    return c.all_slice(x, resolve_grid(shape, c.size), axes, axis)


def all_to_all(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], split: int, concat: int, trusted: bool = False) -> np.ndarray:
    c = _comm(trusted)
    return c.all_to_all(x, resolve_grid(shape, c.size), axes, split, concat)


def reduce_scatter(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], axis: int, kind: str, dt: np.dtype, trusted: bool = False) -> np.ndarray:
    c = _comm(trusted)
    return c.reduce_scatter(np.asarray(x).astype(dt, copy=False), resolve_grid(shape, c.size), axes, axis, kind)


def start_all_reduce(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], kind: str, dt: np.dtype, trusted: bool = False) -> Pending:
    if not overlap_run.enabled():
        return Pending.completed(all_reduce(x, shape, axes, kind, dt, trusted))
    c = _comm(trusted)
    return overlap_run.launch(c.iall_reduce(np.asarray(x).astype(dt, copy=False), resolve_grid(shape, c.size), axes, kind))


def start_reduce_scatter(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], axis: int, kind: str, dt: np.dtype, trusted: bool = False) -> Pending:
    if not overlap_run.enabled():
        return Pending.completed(reduce_scatter(x, shape, axes, axis, kind, dt, trusted))
    c = _comm(trusted)
    return overlap_run.launch(c.ireduce_scatter(np.asarray(x).astype(dt, copy=False), resolve_grid(shape, c.size), axes, axis, kind))


def start_all_gather(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], axis: int, trusted: bool = False) -> Pending:
    if not overlap_run.enabled():
        return Pending.completed(all_gather(x, shape, axes, axis, trusted))
    c = _comm(trusted)
    return overlap_run.launch(c.iall_gather(x, resolve_grid(shape, c.size), axes, axis))


def broadcast(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], root: Sequence[int], trusted: bool = False) -> np.ndarray:
    c = _comm(trusted)
    return c.broadcast(x, resolve_grid(shape, c.size), axes, [int(r) for r in root])


def gather(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], axis: int, root: Sequence[int], trusted: bool = False) -> np.ndarray:
    c = _comm(trusted)
    return c.gather(x, resolve_grid(shape, c.size), axes, axis, [int(r) for r in root])


def reduce(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], root: Sequence[int], kind: str, dt: np.dtype, trusted: bool = False) -> np.ndarray:
    c = _comm(trusted)
    return c.reduce(np.asarray(x).astype(dt, copy=False), resolve_grid(shape, c.size), axes, [int(r) for r in root], kind)


def scatter(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], axis: int, root: Sequence[int], trusted: bool = False) -> np.ndarray:
    c = _comm(trusted)
    return c.scatter(x, resolve_grid(shape, c.size), axes, axis, [int(r) for r in root])


def send(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], dest: Sequence[int]) -> np.ndarray:
    c = current_comm()
    c.send(x, resolve_grid(shape, c.size), axes, [int(d) for d in dest])
    return x


def recv(like: np.ndarray, shape: GridShape, axes: tuple[int, ...], source: Sequence[int] | None) -> np.ndarray:
    c = current_comm()
    return c.recv(like, resolve_grid(shape, c.size), axes, None if source is None else [int(s) for s in source])


def shift(x: np.ndarray, shape: GridShape, axes: tuple[int, ...], axis: int, offset: int, rotate: bool) -> np.ndarray:
    c = current_comm()
    return c.shift(x, resolve_grid(shape, c.size), axes, axis, offset, rotate)


def update_halo(x: np.ndarray, shape: GridShape, split_axes: tuple[tuple[int, ...], ...], halos: Sequence[int], in_place: bool) -> np.ndarray:
    """Fill the halos of `x` from the neighbours' cores, split dims from the last to the
    first; the blocks exchanged for a dim span the halos of the dims after it (already
    updated) and the cores of the dims before it, so corners come out right."""
    c = current_comm()
    g = resolve_grid(shape, c.size)
    me = c.process_multi_index(g)
    arr = x if in_place else np.array(x, copy=True)
    split = [d for d, axes in enumerate(split_axes) if axes]
    if not halos:
        return arr
    if len(halos) != 2 * len(split):
        raise CommError(f"update_halo: {len(halos)} halo sizes for {len(split)} split dimensions")
    core = [slice(None)] * arr.ndim
    for k, d in enumerate(split):
        lo, hi = int(halos[2 * k]), int(halos[2 * k + 1])
        core[d] = slice(lo, arr.shape[d] - hi)
    for k in reversed(range(len(split))):
        d = split[k]
        lo, hi = int(halos[2 * k]), int(halos[2 * k + 1])
        down, up = neighbors(shape, me, split_axes[d])
        n = arr.shape[d]

        def block(start: int, stop: int) -> tuple[slice, ...]:
            idx = list(core)
            idx[d] = slice(start, stop)
            return tuple(idx)

        if hi > 0:  # my upper halo comes from the core start of the device above
            got = c.sendrecv(arr[block(lo, lo + hi)] if down >= 0 else None, down if down >= 0 else None, arr[block(n - hi, n)], up if up >= 0 else None)
            if got is not None:
                arr[block(n - hi, n)] = got
        if lo > 0:  # my lower halo comes from the core end of the device below
            got = c.sendrecv(arr[block(n - hi - lo, n - hi)] if up >= 0 else None, up if up >= 0 else None, arr[block(0, lo)], down if down >= 0 else None)
            if got is not None:
                arr[block(0, lo)] = got
        core[d] = slice(None)
    return arr
