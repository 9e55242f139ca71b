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
- *first match*: `yield select(out == C, select(cond, e, out), out)` -> `e` at the
  first reduction point where `cond` holds (`argmax` of cond over the flattened
  reduction dims), where the init is still C (torch-mlir's max-pool indices);
- *elementwise* (no reduction dims): the body once, on whole arrays, each block argument
  bound to its operand transposed/broadcast into loop order by its indexing map;
- anything else: the general path, the body evaluated on whole arrays over the parallel
  dims once per point of the reduction dims (in loop order, so any body is exact),
  with a warning naming the op.

`linalg.index` reads broadcast index grids; `tensor.extract` with such indices is a numpy
gather (`kernels/tensor.py`); `cf.assert` in a body checks the whole array at once.
Indexing maps are projected permutations (dims, or the constant 0 on size-1 dims); an
input read through affine sums of dims (a convolution's image) is given as a strided
view whose axes are those dims (`window.py`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from xdsl.dialects import arith, cf
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.builtin import AffineMapAttr, BFloat16Type, Float32Type, TensorType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from shardc.ir.segments import ins_outs
from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, describe, targets, tuple_expr
from shardc.runtime.execute.dtypes import elem_type, is_shaped, np_dtype
from shardc.runtime.codegen.donation import inplace_inits, inplace_pairs
from shardc.runtime.codegen.kernels.fused import build_kernel
from shardc.runtime.execute.window_run import WindowPlan, run_windowed
from shardc.runtime.codegen.horizontal import build_group
from shardc.runtime.execute.horizontal_run import Member, run_group

from shardc.runtime.execute.structured_run import (
    Aligner,
    ArgReduce,
    Map,
    OneHotUse,
    StructuredSpec,
    Unaligner,
    build_contraction_plan,
    run_structured,
)
from shardc.runtime.codegen.window import depthwise_plan, map_dims, shift_plan


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


def _widened_bf16_leaves(leaves: Sequence[tuple[SSAValue, int]], block: Block, n_ins: int) -> tuple[int, ...]:
    """The contraction leaves that are `arith.extf` of a bf16 input to f32 (a matmul of bf16
    operands into a float32 result): the body leaves them bf16, for a bf16 GEMM
    (`structured_run._widen`)."""
    found = []
    for k, (v, _) in enumerate(leaves):
        op = v.owner
        if isinstance(op, arith.ExtFOp) and isinstance(op.input.type, BFloat16Type) and isinstance(op.result.type, Float32Type):
            src = op.input
            if isinstance(src, BlockArgument) and src.block is block and src.index < n_ins:
                found.append(k)
    return tuple(found)


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


def _classify_first_match(block: Block, n_ins: int, yields: Sequence[SSAValue], memo: dict[SSAValue, frozenset[int]]) -> tuple[SSAValue, SSAValue, object] | None:
    """(cond, value, sentinel) for `yield select(out == sentinel, select(cond, value, out),
    out)`, cond and value free of the output: the value at the first reduction point (in
    loop order) where cond holds, kept from there on (torch-mlir's max-pool indices)."""
    if len(yields) != 1 or len(block.args) != n_ins + 1:
        return None
    out = block.args[n_ins]
    outer = yields[0].owner
    if not isinstance(outer, arith.SelectOp) or not _inside(outer, block) or outer.rhs is not out:
        return None
    test, inner = outer.cond.owner, outer.lhs.owner
    if not isinstance(test, arith.CmpiOp) or test.predicate.value.data != 0 or not _inside(test, block):
        return None
    a, b = test.operands
    other = b if a is out else a if b is out else None
    sentinel = _scalar_constant(other) if other is not None else None
    if sentinel is None or not isinstance(inner, arith.SelectOp) or not _inside(inner, block) or inner.rhs is not out:
        return None
    if any(i >= n_ins for v in (inner.cond, inner.lhs) for i in _deps(v, block, memo)):
        return None
    return inner.cond, inner.lhs, sentinel


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


def onehot_source(v: SSAValue) -> _OneHotSrc | None:
    op = v.owner
    if not isinstance(op, linalg.GenericOp) or len(op.results) != 1:
        return None
    inputs, outputs = ins_outs(op)
    if len(inputs) != 2 or len(outputs) != 1:
        return None
    if _is_memref(outputs[0]) or any(not is_shaped(x.type) for x in inputs):
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
            return _OneHotSrc(inputs[1 - j], inputs[j], tok_map, ids_map, maps[2], np_dtype(elem_type(outputs[0].type)))
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
        src = onehot_source(ins[i])
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
    if not isinstance(op, linalg.GenericOp) or len(op.results) != 1 or onehot_source(op.results[0]) is None:
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
            user_ins, user_outs = ins_outs(user)
            found = _onehot_use(list(user_ins), list(user_outs), maps, _generic_iters(user), user.body.block)
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
    windows: WindowPlan | None = None,
) -> tuple[StructuredSpec, str] | None:
    """Emit a call to `run_structured` for a structured op with the given maps and body.
    With `windows`, the inputs it names are read as strided views (`window.py`), whose
    maps `maps` holds. A member of a horizontal group (`shardc.runtime.codegen.horizontal`) emits its whole group
    where the first member comes; with `collect`, only the body is emitted and the spec
    and the call's argument tuple are returned, for the group's call."""
    if not collect and (group := g.cg.hgroups.get(op)) is not None:
        if op.results[0] not in g.names:  # the group's first member: run them all here
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
    first = None if leaves is not None or reduction is not None or arg is not None or not by_ins else _classify_first_match(block, n_ins, yields, memo)
    if leaves is not None and all(is_shaped(ins[i].type) for _, i in leaves if i >= 0):
        spec.kind = "contraction"
        spec.zero_init = _is_zero_fill(outs[0])
        spec.out_map = maps[n_ins]
        spec.factor_inputs = [i for _, i in leaves]
        spec.plan = build_contraction_plan(spec, _constant_leaves(block, ins, leaves))
        spec.windowed = windows is not None
        spec.init_inplace = 0 in inplace_inits(op) and spec.out_is_tensor[0]
        if op.results and _free_layout(spec):
            spec.out_layout = _consumer_layout(op.results[0])
        found = _onehot_use(ins, outs, maps, iter_types, block) if isinstance(op, linalg.GenericOp) else None
        if found is not None:
            i, k, src = found
            spec.onehot = _onehot_spec(i, k, maps[i], src)
            onehot_args = (i, src)
        body_values = [v for v, _ in leaves]
        if windows is None and spec.onehot is None:
            spec.widened = _widened_bf16_leaves(leaves, block, n_ins)
            body_values = [v.owner.operands[0] if k in spec.widened else v for k, v in enumerate(body_values)]  # type: ignore[union-attr]
        params = ["ins"]
    elif reduction is not None:
        spec.kind = "reduction"
        spec.windowed = windows is not None
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
    elif first is not None:
        spec.kind = "firstmatch"
        cond, value, spec.sentinel = first
        body_values = [cond, value]
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
    body_name = emit_body_fn(g, block, n_ins, body_values, with_outs="outs" in params)
    spec_name = g.const(spec, "spec")
    in_names = list(g.vs(ins)) if onehot_args is None else [
        "None" if k == onehot_args[0] and _onehot_elided(v.owner) else g.v(v) for k, v in enumerate(ins)  # type: ignore[arg-type]
    ]
    aux = "" if onehot_args is None else f", ({g.v(onehot_args[1].tok)}, {g.v(onehot_args[1].ids)})"
    in_expr = tuple_expr(in_names) if ins else "()"
    if windows is not None and collect:
        in_expr = f"{g.const(windows, 'windows')}({in_expr}, {tuple_expr(g.vs(outs))})"
    if collect:
        return spec, f"({spec_name}, {body_name}, {in_expr}, {tuple_expr(g.vs(outs))})"
    if windows is not None:
        if leaves is not None and spec.kind == "contraction":
            direct = all(v is block.args[i] for v, i in leaves)
            windows = replace(windows, shift=shift_plan(windows, spec, direct), depthwise=depthwise_plan(windows, spec, direct))
        call = f"{g.const(run_windowed, 'run_windowed')}({spec_name}, {body_name}, {g.const(windows, 'windows')}, {in_expr}, {tuple_expr(g.vs(outs))})"
    else:
        call = f"{g.const(run_structured, 'run_structured')}({spec_name}, {body_name}, {in_expr}, {tuple_expr(g.vs(outs))}{aux})"
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

    from shardc.runtime.execute.helpers import dense_to_array

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


def emit_body_fn(g: FunctionBuilder, block: Block, n_ins: int, values: Sequence[SSAValue], with_outs: bool) -> str:
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


def emit_group(ops: Sequence[Operation], g: object) -> None:
    """Emit the group's members' bodies and one `run_group` call defining every
    member's results (`emit_structured` calls this at the group's first member)."""
    members: list[Member] = []
    parts: list[str] = []
    for op in ops:
        assert isinstance(op, linalg.GenericOp)
        iters = [str(t.data).split(".")[-1].lower() for t in op.iterator_types.data]  # pyright: ignore[reportUnknownMemberType]
        got = emit_structured(op, g, list(op.inputs), list(op.outputs), maps_of(op, op.indexing_maps.data), iters, op.body.block, collect=True)  # type: ignore[arg-type]
        assert got is not None
        spec, call = got
        shape = next(tuple(v.type.get_shape()) for v in op.operands if isinstance(v.type, TensorType))  # type: ignore[union-attr]
        members.append(Member(spec, shape))
        parts.append(call)
    names = [g.res(op, i, vec=False) for op in ops for i in range(len(op.results))]  # type: ignore[attr-defined]
    group = g.const(build_group(members), "hgroup")  # type: ignore[attr-defined]
    g.emit(f"{targets(names)} = {g.const(run_group, 'run_group')}({group}, ({', '.join(parts)},))")  # type: ignore[attr-defined]
