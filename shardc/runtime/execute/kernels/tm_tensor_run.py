"""The run time of `tm_tensor.scatter` and `tm_tensor.scan` (what the code
`codegen/kernels/tm_tensor.py` emits calls): scatters by whole-array fancy indexing or a
ufunc's `.at`, scans by a ufunc's `accumulate` or one body evaluation per step."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def scatter_positions(indices: np.ndarray, upd_shape: Sequence[int], orig_rank: int, dims: Sequence[int]) -> tuple[np.ndarray | int, ...]:
    """One index array per dimension of the original, broadcastable to `upd_shape`."""
    n, *slice_shape = upd_shape
    offset = orig_rank - len(slice_shape)
    rank = len(upd_shape)
    pos: list[np.ndarray | int] = [0] * orig_rank
    for d in range(offset, orig_rank):
        shape = [1] * rank
        shape[1 + d - offset] = slice_shape[d - offset]
        pos[d] = np.arange(slice_shape[d - offset]).reshape(shape)
    col_shape = [n] + [1] * (rank - 1)
    for i, d in enumerate(dims):
        pos[d] = pos[d] + indices[:, i].astype(np.intp).reshape(col_shape)
    return tuple(pos)


def scatter_assign(upd: np.ndarray, indices: np.ndarray, orig: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    out = orig.copy()
    out[scatter_positions(indices, upd.shape, orig.ndim, dims)] = upd
    return out


def scatter_ufunc(ufunc: np.ufunc, upd: np.ndarray, indices: np.ndarray, orig: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    out = orig.copy()
    if ufunc is np.add and add_rows(out, upd, indices, dims):
        return out
    pos = scatter_positions(indices, upd.shape, orig.ndim, dims)
    ufunc.at(out, tuple(np.broadcast_to(p, upd.shape) for p in pos), upd)
    return out


def add_rows(out: np.ndarray, upd: np.ndarray, indices: np.ndarray, dims: Sequence[int]) -> bool:
    """`out[row(i)] += upd[i]` where every update is one whole row of `out` seen as
    (leading dims) x (the rest) at an in-bounds position: the embedding backward's form
    (`updates: N x 1 x C, dimension_map [0]` into `V x C`). Exactly `add.at`'s sums, in
    its order (each row gets its updates one after another, as they come), but row-wise:
    the k-th update of every row is added in one fancy-indexed step (those rows are
    distinct), so a batch costs as many steps as a row repeats, not one per element.
    Returns False (nothing written) where that does not apply or a row repeats more
    than `MAX_REPEATS` times; `ufunc.at` then does it and raises on bad indices."""
    n, *slice_shape = upd.shape
    offset = out.ndim - len(slice_shape)
    if n == 0 or len(set(dims)) != len(dims):
        return False
    k = max([offset - 1, *dims]) + 1  # the row dims: 0 .. k-1
    if any(d >= offset and (d not in dims or slice_shape[d - offset] != 1) for d in range(k)):
        return False
    if tuple(slice_shape[k - offset :]) != out.shape[k:]:
        return False
    cols = [indices[:, list(dims).index(d)].astype(np.int64) if d in dims else np.zeros(n, np.int64) for d in range(k)]
    for d, c in enumerate(cols):
        if int(c.min()) < 0 or int(c.max()) >= out.shape[d]:
            return False
    rows = np.ravel_multi_index(cols, out.shape[:k]) if k else np.zeros(n, np.int64)
    width = math.prod(out.shape[k:])
    flat = out.reshape(math.prod(out.shape[:k]), width)
    src = upd.reshape(n, width)
    if flat.shape[0] <= 8 * n and int(np.bincount(rows, minlength=1).max()) == 1:
        # every row once (a max pool's gradient, windows not overlapping): one step,
        # found by counting instead of sorting
        flat[rows] += src
        return True
    order = np.argsort(rows, kind="stable")  # by row, each row's updates in order
    srt = rows[order]
    starts = np.flatnonzero(np.concatenate(([True], srt[1:] != srt[:-1])))
    counts = np.diff(np.append(starts, n))
    repeats = int(counts.max())
    if repeats > MAX_REPEATS:
        return False
    nth = np.arange(n) - np.repeat(starts, counts)  # which update of its row each is
    by_nth = order[np.argsort(nth, kind="stable")]  # the first updates, the second ...
    bounds = np.searchsorted(np.sort(nth), np.arange(repeats + 1))
    for j in range(repeats):
        sel = by_nth[bounds[j] : bounds[j + 1]]
        flat[rows[sel]] += src[sel]  # distinct rows: one add per element, in order
    return True


MAX_REPEATS = 64
"""Rows repeated more often than this scatter with `add.at` (one step per repeat would
cost more than its per-element loop)."""


def scatter_body(body, upd: np.ndarray, indices: np.ndarray, orig: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    out = orig.copy()
    pos = scatter_positions(indices, upd.shape, orig.ndim, dims)
    (new,) = body(upd, orig[pos], None)
    out[pos] = new
    return out


def scan_ufunc(ufunc: np.ufunc, x: np.ndarray, acc: np.ndarray, dim: int, inclusive: bool) -> tuple[np.ndarray, np.ndarray]:
    """(output, accumulator) of a scan whose region is `ufunc(previous, current)`."""
    n = x.shape[dim]
    if n == 0:
        return x.copy(), acc.copy()
    if inclusive:
        out = ufunc.accumulate(x, axis=dim, dtype=x.dtype)
    else:
        head = np.expand_dims(np.asarray(acc, dtype=x.dtype), dim)
        out = ufunc.accumulate(np.concatenate([head, x.take(range(n - 1), axis=dim)], axis=dim), axis=dim, dtype=x.dtype)
    return out, last_step(out, acc, dim)


def scan_body(body, x: np.ndarray, acc: np.ndarray, dim: int, inclusive: bool) -> tuple[np.ndarray, np.ndarray]:
    """The same for any region: one body evaluation per step, on whole slices."""
    n = x.shape[dim]
    if n == 0:
        return x.copy(), acc.copy()
    xs = np.moveaxis(x, dim, 0)
    out = np.empty_like(xs)
    prev = xs[0] if inclusive else np.asarray(acc, dtype=x.dtype)
    out[0] = prev
    for i in range(1, n):
        (prev,) = body(out[i - 1], xs[i] if inclusive else xs[i - 1], None)
        out[i] = prev
    out = np.moveaxis(out, 0, dim)
    return out, last_step(out, acc, dim)


def last_step(out: np.ndarray, acc: np.ndarray, dim: int) -> np.ndarray:
    """The accumulator result: the last slice, written only by steps after the first."""
    n = out.shape[dim]
    return out.take(n - 1, axis=dim) if n > 1 else np.array(acc, dtype=out.dtype, copy=True)
