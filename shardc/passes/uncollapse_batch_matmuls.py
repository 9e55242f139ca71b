"""`uncollapse-batch-matmuls`: a `linalg.batch_matmul` over collapsed batch dimensions
becomes one contraction over the dimensions it collapsed.

PyTorch computes attention (`F.scaled_dot_product_attention` in its math form, eager
attention, and their backward) as 3-D `bmm`s over `batch * heads`, so torch-mlir emits

    %a = tensor.collapse_shape %q [[0, 1], [2], [3]] : BxHxMxK -> (B*H)xMxK
    %c = linalg.batch_matmul ins(%a, %b) outs(%zeros)   (operands maybe transposed [0, 2, 1])
    %s = tensor.expand_shape %c [[0, 1], [2], [3]] : (B*H)xMxN -> BxHxMxN

and with grouped-query attention the keys and values come from `repeat_kv`, a
`BxGxRxTxD` broadcast collapsed by `[[0, 1, 2], [3], [4]]` (H = G*R). A split of the
heads (tensor parallelism) cannot pass such a collapse: heads are a minor factor of the
batch dimension, so each rank's heads are not one block of it and propagation must
gather them first.

The rewrite computes the same contraction as one `linalg.generic` over the finest
common factorization of the batch dimension (`b h m k, b h k n -> b h m n`; with GQA
`b g r m k, b g r k n -> b g r m n`): each operand's source is used as it is, or
expanded to that factorization where it is coarser (`BxHxMxK -> BxGxRxMxK`, its major
factor split as before), and the product is collapsed back to the shape the expand
asked for. Every reshape left splits on its major dimension, so the batch and the heads
(or the key/value groups) stay split from the projections to the output projection.
The collapses and transposes it no longer reads are left to die.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects import tensor as xtensor
from xdsl.dialects.builtin import AffineMapAttr, AnyFloat, ArrayAttr, IntegerAttr, ModuleOp, TensorType, i64
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from shardc.dialects.tensor import ExpandShapeOp


def reassociation_groups(op: Operation) -> list[list[int]]:
    return [[i.value.data for i in g.data] for g in op.reassociation.data]  # type: ignore[attr-defined]


def _batch_group_shape(op: Operation, collapsed_rank: int = 3) -> tuple[int, ...] | None:
    """The dimensions a reshape's first group merges, when its groups are that group
    then one dimension each (`[[0, .., k-1], [k], [k+1]]`); None otherwise."""
    groups = reassociation_groups(op)
    if len(groups) != collapsed_rank or any(len(g) != 1 for g in groups[1:]):
        return None
    expanded = op.results[0].type if op.name == "tensor.expand_shape" else op.operands[0].type
    if not isinstance(expanded, TensorType):
        return None
    shape = expanded.get_shape()
    if len(shape) != len(groups[0]) + 2 or groups[0] != list(range(len(groups[0]))):
        return None
    return tuple(shape[: len(groups[0])])


def _source(value: SSAValue) -> tuple[SSAValue, bool, tuple[int, ...]] | None:
    """(the uncollapsed tensor behind a bmm operand, whether its last two dims are
    swapped, the batch dimensions it collapsed)."""
    op = value.owner
    swapped = False
    if isinstance(op, Operation) and op.name == "linalg.transpose":
        if list(op.permutation.get_values()) != [0, 2, 1]:  # type: ignore[attr-defined]
            return None
        value, swapped = op.operands[0], True
        op = value.owner
    if not (isinstance(op, Operation) and op.name == "tensor.collapse_shape"):
        return None
    batch = _batch_group_shape(op)
    if batch is None:
        return None
    return op.operands[0], swapped, batch


def common_factorization(*shapes: Sequence[int]) -> tuple[int, ...] | None:
    """The coarsest shape that refines each of `shapes` (same product, every shape's
    dimensions products of consecutive ones of it): the union of their prefix products,
    when those divide one another; None when no such shape exists, or when the shapes
    differ and a size is not a static size above one."""
    if all(tuple(shape) == tuple(shapes[0]) for shape in shapes):
        return tuple(shapes[0])
    total = None
    bounds: set[int] = set()
    for shape in shapes:
        if any(not isinstance(d, int) or d < 2 for d in shape):
            return None
        p = 1
        for d in shape:
            p *= d
            bounds.add(p)
        if total is None:
            total = p
        elif p != total:
            return None
    ordered = sorted(bounds)
    out: list[int] = []
    prev = 1
    for b in ordered:
        if b % prev:
            return None
        out.append(b // prev)
        prev = b
    return tuple(out)


def _refining_groups(coarse: Sequence[int], fine: Sequence[int]) -> list[list[int]]:
    """For each dimension of `coarse`, the dimensions of `fine` it is made of."""
    groups: list[list[int]] = []
    j = 0
    for d in coarse:
        group: list[int] = []
        p = 1
        while p < d:
            p *= fine[j]
            group.append(j)
            j += 1
        groups.append(group)
    return groups


def _reassociation(groups: list[list[int]]) -> ArrayAttr[ArrayAttr[IntegerAttr]]:
    return ArrayAttr([ArrayAttr([IntegerAttr(i, i64) for i in g]) for g in groups])


def _with_trailing(groups: list[list[int]], n_trailing: int) -> list[list[int]]:
    last = groups[-1][-1] if groups and groups[-1] else -1
    return [*groups, *([last + 1 + i] for i in range(n_trailing))]


def uncollapse_batch_matmuls(module: Operation) -> int:
    """Rewrite every matching `collapse -> batch_matmul -> expand` (module docstring) in
    place; returns how many were rewritten."""
    from shardc.dialects.linalg import BatchMatmulOp, GenericOp

    count = 0
    for bmm in [op for op in module.walk() if isinstance(op, BatchMatmulOp)]:
        res = bmm.results[0] if bmm.results else None
        if res is None or len(list(res.uses)) != 1:
            continue
        expand = next(iter(res.uses)).operation
        if expand.name != "tensor.expand_shape":
            continue
        out_batch = _batch_group_shape(expand)
        out_t = expand.results[0].type
        a, b = (_source(v) for v in bmm.inputs)
        fill = bmm.outputs[0].owner
        if out_batch is None or a is None or b is None or not isinstance(out_t, TensorType):
            continue
        if not (isinstance(fill, Operation) and fill.name == "linalg.fill"):
            continue
        ft = out_t.get_element_type()
        if not isinstance(ft, AnyFloat):
            continue
        fine = common_factorization(a[2], b[2], out_batch)
        if fine is None:
            continue
        new_ops: list[Operation] = []
        inputs: list[SSAValue] = []
        for src, _, batch in (a, b):
            if tuple(batch) != fine:
                src_t = src.type
                assert isinstance(src_t, TensorType)
                shape = [*fine, *src_t.get_shape()[len(batch) :]]
                groups = _with_trailing(_refining_groups(batch, fine), 2)
                ex = ExpandShapeOp(src, [], _reassociation(groups), shape, TensorType(src_t.get_element_type(), shape))
                new_ops.append(ex)
                src = ex.result
            inputs.append(src)
        n = len(fine)
        dims = [AffineDimExpr(i) for i in range(n + 3)]  # batch..., m, n, k
        bs, (m, nn, k) = dims[:n], dims[n:]
        (_, a_t, _), (_, b_t, _) = a, b
        maps = [
            AffineMap(n + 3, 0, (*bs, k, m) if a_t else (*bs, m, k)),
            AffineMap(n + 3, 0, (*bs, nn, k) if b_t else (*bs, k, nn)),
            AffineMap(n + 3, 0, (*bs, m, nn)),
        ]
        fine_t = TensorType(ft, [*fine, *out_t.get_shape()[len(out_batch) :]])
        empty = xtensor.EmptyOp([], fine_t)
        zero = linalg.FillOp([fill.operands[0]], [empty.tensor], [fine_t])
        body = Block(arg_types=[ft, ft, ft])
        mul = arith.MulfOp(body.args[0], body.args[1])
        add = arith.AddfOp(body.args[2], mul.result)
        body.add_ops([mul, add, linalg.YieldOp(add.result)])
        p, r = IteratorTypeAttr.parallel(), IteratorTypeAttr.reduction()
        generic = GenericOp(inputs, [zero.results[0]], Region(body), [AffineMapAttr(x) for x in maps], [p] * (n + 2) + [r], [fine_t])
        new_ops += [empty, zero, generic]
        result = generic.results[0]
        if tuple(out_batch) != fine:
            groups = _with_trailing(_refining_groups(out_batch, fine), 2)
            collapse = xtensor.CollapseShapeOp(operands=[result], properties={"reassociation": _reassociation(groups)}, result_types=[out_t])
            new_ops.append(collapse)
            result = collapse.results[0]
        for new in new_ops:
            new.location = bmm.location  # type: ignore[attr-defined]
        Rewriter.insert_op(new_ops, InsertPoint.before(expand))
        expand.results[0].replace_all_uses_with(result)
        Rewriter.erase_op(expand)
        Rewriter.erase_op(bmm)
        count += 1
    erase_dead_reshapes(module)
    return count


def erase_dead_reshapes(module: Operation, also: frozenset[str] | set[str] = frozenset()) -> None:
    """Drop the collapses, transposes, fills and empties (and `also`) nothing reads any
    more."""
    names = {"tensor.collapse_shape", "linalg.transpose", "linalg.fill", "tensor.empty", *also}
    changed = True
    while changed:
        changed = False
        for op in [op for op in module.walk() if op.name in names]:
            if op.results and all(not r.uses for r in op.results):  # memref forms write
                Rewriter.erase_op(op)
                changed = True


@dataclass(frozen=True)
class UncollapseBatchMatmulsPass(ModulePass):
    """Rewrite batch matmuls over collapsed batch dimensions as one contraction over them."""

    name = "uncollapse-batch-matmuls"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        uncollapse_batch_matmuls(op)
