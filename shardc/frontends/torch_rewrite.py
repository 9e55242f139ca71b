"""Rewrites of torch-mlir's linalg-on-tensors output that make it shard better.

`split_shared_fills`: torch-mlir builds one zero-filled tensor and uses it as the init of
every contraction of that shape, forward and backward alike. Those users want it split
differently (a forward product split over the batch, a weight gradient that reduces over
it), and one value can have one producer sharding: partition then gathers a tensor of
zeros. Each user gets its own `tensor.empty` + `linalg.fill` instead, which cost nothing
to build in any layout.

`uncollapse_batch_matmuls`: PyTorch computes attention (`F.scaled_dot_product_attention`
in its math form, and its backward) as 3-D `bmm`s over `batch * heads`, so torch-mlir
emits

    %a = tensor.collapse_shape %q [[0, 1], [2], [3]] : BxHxMxK -> (B*H)xMxK
    %c = linalg.batch_matmul ins(%a, %b) outs(%zeros)   (operands maybe transposed [0, 2, 1])
    %s = tensor.expand_shape %c [[0, 1], [2], [3]] : (B*H)xMxN -> BxHxMxN

A split of the heads (tensor parallelism) cannot pass that collapse: heads are the minor
factor of `B*H`, so each rank's heads are not one block of it and propagation must
gather them first. The rewrite computes the same contraction as one 4-D
`linalg.generic` on the uncollapsed operands (`bhmk,bhkn->bhmn`), which splits on `b` and
`h` alike; the collapses and transposes it no longer reads are left to die.
"""

from __future__ import annotations

from xdsl.dialects import arith, tensor
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.builtin import AffineMapAttr, AnyFloat, ModuleOp, TensorType
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.rewriter import Rewriter

_GROUPED = [[0, 1], [2], [3]]


def _groups(op: Operation) -> list[list[int]]:
    return [[i.value.data for i in g.data] for g in op.reassociation.data]  # type: ignore[attr-defined]


def _source(value: SSAValue) -> tuple[SSAValue, bool] | None:
    """(the 4-D tensor behind a bmm operand, whether its last two dims are swapped)."""
    op = value.owner
    swapped = False
    if isinstance(op, Operation) and op.name == "linalg.transpose":
        if list(op.permutation.get_values()) != [0, 2, 1]:  # type: ignore[attr-defined]
            return None
        value, swapped = op.operands[0], True
        op = value.owner
    if not (isinstance(op, Operation) and op.name == "tensor.collapse_shape" and _groups(op) == _GROUPED):
        return None
    src = op.operands[0]
    if not isinstance(src.type, TensorType) or len(src.type.get_shape()) != 4:
        return None
    return src, swapped


def _zero_fill_value(init: SSAValue) -> SSAValue | None:
    op = init.owner
    if isinstance(op, Operation) and op.name == "linalg.fill":
        return op.operands[0]
    return None


def uncollapse_batch_matmuls(module: ModuleOp) -> int:
    """Rewrite every matching `collapse -> batch_matmul -> expand` (module docstring) in
    place; returns how many were rewritten."""
    from shardc.dialects.linalg import BatchMatmulOp, GenericOp

    count = 0
    for bmm in [op for op in module.walk() if isinstance(op, BatchMatmulOp)]:
        res = bmm.results[0] if bmm.results else None
        if res is None or len(list(res.uses)) != 1:
            continue
        expand = next(iter(res.uses)).operation
        if expand.name != "tensor.expand_shape" or _groups(expand) != _GROUPED:
            continue
        out_t = expand.results[0].type
        a, b = (_source(v) for v in bmm.inputs)
        fill_value = _zero_fill_value(bmm.outputs[0])
        if a is None or b is None or fill_value is None or not isinstance(out_t, TensorType):
            continue
        if not isinstance(out_t.get_element_type(), AnyFloat):
            continue
        (a_src, a_t), (b_src, b_t) = a, b
        B, H = out_t.get_shape()[:2]
        if a_src.type.get_shape()[:2] != (B, H) or b_src.type.get_shape()[:2] != (B, H):  # type: ignore[attr-defined]
            continue
        d = [AffineDimExpr(i) for i in range(5)]  # b, h, m, n, k
        bb, hh, m, n, k = d
        maps = [
            AffineMap(5, 0, (bb, hh, k, m) if a_t else (bb, hh, m, k)),
            AffineMap(5, 0, (bb, hh, n, k) if b_t else (bb, hh, k, n)),
            AffineMap(5, 0, (bb, hh, m, n)),
        ]
        ft = out_t.get_element_type()
        empty = tensor.EmptyOp([], out_t)
        fill = linalg.FillOp([fill_value], [empty.tensor], [out_t])
        body = Block(arg_types=[ft, ft, ft])
        mul = arith.MulfOp(body.args[0], body.args[1])
        add = arith.AddfOp(body.args[2], mul.result)
        body.add_ops([mul, add, linalg.YieldOp(add.result)])
        p, r = IteratorTypeAttr.parallel(), IteratorTypeAttr.reduction()
        generic = GenericOp(
            [a_src, b_src], [fill.results[0]], Region(body), [AffineMapAttr(x) for x in maps], [p, p, p, p, r], [out_t]
        )
        for new in (empty, fill, generic):
            new.location = bmm.location
        Rewriter.insert_op([empty, fill, generic], _before(expand))
        expand.results[0].replace_all_uses_with(generic.results[0])
        Rewriter.erase_op(expand)
        Rewriter.erase_op(bmm)
        count += 1
    _erase_dead(module)
    return count


def _before(op: Operation):
    from xdsl.rewriter import InsertPoint

    return InsertPoint.before(op)


def _erase_dead(module: ModuleOp) -> None:
    """Drop the collapses, transposes, fills and empties nothing reads any more."""
    names = {"tensor.collapse_shape", "linalg.transpose", "linalg.fill", "tensor.empty"}
    changed = True
    while changed:
        changed = False
        for op in [op for op in module.walk() if op.name in names]:
            if all(not r.uses for r in op.results):
                Rewriter.erase_op(op)
                changed = True


def split_shared_fills(module: ModuleOp) -> int:
    """Give every use of a multi-use `linalg.fill` of a `tensor.empty` its own copy (the
    module docstring says why); returns how many copies were made."""
    from xdsl.rewriter import InsertPoint

    count = 0
    for fill in [op for op in module.walk() if op.name == "linalg.fill"]:
        if not fill.results:
            continue
        init = fill.operands[-1].owner
        if not (isinstance(init, Operation) and init.name == "tensor.empty" and not init.operands):
            continue
        uses = list(fill.results[0].uses)
        for use in uses[1:]:
            empty = init.clone()
            copy = fill.clone()
            copy.operands[len(copy.operands) - 1] = empty.results[0]
            Rewriter.insert_op([empty, copy], InsertPoint.before(use.operation))
            use.operation.operands[use.index] = copy.results[0]
            count += 1
    return count
