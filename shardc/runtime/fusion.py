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
used only by that consumer (by several of its inputs when they read it through the same
map: torch-mlir squares with `mulf %in, %in_0` of two operands that are one value),
read through a permutation (its output map), its body neither reading its init nor
using `linalg.index` (the fused loops are the consumer's). Bodies keep their
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
    if sum(1 for _ in value.uses) != len(slots) or len({consumer.indexing_maps.data[k].data for k in slots}) != 1:
        return False
    body = producer.body.block
    if any(arg.first_use is not None for arg in body.args[len(producer.inputs) :]):
        return False  # the body reads its init
    if any(isinstance(o, IndexOp) for o in body.walk()):
        return False
    out_map = producer.indexing_maps.data[-1].data
    dims = [e.position for e in out_map.results if isinstance(e, AffineDimExpr)]
    return len(dims) == len(out_map.results) == out_map.num_dims and sorted(dims) == list(range(out_map.num_dims))


def _slots(consumer: GenericOp, value: SSAValue) -> list[int]:
    """The consumer's inputs that are `value` (its uses, when all are inputs of it)."""
    return [k for k, v in enumerate(consumer.inputs) if v is value]


def _fuse(consumer: GenericOp, i: int) -> GenericOp:
    """Replace `consumer` by one generic that also computes its input #i's producer
    (once, for every input slot that reads it)."""
    producer = consumer.inputs[i].owner
    assert isinstance(producer, GenericOp)
    same = _slots(consumer, consumer.inputs[i])
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
    keep = [k for k in range(n_in) if k not in same]
    before, after = [k for k in keep if k < i], [k for k in keep if k > i]
    inputs = [*(consumer.inputs[k] for k in before), *producer.inputs, *(consumer.inputs[k] for k in after)]
    new_maps = [*(maps[k] for k in before), *composed, *(maps[k] for k in after)]
    c_body, p_body = consumer.body.block, producer.body.block
    c_args = list(c_body.args)
    p_ins = p_body.args[: len(producer.inputs)]
    old_args = [*(c_args[k] for k in before), *p_ins, *(c_args[k] for k in after), *c_args[n_in:]]
    block = Block(arg_types=[a.type for a in old_args])
    mapping: dict[SSAValue, SSAValue] = dict(zip(old_args, block.args))
    for op in p_body.ops:
        if isinstance(op, YieldOp):
            for k in same:
                mapping[c_args[k]] = mapping.get(op.operands[0], op.operands[0])
            continue
        block.add_op(op.clone(mapping))
    for op in c_body.ops:
        block.add_op(op.clone(mapping))
    fused = GenericOp(
        inputs,
        list(consumer.outputs),
        Region(block),
        [AffineMapAttr(m) for m in [*new_maps, *maps[n_in:]]],
        consumer.iterator_types,
        [r.type for r in consumer.results],
    )
    if (loc := getattr(consumer, "location", None)) is not None:
        fused.location = loc  # type: ignore[attr-defined]
    for old, new in zip(consumer.results, fused.results):
        new.name_hint = old.name_hint
    Rewriter.replace_op(consumer, fused)
    Rewriter.erase_op(producer)
    return fused


__all__ = ["fuse_elementwise"]
