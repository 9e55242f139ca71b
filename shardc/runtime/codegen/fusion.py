"""Elementwise fusion before code generation.

The runtime runs every linalg op as whole-array numpy calls, so a chain of elementwise
generics (a GELU's derivative, an optimizer update) costs one dispatch, one output
allocation and one result kept alive per op. Fusing a producer into its only consumer
gives one generic whose body holds the whole chain: one dispatch, and temporaries that
the generated body frees as soon as they are dead. (Running fused bodies block by block
to keep temporaries in cache was measured and did not pay: numpy's per-call cost eats
what the cache saves at these sizes.)

This is a rewrite of the runtime's private copy of the module, not a pass of the
pipeline: what the user compiled, printed and counted is unchanged. The rule is
upstream's default for `linalg-fuse-elementwise-ops` restricted to what keeps the
runtime's fast paths: both ops all-parallel generics on tensors, the producer's result
read by the consumer through one map (by several of its inputs when they read it
through the same map: torch-mlir squares with `mulf %in, %in_0` of two operands that
are one value), written through a permutation (its output map), its body neither
reading its init nor using `linalg.index` (the fused loops are the consumer's). As
upstream does, a result with other users still fuses when those users all come after
the consumer and the consumer reads it through a permutation: the fused generic yields
it as an extra result (AdamW's m' and v', returned and read by p', make one pass); a
producer with several results (itself a fusion that kept one) fuses the same way, every
result with other users yielded again, so a chain whose links are all saved for the
backward pass (GELU's pre-activation, its square, its tanh) still becomes one op. Bodies keep their
`cf.assert`s and `tensor.extract` gathers: they move with the ops they check. bf16 joins a
fused op only in the two forms a fused kernel handles as 16-bit patterns (`_bf16_only_cast`):
a float32 value's cast, yielded, and an input that the body only widens to float32 (a
product's epilogue saved in bf16 for the backward, widened where the GELU derivative
reads it: the GPT bf16 step 0.6-0.9% faster on 1 rank, measured).
Contractions and reductions are never consumers, so their matmul and ufunc-reduce paths
stay as they are; what follows one the other way round, `x + contraction` (a gradient
added into its accumulator, a bias added to a projection), is folded into the
contraction as its init instead (`fuse_accumulations`, after donation).
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import AffineMapAttr, BFloat16Type, Float32Type, ModuleOp, TensorType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp, IndexOp, YieldOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.rewriter import Rewriter

from shardc.runtime.codegen.kernels.fused import widened_only


def fuse_elementwise(module: ModuleOp) -> int:
    """Fuse single-use elementwise producers into elementwise consumers, in place, in
    every block of `module`; returns the number of fusions. Blocks are walked forward,
    so a consumer meets its producers already fused with theirs: chains fuse whole."""
    count = 0
    blocks = [b for op in module.walk() for r in op.regions for b in r.blocks]
    for block in blocks:
        order = {op: k for k, op in enumerate(block.ops)}  # `after` without walking the block
        for op in list(block.ops):
            while isinstance(op, GenericOp) and _elementwise(op):
                i = next((i for i, v in enumerate(op.inputs) if _fusable(op, v, order)), None)
                if i is None:
                    break
                fused = _fuse(op, i)
                order[fused] = order[op]  # in the consumer's place
                op = fused
                count += 1
    return count


def _elementwise(op: GenericOp) -> bool:
    return (
        bool(op.results)
        and all(t.data == IteratorType.PARALLEL for t in op.iterator_types.data)  # pyright: ignore[reportUnknownMemberType]
        and all(isinstance(v.type, TensorType) for v in op.outputs)
    )


def _fusable(consumer: GenericOp, value: SSAValue, order: dict[Operation, int] | None = None) -> bool:
    producer = value.owner
    if not isinstance(producer, GenericOp) or producer.parent is not consumer.parent:
        return False
    if not _elementwise(producer):
        return False
    if not _bf16_only_cast(consumer) or not _bf16_only_cast(producer):
        return False  # fused kernels take bf16 only widened on load or as a float32 value's final cast (kernels/fused.py's BF16_BITS)
    if any(_bf16(r) and _slots(consumer, r) for r in producer.results):
        return False  # the consumer would read bf16: a producer's bf16 copy is only yielded again
    slots = _slots(consumer, value)
    if not slots:
        return False
    read = [k for r in producer.results for k in _slots(consumer, r)]  # every result it reads
    if len({consumer.indexing_maps.data[k].data for k in read}) != 1:
        return False
    n_pin = len(producer.inputs)
    out_maps = [m.data for m in producer.indexing_maps.data[n_pin:]]
    if len(set(out_maps)) != 1 or not _permutation(out_maps[0]):
        return False  # one iteration-to-result map for every result it yields
    others = [u.operation for r in producer.results for u in r.uses if u.operation is not consumer]
    if any(not after(user, consumer, order) for user in others):
        return False  # a use the fused op would not dominate
    if others and not _permutation(consumer.indexing_maps.data[slots[0]].data):
        return False  # kept for other users, the results must cover the consumer's loops
    body = producer.body.block
    if any(arg.first_use is not None for arg in body.args[n_pin:]):
        return False  # the body reads its init
    return not any(isinstance(o, IndexOp) for o in body.walk())


def _bf16(v: SSAValue) -> bool:
    t = v.type
    return isinstance(t, TensorType) and t.element_type.name == "bf16"


def _bf16_only_cast(op: GenericOp) -> bool:
    """Whether bf16 enters `op` only as results cast from float32 and yielded (the
    mixed-precision pass's copy of a product's operand) or as inputs its body only
    widens to float32 (a product's epilogue saved in bf16 for the backward,
    `mixed_precision.save_epilogues_in_bf16`): such a chain runs as one fused kernel
    loading and storing the bf16 bits; other bf16 (arithmetic on it, a bf16 input
    read otherwise) keeps ops apart, as the numpy path is all a body with those has."""
    block = op.body.block
    if any(_bf16(v) and not widened_only(arg) for v, arg in zip(op.inputs, block.args)):
        return False
    for o in block.ops:
        if any(isinstance(r.type, BFloat16Type) for r in o.results):
            if not (isinstance(o, arith.TruncFOp) and isinstance(o.input.type, Float32Type) and all(isinstance(u.operation, YieldOp) for u in o.result.uses)):
                return False
    return True


def _permutation(m: AffineMap) -> bool:
    dims = [e.position for e in m.results if isinstance(e, AffineDimExpr)]
    return len(dims) == len(m.results) == m.num_dims and sorted(dims) == list(range(m.num_dims))


def after(user: Operation, consumer: GenericOp, order: dict[Operation, int] | None = None) -> bool:
    """Whether `user` comes after `consumer` (itself or an op holding it, in its block;
    `row_fusion` asks it of a chain's last member); `order`: positions in that block
    (walking it from `consumer` was quadratic: 1.8 M steps, 0.3-0.5 s of the GPT step's
    cold compile)."""
    while user.parent is not consumer.parent:
        parent = user.parent_op()
        if parent is None:
            return False
        user = parent
    if order is not None and (u := order.get(user)) is not None and (c := order.get(consumer)) is not None:
        return c < u
    return consumer.is_before_in_block(user)


def _slots(consumer: GenericOp, value: SSAValue) -> list[int]:
    """The consumer's inputs that are `value` (its uses, when all are inputs of it)."""
    return [k for k, v in enumerate(consumer.inputs) if v is value]


def _fuse(consumer: GenericOp, i: int) -> GenericOp:
    """Replace `consumer` by one generic that also computes its input #i's producer
    (once, for every input slot that reads one of its results); the producer's results
    with other users are yielded by the fused op as well."""
    value = consumer.inputs[i]
    producer = value.owner
    assert isinstance(producer, GenericOp)
    n_pin = len(producer.inputs)
    reads = [_slots(consumer, r) for r in producer.results]  # per producer result
    same = sorted(k for ks in reads for k in ks)
    kept = [j for j, r in enumerate(producer.results) if any(u.operation is not consumer for u in r.uses)]
    maps = [m.data for m in consumer.indexing_maps.data]
    p_maps = [m.data for m in producer.indexing_maps.data]
    # Producer loop j is the consumer expression that reads its results' dim k, p_out[k] = j.
    p_out = p_maps[n_pin]
    at = {e.position: maps[i].results[k] for k, e in enumerate(p_out.results)}  # type: ignore[attr-defined]
    composed = [
        AffineMap(maps[i].num_dims, 0, tuple(at[e.position] if isinstance(e, AffineDimExpr) else e for e in m.results))
        for m in p_maps[:n_pin]
    ]
    n_in = len(consumer.inputs)
    rest = [k for k in range(n_in) if k not in same]
    before, after = [k for k in rest if k < i], [k for k in rest if k > i]
    inputs = [*(consumer.inputs[k] for k in before), *producer.inputs, *(consumer.inputs[k] for k in after)]
    new_maps = [*(maps[k] for k in before), *composed, *(maps[k] for k in after)]
    c_body, p_body = consumer.body.block, producer.body.block
    c_args = list(c_body.args)
    p_ins = p_body.args[:n_pin]
    old_args = [*(c_args[k] for k in before), *p_ins, *(c_args[k] for k in after), *c_args[n_in:]]
    extra = [p_body.args[n_pin + j].type for j in kept]
    block = Block(arg_types=[*(a.type for a in old_args), *extra])
    mapping: dict[SSAValue, SSAValue] = dict(zip(old_args, block.args))
    p_yields: list[SSAValue] = []
    for op in p_body.ops:
        if isinstance(op, YieldOp):
            p_yields = [mapping.get(v, v) for v in op.operands]
            for j, ks in enumerate(reads):
                for k in ks:
                    mapping[c_args[k]] = p_yields[j]
            continue
        block.add_op(op.clone(mapping))
    for op in c_body.ops:
        if isinstance(op, YieldOp) and kept:
            block.add_op(YieldOp(*(mapping.get(v, v) for v in op.operands), *(p_yields[j] for j in kept)))
            continue
        block.add_op(op.clone(mapping))
    fused = GenericOp(
        inputs,
        [*consumer.outputs, *(producer.outputs[j] for j in kept)],
        Region(block),
        [AffineMapAttr(m) for m in [*new_maps, *maps[n_in:], *[maps[i]] * len(kept)]],
        consumer.iterator_types,
        [*(r.type for r in consumer.results), *(producer.results[j].type for j in kept)],
    )
    if (loc := getattr(consumer, "location", None)) is not None:
        fused.location = loc  # type: ignore[attr-defined]
    n_c = len(consumer.results)
    for old, new in zip([*consumer.results, *(producer.results[j] for j in kept)], fused.results):
        new.name_hint = old.name_hint
    Rewriter.replace_op(consumer, fused, fused.results[:n_c])
    for t, j in enumerate(kept):
        producer.results[j].replace_all_uses_with(fused.results[n_c + t])
    Rewriter.erase_op(producer)
    return fused


ACCUMULATE = True
"""False: `fuse_accumulations` folds nothing (the baseline for benchmarks and tests; read
at compile time, so turn the compile cache off, `SHARDC_CACHE=0`, when switching it)."""


def fuse_accumulations(module: ModuleOp) -> int:
    """Fold `x + c` into `c`'s contraction as its init, in place, in every block of
    `module`; returns the number of folds.

    A gradient accumulator is `acc + dW` after `dW = sum(a * b)` from zeros: the
    product is kept alive through the backward pass, then read again with `acc` and
    written out once more. A contraction whose body accumulates by `addf` into its init
    computes `init + sum(a * b)`, so `x` can be that init: one op, BLAS adding into it
    (`beta = 1`). Where the add wrote over a donated `x` (`shardc.inplace`), the
    contraction is marked `shardc.inplace_init` and the product lands straight in the
    donated buffer. An `x` read through a broadcast (a bias) becomes the init through a
    broadcasting generic, which the runtime writes into the result's buffer before BLAS
    adds the product (one pass over the result instead of two). The rule: the add is an
    all-parallel generic on tensors, `yield addf(x, c)` in either order, `c` and the
    result through the identity map with one type, `x` through the identity (same type)
    or a projected permutation (same element type); `c` is the only result of a generic
    in the same block, used by the add alone, whose init is `linalg.fill` of zero and
    whose body reads the init once, as an operand of the `addf` it yields; `x` is
    defined before that generic."""
    from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, i64

    from shardc.runtime.codegen.donation import INPLACE_INIT_ATTR, inplace_pairs

    count = 0
    if not ACCUMULATE:
        return count
    blocks = [b for op in module.walk() for r in op.regions for b in r.blocks]
    for block in blocks:
        for add in list(block.ops):
            found = _accumulation(add)
            if found is None:
                continue
            contraction, x, x_map = found
            fill = contraction.outputs[0].owner
            if x_map is not None:  # a broadcast x: materialised as the init, into the fill's tensor.empty
                x = _broadcast(add, x, x_map, fill.outputs[0], contraction)  # type: ignore[union-attr]
            operands = list(contraction.operands)
            operands[-1] = x
            contraction.operands = operands
            pairs = inplace_pairs(add)
            if 0 in pairs and add.inputs[pairs[0]] is x:  # x donated: write the product into it
                contraction.attributes[INPLACE_INIT_ATTR] = ArrayAttr([IntegerAttr(0, i64)])
            contraction.results[0].name_hint = add.results[0].name_hint or contraction.results[0].name_hint
            add.results[0].replace_all_uses_with(contraction.results[0])
            Rewriter.erase_op(add)
            while isinstance(fill, Operation) and not any(r.uses for r in fill.results) and fill.name in ("linalg.fill", "tensor.empty"):
                nxt = fill.operands[-1].owner if fill.name == "linalg.fill" else None
                Rewriter.erase_op(fill)
                fill = nxt
            count += 1
    return count


def _broadcast(add: GenericOp, x: SSAValue, x_map: AffineMap, empty: SSAValue, before: Operation) -> SSAValue:
    """`linalg.generic` yielding `x` read through `x_map` into `empty`, inserted before `before`."""
    t = add.results[0].type
    assert isinstance(t, TensorType)
    elem = t.element_type
    block = Block(arg_types=[elem, elem])
    block.add_op(YieldOp(block.args[0]))
    ident = AffineMap.identity(len(t.get_shape()))
    op = GenericOp([x], [empty], Region(block), [AffineMapAttr(x_map), AffineMapAttr(ident)], add.iterator_types, [t])
    parent = before.parent_block()
    assert parent is not None
    parent.insert_op_before(op, before)
    return op.results[0]


def _accumulation(add: Operation) -> tuple[GenericOp, SSAValue, AffineMap | None] | None:
    """(the contraction, x, x's map where it is not the identity) when `add` is `x + c`
    that `fuse_accumulations` folds."""
    from xdsl.dialects.arith import AddfOp
    from xdsl.ir import BlockArgument

    if not isinstance(add, GenericOp) or not _elementwise(add) or len(add.inputs) != 2 or len(add.results) != 1:
        return None
    t = add.results[0].type
    if not isinstance(t, TensorType):
        return None
    ident = AffineMap.identity(len(t.get_shape()))
    maps = [m.data for m in add.indexing_maps.data]
    if maps[2] != ident:
        return None
    body = add.body.block
    ops = list(body.ops)
    if len(ops) != 2 or not isinstance(ops[0], AddfOp) or not isinstance(ops[1], YieldOp) or list(ops[1].operands) != [ops[0].result]:
        return None
    if {ops[0].lhs, ops[0].rhs} != {body.args[0], body.args[1]} or ops[0].lhs is ops[0].rhs:
        return None
    for j in (0, 1):
        c, x = add.inputs[j], add.inputs[1 - j]
        if c.type != t or maps[j] != ident:
            continue
        x_map = None if x.type == t and maps[1 - j] == ident else maps[1 - j]
        if x_map is not None and not _broadcastable(x, x_map, t):
            continue
        g = c.owner
        if c is x or not isinstance(g, GenericOp) or g.parent is not add.parent or len(g.results) != 1 or len(g.outputs) != 1:
            continue
        if c.uses.get_length() != 1 or any(v is x for v in g.inputs) or not _zero_fill(g.outputs[0]):
            continue
        if all(it.data == IteratorType.PARALLEL for it in g.iterator_types.data):  # pyright: ignore[reportUnknownMemberType]
            continue
        g_body = g.body.block
        init = g_body.args[len(g.inputs)]
        g_yield = g_body.last_op
        if init.uses.get_length() != 1 or not isinstance(g_yield, YieldOp) or len(g_yield.operands) != 1:
            continue
        acc = g_yield.operands[0].owner
        if not isinstance(acc, AddfOp) or acc.parent is not g_body or init not in (acc.lhs, acc.rhs) or acc.result.uses.get_length() != 1:
            continue
        if isinstance(x, BlockArgument):
            if not _encloses(x.block, g):
                continue
        elif not (isinstance(x.owner, Operation) and x.owner.parent is g.parent and x.owner.is_before_in_block(g)):
            continue
        return g, x, x_map
    return None


def _broadcastable(x: SSAValue, m: AffineMap, t: TensorType) -> bool:
    """Whether `x` read through `m` is a broadcast of a static tensor to `t`: distinct
    dims in increasing order, each of the extent it has in `t`."""
    xt = x.type
    if not isinstance(xt, TensorType) or xt.element_type != t.element_type or m.num_symbols or m.num_dims != len(t.get_shape()):
        return False
    if not all(isinstance(e, AffineDimExpr) for e in m.results):
        return False
    dims = [e.position for e in m.results]  # type: ignore[attr-defined]
    shape, full = list(xt.get_shape()), list(t.get_shape())
    return dims == sorted(set(dims)) and len(shape) == len(dims) and all(s == full[d] and s >= 0 for s, d in zip(shape, dims))


def _encloses(block: Block, op: Operation) -> bool:
    parent = op.parent_block()
    while parent is not None:
        if parent is block:
            return True
        owner = parent.parent_op()
        parent = owner.parent_block() if owner is not None else None
    return False


def _zero_fill(v: SSAValue) -> bool:
    """Whether `v` is `linalg.fill` of a constant +0 into a tensor."""
    from xdsl.dialects.arith import ConstantOp
    from xdsl.dialects.builtin import FloatAttr, IntegerAttr
    from xdsl.dialects.linalg.ops import FillOp

    fill = v.owner
    if not isinstance(fill, FillOp) or not isinstance(v.type, TensorType):
        return False
    cst = fill.inputs[0].owner
    if not isinstance(cst, ConstantOp) or not isinstance(cst.value, FloatAttr | IntegerAttr):
        return False
    val = cst.value.value.data
    return val == 0 and str(val) != "-0.0"


__all__ = ["after", "fuse_accumulations", "fuse_elementwise"]
