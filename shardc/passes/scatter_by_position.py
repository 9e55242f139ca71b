"""scatter-by-position: a `tm_tensor.scatter` whose first index column is each update's
own position becomes an elementwise `linalg.generic`, which splits by rows like its
neighbours.

The backward of cross-entropy (torch-mlir's `nll_loss_backward`) writes each row's
gradient into a zero `[rows, classes]` tensor by a scatter whose index pairs are
`(n, target[n])`, the first column computed as `linalg.index 0` of the generic that
gathers the targets:

    %g:2 = linalg.generic ... { %i = linalg.index 0 ... linalg.yield %i, %target_i }
    %s0 = tensor.insert_slice %g#0 into %f[0, 0] [N, 1] [1, 1]
    %s1 = tensor.insert_slice %g#1 into %s0[0, 1] [N, 1] [1, 1]
    %r = tm_tensor.scatter {dimension_map = array<i64: 0, 1>} ins(%u, %s1) outs(%orig)

A scatter's indexed dimensions cannot be split in general (where an update lands
depends on data), so sharding propagation replicated it and partition gathered the
data-parallel rows to every rank. Because update n provably lands in row n, the scatter
is the elementwise generic over the original

    out[n, j] = j == target[n] ? combine(update[n], out[n, j]) : out[n, j]

(one pass, no scatter), equal to the scatter on every in-bounds index (an out-of-bounds
one writes nothing here, as it has no defined effect there). The insert_slices that
built the index pairs are erased once nothing reads them.

Why a pass and not the scatter's ShardingInterface: the proof needs the producer of the
indices, which an interface, seeing one op and its shardings, does not get.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import AffineMapAttr, IntegerType, ModuleOp, TensorType
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from shardc.dialects.linalg import GenericOp
from shardc.dialects.tm_tensor import ScatterOp
from shardc.interfaces.linalg import index_loop
from shardc.passes.uncollapse_batch_matmuls import erase_dead_reshapes


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
    it, `shardc.interfaces.linalg.index_loop`)."""
    producer = column.owner
    if not isinstance(producer, linalg.GenericOp) or len(producer.iterator_types) != 1:
        return False
    index = column.index  # type: ignore[attr-defined]
    out_map = producer.indexing_maps.data[len(producer.inputs) + index].data
    if out_map.results != (AffineDimExpr(0), AffineConstantExpr(0)):
        return False
    block = producer.body.blocks.first
    yield_ = block.last_op if block is not None else None
    if yield_ is None or index >= len(yield_.operands):
        return False
    return index_loop(yield_.operands[index], producer, n) == 0


def _scatter_as_generic(scatter: ScatterOp) -> GenericOp | None:
    """The generic computing `scatter` when update n provably lands at position n of the
    original's first dimension (and its slice covers the trailing dimensions whole).
    Equal for in-bounds indices, the scatter's defined domain (an out-of-bounds one
    writes nothing here)."""
    upd_t, ind_t, orig_t = scatter.updates.type, scatter.indices.type, scatter.original.type
    if not scatter.results or not all(isinstance(t, TensorType) for t in (upd_t, ind_t, orig_t)):
        return None
    dims: list[int] = list(scatter.dims)
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
    _, columns = _index_columns(scatter.indices, n)
    if 0 not in columns or not _is_position(columns[0], n):
        return None
    d = [AffineDimExpr(i) for i in range(rank)]
    # Operands: the update, each other index column, the original (the init).
    inputs: list[SSAValue] = [scatter.updates]
    maps = [AffineMap(rank, 0, (d[0], *d[offset:]))]
    for c in range(1, len(dims)):
        if c in columns:
            inputs.append(columns[c])
            maps.append(AffineMap(rank, 0, (d[0], AffineConstantExpr(0))))
        else:
            inputs.append(scatter.indices)
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
    region_block = scatter.region.blocks.first
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
    return GenericOp(
        inputs, [scatter.original], Region(body), [AffineMapAttr(m) for m in maps], [p] * rank, [orig_t]
    )


def scatters_by_position(module: ModuleOp) -> int:
    """Rewrite every `tm_tensor.scatter` on tensors whose first index column is the
    update's position into an elementwise `linalg.generic` (module docstring); returns
    how many were rewritten."""
    count = 0
    for scatter in [op for op in module.walk() if isinstance(op, ScatterOp)]:
        generic = _scatter_as_generic(scatter)
        if generic is None:
            continue
        generic.location = scatter.location
        Rewriter.insert_op(generic, InsertPoint.before(scatter))
        scatter.results[0].replace_all_uses_with(generic.results[0])
        Rewriter.erase_op(scatter)
        count += 1
    erase_dead_reshapes(module, {"tensor.insert_slice"})
    return count


@dataclass(frozen=True)
class ScatterByPositionPass(ModulePass):
    """Scatters whose first index column is each update's own position as elementwise generics."""

    name = "scatter-by-position"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        scatters_by_position(op)


__all__ = ["ScatterByPositionPass", "scatters_by_position"]
