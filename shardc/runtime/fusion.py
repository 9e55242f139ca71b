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
`cf.assert`s and `tensor.extract` gathers: they move with the ops they check.
Contractions and reductions are never consumers, so their matmul and ufunc-reduce paths
stay as they are.
"""

from __future__ import annotations

from xdsl.dialects.builtin import AffineMapAttr, ModuleOp, TensorType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp, IndexOp, YieldOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.rewriter import Rewriter


def fuse_elementwise(module: ModuleOp) -> int:
    """Fuse single-use elementwise producers into elementwise consumers, in place, in
    every block of `module`; returns the number of fusions. Blocks are walked forward,
    so a consumer meets its producers already fused with theirs: chains fuse whole."""
    count = 0
    blocks = [b for op in module.walk() for r in op.regions for b in r.blocks]
    for block in blocks:
        for op in list(block.ops):
            while isinstance(op, GenericOp) and _elementwise(op):
                i = next((i for i, v in enumerate(op.inputs) if _fusable(op, v)), None)
                if i is None:
                    break
                op = _fuse(op, i)
                count += 1
    return count


def _elementwise(op: GenericOp) -> bool:
    return (
        bool(op.results)
        and all(t.data == IteratorType.PARALLEL for t in op.iterator_types.data)  # pyright: ignore[reportUnknownMemberType]
        and all(isinstance(v.type, TensorType) for v in op.outputs)
    )


def _fusable(consumer: GenericOp, value: SSAValue) -> bool:
    producer = value.owner
    if not isinstance(producer, GenericOp) or producer.parent is not consumer.parent:
        return False
    if not _elementwise(producer):
        return False
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
    if any(not _after(user, consumer) for user in others):
        return False  # a use the fused op would not dominate
    if others and not _permutation(consumer.indexing_maps.data[slots[0]].data):
        return False  # kept for other users, the results must cover the consumer's loops
    body = producer.body.block
    if any(arg.first_use is not None for arg in body.args[n_pin:]):
        return False  # the body reads its init
    return not any(isinstance(o, IndexOp) for o in body.walk())


def _permutation(m: AffineMap) -> bool:
    dims = [e.position for e in m.results if isinstance(e, AffineDimExpr)]
    return len(dims) == len(m.results) == m.num_dims and sorted(dims) == list(range(m.num_dims))


def _after(user: Operation, consumer: GenericOp) -> bool:
    """Whether `user` comes after `consumer` (itself or an op holding it, in its block)."""
    while user.parent is not consumer.parent:
        parent = user.parent_op()
        if parent is None:
            return False
        user = parent
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


__all__ = ["fuse_elementwise"]
