"""Vectorized execution of linalg structured ops (generic and named alike).

The body is classified once, at compile time:

- *contraction*: `yield add(out, mul(f0(in_a), f1(in_b), ...))` where each factor depends
  on one input (casts allowed) -> batched matmul (2 factors) or `einsum` (more), added to
  the init;
- *reduction*: `yield comb(out, e)` with `e` free of `out` and `comb` associative and
  commutative -> `e` on the whole iteration space, reduced along the reduction dims by the
  combiner's ufunc, combined with the init;
- *elementwise* (no reduction dims): the body once, on whole arrays, each block argument
  bound to its operand transposed/broadcast into loop order by its indexing map;
- anything else: the general path, the body evaluated on whole arrays over the parallel
  dims once per point of the reduction dims (in loop order, so any body is exact),
  with a warning naming the op.

`linalg.index` reads broadcast index grids. Indexing maps must be projected permutations
(dims, or the constant 0 on size-1 dims).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap

from shardc.runtime.compile import FunctionBuilder, compile_error, describe, targets, tuple_expr
from shardc.runtime.dtypes import elem_type, is_shaped, np_dtype

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

    @staticmethod
    def build(m: Map, n_loops: int) -> Aligner:
        take = tuple(0 if d is None else slice(None) for d in m) if None in m else None
        dims = [d for d in m if d is not None]
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        perm = tuple(order) if order != list(range(len(dims))) else None
        expand = tuple(d for d in range(n_loops) if d not in dims)
        return Aligner(take, perm, expand)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.take is not None:
            x = x[self.take]
        if self.perm is not None:
            x = x.transpose(self.perm)
        if self.expand:
            x = np.expand_dims(x, self.expand)
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

    kind: str  # elementwise | contraction | reduction | general
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
        shape = [1 if d in un.squeeze else sizes[d] for d in range(spec.n_loops)]
        arr = np.broadcast_to(np.asarray(v), shape)
        res = un(arr)
        if spec.out_is_tensor[k]:
            results.append(res.astype(spec.out_dtypes[k], copy=False))
        else:
            outs[k][...] = res
    return tuple(results)


def run_structured(spec: StructuredSpec, body: Callable[..., tuple[object, ...]], ins: Sequence[object], outs: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    sizes = spec.sizes([*ins, *outs])  # type: ignore[list-item]
    if spec.kind == "contraction":
        return _run_contraction(spec, body, ins, outs, sizes)
    aligned_in = [a(x) if a is not None else x for a, x in zip(spec.in_align, ins)]  # type: ignore[arg-type]
    ix = spec.index_grids(sizes) if spec.uses_index else None
    if spec.kind == "elementwise":
        aligned_out = [a(x) for a, x in zip(spec.out_align, outs)]
        return _finish(spec, body(*aligned_in, *aligned_out, ix), outs, sizes)
    if spec.kind == "reduction":
        exprs = body(*aligned_in, ix)
        vals = []
        full = tuple(sizes)
        for k, (red, comb, unsigned) in enumerate(spec.combiners):
            dt = spec.out_dtypes[k]
            e = np.broadcast_to(np.asarray(exprs[k], dtype=dt), full)
            init = spec.out_align[k](outs[k])
            if unsigned:
                from shardc.runtime.helpers import uview

                r = red(uview(e, dt), axis=spec.red_dims, keepdims=True)
                vals.append(comb(uview(init, dt), r).view(dt))
            else:
                r = red(e, axis=spec.red_dims, keepdims=True, dtype=dt)
                vals.append(comb(init, r))
        return _finish(spec, vals, outs, sizes)
    return _run_general(spec, body, aligned_in, outs, sizes)


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


def contract2(a: np.ndarray, sa: Map, b: np.ndarray, sb: Map, so: Sequence[int], sizes: Sequence[int]) -> np.ndarray:
    """Contract two operands (axes labelled by loop dims) into axes `so` via matmul."""
    sa_l, sb_l = [d for d in sa], [d for d in sb]
    # Sum out dims private to one operand and absent from the output.
    for x_name in ("a", "b"):
        x, s, other = (a, sa_l, sb_l) if x_name == "a" else (b, sb_l, sa_l)
        private = [i for i, d in enumerate(s) if d not in other and d not in so]
        if private:
            x = x.sum(axis=tuple(private))
            s = [d for i, d in enumerate(s) if i not in private]
            if x_name == "a":
                a, sa_l = x, s
            else:
                b, sb_l = x, s
    batch = [d for d in so if d in sa_l and d in sb_l]
    contr = [d for d in sa_l if d in sb_l and d not in so]
    afree = [d for d in sa_l if d not in sb_l]
    bfree = [d for d in sb_l if d not in sa_l]
    bs = [sizes[d] for d in batch]
    m = int(np.prod([sizes[d] for d in afree], dtype=np.int64))
    k = int(np.prod([sizes[d] for d in contr], dtype=np.int64))
    n = int(np.prod([sizes[d] for d in bfree], dtype=np.int64))
    pa = [sa_l.index(d) for d in batch + afree + contr]
    pb = [sb_l.index(d) for d in batch + contr + bfree]
    A = a.transpose(pa).reshape(bs + [m, k])
    B = b.transpose(pb).reshape(bs + [k, n])
    C = np.matmul(A, B)
    got = batch + afree + bfree
    C = C.reshape(bs + [sizes[d] for d in afree] + [sizes[d] for d in bfree])
    present = [d for d in so if d in got]
    perm = [got.index(d) for d in present]
    if perm != list(range(len(perm))):
        C = C.transpose(perm)
    return C


def _run_contraction(spec: StructuredSpec, leaves_fn: Callable[..., tuple[object, ...]], ins: Sequence[object], outs: Sequence[np.ndarray], sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    leaves = leaves_fn(*ins, None)
    factors: list[tuple[np.ndarray, Map]] = []
    scale: object = None
    for k, leaf in enumerate(leaves):
        i = spec.factor_inputs[k]
        if i < 0:
            scale = leaf if scale is None else scale * leaf  # type: ignore[operator]
            continue
        m = spec.in_maps[i]
        x = np.asarray(leaf)
        if None in m:
            x = x[tuple(0 if d is None else slice(None) for d in m)]
            m = tuple(d for d in m if d is not None)
        factors.append((x, m))
    so = [d for d in spec.out_map if d is not None]
    dt = spec.out_dtypes[0]
    fresh = True
    if len(factors) == 1:
        (x, m), = factors
        x = np.asarray(x)
        private = tuple(i for i, d in enumerate(m) if d not in so)
        r = x.sum(axis=private, dtype=dt) if private else x
        fresh = bool(private)
        rest = [d for d in m if d in so]
        r = r.transpose([rest.index(d) for d in so if d in rest])
    elif len(factors) == 2:
        (a, ma), (b, mb) = factors
        r = contract2(a, ma, b, mb, so, sizes)
    else:
        letters = {d: chr(ord("a") + d) for d in range(spec.n_loops)}
        subs = ",".join("".join(letters[d] for d in m) for _, m in factors)
        present = {d for _, m in factors for d in m}
        out_s = "".join(letters[d] for d in so if d in present)
        r = np.einsum(f"{subs}->{out_s}", *[x for x, _ in factors], optimize="greedy")
    present = {d for _, m in factors for d in m}
    missing_red = [d for d in spec.red_dims if d not in present]
    if missing_red:
        r, fresh = r * dt.type(int(np.prod([sizes[d] for d in missing_red]))), True
    if scale is not None:
        r, fresh = r * scale, True
    missing_out = [i for i, d in enumerate(so) if d not in present]
    if missing_out:
        r, fresh = np.broadcast_to(np.expand_dims(r, tuple(missing_out)), [sizes[d] for d in so]), False
    if None in spec.out_map:
        r = np.expand_dims(r, tuple(i for i, d in enumerate(spec.out_map) if d is None))
    init = outs[0]
    r = np.asarray(r)
    if spec.zero_init and spec.out_is_tensor[0]:
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
    """The ops of `block` the values depend on, in block order."""
    needed: set[Operation] = set()
    stack = [v for v in values]
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


def emit_structured(
    op: Operation,
    g: FunctionBuilder,
    ins: Sequence[SSAValue],
    outs: Sequence[SSAValue],
    maps: Sequence[Map],
    iter_types: Sequence[str],
    block: Block,
) -> None:
    """Emit a call to `run_structured` for a structured op with the given maps and body."""
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
    leaves = _classify_contraction(block, n_ins, yields, memo) if red_dims and len(outs) == 1 else None
    reduction = None if leaves is not None or not red_dims else _classify_reduction(block, n_ins, yields, memo)
    if leaves is not None and all(is_shaped(ins[i].type) for _, i in leaves if i >= 0):
        spec.kind = "contraction"
        spec.zero_init = _is_zero_fill(outs[0])
        spec.out_map = maps[n_ins]
        spec.factor_inputs = [i for _, i in leaves]
        body_values = [v for v, _ in leaves]
        params = ["ins"]
    elif reduction is not None:
        spec.kind = "reduction"
        spec.combiners = [_REDUCERS[type(c)] for c, _ in reduction]  # type: ignore[misc]
        body_values = [e for _, e in reduction]
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
        body_values = yields
        params = ["ins", "outs"]
    body_name = _emit_body_fn(g, block, n_ins, body_values, with_outs="outs" in params)
    spec_name = g.const(spec, "spec")
    call = f"{g.const(run_structured, 'run_structured')}({spec_name}, {body_name}, {tuple_expr(g.vs(ins)) if ins else '()'}, {tuple_expr(g.vs(outs))})"
    tensor_results = list(op.results)
    if tensor_results:
        names = [g.res(op, i, vec=False) for i in range(len(tensor_results))]
        g.emit(f"{targets(names)} = {call}")
    else:
        g.emit(call)


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
