"""The run time of `tensor.extract` inside vectorized linalg bodies: `gather`, what the
code `codegen/kernels/tensor.py` emits calls."""

from __future__ import annotations

import numpy as np

from shardc.runtime.execute.compiled import RuntimeExecutionError


def gather(t: np.ndarray, idx: tuple[object, ...], grid_dims: tuple[int | None, ...], where: str) -> np.ndarray:
    """`t[idx]` for indices vectorized over a linalg body's loops: arrays in loop order
    (broadcastable), ints, and `linalg.index` grids (`grid_dims`: the loop dim of each,
    else None). A grid spanning its whole axis is read as a slice, so an embedding
    lookup `t[tok, index(d)]` gathers rows (`t[tok]`) instead of single elements.
    Indices out of bounds raise, with the op's location."""
    for k, i in enumerate(idx):
        n = t.shape[k]
        if isinstance(i, np.ndarray):
            lo, hi = (int(i.min()), int(i.max())) if i.size else (0, 0)
            if lo < 0 or hi >= n:
                bad = lo if lo < 0 else hi
                raise RuntimeExecutionError(f"runtime: {where}: index {bad} out of bounds for dimension {k} of size {n}")
        elif not 0 <= int(i) < n:  # type: ignore[call-overload]
            raise RuntimeExecutionError(f"runtime: {where}: index {i} out of bounds for dimension {k} of size {n}")
    rows = row_gather(t, idx, grid_dims)
    return rows if rows is not None else t[idx]


def row_gather(t: np.ndarray, idx: tuple[object, ...], grid_dims: tuple[int | None, ...]) -> np.ndarray | None:
    """The gather with full-axis grids as slices, or None where that does not apply."""
    grids = [k for k, d in enumerate(grid_dims) if d is not None]
    if not grids:
        return None
    g0 = idx[grids[0]]
    n = g0.ndim if isinstance(g0, np.ndarray) else -1
    dims: list[int] = []
    for k in grids:
        i, d = idx[k], grid_dims[k]
        if not isinstance(i, np.ndarray) or i.ndim != n or i.shape[d] != t.shape[k] or i.size != i.shape[d]:  # type: ignore[index]
            return None
        dims.append(d)  # type: ignore[arg-type]
    if len(set(dims)) != len(dims):
        return None
    rest = [k for k in range(len(idx)) if k not in grids]
    others = [np.shape(idx[k]) for k in rest]
    if any(len(s) > n for s in others):
        return None
    shape = np.broadcast_shapes((1,) * n, *others)
    if any(shape[d] != 1 for d in dims):
        return None  # another index varies along a grid's dim
    src = t.transpose(rest + grids) if rest + grids != list(range(t.ndim)) else t
    r = src[tuple(idx[k] for k in rest)] if rest else src  # shape + the grid axes
    if not rest:
        r = r.reshape((1,) * n + r.shape)
    kept = [d for d in range(n) if d not in dims]
    r = r.reshape([shape[d] for d in kept] + [t.shape[k] for k in grids])
    pos = {d: j for j, d in enumerate(kept + dims)}
    return r.transpose([pos[d] for d in range(n)])
