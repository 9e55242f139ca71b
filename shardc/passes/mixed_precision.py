"""`mixed-precision{compute=bf16}`: bf16 matrix products, float32 for
everything else, derived from the IR (the policy `torch.autocast` and FSDP2's
`MixedPrecisionPolicy` apply, as a pass, so any imported model gets it).

- **Products.** Every contraction (`linalg.generic` with reduction loops whose body is
  `out + in0 * in1` over float32 tensors, and `linalg.matmul`/`linalg.batch_matmul`,
  which torch-mlir emits, rewritten to that generic form) reads bf16 copies of its two
  inputs and extends them in its body (`arith.extf`): the runtime runs it as a bf16 GEMM that
  accumulates and writes float32 (`structured_run._widen`, MKL's
  `cblas_gemm_bf16bf16f32` on AMX / AVX512-BF16). Forward and backward products alike:
  the weight gradient `x^T dy` reads the same bf16 copy of `x` as the forward product
  (one cast per value, shared by all its products). Inputs that are constants or made
  from integers only (the one-hot selectors the runtime reads as an index: a gather
  or scatter-add) keep the product in float32; where the other input has a bf16 copy
  anyway (a tied embedding's table, which the head reads), the gather reads that copy:
  one all_gather of it, in bf16. Contractions that are not matrix products
  (`is_gemm_shaped`: a layernorm's sum of squares, its `sum dy * xhat`) run as
  float32 row reductions: the statistics stay float32.
- **Where a cast goes.** Right after the value is made; for a value read through
  `shard.shard ... annotate_for_users` (a parameter resharded from its storage to its
  compute layout) the cast is placed before that annotation, annotated with the
  value's own sharding (propagation would otherwise be free to cast after the
  gather: its cost model counts elements, not bytes) and the annotation is repeated on
  the bf16 copy, so the resharding the compiler derives (FSDP's all_gather of
  parameters, ZeRO's gather) moves bf16: half the bytes. Masters stay float32 in their
  storage layout: only copies are cast.
- **Float32 elsewhere.** Reductions (softmax, layernorm statistics, the loss),
  elementwise ops, activations between products, gradients' accumulation and the whole
  optimizer step keep float32: they are not contractions, so nothing of theirs changes.
  Activations are kept float32 (plus the bf16 copy a product reads) rather than bf16:
  the runtime's fused elementwise and row kernels compute in float32 and write the
  bf16 copy in the same pass as the float32 value (the cast joins their chain:
  `kernels/fused.py`'s BF16_BITS), so the copy costs no pass of its own.
- **Saved in bf16.** One exception, where autocast's bf16 is what the backward reads
  anyway: a product's epilogue (`linear + bias`, an MLP's pre-activation) read again
  past another product (the backward's GELU derivative) is kept to that reader as a
  bf16 copy made after its first reader, extended just before the later one
  (`save_epilogues_in_bf16`): half the bytes held from the forward to the backward.
- **Gradient reduction** is not this pass's: a gradient is the partial sum of a
  product over the split batch, reduced by a collective partition makes on the
  product's float32 result (an all_reduce that simplify merges with the slice into a
  reduce_scatter). Casting that result to bf16 here, before propagation, would not make
  the reduction bf16 (the partial sum is reduced before the cast, and the merged
  reduce_scatter becomes an all_reduce plus a slice, twice the bytes). `--grad-reduce
  bf16` is `reduction-precision`, run after `shard-simplify` on the collectives
  themselves.

`compute=f32` changes nothing (the pipeline stays the float32 one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xdsl.context import Context
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import (
    AffineMapAttr,
    BFloat16Type,
    Float32Type,
    IndexType,
    IntegerType,
    ModuleOp,
    TensorType,
    bf16,
    f32,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from shardc.dialects import shard
from shardc.dialects.linalg import BatchMatmulOp, MatmulOp

Precision = Literal["bf16", "f32"]


def _f32_tensor(t: object) -> bool:
    """A float32 tensor of static shape (a cast's `tensor.empty` needs no sizes)."""
    return isinstance(t, TensorType) and isinstance(t.element_type, Float32Type) and all(d >= 0 for d in t.get_shape())


def _iterators(op: GenericOp) -> list[str]:
    return [str(it.data) for it in op.iterator_types]


def is_contraction(op: Operation) -> bool:
    """Whether `op` is a two-input float32 contraction: reduction loops and a body
    `yield out + in0 * in1`, or `out + (in0 * in1) * c` with `c` a constant from outside
    the body (attention's scaled scores recomputed in the backward: BLAS's alpha),
    reading its inputs directly."""
    if not isinstance(op, GenericOp) or len(op.inputs) != 2 or len(op.outputs) != 1:
        return False
    if "reduction" not in " ".join(_iterators(op)).lower():
        return False
    if not all(_f32_tensor(v.type) for v in (*op.inputs, *op.outputs)):
        return False
    block = op.body.block
    ops = [o for o in block.ops if not isinstance(o, arith.ConstantOp)]
    if len(ops) == 4 and isinstance(ops[1], arith.MulfOp):  # `out + (in0 * in1) * c`: BLAS's alpha
        mul, scale, add, yld = ops
        c = [x for x in scale.operands if x is not mul.result]
        if len(c) != 1 or not isinstance(c[0].owner, arith.ConstantOp):
            return False
        last = scale.result
    elif len(ops) == 3:
        mul, add, yld = ops
        last = mul.result
    else:
        return False
    if not isinstance(mul, arith.MulfOp) or not isinstance(add, arith.AddfOp):
        return False
    a, b, out = block.args
    if {id(x) for x in mul.operands} != {id(a), id(b)} or a is b:
        return False
    if {id(x) for x in add.operands} != {id(out), id(last)}:
        return False
    return list(yld.operands) == [add.result]


def _loop_dims(m: AffineMapAttr) -> set[int]:
    """The loop dimensions an operand's indexing map reads."""
    return {e.position for e in m.data.results if isinstance(e, AffineDimExpr)}


def is_gemm_shaped(op: GenericOp) -> bool:
    """Whether contraction `op` is a matrix product: each input indexes a loop the other
    does not (a GEMM's M and N; batch dims may be shared). A sum of an elementwise
    product (a layernorm's sum of squares, its weight gradient `sum dy * xhat`) is not:
    the runtime runs it as a float32 row reduction, so a bf16 copy would only round it."""
    maps = [_loop_dims(m) for m in op.indexing_maps.data[:2]]
    return bool(maps[0] - maps[1]) and bool(maps[1] - maps[0])


def _from_integers(v: SSAValue) -> bool:
    """Whether `v` is made by a `linalg.generic` reading only integer tensors (a one-hot
    selector `tokens == ids`): its products are a gather or scatter-add that the runtime
    runs in float32 without materialising it, and its values are exact anyway. Read
    through the `shard.shard` annotations on it."""
    while isinstance(v.owner, shard.ShardOp):
        v = v.owner.src
    owner = v.owner
    if not isinstance(owner, GenericOp) or not owner.inputs:
        return False
    return all(isinstance(x.type, TensorType) and isinstance(x.type.element_type, IntegerType | IndexType) for x in owner.inputs)


def _default_maps(op: Operation) -> object:
    """The `indexing_maps` a named product has when none are written (its definition's)."""
    return type(op).get_irdl_definition().properties["indexing_maps"].default_value


def is_named_product(op: Operation) -> bool:
    """A `linalg.matmul`/`linalg.batch_matmul` (torch-mlir's products) of float32 tensors
    with the default maps (no transposed or broadcast variant)."""
    if not isinstance(op, (MatmulOp, BatchMatmulOp)) or len(op.operands) != 3 or len(op.results) != 1:
        return False
    if op.properties.get("indexing_maps", _default_maps(op)) != _default_maps(op):
        return False
    return all(_f32_tensor(v.type) for v in (*op.operands, op.results[0]))


def _generic_product(op: Operation, a: SSAValue, b: SSAValue) -> GenericOp:
    """The generic form of named product `op` reading bf16 `a` and `b`: its own maps,
    iterators and body, which extends the operands to the float32 accumulator's type
    (`get_hidden_region`, as MLIR's named ops cast their inputs)."""
    assert isinstance(op, (MatmulOp, BatchMatmulOp))
    out = op.operands[2]
    region = type(op).get_hidden_region([a, b], [out])
    maps = _default_maps(op)
    return GenericOp([a, b], [out], region, list(maps.data), list(op.get_iterator_types().data), [op.results[0].type])  # type: ignore[attr-defined]


def cast_op(v: SSAValue, to: object) -> list[Operation]:
    """`tensor.empty` and an elementwise `linalg.generic` casting `v` to `to` (bf16 or f32)."""
    t = v.type
    assert isinstance(t, TensorType)
    empty = tensor.EmptyOp([], TensorType(to, t.get_shape()))
    src = t.element_type
    block = Block(arg_types=[src, to])
    cast: Operation = arith.TruncFOp(block.args[0], to) if isinstance(to, BFloat16Type) else arith.ExtFOp(block.args[0], to)
    block.add_ops([cast, YieldOp(cast.results[0])])
    ident = AffineMapAttr(AffineMap.identity(len(t.get_shape())))
    gen = GenericOp(
        [v], [empty.results[0]], Region(block), [ident, ident], [IteratorTypeAttr.parallel()] * len(t.get_shape()), [empty.results[0].type]
    )
    return [empty, gen]


def _insert_after_def(v: SSAValue, ops: list[Operation]) -> None:
    owner = v.owner
    if isinstance(owner, Operation):
        Rewriter.insert_op(ops, InsertPoint.after(owner))
    else:
        assert isinstance(v, BlockArgument)
        Rewriter.insert_op(ops, InsertPoint.at_start(v.block))


def _for_users_chain(v: SSAValue) -> tuple[SSAValue, list[shard.ShardOp]]:
    """The value before the `annotate_for_users` shard ops `v` is read through, and
    those ops (outermost last)."""
    chain: list[shard.ShardOp] = []
    while isinstance(v.owner, shard.ShardOp) and v.owner.annotate_for_users is not None:
        chain.insert(0, v.owner)
        v = v.owner.src
    return v, chain


class _Casts:
    """bf16 copies of float32 values, one per value."""

    def __init__(self) -> None:
        self.copies: dict[SSAValue, SSAValue] = {}

    def bf16(self, v: SSAValue) -> SSAValue:
        got = self.copies.get(v)
        if got is not None:
            return got
        base, chain = _for_users_chain(v)
        ops = cast_op(base, bf16)
        out = ops[-1].results[0]
        if chain and isinstance(base.owner, shard.ShardOp):  # the cast pinned where the value is made
            pin = shard.ShardOp(out, base.owner.sharding)
            ops.append(pin)
            out = pin.results[0]
        for ann in chain:  # the annotation repeated on the copy: the resharding moves bf16
            new = shard.ShardOp(out, ann.sharding, annotate_for_users=True)
            ops.append(new)
            out = new.results[0]
        if chain:
            Rewriter.insert_op(ops, InsertPoint.after(chain[-1]))
        else:
            _insert_after_def(base, ops)
        self.copies[v] = out
        return out


def _read_bf16(op: GenericOp, k: int, value: SSAValue) -> None:
    """Input `k` of contraction `op` reads the bf16 `value`, extended to float32 in the body."""
    op.operands[k] = value
    block = op.body.block
    old = block.args[k]
    new = block.insert_arg(bf16, k)
    ext = arith.ExtFOp(new, f32)
    mul = next(o for o in block.ops if isinstance(o, arith.MulfOp))
    block.insert_op_before(ext, mul)  # after the extensions made before, in input order
    old.replace_all_uses_with(ext.result)
    block.erase_arg(old)


def _erase_dead_annotations(ops: list[shard.ShardOp]) -> None:
    for ann in reversed(ops):
        if ann.parent is not None and not ann.results[0].uses:
            Rewriter.erase_op(ann)


def cast_products(f: func.FuncOp) -> int:
    """bf16 inputs for every contraction of `f` whose inputs are not constants; returns
    how many contractions were changed."""
    casts = _Casts()
    done = 0
    picks: list[tuple[GenericOp, int]] = []  # products of a one-hot: (op, the other input)
    for op in [o for o in f.walk() if is_contraction(o)]:
        assert isinstance(op, GenericOp)
        ins = list(op.inputs)
        onehot = [_from_integers(v) for v in ins]
        if any(onehot) and not all(onehot):
            picks.append((op, onehot.index(False)))
        if any(isinstance(v.owner, arith.ConstantOp) for v in ins) or any(onehot) or not is_gemm_shaped(op):
            continue
        chains = [_for_users_chain(v)[1] for v in ins]
        for k, v in enumerate(ins):
            _read_bf16(op, k, casts.bf16(v))
        for chain in chains:
            _erase_dead_annotations(chain)
        done += 1
    for op in [o for o in f.walk() if is_named_product(o)]:
        ins = list(op.operands[:2])
        chains = [_for_users_chain(v)[1] for v in ins]
        gen = _generic_product(op, casts.bf16(ins[0]), casts.bf16(ins[1]))
        Rewriter.replace_op(op, gen)
        for chain in chains:
            _erase_dead_annotations(chain)
        done += 1
    for op, k in picks:  # a tied embedding gathers rows of the bf16 copy the head reads
        v = op.inputs[k]
        if v in casts.copies:
            chain = _for_users_chain(v)[1]
            _read_bf16(op, k, casts.copies[v])
            _erase_dead_annotations(chain)
    return done


def _all_parallel(op: Operation) -> bool:
    return isinstance(op, GenericOp) and all(t == "parallel" for t in (x.split(".")[-1].lower() for x in _iterators(op)))


def _bf16_product(op: Operation) -> bool:
    """A contraction this pass made read bf16 copies (a bf16 GEMM writing float32)."""
    return (
        isinstance(op, GenericOp)
        and len(op.inputs) == 2
        and "reduction" in " ".join(_iterators(op)).lower()
        and all(isinstance(v.type, TensorType) and isinstance(v.type.element_type, BFloat16Type) for v in op.inputs)
    )


def _epilogue_of_product(op: Operation) -> bool:
    """An elementwise generic reading a bf16 product's float32 result and otherwise only
    values with fewer dimensions (a bias, a scale): `linear(x, W, b)`, which autocast
    computes and keeps in bf16."""
    if not _all_parallel(op) or len(op.results) != 1 or not _f32_tensor(op.results[0].type):
        return False
    assert isinstance(op, GenericOp)
    rank = len(op.results[0].type.get_shape())  # type: ignore[attr-defined]
    products = [v for v in op.inputs if isinstance(v.owner, Operation) and _bf16_product(v.owner)]
    rest = [v for v in op.inputs if v not in products]
    return len(products) == 1 and all(not isinstance(v.type, TensorType) or len(v.type.get_shape()) < rank for v in rest)


def _cast_to(v: SSAValue, to: object, before: Operation) -> SSAValue:
    ops = cast_op(v, to)
    Rewriter.insert_op(ops, InsertPoint.before(before))
    return ops[-1].results[0]


def save_epilogues_in_bf16(f: func.FuncOp) -> int:
    """Readers of a product's epilogue (`_epilogue_of_product`: a projection plus its
    bias, an MLP's pre-activation) that come after another product read it rounded to
    bf16: the value's first reader (the forward's activation) reads the float32 value,
    a bf16 copy is made right after that reader, and each later reader past a product
    (the backward's GELU derivative) reads that copy extended to float32 just before it.
    What a step keeps from its forward to its backward is then the bf16 copy, half the
    bytes: 12 MiB a layer of the GPT at n_embd 768, block 256, batch 8. The backward reads
    what `torch.autocast` saves for it (a bf16 linear output); the forward is unchanged.
    Returns how many values are kept so."""
    kept = 0
    for block in [b for op in f.walk() for r in op.regions for b in r.blocks]:
        ops = list(block.ops)
        order = {op: k for k, op in enumerate(ops)}
        products = [k for k, op in enumerate(ops) if _bf16_product(op)]
        for op in ops:
            if not _epilogue_of_product(op):
                continue
            v = op.results[0]
            readers = {u.operation for u in v.uses}
            if not all(r in order and _all_parallel(r) for r in readers) or len(readers) < 2:
                continue
            first, *later = sorted(readers, key=order.__getitem__)
            far = [r for r in later if any(order[first] < k < order[r] for k in products)]
            if not far:
                continue
            copy_ops = cast_op(v, bf16)
            Rewriter.insert_op(copy_ops, InsertPoint.after(first))
            copy = copy_ops[-1].results[0]
            for r in far:
                wide = _cast_to(copy, f32, r)
                for k, x in enumerate(r.operands):
                    if x is v:
                        r.operands[k] = wide
            kept += 1
    return kept


@dataclass(frozen=True)
class MixedPrecisionPass(ModulePass):
    """bf16 products with float32 everything else (the module docstring)."""

    name = "mixed-precision"

    compute: Precision = "bf16"
    """The products' input type: `bf16`, or `f32` (no change)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in [o for o in op.ops if isinstance(o, func.FuncOp)]:
            if self.compute == "bf16":
                cast_products(f)
                save_epilogues_in_bf16(f)


__all__ = ["MixedPrecisionPass", "cast_op", "cast_products", "save_epilogues_in_bf16", "is_contraction", "is_gemm_shaped", "is_named_product"]
