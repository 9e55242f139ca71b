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
it as an extra result (AdamW's m' and v', returned and read by p', make one pass). Bodies keep their
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
    if len(producer.results) != 1 or not _elementwise(producer):
        return False
    slots = _slots(consumer, value)
    if not slots or len({consumer.indexing_maps.data[k].data for k in slots}) != 1:
        return False
    if any(not _after(u.operation, consumer) for u in value.uses if u.operation is not consumer):
        return False  # a use the fused op would not dominate
    if sum(1 for _ in value.uses) != len(slots) and not _permutation(consumer.indexing_maps.data[slots[0]].data):
        return False  # kept for other users, the value must cover the consumer's loops
    body = producer.body.block
    if any(arg.first_use is not None for arg in body.args[len(producer.inputs) :]):
        return False  # the body reads its init
    if any(isinstance(o, IndexOp) for o in body.walk()):
        return False
    return _permutation(producer.indexing_maps.data[-1].data)


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
    (once, for every input slot that reads it)."""
    value = consumer.inputs[i]
    producer = value.owner
    assert isinstance(producer, GenericOp)
    same = _slots(consumer, value)
    keep = any(u.operation is not consumer for u in value.uses)  # the fused op yields it too
    maps = [m.data for m in consumer.indexing_maps.data]
    p_maps = [m.data for m in producer.indexing_maps.data]
    # Producer loop j is the consumer expression that reads its result's dim k, p_out[k] = j.
    p_out = p_maps[-1]
    at = {e.position: maps[i].results[k] for k, e in enumerate(p_out.results)}  # type: ignore[attr-defined]
    composed = [
        AffineMap(maps[i].num_dims, 0, tuple(at[e.position] if isinstance(e, AffineDimExpr) else e for e in m.results))
        for m in p_maps[: len(producer.inputs)]
    ]
    n_in = len(consumer.inputs)
    kept = [k for k in range(n_in) if k not in same]
    before, after = [k for k in kept if k < i], [k for k in kept if k > i]
    inputs = [*(consumer.inputs[k] for k in before), *producer.inputs, *(consumer.inputs[k] for k in after)]
    new_maps = [*(maps[k] for k in before), *composed, *(maps[k] for k in after)]
    c_body, p_body = consumer.body.block, producer.body.block
    c_args = list(c_body.args)
    p_ins = p_body.args[: len(producer.inputs)]
    old_args = [*(c_args[k] for k in before), *p_ins, *(c_args[k] for k in after), *c_args[n_in:]]
    extra = [p_body.args[len(producer.inputs)].type] if keep else []
    block = Block(arg_types=[*(a.type for a in old_args), *extra])
    mapping: dict[SSAValue, SSAValue] = dict(zip(old_args, block.args))
    p_yield: SSAValue | None = None
    for op in p_body.ops:
        if isinstance(op, YieldOp):
            p_yield = mapping.get(op.operands[0], op.operands[0])
            for k in same:
                mapping[c_args[k]] = p_yield
            continue
        block.add_op(op.clone(mapping))
    for op in c_body.ops:
        if isinstance(op, YieldOp) and keep:
            assert p_yield is not None
            block.add_op(YieldOp(*(mapping.get(v, v) for v in op.operands), p_yield))
            continue
        block.add_op(op.clone(mapping))
    fused = GenericOp(
        inputs,
        [*consumer.outputs, *producer.outputs[:1] * keep],
        Region(block),
        [AffineMapAttr(m) for m in [*new_maps, *maps[n_in:], *[maps[i]] * keep]],
        consumer.iterator_types,
        [*(r.type for r in consumer.results), *[r.type for r in producer.results] * keep],
    )
    if (loc := getattr(consumer, "location", None)) is not None:
        fused.location = loc  # type: ignore[attr-defined]
    for old, new in zip([*consumer.results, *producer.results], fused.results):
        new.name_hint = old.name_hint
    Rewriter.replace_op(consumer, fused, fused.results[: len(consumer.results)])
    if keep:
        value.replace_all_uses_with(fused.results[-1])
    Rewriter.erase_op(producer)
    return fused


__all__ = ["fuse_elementwise"]
