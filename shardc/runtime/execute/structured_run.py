"""The run time of linalg structured ops (`structured.py` emits them): the
`StructuredSpec` a generated function passes to `run_structured`, its aligners, the
contraction, reduction and one-hot plans, and the BLAS paths. No xDSL here, so a
compile-cache hit loads none; structured.py re-exports every name."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from shardc.runtime.execute.kernels.bf16_run import is_bfloat16
from shardc.runtime.execute.kernels import blas
from shardc.runtime.execute.kernels.bf16_gemm import matmul as bf16_matmul
from shardc.runtime.execute.kernels.fused_run import FusedKernel

Map = tuple[int | None, ...]  # per operand axis: loop dim, or None for the constant 0

MAX_CACHED_LAYOUTS = 4096
"""Decisions kept per operand layout (`sum_axes`): a step's call sites see the same
shapes and strides every step, so each is decided once; past this many the table is
emptied (a program whose shapes keep changing decides afresh). 0: decide every call."""
MAX_CACHED_SHAPES = 64
"""Loop sizes kept per contraction plan (`MatmulPlan.shapes`); 0: every call."""


# ---------------------------------------------------------------------------------------
# Runtime side
# ---------------------------------------------------------------------------------------


@dataclass
class Aligner:
    """Brings an operand (laid out by its map) into loop order with size-1 missing dims."""

    take: tuple[object, ...] | None  # index for constant-0 axes (None: no such axis)
    perm: tuple[int, ...] | None  # transpose of the remaining axes into increasing loop dim
    expand: tuple[int, ...]  # axes to insert (loop dims the operand lacks)
    insert: tuple[object, ...] | None = None  # the index inserting them (np.newaxis)

    @staticmethod
    def build(m: Map, n_loops: int) -> Aligner:
        take = tuple(0 if d is None else slice(None) for d in m) if None in m else None
        dims = [d for d in m if d is not None]
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        perm = tuple(order) if order != list(range(len(dims))) else None
        expand = tuple(d for d in range(n_loops) if d not in dims)
        insert = tuple(None if d in expand else slice(None) for d in range(n_loops)) if expand else None
        return Aligner(take, perm, expand, insert)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.take is not None:
            x = x[self.take]
        if self.perm is not None:
            x = x.transpose(self.perm)
        if self.insert is not None:
            x = x[self.insert]
        return x


@dataclass
class Unaligner:
    """Turns a loop-order array (size 1 at non-output dims) into the output's layout."""

    squeeze: tuple[int, ...]
    perm: tuple[int, ...] | None
    take_shape: bool  # output has constant-0 axes: reshape needed
    out_dims: Map

    @staticmethod
    def build(m: Map, n_loops: int) -> Unaligner:
        dims = [d for d in m if d is not None]
        squeeze = tuple(d for d in range(n_loops) if d not in dims)
        srt = sorted(dims)
        perm = tuple(srt.index(d) for d in dims)
        return Unaligner(squeeze, perm if list(perm) != list(range(len(perm))) else None, None in m, m)

    @property
    def identity(self) -> bool:
        return not self.squeeze and self.perm is None and not self.take_shape

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.squeeze:
            x = x.reshape([s for i, s in enumerate(x.shape) if i not in self.squeeze])
        if self.perm is not None:
            x = x.transpose(self.perm)
        if self.take_shape:
            x = np.expand_dims(x, tuple(i for i, d in enumerate(self.out_dims) if d is None))
        return x


@dataclass
class StructuredSpec:
    """Everything about one structured op that does not depend on runtime shapes."""

    kind: str  # elementwise | contraction | reduction | argreduce | firstmatch | general
    n_loops: int
    red_dims: tuple[int, ...]
    size_src: tuple[tuple[int, int], ...]  # per loop dim: (operand, axis)
    in_align: list[Aligner | None]  # None: scalar operand
    out_align: list[Aligner]
    out_unalign: list[Unaligner]
    out_dtypes: list[np.dtype]
    out_is_tensor: list[bool]
    uses_index: bool
    n_ins: int
    # contraction
    in_maps: list[Map] = field(default_factory=list)
    out_map: Map = ()
    factor_inputs: list[int] = field(default_factory=list)  # input index per factor
    # reduction
    combiners: list[tuple[Callable[..., np.ndarray], Callable[..., np.ndarray], bool]] = field(default_factory=list)
    name: str = ""
    zero_init: bool = False  # the init is known to be zeros (a fill of 0): skip adding it
    plan: ContractionPlan | None = None
    onehot: OneHotUse | None = None  # a one-hot input run as a gather / scatter-add
    stack: tuple[int, tuple[int, ...]] | None = None  # (loop dim, input per index): see _stack_cases
    arg: ArgReduce | None = None  # the arg-reduction's facts (kind "argreduce")
    fused: FusedKernel | None = None  # the body as compiled loop nests (kernels/fused.py)
    inplace: tuple[tuple[int, int], ...] = ()  # (result, input) written over a donated input (runtime/donation.py)
    out_layout: tuple[int, ...] | None = None  # contraction: memory order of the result's axes
    sentinel: object = None  # first match: the init value that means "not found yet"
    windowed: bool = False  # an input is a window view (`contract2`, `_reduce_points`)
    init_inplace: bool = False  # contraction / reduction: the result is written into its init, a donated buffer (fusion.fuse_accumulations)
    widened: tuple[int, ...] = ()  # contraction: leaves whose body's extf bf16 -> f32 is left to `_widen` (bf16 GEMM)

    # -- shapes ----------------------------------------------------------------------
    def sizes(self, operands: Sequence[np.ndarray]) -> tuple[int, ...]:
        return tuple([operands[i].shape[k] for i, k in self.size_src])  # a list: faster than a generator

    def index_grids(self, sizes: Sequence[int]) -> list[np.ndarray]:
        n = len(sizes)
        return [np.arange(s, dtype=np.int64).reshape([s if j == d else 1 for j in range(n)]) for d, s in enumerate(sizes)]


def _finish(spec: StructuredSpec, vals: Sequence[object], outs: Sequence[np.ndarray], sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    """Write loop-order values into outputs: new arrays for tensors, in place for memrefs."""
    results: list[np.ndarray] = []
    for k, v in enumerate(vals):
        un = spec.out_unalign[k]
        if spec.out_is_tensor[k] and un.identity and type(v) is np.ndarray and v.shape == outs[k].shape:
            results.append(v if v.dtype == spec.out_dtypes[k] else v.astype(spec.out_dtypes[k]))
            continue  # the common case: the body computed the whole result already
        shape = tuple(1 if d in un.squeeze else sizes[d] for d in range(spec.n_loops))
        arr = np.asarray(v)
        if arr.shape != shape:
            arr = np.broadcast_to(arr, shape)
        res = un(arr)
        if spec.out_is_tensor[k]:
            results.append(res.astype(spec.out_dtypes[k], copy=False))
        else:
            outs[k][...] = res
    return tuple(results)


def run_structured(
    spec: StructuredSpec, body: Callable[..., tuple[object, ...]], ins: Sequence[object], outs: Sequence[np.ndarray], aux: Sequence[np.ndarray] = ()
) -> tuple[np.ndarray, ...]:
    """Run one structured op; `aux` holds the (tokens, ids) of a one-hot input whose
    producer was not emitted (`spec.onehot`), that input being None in `ins`."""
    if spec.onehot is not None:
        ins = list(ins)
        ins[spec.onehot.input] = spec.onehot.placeholder(aux[0], aux[1])
    sizes = spec.sizes([*ins, *outs])  # type: ignore[list-item]
    if spec.kind == "contraction":
        return _run_contraction(spec, body, ins, outs, sizes, aux)
    aligned_in = [a(x) if a is not None else x for a, x in zip(spec.in_align, ins)]  # type: ignore[arg-type]
    ix = spec.index_grids(sizes) if spec.uses_index else None
    if spec.kind == "elementwise":
        if spec.stack is not None and sizes[spec.stack[0]] == len(spec.stack[1]):
            return _finish(spec, _write_donated(spec, [_run_stack(spec, aligned_in, sizes)], aligned_in), outs, sizes)
        aligned_out = [a(x) for a, x in zip(spec.out_align, outs)]
        if spec.fused is not None and (vals := spec.fused([*aligned_in, *aligned_out], sizes)) is not None:
            return _finish(spec, _write_donated(spec, vals, aligned_in), outs, sizes)
        return _finish(spec, _write_donated(spec, body(*aligned_in, *aligned_out, ix), aligned_in), outs, sizes)
    if spec.kind == "reduction":
        exprs = body(*aligned_in, ix)
        vals = []
        full = tuple(sizes)
        for k, (red, comb, unsigned) in enumerate(spec.combiners):
            dt = spec.out_dtypes[k]
            e = np.asarray(exprs[k], dtype=dt)
            if e.shape != full:
                e = np.broadcast_to(e, full)
            init = spec.out_align[k](outs[k])
            if unsigned:
                from shardc.runtime.execute.helpers import uview

                r = red(uview(e, dt), axis=spec.red_dims, keepdims=True)
                vals.append(comb(uview(init, dt), r).view(dt))
            elif spec.windowed and 1 < math.prod(full[d] for d in spec.red_dims) <= MAX_WINDOW_POINTS:
                vals.append(_reduce_points(init, e, spec.red_dims, comb, dt))
            else:
                if dt.kind == "V" and is_bfloat16(dt) and red in _WIDENED_REDUCES:
                    # bf16 in float32, rounded once: numpy's bf16 reduce rounds at every step
                    # and ran 30x slower than widening (sum of 1M elements; max/min are exact)
                    f32 = np.dtype(np.float32)
                    w = e.astype(f32)
                    r = (sum_axes(w, spec.red_dims, f32, keepdims=True) if red == np.add.reduce else red(w, axis=spec.red_dims, keepdims=True)).astype(dt)
                elif red == np.add.reduce:
                    r = sum_axes(e, spec.red_dims, dt, keepdims=True)
                elif (red == np.maximum.reduce or red == np.minimum.reduce) and _inner_axis(e, spec.red_dims):
                    # argmax + gather: 1.7-2.9x faster than maximum.reduce along a unit-stride
                    # last axis (softmax's row max; measured), the same value, NaN included
                    find = np.argmax if red == np.maximum.reduce else np.argmin
                    r = np.take_along_axis(e, find(e, axis=-1, keepdims=True), axis=-1)
                else:
                    r = red(e, axis=spec.red_dims, keepdims=True, dtype=dt)
                if spec.init_inplace and init.flags.writeable and init.dtype == dt:
                    comb(init, r, out=init)  # a donated accumulator takes the sum
                    return (outs[0],)
                vals.append(comb(init, r))
        return _finish(spec, vals, outs, sizes)
    if spec.kind == "argreduce":
        return _run_argreduce(spec, body, aligned_in, outs, sizes)
    if spec.kind == "firstmatch":
        return _run_first_match(spec, body(*aligned_in, ix), outs, sizes)
    return _run_general(spec, body, aligned_in, outs, sizes)


def _run_first_match(spec: StructuredSpec, found: Sequence[object], outs: Sequence[np.ndarray], sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    """`select(out == C, select(cond, e, out), out)` over the reduction points in loop
    order: where the init is C, `e` at the first point where cond holds and `e` is not C
    (one that is C leaves the output C, so the search goes on), else C."""
    dt = spec.out_dtypes[0]
    full = tuple(sizes)
    cond = np.broadcast_to(np.asarray(found[0], dtype=bool), full)
    e = np.broadcast_to(np.asarray(found[1], dtype=dt), full)
    c = dt.type(spec.sentinel)
    hit = cond & (e != c)
    n = spec.n_loops
    par = [d for d in range(n) if d not in spec.red_dims]
    order = [*par, *spec.red_dims]
    r = math.prod(sizes[d] for d in spec.red_dims)
    flat_hit = hit.transpose(order).reshape(*(sizes[d] for d in par), r)
    flat_e = e.transpose(order).reshape(*(sizes[d] for d in par), r)
    first = np.argmax(flat_hit, axis=-1)[..., None]
    value = np.where(np.take_along_axis(flat_hit, first, -1), np.take_along_axis(flat_e, first, -1), c)[..., 0]
    value = np.expand_dims(value, tuple(spec.red_dims))  # loop order, size 1 on the reduction dims
    init = spec.out_align[0](outs[0])
    return _finish(spec, [np.where(init != c, init, value).astype(dt, copy=False)], outs, sizes)


_WIDENED_REDUCES = (np.add.reduce, np.maximum.reduce, np.minimum.reduce, np.fmax.reduce, np.fmin.reduce)
"""The reductions `run_structured` runs on bf16 in float32."""

MAX_WINDOW_POINTS = 64
"""A reduction over a window view (pooling) with at most this many window positions
combines one whole-array slice per position; numpy's reduce over the short, strided
window axes ran 3-4x slower than PyTorch's pooling (measured, 2x2 and 3x3 windows)."""


def _reduce_points(init: np.ndarray, e: np.ndarray, axes: Sequence[int], comb: Callable[..., np.ndarray], dt: np.dtype) -> np.ndarray:
    """`init` combined by the binary `comb` with `e`'s slices at each point of `axes`
    (kept, size 1), in loop order: the op's own sequence."""
    points = itertools.product(*(range(e.shape[a]) for a in axes))

    def at(point: tuple[int, ...]) -> np.ndarray:
        index: list[object] = [slice(None)] * e.ndim
        for a, p in zip(axes, point):
            index[a] = slice(p, p + 1)
        return e[tuple(index)]

    r = comb(init, at(next(points)))
    if r.dtype != dt:
        r = r.astype(dt)
    for point in points:
        comb(r, at(point), out=r)
    return r


def _inner_axis(e: np.ndarray, axes: Sequence[int]) -> bool:
    """Whether `axes` is the last axis alone, of unit stride and not empty, on floats."""
    return len(axes) == 1 and e.ndim > 0 and axes[0] == e.ndim - 1 and e.shape[-1] > 0 and e.strides[-1] == e.itemsize and e.dtype.kind == "f"


def _write_donated(spec: StructuredSpec, vals: Sequence[object], ins: Sequence[object]) -> Sequence[object]:
    """The results, those written in place (`spec.inplace`) as their donated input: an
    in-place fused kernel wrote it already, any other path is copied into it (every
    result is computed before the first copy, so no input is read once written)."""
    if not spec.inplace:
        return vals
    vals = list(vals)
    for j, k in spec.inplace:
        dst = ins[k]
        if vals[j] is not dst:
            np.copyto(dst, vals[j])  # type: ignore[arg-type]
            vals[j] = dst
    return vals


@dataclass(frozen=True)
class ArgReduce:
    """`yield comb(out_v, e), select(cmp(e, out_v), index(dim), out_i)`: the running
    extremum of `e` along `dim` and the position where it was last improved on.

    Sequentially, the index moves at every strict record (`ogt`: the first position of
    the extremum) or at every tie too (`oge`: the last one), and only where the record
    beats the init; that is `argmax` (of the reversed axis for ties) merged with the
    inits by the same comparison. Rows holding NaN: numpy's argmax points at the first
    NaN where the sequential loop keeps the index before it."""

    value_out: int  # which result is the extremum
    index_out: int  # which result is the position
    dim: int  # the reduction loop dim
    is_max: bool
    strict: bool  # the first position of the extremum (else the last)
    comb: Callable[..., np.ndarray]  # np.maximum / np.fmax / np.minimum / np.fmin
    index_dead: bool = False  # the position is a tensor result nobody uses: a plain max


def _run_argreduce(spec: StructuredSpec, body: Callable[..., tuple[object, ...]], aligned_in: Sequence[object], outs: Sequence[np.ndarray], sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    a = spec.arg
    assert a is not None
    vdt, idt = spec.out_dtypes[a.value_out], spec.out_dtypes[a.index_out]
    e = np.asarray(body(*aligned_in, None)[0], dtype=vdt)
    if e.shape != tuple(sizes):
        e = np.broadcast_to(e, tuple(sizes))
    ax, n = a.dim, sizes[a.dim]
    if n == 0:
        return _finish(spec, [spec.out_align[k](outs[k]) for k in range(2)], outs, sizes)
    init_v = spec.out_align[a.value_out](outs[a.value_out])
    init_i = spec.out_align[a.index_out](outs[a.index_out])
    vals: list[object] = [None, None]
    find = np.argmax if a.is_max else np.argmin
    if a.index_dead:
        # torch-mlir's softmax takes max.dim and drops the indices: the extremum alone,
        # no merge of positions. argmax + gather is numpy's fastest max (twice
        # `maximum.reduce`) and NaN-propagating like maximumf; fmax/fmin skip NaN.
        if a.comb in (np.fmax, np.fmin):
            best = a.comb.reduce(e, axis=ax, keepdims=True)  # type: ignore[attr-defined]
        else:
            best = np.take_along_axis(e, find(e, axis=ax, keepdims=True), axis=ax)
        vals[a.value_out] = a.comb(init_v, best)
        vals[a.index_out] = init_i
        return _finish(spec, vals, outs, sizes)
    if a.strict:
        pos = find(e, axis=ax, keepdims=True)
    else:
        pos = (n - 1) - find(np.flip(e, ax), axis=ax, keepdims=True)
    best = np.take_along_axis(e, pos, axis=ax)
    if a.is_max:
        wins = best > init_v if a.strict else best >= init_v
    else:
        wins = best < init_v if a.strict else best <= init_v
    vals[a.value_out] = a.comb(init_v, best)
    vals[a.index_out] = np.where(wins, pos.astype(idt), init_i)
    return _finish(spec, vals, outs, sizes)


@functools.lru_cache(maxsize=256)
def _ones(n: int, dt: np.dtype) -> np.ndarray:
    ones = np.ones(n, dt)
    ones.flags.writeable = False
    return ones


def sum_axes(x: np.ndarray, axes: Sequence[int], dt: np.dtype, keepdims: bool = False) -> np.ndarray:
    """`x` summed over `axes` in `dt`. When they are the outer or the inner axes of a
    float array's memory layout (a transposed view counts by its layout), a product with
    a vector of ones: BLAS does it two to three times faster than numpy's pairwise
    reduce (a layernorm's mean, a bias's gradient); elsewhere numpy's reduce. Which of
    these, and the views, depend on the layout alone: decided once per layout."""
    key = (x.shape, x.strides, tuple(axes), x.dtype, dt, keepdims)
    plan = _SUM_PLANS.get(key)
    if plan is None:
        if len(_SUM_PLANS) >= MAX_CACHED_LAYOUTS:
            _SUM_PLANS.clear()
        plan = _SUM_PLANS[key] = _sum_plan(x, key[2], dt, keepdims)
    mode, order, k, shape, perm, ax = plan
    if mode == 0:
        return np.add.reduce(x, axis=ax, keepdims=keepdims, dtype=dt)
    y = x if order is None else x.transpose(order)
    r = _ones(k, dt) @ y.reshape(k, -1) if mode == 1 else y.reshape(-1, k) @ _ones(k, dt)
    if perm is None:
        return r.reshape(shape)
    r = r.reshape(shape).transpose(perm)
    return np.expand_dims(r, ax) if keepdims else r


_SUM_PLANS: dict[tuple[object, ...], tuple[int, tuple[int, ...] | None, int, tuple[int, ...], tuple[int, ...] | None, tuple[int, ...]]] = {}


def _sum_plan(x: np.ndarray, axes: tuple[int, ...], dt: np.dtype, keepdims: bool) -> tuple[int, tuple[int, ...] | None, int, tuple[int, ...], tuple[int, ...] | None, tuple[int, ...]]:
    """(mode: 0 reduce / 1 ones @ outer axes / 2 inner axes @ ones, the transpose into
    memory order or None, k, the result's reshape, the transpose after it or None, the
    summed axes) for `sum_axes` on arrays of `x`'s layout."""
    n = x.ndim
    ax = sorted(a % n for a in axes) if n else []
    if ax and x.size and x.dtype == dt and dt.kind == "f" and dt.itemsize >= 4:
        plain = x.flags.c_contiguous
        order = list(range(n)) if plain else sorted(range(n), key=lambda i: -x.strides[i])
        y = x if plain else x.transpose(order)
        if y.flags.c_contiguous:
            pos = ax if plain else sorted(order.index(a) for a in ax)
            k = math.prod(x.shape[a] for a in ax)
            mode = 0
            if pos[-1] == len(pos) - 1:  # the outer axes
                mode = 1
            elif pos[0] == n - len(pos) and pos[-1] == n - 1:  # the inner axes
                mode = 2
            if mode:
                kept = [a for a in order if a not in ax]  # the product's axes, in memory order
                tr = None if plain else tuple(order)
                if plain or kept == sorted(kept):
                    shape = [1 if i in ax else s for i, s in enumerate(x.shape)] if keepdims else [x.shape[a] for a in sorted(kept)]
                    return mode, tr, k, tuple(shape), None, tuple(ax)
                return mode, tr, k, tuple(x.shape[a] for a in kept), _argsort(tuple(kept)), tuple(ax)
    return 0, None, 0, (), None, tuple(ax)


def _run_stack(spec: StructuredSpec, aligned_in: Sequence[object], sizes: Sequence[int]) -> np.ndarray:
    """The inputs (size 1 along the stacked dim) copied into their places along it."""
    assert spec.stack is not None
    d, which = spec.stack
    out = np.empty(tuple(sizes), spec.out_dtypes[0])
    lead = (slice(None),) * d
    for k, i in enumerate(which):
        out[(*lead, slice(k, k + 1))] = aligned_in[i]
    return out


def _run_general(spec: StructuredSpec, body: Callable[..., tuple[object, ...]], aligned_in: list[object], outs: Sequence[np.ndarray], sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    n = spec.n_loops
    par_shape = [1 if d in spec.red_dims else sizes[d] for d in range(n)]
    acc: list[np.ndarray] = []
    for k, x in enumerate(outs):
        a = spec.out_align[k](x)
        acc.append(np.broadcast_to(a, [max(s, 1) if d not in spec.red_dims else 1 for d, s in enumerate(par_shape)]))
    grids = spec.index_grids(sizes) if spec.uses_index else None
    for point in itertools.product(*(range(sizes[d]) for d in spec.red_dims)):
        args: list[object] = []
        for x in aligned_in:
            if isinstance(x, np.ndarray) and x.ndim == n:
                idx = [slice(None)] * n
                for d, p in zip(spec.red_dims, point):
                    if x.shape[d] != 1:
                        idx[d] = slice(p, p + 1)
                x = x[tuple(idx)]
            args.append(x)
        ix = None
        if grids is not None:
            ix = list(grids)
            for d, p in zip(spec.red_dims, point):
                ix[d] = np.int64(p)
        vals = body(*args, *acc, ix)
        acc = [np.broadcast_to(np.asarray(v, dtype=spec.out_dtypes[k]), par_shape) for k, v in enumerate(vals)]
    return _finish(spec, acc, outs, sizes)


@functools.lru_cache(maxsize=1024)
def _argsort(p: tuple[int, ...]) -> tuple[int, ...]:
    """`np.argsort` of distinct ints, as a tuple (numpy's call costs ~2 us on a tuple)."""
    return tuple(sorted(range(len(p)), key=p.__getitem__))


def _view(x: np.ndarray, shape: Sequence[int]) -> np.ndarray | None:
    """`x` reshaped without copying, or None when the strides do not allow it."""
    try:
        return x.reshape(shape, copy=False)  # the method: np.reshape's wrapper costs 2x
    except (ValueError, TypeError):
        return None


@dataclass(frozen=True)
class MatmulPlan:
    """How two operands (axes labelled by loop dims) contract into output dims `so`: which
    axes each sums alone first, the operand order, and the transposes into
    `batch + m + k` / `batch + k + n`; computed once per (maps, output) and cached."""

    sum_a: tuple[int, ...]
    sum_b: tuple[int, ...]
    swap: bool  # B @ A: the output's innermost dim comes from the first operand
    pa: tuple[int, ...]
    pb: tuple[int, ...]
    batch: tuple[int, ...]
    mdims: tuple[int, ...]
    kdims: tuple[int, ...]
    ndims: tuple[int, ...]
    out_perm: tuple[int, ...]  # axes of the (batch, m, n) result in output order
    inv_perm: tuple[int, ...] = ()  # its inverse (output axes in (batch, m, n) order)
    out_identity: bool = True  # out_perm is the identity
    expand_a: int = 0  # leading batch dims the first operand lacks (broadcast over them)
    dims: dict[tuple[int, ...], MatmulDims] = field(default_factory=dict, compare=False, repr=False)
    """Loop sizes -> the matmul's shapes: a call site sees the same sizes every step."""

    def shapes(self, sizes: Sequence[int]) -> MatmulDims:
        key = sizes if type(sizes) is tuple else tuple(sizes)
        d = self.dims.get(key)
        if d is None:
            if len(self.dims) >= MAX_CACHED_SHAPES:
                self.dims.clear()
            d = self.dims[key] = MatmulDims.build(self, key)
        return d


@dataclass(frozen=True)
class MatmulDims:
    """The shapes `contract2` reshapes and allocates for one plan at one set of loop sizes."""

    bs: tuple[int, ...]  # batch sizes
    m: int
    k: int
    n: int
    present: tuple[int, ...]  # the (batch, m, n) result's shape
    out: tuple[int, ...]  # the result's shape in output order
    amk: tuple[int, ...]  # bs + (m, k)
    bkn: tuple[int, ...]  # bs + (k, n)
    bmn: tuple[int, ...]  # bs + (m, n)
    rows_k: tuple[int, int]  # (prod(bs) * m, k): the batch folded into the rows
    rows_n: tuple[int, int]  # (prod(bs) * m, n)

    @staticmethod
    def build(plan: MatmulPlan, sizes: tuple[int, ...]) -> MatmulDims:
        bs = tuple(sizes[d] for d in plan.batch)
        m = math.prod(sizes[d] for d in plan.mdims)
        k = math.prod(sizes[d] for d in plan.kdims)
        n = math.prod(sizes[d] for d in plan.ndims)
        present = tuple(sizes[d] for d in (*plan.batch, *plan.mdims, *plan.ndims))
        rows = math.prod(bs) * m
        return MatmulDims(bs, m, k, n, present, tuple(present[i] for i in plan.out_perm), (*bs, m, k), (*bs, k, n), (*bs, m, n), (rows, k), (rows, n))


@functools.lru_cache(maxsize=4096)
def matmul_plan(sa: Map, sb: Map, so: tuple[int, ...], lead_batch: bool = False) -> MatmulPlan:
    """With `lead_batch`, a result that would come out transposed (the output's outer
    dims belong to the second operand alone, as a convolution's batch does) is computed
    as a batch of matmuls over those dims instead, the first operand broadcast over them,
    so that each matmul writes its block of the output in place."""
    sum_a = tuple(i for i, d in enumerate(sa) if d not in sb and d not in so)
    sum_b = tuple(i for i, d in enumerate(sb) if d not in sa and d not in so)
    la = [d for i, d in enumerate(sa) if i not in sum_a]
    lb = [d for i, d in enumerate(sb) if i not in sum_b]
    batch = [d for d in so if d in la and d in lb]
    contr = [d for d in la if d in lb and d not in so]
    afree = [d for d in so if d in la and d not in lb]
    bfree = [d for d in so if d in lb and d not in la]
    present = [d for d in so if d in la or d in lb]
    # Put the operand whose free dims come last in the output second, so that the
    # matmul's unit-stride axis is the output's innermost one (no transposed results).
    swap = bool(present) and present[-1] in afree
    if swap:
        la, lb, afree, bfree = lb, la, bfree, afree
    got = batch + afree + bfree
    expand: list[int] = []
    if lead_batch and got != present and afree:
        first_a = present.index(afree[0])
        lead = present[:first_a]
        rest = [d for d in bfree if d not in lead]
        if set(batch) <= set(lead) and lead + afree + rest == present:
            expand = [d for d in lead if d not in la]
            la = expand + la
            batch, bfree, got = lead, rest, present
    out_perm = tuple(got.index(d) for d in present)
    inv = _argsort(out_perm)
    return MatmulPlan(
        sum_a, sum_b, swap,
        tuple(la.index(d) for d in batch + afree + contr),
        tuple(lb.index(d) for d in batch + contr + bfree),
        tuple(batch), tuple(afree), tuple(contr), tuple(bfree),
        out_perm, inv, out_perm == tuple(range(len(out_perm))), len(expand),
    )


def contract2(
    a: np.ndarray, sa: Map, b: np.ndarray, sb: Map, so: Sequence[int], sizes: Sequence[int], dt: np.dtype | None = None,
    layout: Sequence[int] | None = None, acc: np.ndarray | None = None, alpha: float = 1.0, windowed: bool = False,
) -> tuple[np.ndarray, bool]:
    """Contract two operands (axes labelled by loop dims) into the output dims `so` that
    either has, through one (batched) matmul; the result's axes follow `so`. With `dt`,
    the matmul writes straight into a fresh array of that dtype when the operands have
    it: C-ordered, or with its axes laid out in memory in the order `layout` (outermost
    first) where BLAS can write that. With `acc` (axes in `so` order, dtype `dt`), the
    product is added into it in place by BLAS (beta = 1) where its strides allow, and
    `acc` itself is returned; otherwise the product alone, for the caller to add. The
    product is scaled by `alpha` (BLAS's own factor on the matmul paths, so a constant
    factor of the contraction costs no pass over the result; a pass on the others).
    Returns (result, whether it is a fresh array the caller owns).

    `windowed` (an operand is a strided window view, `window_run.py`): the result comes
    from a batch of matmuls over the output's leading dims (`matmul_plan`'s
    `lead_batch`) where each matmul's columns are many enough (a convolution's
    forward, not its weight gradient: a small result is better transposed once), and
    an operand copied into matmul order (im2col) is copied along its longest unit-stride
    run (`_matrix`)."""
    plan = matmul_plan(tuple(sa), tuple(sb), tuple(so))
    if windowed:
        lead = matmul_plan(tuple(sa), tuple(sb), tuple(so), True)
        if lead != plan and math.prod(sizes[d] for d in lead.ndims) >= MIN_LEAD_BATCH_COLUMNS:
            plan = lead
    if plan.sum_a:
        a = a.sum(axis=plan.sum_a)
    if plan.sum_b:
        b = b.sum(axis=plan.sum_b)
    if plan.swap:
        a, b = b, a
    if plan.expand_a:
        a = a.reshape((1,) * plan.expand_a + a.shape)
    if not plan.mdims and not plan.ndims:
        # Batched dot products (a layernorm's gradients: summed over features, or over
        # batch and positions). As 1xk by kx1 matmuls they ran at half of memory speed:
        # vecdot where the summed axes fold into each operand's unit-stride last axis,
        # else einsum reading them in place.
        vecdot = getattr(np, "vecdot", None)
        if vecdot is not None and a.dtype == b.dtype and a.dtype.kind == "f":  # (vecdot conjugates complex)
            kk = math.prod(sizes[d] for d in plan.kdims)
            shape = [*(sizes[d] for d in plan.batch), kk]
            A1, B1 = _view(a.transpose(plan.pa), shape), _view(b.transpose(plan.pb), shape)
            if A1 is not None and B1 is not None and A1.strides[-1] == B1.strides[-1] == a.itemsize:
                return _scaled(np.asarray(vecdot(A1, B1)), alpha), True
        da = [d for i, d in enumerate(sa) if i not in plan.sum_a]
        db = [d for i, d in enumerate(sb) if i not in plan.sum_b]
        if plan.swap:
            da, db = db, da
        return _scaled(np.asarray(np.einsum(a, da, b, db, [d for d in so if d in plan.batch])), alpha), True
    sh = plan.shapes(sizes)
    k, n = sh.k, sh.n
    present_shape = sh.present
    At, Bt = a.transpose(plan.pa), b.transpose(plan.pb)
    nb = len(sh.bs)
    if plan.expand_a:
        At = np.broadcast_to(At, (*sh.bs, *At.shape[nb:]))
    if nb and not any(Bt.strides[:nb]) and (A2 := _view(At, sh.rows_k)) is not None:
        # The second operand is broadcast over the batch (torch-mlir's batch_matmul with
        # a linalg.broadcast weight): one matmul with the batch folded into the rows
        # instead of one per batch entry on a stride-0 operand.
        B2 = Bt[(0,) * nb].reshape(k, n)
        if acc is not None and A2.dtype == dt and B2.dtype == dt and acc.dtype == dt:
            target = _view(acc.transpose(plan.inv_perm), sh.rows_n)
            if target is not None and _blas_writable(target):
                _accumulate(A2, B2, target, alpha)
                return acc, False
        if dt is not None and A2.dtype == dt and B2.dtype == dt:
            res = np.empty(sh.out, dt)
            target = _view(res.transpose(plan.inv_perm), sh.rows_n)
            if target is not None:
                _matmul(A2, B2, target, alpha)
                return res, True
        C = _matmul(A2, B2, None, alpha).reshape(present_shape)
        return (C if plan.out_identity else C.transpose(plan.out_perm)), True
    if windowed:
        A, B = _matrix(At, sh.amk), _matrix(Bt, sh.bkn)
    else:
        A = At.reshape(sh.amk)
        B = Bt.reshape(sh.bkn)
    if acc is not None and A.dtype == dt and B.dtype == dt and acc.dtype == dt:
        target = _view(acc.transpose(plan.inv_perm), sh.bmn)
        if target is not None and _blas_writable(target):
            _accumulate(A, B, target, alpha)
            return acc, False
    if dt is not None and A.dtype == dt and B.dtype == dt:
        # Allocate the result in output order (or in `layout`) and let the matmul write
        # through a view.
        inv = plan.inv_perm
        shape = sh.out
        for lay in ([layout] if layout is not None and len(layout) == len(shape) else []) + [None]:
            res = np.empty(shape, dt) if lay is None else np.empty([shape[i] for i in lay], dt).transpose(_argsort(tuple(lay)))
            target = _view(res.transpose(inv), sh.bmn)
            if target is not None and (lay is None or _blas_writable(target)):
                _matmul(A, B, target, alpha)
                return res, True
    C = _matmul(A, B, None, alpha).reshape(present_shape)
    if not plan.out_identity:
        C = C.transpose(plan.out_perm)
    return C, True


MIN_LEAD_BATCH_COLUMNS = 64
"""A windowed contraction runs as a batch of matmuls over the output's leading dims
when each has at least this many columns (a 32x32 image: 1024); fewer (a weight
gradient's 3x3 kernel positions): one matmul, its small result transposed."""


def _matrix(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`x` (batch axes, then the axes of the rows, then those of the columns) as the
    matrices `shape` (*batch, rows, cols): a view where the strides allow; else a copy
    made along whichever of the two groups' last axes is the longer unit-stride run
    (an im2col copy of a weight gradient's window view runs along the image's rows, not
    along the 3 kernel positions), returned transposed if that is the columns'."""
    view = _view(x, shape)
    if view is not None:
        return view
    nb = len(shape) - 2
    rows, cols = shape[-2:]
    # split the non-batch axes into the rows' and the columns' (by their sizes' products)
    rest = x.shape[nb:]
    split, acc = 0, 1
    while split < len(rest) and acc < rows:
        acc *= rest[split]
        split += 1
    while split < len(rest) and rest[split] == 1:
        split += 1
    if acc != rows or split == 0 or split == len(rest):
        return x.reshape(shape)

    def run(axis: int) -> tuple[int, int]:  # smaller is better: unit stride first, then longer
        return (abs(x.strides[axis]), -x.shape[axis])

    if run(nb + split - 1) < run(x.ndim - 1):  # the rows' last axis is the better inner loop
        order = [*range(nb), *range(nb + split, x.ndim), *range(nb, nb + split)]
        return np.ascontiguousarray(x.transpose(order)).reshape(*shape[:nb], cols, rows).swapaxes(-1, -2)
    return x.reshape(shape)


def _is_matmul(sa: Map, sb: Map, so: Sequence[int]) -> bool:
    """Whether `contract2` runs these maps as a matmul (not as batched dot products)."""
    plan = matmul_plan(tuple(sa), tuple(sb), tuple(so))
    return bool(plan.mdims or plan.ndims)


def _matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, alpha: float = 1.0) -> np.ndarray:
    """`alpha * np.matmul(a, b)` through MKL where the operands' views allow (`kernels/blas.py`)."""
    if a.dtype.kind == "V" and a.dtype == b.dtype and is_bfloat16(a.dtype) and a.ndim >= 2 and b.ndim >= 2:
        return bf16_matmul(a, b, out, alpha=alpha)  # float32 accumulation (a float32 result without `out`)
    if out is None:
        if a.dtype != b.dtype or a.dtype.char not in "fd" or a.ndim < 2 or b.ndim < 2:
            return _scaled(np.matmul(a, b), alpha)
        out = np.empty((*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1]), a.dtype)
    return blas.matmul(a, b, out, alpha=alpha)


def _widen(spec: StructuredSpec, factors: list[tuple[np.ndarray, Map]], leaves: list[int], so: Sequence[int]) -> list[tuple[np.ndarray, Map]]:
    """The factors of a contraction whose body extends bf16 inputs to float32
    (`spec.widened`; the body returns them unextended): kept bf16 where two such factors
    make one matmul (`contract2` runs a bf16 GEMM accumulating in float32, the same
    numbers: bf16 products are exact in float32), extended to float32 otherwise."""
    if len(factors) == 2 and all(k in spec.widened for k in leaves):
        p = matmul_plan(tuple(factors[0][1]), tuple(factors[1][1]), tuple(so))
        if (p.mdims or p.ndims) and not p.sum_a and not p.sum_b:
            return factors
    f32 = np.dtype(np.float32)
    return [(x.astype(f32) if k in spec.widened else x, m) for (x, m), k in zip(factors, leaves)]


def _accumulate(a: np.ndarray, b: np.ndarray, out: np.ndarray, alpha: float) -> None:
    """`out += alpha * a @ b`, bf16 operands accumulated in float32 (`bf16_gemm.py`)."""
    if a.dtype.kind == "V" and is_bfloat16(a.dtype):
        bf16_matmul(a, b, out, alpha=alpha, beta=1.0)
    else:
        blas.matmul(a, b, out, beta=1.0, alpha=alpha)


def _scaled(r: np.ndarray, alpha: float) -> np.ndarray:
    """`r * alpha`, in place (`r` is a fresh array); `r` itself for 1."""
    if alpha == 1:
        return r
    if r.dtype.kind in "fc" and r.ndim:
        np.multiply(r, alpha, out=r)
        return r
    return r * alpha


def _blas_writable(x: np.ndarray) -> bool:
    """Whether each matrix of a (batched) matmul output can be written by BLAS in place
    (unit stride along one of its two axes, the other a multiple of the row length),
    so that numpy does not compute into a temporary and copy."""
    if x.ndim < 2 or x.size == 0:
        return True
    s0, s1 = x.strides[-2:]
    r0, r1 = x.shape[-2:]
    item = x.itemsize
    return (s1 == item and s0 % item == 0 and s0 >= r1 * item) or (s0 == item and s1 % item == 0 and s1 >= r0 * item)


@dataclass
class ContractionPlan:
    """Compile-time facts of a contraction beyond its maps: factors that are constants
    with a single non-zero entry (the one-hot selectors an einsum-style model uses to pick
    q/k/v out of a fused weight) fix their loop dims to that entry's index and scale the
    result by its value, instead of multiplying whole arrays by mostly-zero ones."""

    dropped: frozenset[int] = frozenset()  # leaves replaced by `fixed` and `scale`
    fixed: dict[int, int] = field(default_factory=dict)  # loop dim -> index
    scale: float | int | None = None
    factor_index: dict[int, tuple[object, ...]] = field(default_factory=dict)  # leaf -> index
    factor_maps: dict[int, Map] = field(default_factory=dict)  # leaf -> map after indexing
    so: tuple[int, ...] = ()  # output dims (constant-0 axes dropped)
    so_free: tuple[int, ...] = ()  # ... and fixed ones
    out_take: tuple[object, ...] | None = None  # index into the output writing the free part


def build_contraction_plan(spec: StructuredSpec, const_leaves: dict[int, np.ndarray]) -> ContractionPlan:
    """`const_leaves`: leaf position -> the constant array that leaf reads unchanged."""
    fixed: dict[int, int] = {}
    dropped: set[int] = set()
    scale: float | int | None = None
    for k, arr in const_leaves.items():
        m = spec.in_maps[spec.factor_inputs[k]]
        nz = np.flatnonzero(arr)
        if len(nz) != 1 or None in m or any(d in fixed for d in m) or arr.ndim == 0:
            continue
        pos = np.unravel_index(int(nz[0]), arr.shape)
        for d, p in zip(m, pos):
            fixed[d] = int(p)  # type: ignore[index]
        dropped.add(k)
        v = arr[pos].item()
        if v != 1:
            scale = v if scale is None else scale * v
    factor_index: dict[int, tuple[object, ...]] = {}
    factor_maps: dict[int, Map] = {}
    for k, i in enumerate(spec.factor_inputs):
        if i < 0 or k in dropped:
            continue
        m = spec.in_maps[i]
        if None in m or any(d in fixed for d in m):
            factor_index[k] = tuple(0 if d is None else fixed[d] if d in fixed else slice(None) for d in m)
        factor_maps[k] = tuple(d for d in m if d is not None and d not in fixed)
    so = tuple(d for d in spec.out_map if d is not None)
    so_free = tuple(d for d in so if d not in fixed)
    out_take = tuple(fixed[d] if d in fixed else slice(None) for d in so) if so_free != so else None
    return ContractionPlan(frozenset(dropped), fixed, scale, factor_index, factor_maps, so, so_free, out_take)


def onehot_positions(tok: np.ndarray, ids: np.ndarray) -> np.ndarray | None:
    """For each token, the position of the equal entry of `ids` (-1: none); None when
    `ids` repeats a value (a one-hot row would then hold several ones)."""
    ids = np.asarray(ids).reshape(-1)
    tok = np.asarray(tok)
    n = ids.size
    if n == 0:
        return np.full(tok.shape, -1, np.int64)
    lo = int(ids[0])
    if np.array_equal(ids.astype(np.int64) - lo, np.arange(n, dtype=np.int64)):
        p = tok.astype(np.int64) - lo  # ids is a range (the vocabulary, or a shard of it)
        bad = (p < 0) | (p >= n)
    else:
        order = np.argsort(ids, kind="stable")
        srt = ids[order]
        if n > 1 and bool((srt[1:] == srt[:-1]).any()):
            return None
        j = np.minimum(np.searchsorted(srt, tok), n - 1)
        bad = srt[j] != tok
        p = order[j].astype(np.int64)
    if bad.any():
        p = np.where(bad, -1, p)
    return p


def scatter_rows(pos: np.ndarray, x: np.ndarray, n: int, dt: np.dtype) -> np.ndarray:
    """`out[pos[i]] += x[i]` into zeros of n rows (rows with pos -1 dropped)."""
    keep = pos >= 0
    if not keep.all():
        pos, x = pos[keep], x[keep]
    out = np.zeros((n, *x.shape[1:]), dt)
    if pos.size == 0:
        return out
    order = np.argsort(pos, kind="stable")
    ps = pos[order]
    starts = np.flatnonzero(np.concatenate(([True], ps[1:] != ps[:-1])))
    out[ps[starts]] = np.add.reduceat(x[order], starts, axis=0)
    return out


@dataclass(frozen=True)
class OneHotUse:
    """A contraction input that is `select(cmpi eq(tok, ids), 1, 0)` of another
    linalg.generic (the embedding's and the loss's one-hot of token ids): summing it
    against the other factor over the class dim is a gather of that factor's rows
    (`take`), and contracting it over the token dims into the class dim a scatter-add,
    so the one-hot array is neither built nor multiplied."""

    input: int  # the consumer's input
    leaf: int  # its leaf among the contraction's factors
    dims: Map  # consumer loop dims of the one-hot's axes
    tok_dims: tuple[int, ...]  # consumer dims of the tokens' axes, in their order
    cls_dim: int  # consumer dim of the class (ids) axis
    shape_src: tuple[tuple[int, int], ...]  # per one-hot axis: (0 tokens / 1 ids, axis)
    # the producer, to build the one-hot when ids repeat a value
    tok_align: Aligner
    ids_align: Aligner
    out_unalign: Unaligner
    dtype: np.dtype

    def placeholder(self, tok: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """A stand-in with the one-hot's shape (for loop sizes; never read)."""
        srcs = (np.shape(tok), np.shape(ids))
        shape = tuple(srcs[w][k] for w, k in self.shape_src)
        return np.lib.stride_tricks.as_strided(np.zeros(1, self.dtype), shape, (0,) * len(shape), writeable=False)

    def materialize(self, tok: np.ndarray, ids: np.ndarray) -> np.ndarray:
        eq = self.tok_align(np.asarray(tok)) == self.ids_align(np.asarray(ids))
        return self.out_unalign(eq).astype(self.dtype)

    def contract(self, pos: np.ndarray, x: np.ndarray, mx: Map, so: Sequence[int], sizes: Sequence[int], dt: np.dtype) -> tuple[np.ndarray, bool]:
        """sum(onehot * x) into the dims `so` (those either factor has, in `so` order)."""
        cv, tdims = self.cls_dim, self.tok_dims
        if cv in mx:  # gather: the class dim is summed against x
            ax = mx.index(cv)
            shared = [d for d in tdims if d in mx]
            mask = pos < 0
            anybad = bool(mask.any())
            ps = np.where(mask, 0, pos) if anybad else pos
            if not shared:
                r = np.take(x, ps, axis=ax)
                rdims = [*mx[:ax], *tdims, *mx[ax + 1 :]]
                if anybad:
                    r = np.where(mask.reshape((1,) * ax + mask.shape + (1,) * (len(mx) - ax - 1)), 0, r)
            else:  # x shares token dims (picking each row's own class): index on a grid
                rdims = [d for d in tdims if d not in mx] + [d for d in mx if d != cv]
                n = len(rdims)

                def along(a: np.ndarray, dims: Sequence[int]) -> np.ndarray:
                    order = sorted(range(len(dims)), key=lambda i: rdims.index(dims[i]))
                    a = a.transpose(order)
                    shape = [1] * n
                    for i in order:
                        shape[rdims.index(dims[i])] = a.shape[order.index(i)]
                    return a.reshape(shape)

                idx = tuple(along(ps, tdims) if d == cv else along(np.arange(x.shape[k]), [d]) for k, d in enumerate(mx))
                r = x[idx]
                if anybad:
                    r = np.where(along(mask, tdims), 0, r)
            private = tuple(i for i, d in enumerate(rdims) if d not in so)
            if private:
                r = r.sum(axis=private, dtype=dt)
            rest = [d for d in rdims if d in so]
            perm = [rest.index(d) for d in so if d in rest]
            if perm != list(range(len(perm))):
                r = r.transpose(perm)
            return r, True
        # scatter-add: the token dims (all in x, all summed) land on the class dim
        private = tuple(i for i, d in enumerate(mx) if d not in tdims and d not in so)
        if private:
            x = x.sum(axis=private, dtype=dt)
        xd = [d for d in mx if d in tdims or d in so]
        ydims = [d for d in xd if d not in tdims]
        xt = x.transpose([xd.index(d) for d in (*tdims, *ydims)])
        nt = math.prod(sizes[d] for d in tdims)
        rows = scatter_rows(pos.reshape(-1), xt.reshape(nt, -1), sizes[cv], dt)
        r = rows.reshape([sizes[cv]] + [sizes[d] for d in ydims])
        rdims = [cv, *ydims]
        perm = [rdims.index(d) for d in so if d in rdims]
        if perm != list(range(len(perm))):
            r = r.transpose(perm)
        return r, True


def _run_contraction(
    spec: StructuredSpec, leaves_fn: Callable[..., tuple[object, ...]], ins: Sequence[object], outs: Sequence[np.ndarray], sizes: Sequence[int], aux: Sequence[np.ndarray] = ()
) -> tuple[np.ndarray, ...]:
    plan = spec.plan
    assert plan is not None
    oh = spec.onehot
    positions = None
    if oh is not None:
        positions = onehot_positions(aux[0], aux[1])
        if positions is None:  # ids with repeats: run on the one-hot array itself
            ins = list(ins)
            ins[oh.input] = oh.materialize(aux[0], aux[1])
    leaves = leaves_fn(*ins, None)
    factors: list[tuple[np.ndarray, Map]] = []
    factor_leaves: list[int] = []
    scale: object = plan.scale
    other: tuple[np.ndarray, Map] | None = None
    for k, leaf in enumerate(leaves):
        if k in plan.dropped:
            continue
        if spec.factor_inputs[k] < 0:
            scale = leaf if scale is None else scale * leaf  # type: ignore[operator]
            continue
        x = np.asarray(leaf)
        idx = plan.factor_index.get(k)
        if idx is not None:
            x = x[idx]
        factors.append((x, plan.factor_maps[k]))
        if spec.widened:
            factor_leaves.append(k)
        if oh is not None and k != oh.leaf:
            other = factors[-1]
    so = plan.so_free
    if spec.widened:
        factors = _widen(spec, factors, factor_leaves, so)
    dt = spec.out_dtypes[0]
    fresh = True
    if oh is not None and positions is not None and other is not None:
        r, fresh = oh.contract(positions, other[0], other[1], so, sizes, dt)
        present = {*oh.dims, *other[1]}
    elif len(factors) == 1:
        (x, m), = factors
        private = tuple(i for i, d in enumerate(m) if d not in so)
        r = sum_axes(x, private, dt) if private else x
        fresh = bool(private)
        rest = [d for d in m if d in so]
        perm = [rest.index(d) for d in so if d in rest]
        if perm != list(range(len(perm))):
            r = r.transpose(perm)
    elif len(factors) == 2:
        (a, ma), (b, mb) = factors
        init = outs[0]
        alpha = 1.0
        if scale is not None and dt.kind == "f" and np.ndim(scale) == 0 and np.isrealobj(scale):
            alpha, scale = float(scale), None  # BLAS scales the product (a constant factor)
        covered = {*ma, *mb}
        plain = (
            not spec.zero_init and spec.out_is_tensor[0] and scale is None and plan.out_take is None and None not in spec.out_map
            and all(d in covered for d in so) and all(d in covered or d in plan.fixed for d in spec.red_dims)
        )
        acc = None
        if plain and spec.init_inplace and init.dtype == dt and init.flags.writeable:
            acc = init  # the donated init: BLAS adds the product into it
        elif plain and spec.out_layout is None and a.dtype == b.dtype == dt and _is_matmul(ma, mb, so):
            acc = np.empty(init.shape, dt)  # a copy of the init (a broadcast bias), BLAS adding into it:
            np.copyto(acc, init)  # one pass over the result where a product then `+ init` takes two
        r, fresh = contract2(a, ma, b, mb, so, sizes, dt, spec.out_layout, acc, alpha, spec.windowed)
        if acc is not None and r is acc:
            return (acc,)
    else:
        letters = {d: chr(ord("a") + d) for d in range(spec.n_loops)}
        subs = ",".join("".join(letters[d] for d in m) for _, m in factors)
        present = {d for _, m in factors for d in m}
        out_s = "".join(letters[d] for d in so if d in present)
        r = np.einsum(f"{subs}->{out_s}", *[x for x, _ in factors], optimize="greedy")
    if oh is None or positions is None:
        present = {d for _, m in factors for d in m}
    missing_red = [d for d in spec.red_dims if d not in present and d not in plan.fixed]
    if missing_red:
        r, fresh = r * dt.type(math.prod(sizes[d] for d in missing_red)), True
    if scale is not None:
        if fresh and r.dtype == dt:
            np.multiply(r, scale, out=r, casting="unsafe")
        else:
            r, fresh = r * scale, True
    missing_out = [i for i, d in enumerate(so) if d not in present]
    if missing_out:
        r, fresh = np.broadcast_to(np.expand_dims(r, tuple(missing_out)), [sizes[d] for d in so]), False
    init = outs[0]
    zero = spec.zero_init and spec.out_is_tensor[0]
    if plan.out_take is not None:
        # Fixed output dims: the free part lands in one slice of the init (or of zeros).
        full_shape = [sizes[d] for d in plan.so]
        base = np.zeros(full_shape, dt) if zero else np.array(init, dtype=dt).reshape(full_shape)
        base[plan.out_take] += r
        r, fresh, zero = base, True, True
    if None in spec.out_map:
        r = np.expand_dims(r, tuple(i for i, d in enumerate(spec.out_map) if d is None))
    r = np.asarray(r)
    if spec.init_inplace and spec.out_is_tensor[0] and init.flags.writeable and np.broadcast_shapes(r.shape, init.shape) == init.shape:
        np.add(init, r, out=init, casting="unsafe")  # the donated init takes the sum
        return (init,)
    if zero:
        r = r.astype(dt, copy=False)
    elif fresh and r.dtype == dt and r.shape == init.shape:
        np.add(r, init, out=r)
    else:
        r = (init + r).astype(dt, copy=False)
    if spec.out_is_tensor[0]:
        return (r,)
    outs[0][...] = r
    return ()
