"""Vectorized execution of linalg structured ops (generic and named alike).

The body is classified once, at compile time:

- *contraction*: `yield add(out, mul(f0(in_a), f1(in_b), ...))` where each factor depends
  on one input (casts allowed) -> batched matmul (2 factors) or `einsum` (more), added to
  the init; operands are read as the views their transposes and broadcasts are (a weight
  broadcast over the batch folds into one matmul), and a result whose only user is a
  transpose is written in that transpose's memory order (so what reads the transpose,
  a collapse of heads into features, reads a view);
- *reduction*: `yield comb(out, e)` with `e` free of `out` and `comb` associative and
  commutative -> `e` on the whole iteration space, reduced along the reduction dims by the
  combiner's ufunc, combined with the init;
- *arg-reduction*: two results, `yield max(out_v, e), select(cmp(e, out_v), index(d),
  out_i)` (torch's max with indices, `argmax`) -> `argmax`/`argmin` along the one
  reduction dim d, merged with the inits by the same comparison (when no one reads the
  position, the extremum alone);
- *elementwise* (no reduction dims): the body once, on whole arrays, each block argument
  bound to its operand transposed/broadcast into loop order by its indexing map;
- anything else: the general path, the body evaluated on whole arrays over the parallel
  dims once per point of the reduction dims (in loop order, so any body is exact),
  with a warning naming the op.

`linalg.index` reads broadcast index grids; `tensor.extract` with such indices is a numpy
gather (`kernels/tensor.py`); `cf.assert` in a body checks the whole array at once.
Indexing maps must be projected permutations (dims, or the constant 0 on size-1 dims).
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from xdsl.dialects import arith, cf
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap

from shardc.runtime.compile import FunctionBuilder, compile_error, describe, targets, tuple_expr
from shardc.runtime.dtypes import elem_type, is_shaped, np_dtype
from shardc.runtime.donation import inplace_inits, inplace_pairs
from shardc.runtime.kernels import blas
from shardc.runtime.kernels.fused import FusedKernel, build_kernel
from shardc.runtime import horizontal  # noqa: F401  (loaded wherever specs are: the compile cache names its groups)

Map = tuple[int | None, ...]  # per operand axis: loop dim, or None for the constant 0


def map_dims(op: Operation, amap: AffineMap) -> Map:
    if amap.num_symbols:
        raise compile_error(op, "indexing maps with symbols are not supported by the runtime")
    out: list[int | None] = []
    for e in amap.results:
        if isinstance(e, AffineDimExpr):
            out.append(e.position)
        elif isinstance(e, AffineConstantExpr) and e.value == 0:
            out.append(None)
        else:
            raise compile_error(op, f"indexing map {amap} is not a projected permutation (not supported by the runtime)")
    return tuple(out)


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


_REDUCERS: dict[type[Operation], tuple[Callable[..., np.ndarray], Callable[..., np.ndarray], bool]] = {
    arith.AddfOp: (np.add.reduce, np.add, False),
    arith.AddiOp: (np.add.reduce, np.add, False),
    arith.MulfOp: (np.multiply.reduce, np.multiply, False),
    arith.MuliOp: (np.multiply.reduce, np.multiply, False),
    arith.MaximumfOp: (np.maximum.reduce, np.maximum, False),
    arith.MinimumfOp: (np.minimum.reduce, np.minimum, False),
    arith.MaxnumfOp: (np.fmax.reduce, np.fmax, False),
    arith.MinnumfOp: (np.fmin.reduce, np.fmin, False),
    arith.MaxSIOp: (np.maximum.reduce, np.maximum, False),
    arith.MinSIOp: (np.minimum.reduce, np.minimum, False),
    arith.MaxUIOp: (np.maximum.reduce, np.maximum, True),
    arith.MinUIOp: (np.minimum.reduce, np.minimum, True),
    arith.OrIOp: (np.bitwise_or.reduce, np.bitwise_or, False),
    arith.AndIOp: (np.bitwise_and.reduce, np.bitwise_and, False),
    arith.XOrIOp: (np.bitwise_xor.reduce, np.bitwise_xor, False),
}


@dataclass
class StructuredSpec:
    """Everything about one structured op that does not depend on runtime shapes."""

    kind: str  # elementwise | contraction | reduction | argreduce | general
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
    init_inplace: bool = False  # contraction / reduction: the result is written into its init, a donated buffer (fusion.fuse_accumulations)

    # -- shapes ----------------------------------------------------------------------
    def sizes(self, operands: Sequence[np.ndarray]) -> tuple[int, ...]:
        return tuple(operands[i].shape[k] for i, k in self.size_src)

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
                from shardc.runtime.helpers import uview

                r = red(uview(e, dt), axis=spec.red_dims, keepdims=True)
                vals.append(comb(uview(init, dt), r).view(dt))
            else:
                if red == np.add.reduce:
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
    return _run_general(spec, body, aligned_in, outs, sizes)


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
    reduce (a layernorm's mean, a bias's gradient); elsewhere numpy's reduce."""
    n = x.ndim
    ax = sorted(a % n for a in axes) if n else []
    if ax and x.size and x.dtype == dt and dt.kind == "f" and dt.itemsize >= 4:
        plain = x.flags.c_contiguous
        order = list(range(n)) if plain else sorted(range(n), key=lambda i: -x.strides[i])
        y = x if plain else x.transpose(order)
        if y.flags.c_contiguous:
            pos = ax if plain else sorted(order.index(a) for a in ax)
            k = math.prod(x.shape[a] for a in ax)
            r = None
            if pos[-1] == len(pos) - 1:  # the outer axes
                r = _ones(k, dt) @ y.reshape(k, -1)
            elif pos[0] == n - len(pos) and pos[-1] == n - 1:  # the inner axes
                r = y.reshape(-1, k) @ _ones(k, dt)
            if r is not None:
                kept = [a for a in order if a not in ax]  # r's axes, in memory order
                if plain or kept == sorted(kept):
                    shape = [1 if i in ax else s for i, s in enumerate(x.shape)] if keepdims else [x.shape[a] for a in sorted(kept)]
                    return r.reshape(shape)
                r = r.reshape([x.shape[a] for a in kept]).transpose(np.argsort(kept))
                return np.expand_dims(r, tuple(ax)) if keepdims else r
    return np.add.reduce(x, axis=tuple(ax), keepdims=keepdims, dtype=dt)


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


def _view(x: np.ndarray, shape: Sequence[int]) -> np.ndarray | None:
    """`x` reshaped without copying, or None when the strides do not allow it."""
    try:
        return np.reshape(x, tuple(shape), copy=False)
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


@functools.lru_cache(maxsize=4096)
def matmul_plan(sa: Map, sb: Map, so: tuple[int, ...]) -> MatmulPlan:
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
    return MatmulPlan(
        sum_a, sum_b, swap,
        tuple(la.index(d) for d in batch + afree + contr),
        tuple(lb.index(d) for d in batch + contr + bfree),
        tuple(batch), tuple(afree), tuple(contr), tuple(bfree),
        tuple(got.index(d) for d in present),
    )


def contract2(
    a: np.ndarray, sa: Map, b: np.ndarray, sb: Map, so: Sequence[int], sizes: Sequence[int], dt: np.dtype | None = None,
    layout: Sequence[int] | None = None, acc: np.ndarray | None = None, alpha: float = 1.0,
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
    Returns (result, whether it is a fresh array the caller owns)."""
    plan = matmul_plan(tuple(sa), tuple(sb), tuple(so))
    if plan.sum_a:
        a = a.sum(axis=plan.sum_a)
    if plan.sum_b:
        b = b.sum(axis=plan.sum_b)
    if plan.swap:
        a, b = b, a
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
    bs = [sizes[d] for d in plan.batch]
    m = math.prod(sizes[d] for d in plan.mdims)
    k = math.prod(sizes[d] for d in plan.kdims)
    n = math.prod(sizes[d] for d in plan.ndims)
    At, Bt = a.transpose(plan.pa), b.transpose(plan.pb)
    present_shape = [sizes[d] for d in (*plan.batch, *plan.mdims, *plan.ndims)]
    nb = len(bs)
    if nb and not any(Bt.strides[:nb]) and (A2 := _view(At, [math.prod(bs) * m, k])) is not None:
        # The second operand is broadcast over the batch (torch-mlir's batch_matmul with
        # a linalg.broadcast weight): one matmul with the batch folded into the rows
        # instead of one per batch entry on a stride-0 operand.
        B2 = Bt[(0,) * nb].reshape(k, n)
        if acc is not None and A2.dtype == dt and B2.dtype == dt and acc.dtype == dt:
            target = _view(acc.transpose(np.argsort(plan.out_perm)), [math.prod(bs) * m, n])
            if target is not None and _blas_writable(target):
                blas.matmul(A2, B2, target, beta=1.0, alpha=alpha)
                return acc, False
        if dt is not None and A2.dtype == dt and B2.dtype == dt:
            res = np.empty([present_shape[i] for i in plan.out_perm], dt)
            target = _view(res.transpose(np.argsort(plan.out_perm)), [math.prod(bs) * m, n])
            if target is not None:
                _matmul(A2, B2, target, alpha)
                return res, True
        C = _matmul(A2, B2, None, alpha).reshape(present_shape)
        return (C.transpose(plan.out_perm) if plan.out_perm != tuple(range(len(plan.out_perm))) else C), True
    A = At.reshape(bs + [m, k])
    B = Bt.reshape(bs + [k, n])
    if acc is not None and A.dtype == dt and B.dtype == dt and acc.dtype == dt:
        target = _view(acc.transpose(np.argsort(plan.out_perm)), bs + [m, n])
        if target is not None and _blas_writable(target):
            blas.matmul(A, B, target, beta=1.0, alpha=alpha)
            return acc, False
    if dt is not None and A.dtype == dt and B.dtype == dt:
        # Allocate the result in output order (or in `layout`) and let the matmul write
        # through a view.
        inv = np.argsort(plan.out_perm)
        shape = [present_shape[i] for i in plan.out_perm]
        for lay in ([layout] if layout is not None and len(layout) == len(shape) else []) + [None]:
            res = np.empty(shape, dt) if lay is None else np.empty([shape[i] for i in lay], dt).transpose(np.argsort(lay))
            target = _view(res.transpose(inv), bs + [m, n])
            if target is not None and (lay is None or _blas_writable(target)):
                _matmul(A, B, target, alpha)
                return res, True
    C = _matmul(A, B, None, alpha).reshape(present_shape)
    if plan.out_perm != tuple(range(len(plan.out_perm))):
        C = C.transpose(plan.out_perm)
    return C, True


def _is_matmul(sa: Map, sb: Map, so: Sequence[int]) -> bool:
    """Whether `contract2` runs these maps as a matmul (not as batched dot products)."""
    plan = matmul_plan(tuple(sa), tuple(sb), tuple(so))
    return bool(plan.mdims or plan.ndims)


def _matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, alpha: float = 1.0) -> np.ndarray:
    """`alpha * np.matmul(a, b)` through MKL where the operands' views allow (`kernels/blas.py`)."""
    if out is None:
        if a.dtype != b.dtype or a.dtype.char not in "fd" or a.ndim < 2 or b.ndim < 2:
            return _scaled(np.matmul(a, b), alpha)
        out = np.empty((*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1]), a.dtype)
    return blas.matmul(a, b, out, alpha=alpha)


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
        if oh is not None and k != oh.leaf:
            other = factors[-1]
    so = plan.so_free
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
        r, fresh = contract2(a, ma, b, mb, so, sizes, dt, spec.out_layout, acc, alpha)
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


# ---------------------------------------------------------------------------------------
# Compile side: body analysis
# ---------------------------------------------------------------------------------------


def _deps(v: SSAValue, block: Block, memo: dict[SSAValue, frozenset[int]]) -> frozenset[int]:
    """Indices of `block`'s arguments that `v` depends on (-1 marks linalg.index)."""
    if v in memo:
        return memo[v]
    if isinstance(v, BlockArgument):
        r = frozenset({v.index}) if v.block is block else frozenset()
    else:
        op = v.owner
        assert isinstance(op, Operation)
        if _inside(op, block):
            acc: set[int] = set()
            for o in op.operands:
                acc |= _deps(o, block, memo)
            if isinstance(op, linalg.IndexOp):
                acc.add(-1)
            for region in op.regions:
                for inner in region.walk():
                    for o in inner.operands:
                        if not _inside_op(o, op):
                            acc |= _deps(o, block, memo)
            r = frozenset(acc)
        else:
            r = frozenset()
    memo[v] = r
    return r


def _inside(op: Operation, block: Block) -> bool:
    return op.parent_block() is block


def _inside_op(v: SSAValue, op: Operation) -> bool:
    owner = v.owner
    o = owner.parent_op() if isinstance(owner, Block) else owner
    while o is not None:
        if o is op:
            return True
        o = o.parent_op()
    return False


def _slice_ops(block: Block, values: Sequence[SSAValue]) -> list[Operation]:
    """The ops of `block` the values depend on, and its assertions (with what they
    check), in block order."""
    needed: set[Operation] = set()
    stack = [v for v in values]
    for op in block.ops:
        if isinstance(op, cf.AssertOp):
            needed.add(op)
            stack.extend(op.operands)
    while stack:
        v = stack.pop()
        op = v.owner
        if isinstance(op, Operation) and _inside(op, block) and op not in needed:
            needed.add(op)
            stack.extend(op.operands)
            for region in op.regions:
                for inner in region.walk():
                    stack.extend(o for o in inner.operands if not _inside_op(o, op))
    return [op for op in block.ops if op in needed]


def _classify_contraction(block: Block, n_ins: int, yields: Sequence[SSAValue], memo: dict[SSAValue, frozenset[int]]) -> list[tuple[SSAValue, int]] | None:
    """For `yield add(out, mul-tree)`: the leaves and the input each depends on (-1: none)."""
    if len(yields) != 1:
        return None
    y = yields[0]
    add = y.owner
    if not isinstance(add, arith.AddfOp | arith.AddiOp) or not _inside(add, block):
        return None
    if elem_type(add.result.type) == elem_type(block.args[0].type) and np_dtype(elem_type(add.result.type)) == np.bool_:
        return None
    out_arg = block.args[n_ins]
    x, z = add.operands
    if z is out_arg:
        x, z = z, x
    if x is not out_arg or add.result.uses.get_length() != 1:
        return None
    mul_cls = arith.MulfOp if isinstance(add, arith.AddfOp) else arith.MuliOp
    leaves: list[tuple[SSAValue, int]] = []

    def visit(v: SSAValue) -> bool:
        op = v.owner
        if isinstance(op, mul_cls) and _inside(op, block) and op.result.uses.get_length() == 1:
            return all(visit(o) for o in op.operands)
        d = _deps(v, block, memo)
        if -1 in d or any(i >= n_ins for i in d) or len(d) > 1:
            return False
        leaves.append((v, next(iter(d)) if d else -1))
        return True

    if not isinstance(z.owner, mul_cls) or not visit(z):
        return None
    if sum(1 for _, i in leaves if i >= 0) < 2:
        return None  # a plain sum: the reduction path handles it
    return leaves


def _classify_reduction(block: Block, n_ins: int, yields: Sequence[SSAValue], memo: dict[SSAValue, frozenset[int]]) -> list[tuple[Operation, SSAValue]] | None:
    out: list[tuple[Operation, SSAValue]] = []
    for k, y in enumerate(yields):
        op = y.owner
        if not isinstance(op, Operation) or type(op) not in _REDUCERS or not _inside(op, block):
            return None
        if np_dtype(elem_type(y.type)) == np.bool_ and not isinstance(op, arith.OrIOp | arith.AndIOp | arith.XOrIOp):
            return None
        a, b = op.operands
        out_arg = block.args[n_ins + k]
        if b is out_arg:
            a, b = b, a
        if a is not out_arg or op.results[0].uses.get_length() != 1:
            return None
        if any(i >= n_ins for i in _deps(b, block, memo)):
            return None
        out.append((op, b))
    return out


_ARG_COMBINERS: dict[type[Operation], tuple[bool, Callable[..., np.ndarray]]] = {
    arith.MaximumfOp: (True, np.maximum),
    arith.MaxnumfOp: (True, np.fmax),
    arith.MaxSIOp: (True, np.maximum),
    arith.MinimumfOp: (False, np.minimum),
    arith.MinnumfOp: (False, np.fmin),
    arith.MinSIOp: (False, np.minimum),
}
# predicate -> (a > b, strict) for `cmp a, b`, ordered or unordered alike
_CMPF_ORDER = {2: (True, True), 3: (True, False), 4: (False, True), 5: (False, False), 9: (True, True), 10: (True, False), 11: (False, True), 12: (False, False)}
_CMPI_ORDER = {4: (True, True), 5: (True, False), 2: (False, True), 3: (False, False)}


def _classify_argreduce(
    block: Block, n_ins: int, yields: Sequence[SSAValue], red_dims: Sequence[int], memo: dict[SSAValue, frozenset[int]]
) -> tuple[ArgReduce, SSAValue] | None:
    """(facts, e) for `yield comb(e, out_v), select(cmp(e, out_v), index(d), out_i)` in
    either result order, d the only reduction dim, `e` free of the outputs and indices."""
    if len(yields) != 2 or len(red_dims) != 1 or len(block.args) != n_ins + 2:
        return None
    for vk in (0, 1):
        ik = 1 - vk
        comb, sel = yields[vk].owner, yields[ik].owner
        out_v, out_i = block.args[n_ins + vk], block.args[n_ins + ik]
        if not isinstance(comb, Operation) or type(comb) not in _ARG_COMBINERS or not _inside(comb, block):
            continue
        if not isinstance(sel, arith.SelectOp) or not _inside(sel, block) or sel.rhs is not out_i:
            continue
        a, b = comb.operands
        e = b if a is out_v else a if b is out_v else None
        if e is None or e is out_v or _deps(e, block, memo) - set(range(n_ins)):
            continue
        is_max, fn = _ARG_COMBINERS[type(comb)]  # type: ignore[index]
        cmp = sel.cond.owner
        if isinstance(cmp, arith.CmpfOp):
            order = _CMPF_ORDER.get(cmp.predicate.value.data)
        elif isinstance(cmp, arith.CmpiOp) and type(comb) in (arith.MaxSIOp, arith.MinSIOp):
            order = _CMPI_ORDER.get(cmp.predicate.value.data)
        else:
            continue
        if order is None or not _inside(cmp, block):  # type: ignore[arg-type]
            continue
        greater, strict = order
        x, y = cmp.operands
        if (x, y) == (out_v, e):
            greater = not greater
        elif (x, y) != (e, out_v):
            continue
        if greater != is_max:
            continue
        v = sel.lhs  # the position: linalg.index d, through index casts
        while isinstance(v.owner, arith.IndexCastOp) and _inside(v.owner, block):
            v = v.owner.input
        idx = v.owner
        if not isinstance(idx, linalg.IndexOp) or not _inside(idx, block) or idx.dim.value.data != red_dims[0]:
            continue
        return ArgReduce(vk, ik, red_dims[0], is_max, strict, fn), e
    return None


@dataclass(frozen=True)
class _OneHotSrc:
    """A linalg.generic computing `select(cmpi eq(tok, ids), 1, 0)` elementwise."""

    tok: SSAValue
    ids: SSAValue
    tok_map: Map
    ids_map: Map
    out_map: Map
    dtype: np.dtype


def _scalar_constant(v: SSAValue) -> object:
    from xdsl.dialects.builtin import FloatAttr, IntegerAttr

    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr | IntegerAttr):
        return op.value.value.data
    return None


def _generic_iters(op: linalg.GenericOp) -> list[str]:
    return [str(t.data).split(".")[-1].lower() for t in op.get_iterator_types().data]


def _onehot_source(v: SSAValue) -> _OneHotSrc | None:
    op = v.owner
    if not isinstance(op, linalg.GenericOp) or len(op.results) != 1 or len(op.inputs) != 2 or len(op.outputs) != 1:
        return None
    if _is_memref(op.outputs[0]) or any(not is_shaped(x.type) for x in op.inputs):
        return None
    try:
        if any(t != "parallel" for t in _generic_iters(op)):
            return None
        maps = maps_of(op, op.get_indexing_maps().data)
    except Exception:
        return None
    block = op.body.blocks.first
    if block is None:
        return None
    body = [o for o in block.ops if not isinstance(o, arith.ConstantOp)]
    if len(body) != 3:
        return None
    cmp, sel, yld = body
    if not isinstance(cmp, arith.CmpiOp) or cmp.predicate.value.data != 0 or set(cmp.operands) != {block.args[0], block.args[1]}:
        return None
    if not isinstance(sel, arith.SelectOp) or sel.cond is not cmp.result or list(yld.operands) != [sel.result]:
        return None
    if _scalar_constant(sel.lhs) != 1 or _scalar_constant(sel.rhs) != 0:
        return None
    if any(None in m for m in maps) or len(set(maps[2])) != len(maps[2]):
        return None
    for j in (1, 0):  # the ids: one dim, which the tokens do not index
        ids_map, tok_map = maps[j], maps[1 - j]
        if len(ids_map) == 1 and ids_map[0] not in tok_map and set(tok_map) | set(ids_map) == set(maps[2]):
            return _OneHotSrc(op.inputs[1 - j], op.inputs[j], tok_map, ids_map, maps[2], np_dtype(elem_type(op.outputs[0].type)))
    return None


def _onehot_use(ins: Sequence[SSAValue], outs: Sequence[SSAValue], maps: Sequence[Map], iter_types: Sequence[str], block: Block) -> tuple[int, int, _OneHotSrc] | None:
    """(input, leaf, source) when a contraction has exactly two factors, one of them a
    one-hot input read as is, and the other factor lets it run as a gather (the class dim
    summed against it) or a scatter-add (the token dims summed into the class dim)."""
    n_ins = len(ins)
    red = {d for d, t in enumerate(iter_types) if t == "reduction"}
    if not red or len(outs) != 1 or len(block.args) != n_ins + 1:
        return None
    leaves = _classify_contraction(block, n_ins, list(list(block.ops)[-1].operands), {})
    if leaves is None or any(not is_shaped(ins[i].type) for _, i in leaves if i >= 0):
        return None
    factors = [(k, v, i) for k, (v, i) in enumerate(leaves) if i >= 0]
    if len(factors) != 2 or _constant_leaves(block, ins, leaves):
        return None
    out_dims = set(maps[n_ins])
    for (k, v, i), (_, _, j) in (factors, factors[::-1]):
        if v is not block.args[i] or list(ins).count(ins[i]) != 1 or None in maps[i]:
            continue
        src = _onehot_source(ins[i])
        if src is None:
            continue
        to_consumer = dict(zip(src.out_map, maps[i]))
        cv = to_consumer[src.ids_map[0]]
        tdims = [to_consumer[d] for d in src.tok_map]
        mx = maps[j]
        if cv in mx and cv in red:
            return (i, k, src)
        if cv not in mx and cv in out_dims and all(d in mx and d in red for d in tdims):
            return (i, k, src)
    return None


def _onehot_elided(op: Operation) -> bool:
    """Whether a one-hot generic is left out: every use is a contraction that gathers or
    scatters through its tokens and ids instead."""
    if not isinstance(op, linalg.GenericOp) or len(op.results) != 1 or _onehot_source(op.results[0]) is None:
        return False
    uses = list(op.results[0].uses)
    if not uses:
        return False
    for use in uses:
        user = use.operation
        if not isinstance(user, linalg.GenericOp):
            return False
        try:
            maps = maps_of(user, user.get_indexing_maps().data)
            found = _onehot_use(list(user.inputs), list(user.outputs), maps, _generic_iters(user), user.body.block)
        except Exception:
            return False
        if found is None or found[0] != use.index:
            return False
    return True


def emit_structured(
    op: Operation,
    g: FunctionBuilder,
    ins: Sequence[SSAValue],
    outs: Sequence[SSAValue],
    maps: Sequence[Map],
    iter_types: Sequence[str],
    block: Block,
    collect: bool = False,
) -> tuple[StructuredSpec, str] | None:
    """Emit a call to `run_structured` for a structured op with the given maps and body.
    A member of a horizontal group (`shardc.runtime.horizontal`) emits its whole group
    where the first member comes; with `collect`, only the body is emitted and the spec
    and the call's argument tuple are returned, for the group's call."""
    if not collect and (group := g.cg.hgroups.get(op)) is not None:
        if op.results[0] not in g.names:  # the group's first member: run them all here
            from shardc.runtime.horizontal import emit_group

            emit_group(group, g)
        return None
    if _onehot_elided(op):
        return None
    n_loops = len(iter_types)
    n_ins = len(ins)
    operands = [*ins, *outs]
    if len(maps) != len(operands):
        raise compile_error(op, "expected one indexing map per operand")
    red_dims = tuple(d for d, t in enumerate(iter_types) if t == "reduction")
    size_src: list[tuple[int, int]] = []
    for d in range(n_loops):
        src = next(((i, k) for i, m in enumerate(maps) for k, dd in enumerate(m) if dd == d and is_shaped(operands[i].type)), None)
        if src is None:
            raise compile_error(op, f"loop dimension d{d} is not bound by any operand's shape")
        size_src.append(src)
    term = list(block.ops)[-1]
    yields = list(term.operands)
    memo: dict[SSAValue, frozenset[int]] = {}
    uses_index = any(isinstance(o, linalg.IndexOp) for o in block.walk())
    spec = StructuredSpec(
        kind="general",
        n_loops=n_loops,
        red_dims=red_dims,
        size_src=tuple(size_src),
        in_align=[Aligner.build(m, n_loops) if is_shaped(v.type) else None for m, v in zip(maps[:n_ins], ins)],
        out_align=[Aligner.build(m, n_loops) for m in maps[n_ins:]],
        out_unalign=[Unaligner.build(m, n_loops) for m in maps[n_ins:]],
        out_dtypes=[np_dtype(elem_type(v.type)) for v in outs],
        out_is_tensor=[not _is_memref(v) for v in outs],
        uses_index=uses_index,
        n_ins=n_ins,
        in_maps=list(maps[:n_ins]),
        name=describe(op),
    )
    for k, m in enumerate(maps[n_ins:]):
        if any(d in red_dims for d in m if d is not None):
            raise compile_error(op, f"output #{k}'s indexing map uses a reduction dimension")
    body_values: list[SSAValue]
    params: list[str]
    onehot_args: tuple[int, _OneHotSrc] | None = None
    asserts = [o for o in block.walk() if isinstance(o, cf.AssertOp)]
    effects = bool(asserts)
    # reductions evaluate the body on the inputs alone: assertions must not read the outputs
    by_ins = red_dims and not any(_deps(a.arg, block, memo) - {-1, *range(n_ins)} for a in asserts)
    leaves = _classify_contraction(block, n_ins, yields, memo) if red_dims and len(outs) == 1 and not effects else None
    reduction = None if leaves is not None or not by_ins else _classify_reduction(block, n_ins, yields, memo)
    arg = None if leaves is not None or reduction is not None or not by_ins else _classify_argreduce(block, n_ins, yields, red_dims, memo)
    if leaves is not None and all(is_shaped(ins[i].type) for _, i in leaves if i >= 0):
        spec.kind = "contraction"
        spec.zero_init = _is_zero_fill(outs[0])
        spec.out_map = maps[n_ins]
        spec.factor_inputs = [i for _, i in leaves]
        spec.plan = build_contraction_plan(spec, _constant_leaves(block, ins, leaves))
        spec.init_inplace = 0 in inplace_inits(op) and spec.out_is_tensor[0]
        if op.results and _free_layout(spec):
            spec.out_layout = _consumer_layout(op.results[0])
        found = _onehot_use(ins, outs, maps, iter_types, block) if isinstance(op, linalg.GenericOp) else None
        if found is not None:
            i, k, src = found
            spec.onehot = _onehot_spec(i, k, maps[i], src)
            onehot_args = (i, src)
        body_values = [v for v, _ in leaves]
        params = ["ins"]
    elif reduction is not None:
        spec.kind = "reduction"
        spec.combiners = [_REDUCERS[type(c)] for c, _ in reduction]  # type: ignore[misc]
        spec.init_inplace = 0 in inplace_inits(op) and len(outs) == 1 and spec.out_is_tensor[0]
        body_values = [e for _, e in reduction]
        params = ["ins"]
    elif arg is not None:
        spec.kind = "argreduce"
        spec.arg, e = arg
        if spec.out_is_tensor[spec.arg.index_out] and not op.results[spec.arg.index_out].uses:
            spec.arg = replace(spec.arg, index_dead=True)
        spec.uses_index = False  # the positions come from argmax, not from index grids
        body_values = [e]
        params = ["ins"]
    else:
        if red_dims:
            sizes_note = "the reduction dimensions"
            warnings.warn(
                f"runtime: {describe(op)}: body not recognised as contraction or reduction; "
                f"running the general vectorized path (a loop over {sizes_note})",
                RuntimeWarning,
                stacklevel=2,
            )
        else:
            spec.kind = "elementwise"
            spec.stack = None if effects else _stack_cases(block, n_ins, yields, maps)
            spec.inplace = tuple(sorted(inplace_pairs(op).items()))
            if spec.stack is None and not effects and not uses_index:
                shaped = [is_shaped(v.type) for v in operands]
                spec.fused = (spec.inplace and build_kernel(block, n_ins, yields, shaped, n_loops, dict(spec.inplace))) or build_kernel(block, n_ins, yields, shaped, n_loops)
        body_values = yields
        params = ["ins", "outs"]
    body_name = _emit_body_fn(g, block, n_ins, body_values, with_outs="outs" in params)
    spec_name = g.const(spec, "spec")
    in_names = g.vs(ins) if onehot_args is None else [
        "None" if k == onehot_args[0] and _onehot_elided(v.owner) else g.v(v) for k, v in enumerate(ins)  # type: ignore[arg-type]
    ]
    aux = "" if onehot_args is None else f", ({g.v(onehot_args[1].tok)}, {g.v(onehot_args[1].ids)})"
    if collect:
        return spec, f"({spec_name}, {body_name}, {tuple_expr(in_names) if ins else '()'}, {tuple_expr(g.vs(outs))})"
    call = f"{g.const(run_structured, 'run_structured')}({spec_name}, {body_name}, {tuple_expr(in_names) if ins else '()'}, {tuple_expr(g.vs(outs))}{aux})"
    tensor_results = list(op.results)
    if tensor_results:
        names = [g.res(op, i, vec=False) for i in range(len(tensor_results))]
        g.emit(f"{targets(names)} = {call}")
    else:
        g.emit(call)


def _onehot_spec(i: int, k: int, m: Map, src: _OneHotSrc) -> OneHotUse:
    to_consumer = dict(zip(src.out_map, m))
    n = len(src.out_map)
    shape_src = tuple((0, src.tok_map.index(d)) if d in src.tok_map else (1, 0) for d in src.out_map)
    return OneHotUse(
        input=i,
        leaf=k,
        dims=m,
        tok_dims=tuple(to_consumer[d] for d in src.tok_map),  # type: ignore[misc]
        cls_dim=to_consumer[src.ids_map[0]],  # type: ignore[arg-type]
        shape_src=shape_src,
        tok_align=Aligner.build(src.tok_map, n),
        ids_align=Aligner.build(src.ids_map, n),
        out_unalign=Unaligner.build(src.out_map, n),
        dtype=src.dtype,
    )


def _constant_leaves(block: Block, ins: Sequence[SSAValue], leaves: Sequence[tuple[SSAValue, int]]) -> dict[int, np.ndarray]:
    """Leaf position -> the value of a dense `arith.constant` input that the leaf reads
    unchanged (its block argument itself)."""
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ShapedType

    from shardc.runtime.helpers import dense_to_array

    out: dict[int, np.ndarray] = {}
    for k, (v, i) in enumerate(leaves):
        if i < 0 or v is not block.args[i]:
            continue
        cst = ins[i].owner
        t = ins[i].type
        if isinstance(cst, arith.ConstantOp) and isinstance(cst.value, DenseIntOrFPElementsAttr) and isinstance(t, ShapedType):
            try:
                out[k] = dense_to_array(cst.value, tuple(t.get_shape()), np_dtype(elem_type(t)))
            except Exception:  # an attribute the decoder does not read: no specialisation
                continue
    return out


def _free_layout(spec: StructuredSpec) -> bool:
    """Whether a contraction's result is the matmul's own array (no fixed output dims,
    no constant-0 output axes), so its memory layout can be chosen."""
    assert spec.plan is not None
    return spec.plan.out_take is None and None not in spec.out_map and len(spec.out_map) > 1


def _consumer_layout(v: SSAValue) -> tuple[int, ...] | None:
    """The memory order (outermost first) of `v`'s axes that makes its only user, a
    transpose (`linalg.transpose`, or a generic that copies its one input through
    permutation maps), read it as a C-ordered view: torch-mlir's attention writes
    `bhmn`, transposes to `bmhn` and collapses heads into features, which then is a
    view instead of a copy. None: keep C order."""
    uses = list(v.uses)
    if len(uses) != 1:
        return None
    user = uses[0].operation
    if not isinstance(user, linalg.TransposeOp | linalg.GenericOp) or len(user.inputs) != 1 or user.inputs[0] is not v:
        return None
    if not user.results or any(t != "parallel" for t in _generic_iters(user)):  # type: ignore[arg-type]
        return None
    block = user.body.blocks.first
    if block is None or len(list(block.ops)) != 1 or list(list(block.ops)[0].operands) != [block.args[0]]:
        return None
    try:
        m_in, m_out = maps_of(user, user.get_indexing_maps().data)
    except Exception:
        return None
    n = len(m_in)
    if None in m_in or None in m_out or sorted(m_in) != list(range(n)) or sorted(m_out) != list(range(n)):  # type: ignore[type-var]
        return None
    lay = tuple(m_in.index(d) for d in m_out)
    return None if lay == tuple(range(n)) else lay


def _is_zero_fill(v: SSAValue) -> bool:
    """Whether a tensor init is `linalg.fill` of a constant zero (the common matmul init)."""
    from xdsl.dialects.builtin import FloatAttr, IntegerAttr

    fill = v.owner
    if not isinstance(fill, linalg.FillOp) or _is_memref(v):
        return False
    cst = fill.inputs[0].owner
    if not isinstance(cst, arith.ConstantOp):
        return False
    val = cst.value
    return isinstance(val, FloatAttr | IntegerAttr) and val.value.data == 0 and str(val.value.data) != "-0.0"


def _is_memref(v: SSAValue) -> bool:
    from xdsl.dialects.builtin import MemRefType

    return isinstance(v.type, MemRefType)


def _stack_cases(block: Block, n_ins: int, yields: Sequence[SSAValue], maps: Sequence[Map]) -> tuple[int, tuple[int, ...]] | None:
    """A body that stacks its inputs along loop dim d: `select(index(d) == 0, in_a,
    select(index(d) == 1, in_b, ... in_z))`, no input reading d, the output writing it.
    Returns (d, the input of each index); run as slice copies, not as a chain of
    `where`s over broadcast index grids (the stacked q/k/v gradients of a GPT)."""
    if len(yields) != 1 or len(maps) != n_ins + 1:
        return None
    cases: dict[int, int] = {}
    dim: int | None = None
    v = yields[0]
    while isinstance(v.owner, arith.SelectOp):
        sel = v.owner
        cmp = sel.cond.owner
        if not isinstance(cmp, arith.CmpiOp) or cmp.predicate.value.data != 0:  # eq
            return None
        idx = next((o.owner for o in cmp.operands if isinstance(o.owner, linalg.IndexOp)), None)
        cst = next((o.owner for o in cmp.operands if isinstance(o.owner, arith.ConstantOp)), None)
        arg = sel.lhs
        if idx is None or cst is None or not isinstance(arg, BlockArgument) or arg.block is not block or arg.index >= n_ins:
            return None
        d = idx.dim.value.data
        if dim is not None and d != dim:
            return None
        dim = d
        k = cst.value.value.data  # type: ignore[union-attr]
        if not isinstance(k, int) or k in cases:
            return None
        cases[k] = arg.index
        v = sel.rhs
    if dim is None or not isinstance(v, BlockArgument) or v.block is not block or v.index >= n_ins:
        return None
    rest = [k for k in range(len(cases) + 1) if k not in cases]
    if len(rest) != 1 or sorted([*cases, *rest]) != list(range(len(cases) + 1)):
        return None
    cases[rest[0]] = v.index
    if dim not in maps[n_ins] or any(dim in maps[i] for i in set(cases.values())):
        return None
    return dim, tuple(cases[k] for k in range(len(cases)))


def _emit_body_fn(g: FunctionBuilder, block: Block, n_ins: int, values: Sequence[SSAValue], with_outs: bool) -> str:
    """Emit a nested `def` evaluating `values` from the block arguments (as arrays)."""
    name = g.fresh("body")
    args = list(block.args) if with_outs else list(block.args[:n_ins])
    arg_names = [g.define(a, vec=True) for a in args]
    g.emit(f"def {name}({', '.join([*arg_names, '_ix'])}):")
    g.depth += 1
    saved_vector = g.vector
    g.vector = True
    g.emit_ops(_slice_ops(block, values))
    g.vector = saved_vector
    g.emit(f"return {tuple_expr(g.vs(values))}" if values else "return ()")
    g.depth -= 1
    return name


def maps_of(op: Operation, attr: Sequence[AffineMapAttr]) -> list[Map]:
    return [map_dims(op, a.data) for a in attr]
