"""tm_tensor.scatter and tm_tensor.scan on numpy.

Scatter: whole-array fancy indexing, no loop over single updates.

The positions of all updates are computed at once (index arrays broadcast over the update
shape). The region decides how they are written: `yield %update` is an assignment
(`out[pos] = upd`), a single commutative-or-ordered arith op of (current, update) a
`ufunc.at` (unbuffered, so repeated positions accumulate; the scatter-add of an
embedding's backward, whole rows, adds the k-th update of every row at once instead:
`_add_rows`); any other body is evaluated on whole arrays and assigned, which is exact
only when positions do not repeat, so it needs `unique_indices(true)`.

Scan: a region that is one arith op of (previous, current) is its ufunc's `accumulate`
along the dimension (`np.add.accumulate` is `np.cumsum`; sequential, so the sums are
the scalar definition's, in its order); exclusive scans accumulate the initial
accumulator followed by all but the last input slice. Any other region steps along the
scan dimension with the body evaluated on whole slices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import i1
from xdsl.ir import Operation

from shardc.dialects.tm_tensor import ScanOp, ScatterOp, YieldOp
from shardc.runtime.compile import FunctionBuilder, compile_error, register, single_block
from shardc.runtime.structured import _emit_body_fn  # pyright: ignore[reportPrivateUsage]

# region op (current, update) -> the ufunc whose `.at` applies it in place
_UFUNCS = {
    "arith.addf": np.add,
    "arith.addi": np.add,
    "arith.mulf": np.multiply,
    "arith.muli": np.multiply,
    "arith.maximumf": np.maximum,
    "arith.maxnumf": np.fmax,
    "arith.maxsi": np.maximum,
    "arith.minimumf": np.minimum,
    "arith.minnumf": np.fmin,
    "arith.minsi": np.minimum,
    "arith.ori": np.bitwise_or,
    "arith.andi": np.bitwise_and,
    "arith.xori": np.bitwise_xor,
}
_COMMUTATIVE = {name for name in _UFUNCS}
_ORDERED = {"arith.subf": np.subtract, "arith.subi": np.subtract}  # current - update only


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
    if ufunc is np.add and _add_rows(out, upd, indices, dims):
        return out
    pos = scatter_positions(indices, upd.shape, orig.ndim, dims)
    ufunc.at(out, tuple(np.broadcast_to(p, upd.shape) for p in pos), upd)
    return out


def _add_rows(out: np.ndarray, upd: np.ndarray, indices: np.ndarray, dims: Sequence[int]) -> bool:
    """`out[row(i)] += upd[i]` where every update is one whole row of `out` seen as
    (leading dims) x (the rest) at an in-bounds position: the embedding backward's form
    (`updates: N x 1 x C, dimension_map [0]` into `V x C`). Exactly `add.at`'s sums, in
    its order (each row gets its updates one after another, as they come), but row-wise:
    the k-th update of every row is added in one fancy-indexed step (those rows are
    distinct), so a batch costs as many steps as a row repeats, not one per element.
    Returns False (nothing written) where that does not apply or a row repeats more
    than `_MAX_REPEATS` times; `ufunc.at` then does it and raises on bad indices."""
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
    if repeats > _MAX_REPEATS:
        return False
    nth = np.arange(n) - np.repeat(starts, counts)  # which update of its row each is
    by_nth = order[np.argsort(nth, kind="stable")]  # the first updates, the second ...
    bounds = np.searchsorted(np.sort(nth), np.arange(repeats + 1))
    for j in range(repeats):
        sel = by_nth[bounds[j] : bounds[j + 1]]
        flat[rows[sel]] += src[sel]  # distinct rows: one add per element, in order
    return True


_MAX_REPEATS = 64
"""Rows repeated more often than this scatter with `add.at` (one step per repeat would
cost more than its per-element loop)."""


def scatter_body(body, upd: np.ndarray, indices: np.ndarray, orig: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    out = orig.copy()
    pos = scatter_positions(indices, upd.shape, orig.ndim, dims)
    (new,) = body(upd, orig[pos], None)
    out[pos] = new
    return out


def _combiner(op: ScatterOp) -> tuple[str, object] | None:
    """("assign", None), ("keep", None), ("ufunc", np.ufunc) or None (a general body)."""
    block = single_block(op.region)
    upd, cur = block.args
    term = block.last_op
    assert isinstance(term, YieldOp)
    (y,) = term.operands
    if y is upd:
        return ("assign", None)
    if y is cur:
        return ("keep", None)
    ops = list(block.ops)
    if len(ops) == 2 and ops[0].results and y is ops[0].results[0] and len(ops[0].operands) == 2:
        a, b = ops[0].operands
        name = ops[0].name
        if name in _COMMUTATIVE and {a, b} == {upd, cur}:
            return ("ufunc", _UFUNCS[name])
        if name in _ORDERED and (a, b) == (cur, upd):
            return ("ufunc", _ORDERED[name])
    return None


@register(ScatterOp)
def _scatter(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, ScatterOp)
    if not op.results_:
        raise compile_error(op, "tm_tensor.scatter on memrefs is not supported by the numpy runtime")
    upd, ind, orig = g.vs([op.updates, op.indices, op.original])
    dims = repr(op.dims)
    kind = _combiner(op)
    if kind is None:
        if not op.unique:
            raise compile_error(
                op,
                "tm_tensor.scatter with repeated indices needs a region that is one arith op of "
                "(current, update) or a plain assignment; this region is not supported",
            )
        block = single_block(op.region)
        term = block.last_op
        assert term is not None
        fn = _emit_body_fn(g, block, 2, list(term.operands), False)
        g.assign(op, f"{g.const(scatter_body, 'scatter_body')}({fn}, {upd}, {ind}, {orig}, {dims})")
    elif kind[0] == "keep":
        g.bind(op.results[0], orig)
    elif kind[0] == "assign":
        g.assign(op, f"{g.const(scatter_assign, 'scatter_assign')}({upd}, {ind}, {orig}, {dims})")
    else:
        uf = g.const(kind[1], "ufunc")
        g.assign(op, f"{g.const(scatter_ufunc, 'scatter_ufunc')}({uf}, {upd}, {ind}, {orig}, {dims})")


# -- scan ----------------------------------------------------------------------------------


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
    return out, _last_step(out, acc, dim)


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
    return out, _last_step(out, acc, dim)


def _last_step(out: np.ndarray, acc: np.ndarray, dim: int) -> np.ndarray:
    """The accumulator result: the last slice, written only by steps after the first."""
    n = out.shape[dim]
    return out.take(n - 1, axis=dim) if n > 1 else np.array(acc, dtype=out.dtype, copy=True)


def scan_ufunc_of(op: ScanOp) -> np.ufunc | None:
    """The ufunc whose `accumulate` is `op`'s region (its combiner: commutative ones in
    either order, subtraction as previous - current), or None."""
    combiner = op.combiner()
    if combiner is None or combiner.results[0].type == i1:
        return None  # i1's wrapping and signed orders are not numpy's bool ufuncs'
    if combiner.name in _COMMUTATIVE:
        return _UFUNCS[combiner.name]
    if combiner.name in _ORDERED and tuple(combiner.operands) == tuple(op.region.block.args):
        return _ORDERED[combiner.name]
    return None


@register(ScanOp)
def _scan(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, ScanOp)
    if len(op.results_) != 2:
        raise compile_error(op, "tm_tensor.scan on memrefs is not supported by the numpy runtime")
    x, acc = g.vs([op.input, op.accumulator])
    args = f"{x}, {acc}, {op.dim}, {op.is_inclusive}"
    ufunc = scan_ufunc_of(op)
    if ufunc is not None:
        call = f"{g.const(scan_ufunc, 'scan_ufunc')}({g.const(ufunc, 'ufunc')}, {args})"
    else:
        block = single_block(op.region)
        term = block.last_op
        assert term is not None
        fn = _emit_body_fn(g, block, 2, list(term.operands), False)
        call = f"{g.const(scan_body, 'scan_body')}({fn}, {args})"
    out, last = g.res(op, 0), g.res(op, 1)
    g.emit(f"{out}, {last} = {call}")
