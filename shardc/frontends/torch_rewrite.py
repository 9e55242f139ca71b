"""Rewrites of torch-mlir's linalg-on-tensors output that make it shard better.

`split_shared_fills`: torch-mlir builds one zero-filled tensor and uses it as the init of
every contraction of that shape, forward and backward alike. Those users want it split
differently (a forward product split over the batch, a weight gradient that reduces over
it), and one value can have one producer sharding: partition then gathers a tensor of
zeros. Each user gets its own `tensor.empty` + `linalg.fill` instead, which cost nothing
to build in any layout.

`scatters_by_position`: the backward of cross-entropy (`nll_loss`) writes each row's
gradient into a zero `[rows, classes]` tensor by a `tm_tensor.scatter` whose index pairs
are `(n, target[n])`, the first column the update's own position (torch-mlir computes it
as `linalg.index 0` in the generic that gathers the targets). A scatter's indexed
dimensions cannot be split (where an update lands depends on data), so sharding
propagation replicates it and partition gathers the data-parallel rows to every rank.
Because update n lands in row n, the scatter is an elementwise `linalg.generic` over the
original: `out[n, j] = j == target[n] ? combine(update[n], out[n, j]) : out[n, j]`,
which splits by rows like its neighbours (and costs one pass, no scatter).

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
from xdsl.dialects.builtin import AffineMapAttr, AnyFloat, IntegerType, ModuleOp, TensorType
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
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


def _erase_dead(module: ModuleOp, also: frozenset[str] | set[str] = frozenset()) -> None:
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


def _index_columns(indices: SSAValue, n: int) -> tuple[SSAValue, dict[int, SSAValue]]:
    """(the tensor under the `tensor.insert_slice`s of whole `[n, 1]` columns that build
    `indices`, {column: the source last written there})."""
    columns: dict[int, SSAValue] = {}
    while isinstance(op := indices.owner, tensor.InsertSliceOp) and not op.offsets and not op.sizes and not op.strides:
        offsets = list(op.static_offsets.get_values())
        sizes = list(op.static_sizes.get_values())
        strides = list(op.static_strides.get_values())
        if len(offsets) != 2 or offsets[0] != 0 or sizes != [n, 1] or strides != [1, 1]:
            break
        columns.setdefault(offsets[1], op.source)
        indices = op.dest
    return indices, columns


def _is_position(column: SSAValue, n: int) -> bool:
    """Whether `column` ([n, 1]) holds n at row n: the result of a one-loop generic that
    writes it at `(d0, 0)` the value `linalg.index 0` (through casts and wraps that keep
    it, `interfaces.linalg._index_loop`)."""
    from shardc.dialects.linalg import GenericOp as ShardcGeneric
    from shardc.interfaces.linalg import _index_loop  # pyright: ignore[reportPrivateUsage]

    producer = column.owner
    if not isinstance(producer, (linalg.GenericOp, ShardcGeneric)) or len(producer.iterator_types) != 1:
        return False
    index = column.index  # type: ignore[attr-defined]
    out_map = producer.indexing_maps.data[len(producer.inputs) + index].data
    if out_map.results != (AffineDimExpr(0), AffineConstantExpr(0)):
        return False
    block = producer.body.blocks.first
    yield_ = block.last_op if block is not None else None
    if yield_ is None or index >= len(yield_.operands):
        return False
    return _index_loop(yield_.operands[index], producer, n) == 0


def scatters_by_position(module: ModuleOp) -> int:
    """Rewrite every `tm_tensor.scatter` on tensors whose first index column is the
    update's position into an elementwise `linalg.generic` (module docstring); returns
    how many were rewritten."""
    from shardc.dialects.linalg import GenericOp
    from shardc.dialects.tm_tensor import ScatterOp

    count = 0
    for scatter in [op for op in module.walk() if isinstance(op, ScatterOp)]:
        generic = _scatter_as_generic(scatter, GenericOp)
        if generic is None:
            continue
        generic.location = scatter.location
        Rewriter.insert_op(generic, _before(scatter))
        scatter.results[0].replace_all_uses_with(generic.results[0])
        Rewriter.erase_op(scatter)
        count += 1
    _erase_dead(module, {"tensor.insert_slice"})
    return count


def _scatter_as_generic(scatter: Operation, generic_class: type) -> Operation | None:
    """The generic computing `scatter` when update n provably lands at position n of the
    original's first dimension (and its slice covers the trailing dimensions whole).
    Equal for in-bounds indices, the scatter's defined domain (an out-of-bounds one
    writes nothing here)."""
    upd_t, ind_t, orig_t = scatter.updates.type, scatter.indices.type, scatter.original.type  # type: ignore[attr-defined]
    if not scatter.results or not all(isinstance(t, TensorType) for t in (upd_t, ind_t, orig_t)):
        return None
    dims: list[int] = list(scatter.dims)  # type: ignore[attr-defined]
    upd_shape, orig_shape = list(upd_t.get_shape()), list(orig_t.get_shape())
    n, slice_shape = upd_shape[0], upd_shape[1:]
    rank = len(orig_shape)
    offset = rank - len(slice_shape)
    index_type = ind_t.get_element_type()
    if (
        not dims
        or dims[0] != 0
        or len(set(dims)) != len(dims)  # a repeated dimension adds its columns
        or any(d >= offset for d in dims)
        or n < 0
        or orig_shape[0] != n
        or orig_shape[offset:] != slice_shape
        or not isinstance(index_type, IntegerType)
    ):
        return None
    _, columns = _index_columns(scatter.indices, n)  # type: ignore[attr-defined]
    if 0 not in columns or not _is_position(columns[0], n):
        return None
    d = [AffineDimExpr(i) for i in range(rank)]
    # Operands: the update, each other index column, the original (the init).
    inputs: list[SSAValue] = [scatter.updates]  # type: ignore[attr-defined]
    maps = [AffineMap(rank, 0, (d[0], *d[offset:]))]
    for c in range(1, len(dims)):
        if c in columns:
            inputs.append(columns[c])
            maps.append(AffineMap(rank, 0, (d[0], AffineConstantExpr(0))))
        else:
            inputs.append(scatter.indices)  # type: ignore[attr-defined]
            maps.append(AffineMap(rank, 0, (d[0], AffineConstantExpr(c))))
    maps.append(AffineMap.identity(rank))
    elem = orig_t.get_element_type()
    body = Block(arg_types=[upd_t.get_element_type(), *([index_type] * (len(dims) - 1)), elem])
    upd_arg, col_args, out_arg = body.args[0], body.args[1:-1], body.args[-1]
    # The position matches where every indexed dimension equals its column and every
    # other leading dimension (written at 0) is 0.
    ops: list[Operation] = []
    conditions: list[SSAValue] = []
    for dim in range(1, offset):
        at = linalg.IndexOp(dim)
        cast = arith.IndexCastOp(at.result, index_type)
        ops += [at, cast]
        if dim in dims[1:]:
            want: SSAValue = col_args[dims.index(dim) - 1]
        else:
            zero = arith.ConstantOp.from_int_and_width(0, index_type)
            ops.append(zero)
            want = zero.result
        eq = arith.CmpiOp(cast.result, want, "eq")
        ops.append(eq)
        conditions.append(eq.result)
    for extra in conditions[1:]:
        both = arith.AndIOp(conditions[0], extra)
        ops.append(both)
        conditions[0] = both.result
    # The combine region, inlined on (update, current).
    region_block = scatter.region.blocks.first  # type: ignore[attr-defined]
    mapping: dict[SSAValue, SSAValue] = {region_block.args[0]: upd_arg, region_block.args[1]: out_arg}
    combined: SSAValue | None = None
    for op in region_block.ops:
        if op is region_block.last_op:
            combined = mapping.get(op.operands[0], op.operands[0])
            break
        if op.regions:
            return None
        clone = op.clone(value_mapper=mapping)  # type: ignore[arg-type]
        ops.append(clone)
    assert combined is not None
    if conditions:
        select = arith.SelectOp(conditions[0], combined, out_arg)
        ops.append(select)
        combined = select.result
    body.add_ops([*ops, linalg.YieldOp(combined)])
    p = IteratorTypeAttr.parallel()
    return generic_class(
        inputs, [scatter.original], Region(body), [AffineMapAttr(m) for m in maps], [p] * rank, [orig_t]  # type: ignore[attr-defined]
    )
