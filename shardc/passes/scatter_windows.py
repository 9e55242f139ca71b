"""scatter-windows: a `tm_tensor.scatter` whose every update provably lands in its own
pooling window becomes a windowed, elementwise `linalg.generic` that splits like the image.

The backward of a max pool (torch-mlir's `max_pool2d_with_indices_backward`) scatters
the pooled gradient `U[n, c, i, j]` into zeros of the input's shape at the positions its
forward recorded:

    %I = linalg.generic ...                 the argmax: flat positions h * W + w, where
                                            h = s*i + r, w = s*j + r' (r, r' window loops)
    %G = linalg.generic ins(%I) ...         index columns (n, c, I floordiv W, I rem W)
    %u = tensor.collapse_shape %U [[0, 1, 2, 3]]
    %g = tensor.collapse_shape %G [[0, 1, 2, 3], [4]]
    %r = tm_tensor.scatter ins(%u, %g) outs(%zeros)

A scatter's indexed dimensions cannot be split in general (where an update lands
depends on data), so propagation replicated it, and the image's split was gathered for
its values and indices. Here the data is bounded by construction: the argmax only ever
writes its init (negative: out of bounds, written nowhere) or a flat position inside the
window of its own output position, and the index columns are the mixed-radix digits of
that position. When the windows do not overlap (window <= stride, extent = stride x
output extent), each input position belongs to exactly one window, and the scatter is

    out6[n, c, i, a, j, b] = (G[n,c,i,j,2] == s*i + a and G[n,c,i,j,3] == s*j + b)
                             ? combine(U[n, c, i, j], orig6[...]) : orig6[...]

over the original expanded to `[N, C, Ho, s, Wo, s]` (`tensor.expand_shape`), collapsed
back after. Every map is a projected permutation, so a split of the image height
(following the major dimension `Ho` of the expanded group) stays split: each rank
writes its own rows, with no communication. Positions are compared, not assumed, so the
result equals the scatter on every in-bounds index.

Why a pass and not the scatter's ShardingInterface: the proof needs the producers of
the indices (two generics away), which an interface, seeing one op and its shardings,
does not get; once rewritten, the generic needs nothing new from propagation or
partition. Overlapping windows (a 3x3 pool with stride 2) would need a sum over the
windows covering each position; they are left as scatters.
"""

from __future__ import annotations


from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, IndexType, IntegerAttr, IntegerType, ModuleOp, TensorType
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from shardc.dialects.linalg import GenericOp
from shardc.dialects.tensor import ExpandShapeOp
from shardc.dialects.tm_tensor import ScatterOp
from shardc.ir.linalg_build import generic_op
from shardc.ir.types import tensor_type


def _const(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _groups(op: Operation) -> list[list[int]]:
    return [[i.value.data for i in g.data] for g in op.reassociation.data]  # type: ignore[attr-defined]


def _loop_of(value: SSAValue, op: Operation) -> int | None:
    owner = value.owner
    if isinstance(owner, linalg.IndexOp) and owner.parent_op() is op:
        return owner.dim.value.data
    return None


def _strip_casts(value: SSAValue) -> SSAValue:
    while isinstance(value.owner, arith.IndexCastOp):
        value = value.owner.input
    return value


def _affine(value: SSAValue, op: Operation) -> tuple[dict[int, int], int] | None:
    """`value` as sum(coefficient * linalg.index loop) + constant, over `op`'s loops;
    None where it is not (only addi and muli by a constant are read)."""
    value = _strip_casts(value)
    loop = _loop_of(value, op)
    if loop is not None:
        return {loop: 1}, 0
    constant = _const(value)
    if constant is not None:
        return {}, constant
    owner = value.owner
    if isinstance(owner, arith.AddiOp):
        a, b = _affine(owner.lhs, op), _affine(owner.rhs, op)
        if a is None or b is None:
            return None
        terms = dict(a[0])
        for k, c in b[0].items():
            terms[k] = terms.get(k, 0) + c
        return terms, a[1] + b[1]
    if isinstance(owner, arith.MuliOp):
        for x, c in ((owner.lhs, owner.rhs), (owner.rhs, owner.lhs)):
            factor = _const(c)
            inner = _affine(x, op) if factor is not None else None
            if factor is not None and inner is not None:
                return {k: v * factor for k, v in inner[0].items()}, inner[1] * factor
    return None


def _yield_leaves(value: SSAValue, out: BlockArgument, seen: set[SSAValue]) -> list[SSAValue] | None:
    """The values a body can yield through `arith.select`s, the output argument left
    out (it carries the init or an earlier yield)."""
    if value is out:
        return []
    owner = value.owner
    if isinstance(owner, arith.SelectOp):
        if value in seen:
            return []
        seen.add(value)
        a = _yield_leaves(owner.lhs, out, seen)
        b = _yield_leaves(owner.rhs, out, seen)
        return None if a is None or b is None else a + b
    return [value]


@dataclass
class _Window:
    dim: int  # dimension of the original
    stride: int


def _argmax_windows(producer: Operation, shape: list[int], out_shape: list[int]) -> dict[int, _Window] | None:
    """The dimensions whose positions every flat index the generic `producer` writes
    lies in the non-overlapping window of its own output position, keyed by dimension,
    when its init is a negative constant fill and each written value is
    `sum_k stride_k * (s_k * i_k + r_k)` over the windowed dimensions (row-major flat
    positions of `out_shape`), r_k a reduction loop of size <= s_k."""
    if not isinstance(producer, GenericOp) or len(producer.outputs) != 1:
        return None
    init = producer.outputs[0].owner
    if not isinstance(init, linalg.FillOp) or _const(_strip_casts(init.inputs[0])) is None:
        return None
    if (_const(_strip_casts(init.inputs[0])) or 0) >= 0:
        return None
    maps = [m.data for m in producer.indexing_maps.data]
    out_map = maps[-1]
    rank = len(shape)
    if out_map.results[:rank] != tuple(AffineDimExpr(d) for d in range(rank)) or len(out_map.results) != rank:
        return None
    iterators = [t.data for t in producer.iterator_types.data]
    sizes = [0] * len(iterators)
    for m, v in zip(maps, [*producer.inputs, *producer.outputs]):
        t = v.type
        if not isinstance(t, TensorType):
            return None
        for expr, extent in zip(m.results, t.get_shape()):
            if isinstance(expr, AffineDimExpr):
                sizes[expr.position] = extent
    block = producer.body.block
    terminator = block.last_op
    if terminator is None or len(terminator.operands) != 1:
        return None
    leaves = _yield_leaves(terminator.operands[0], block.args[-1], set())
    if not leaves:
        return None
    found: dict[int, _Window] | None = None
    for leaf in leaves:
        form = _affine(leaf, producer)
        if form is None or form[1] != 0:
            return None
        terms = dict(form[0])
        windows: dict[int, _Window] = {}
        flat_stride = 1
        for dim in reversed(range(rank)):
            extent = out_shape[dim]
            p = terms.pop(dim, 0)
            if p == 0:
                break  # the windowed dimensions are the trailing ones
            rs = [r for r, c in terms.items() if c == flat_stride and iterators[r] == IteratorType.REDUCTION]
            if len(rs) != 1 or p % flat_stride:
                return None
            r = rs[0]
            del terms[r]
            s = p // flat_stride
            if sizes[r] > s or s * shape[dim] != extent:
                return None
            windows[dim] = _Window(dim, s)
            flat_stride *= extent
        if terms or not windows:
            return None
        if found is None:
            found = windows
        elif {d: w.stride for d, w in found.items()} != {d: w.stride for d, w in windows.items()}:
            return None
    return found


def _columns(generic: Operation, rank: int) -> dict[int, tuple[str, int, int]] | None:
    """The index columns the generic writes along its last dimension: column k ->
    ("pos", loop, 0) for `linalg.index loop`, ("digit", div, mod) for
    `(I floordiv div) rem mod` of its input I (mod 0: no rem), from torch-mlir's form
    `sum_k select(linalg.index last == k, column_k, 0)`."""
    block = generic.body.block  # type: ignore[attr-defined]
    terminator = block.last_op
    if terminator is None or len(terminator.operands) != 1:
        return None
    value = _strip_casts(terminator.operands[0])
    terms: list[SSAValue] = []
    stack = [value]
    while stack:
        v = stack.pop()
        owner = v.owner
        if isinstance(owner, arith.AddiOp):
            stack += [owner.lhs, owner.rhs]
        else:
            terms.append(v)
    source = block.args[0]
    columns: dict[int, tuple[str, int, int]] = {}
    for term in terms:
        select = term.owner
        if not isinstance(select, arith.SelectOp) or _const(select.rhs) != 0:
            return None
        cond = select.cond.owner
        if not isinstance(cond, arith.CmpiOp) or cond.predicate.value.data != 0:  # eq
            return None
        k = None
        for a, b in ((cond.lhs, cond.rhs), (cond.rhs, cond.lhs)):
            if _loop_of(a, generic) == rank and _const(b) is not None:
                k = _const(b)
        if k is None or k in columns:
            return None
        column = select.lhs
        loop = _loop_of(column, generic)
        if loop is not None:
            columns[k] = ("pos", loop, 0)
            continue
        mod = 0
        owner = column.owner
        if isinstance(owner, arith.RemSIOp) and _const(owner.rhs):
            mod, column = _const(owner.rhs) or 0, owner.lhs
            owner = column.owner
        div = 1
        if isinstance(owner, arith.FloorDivSIOp) and _const(owner.rhs):
            div, column = _const(owner.rhs) or 1, owner.lhs
        if _strip_casts(column) is not source:
            return None
        columns[k] = ("digit", div, mod)
    return columns if sorted(columns) == list(range(rank)) else None


def _window_scatter(scatter: ScatterOp) -> tuple[SSAValue, SSAValue, dict[int, _Window]] | None:
    """(the uncollapsed updates U, the uncollapsed index columns G, the windows) when
    `scatter` is the backward of a non-overlapping window argmax (module docstring)."""
    orig_t, upd_t = scatter.original.type, scatter.updates.type
    if not isinstance(orig_t, TensorType) or not isinstance(upd_t, TensorType):
        return None
    out_shape = list(orig_t.get_shape())
    rank = len(out_shape)
    if list(scatter.dims) != list(range(rank)) or len(upd_t.get_shape()) != 1 or not scatter.results:
        return None
    if any(n < 0 for n in out_shape):
        return None  # dynamic sizes: the windows are counted statically
    collapse_u, collapse_g = scatter.updates.owner, scatter.indices.owner
    if not isinstance(collapse_u, tensor.CollapseShapeOp) or not isinstance(collapse_g, tensor.CollapseShapeOp):
        return None
    if _groups(collapse_u) != [list(range(rank))] or _groups(collapse_g) != [list(range(rank)), [rank]]:
        return None
    updates, columns_value = collapse_u.src, collapse_g.src
    shape = list(updates.type.get_shape())  # type: ignore[attr-defined]
    if any(n < 0 for n in shape) or list(columns_value.type.get_shape()) != [*shape, rank]:  # type: ignore[attr-defined]
        return None
    generic = columns_value.owner
    if (
        not isinstance(generic, GenericOp)
        or len(generic.inputs) != 1
        or len(generic.outputs) != 1
        or any(t.data != IteratorType.PARALLEL for t in generic.iterator_types.data)
    ):
        return None
    in_map, out_map = (m.data for m in generic.indexing_maps.data)
    if in_map.results != tuple(AffineDimExpr(d) for d in range(rank)) or out_map != AffineMap.identity(rank + 1):
        return None
    columns = _columns(generic, rank)
    flat = generic.inputs[0]
    windows = _argmax_windows(flat.owner, shape, out_shape) if isinstance(flat.owner, Operation) else None
    if columns is None or windows is None:
        return None
    # Position columns: the update's own position, on a dimension it has whole. Digit
    # columns: the windowed dimensions' digits of the row-major flat position.
    stride = 1
    for dim in reversed(range(rank)):
        kind, a, b = columns[dim]
        if dim in windows:
            if kind != "digit" or a != stride or (b not in (0, out_shape[dim]) or (b == 0 and dim != min(windows))):
                return None
            stride *= out_shape[dim]
        elif kind != "pos" or a != dim or shape[dim] != out_shape[dim]:
            return None
    return updates, columns_value, windows


def _rewrite(scatter: ScatterOp, updates: SSAValue, columns: SSAValue, windows: dict[int, _Window]) -> None:
    orig = scatter.original
    orig_t = orig.type
    assert isinstance(orig_t, TensorType)
    out_shape = list(orig_t.get_shape())
    rank = len(out_shape)
    groups: list[list[int]] = []
    expanded: list[int] = []
    for dim in range(rank):
        if dim in windows:
            s = windows[dim].stride
            groups.append([len(expanded), len(expanded) + 1])
            expanded += [out_shape[dim] // s, s]
        else:
            groups.append([len(expanded)])
            expanded.append(out_shape[dim])
    loops = len(expanded)
    element = orig_t.get_element_type()
    expanded_t = tensor_type(element, expanded)
    reassociation = ArrayAttr([ArrayAttr([IntegerAttr(i, 64) for i in g]) for g in groups])
    new_ops: list[Operation] = []
    expand = ExpandShapeOp(orig, [], reassociation, expanded, expanded_t)
    new_ops.append(expand)
    d = [AffineDimExpr(i) for i in range(loops)]
    major = [d[g[0]] for g in groups]
    index_t = columns.type.get_element_type()  # type: ignore[attr-defined]
    assert isinstance(index_t, IntegerType)
    inputs: list[SSAValue] = [updates]
    maps = [AffineMap(loops, 0, tuple(major))]
    for dim in sorted(windows):
        inputs.append(columns)
        maps.append(AffineMap(loops, 0, (*major, AffineConstantExpr(dim))))
    maps.append(AffineMap.identity(loops))
    body = Block(arg_types=[updates.type.get_element_type(), *([index_t] * len(windows)), element])  # type: ignore[attr-defined]
    upd_arg, column_args, out_arg = body.args[0], body.args[1:-1], body.args[-1]
    ops: list[Operation] = []
    hit: SSAValue | None = None
    for column, dim in zip(column_args, sorted(windows)):
        i, a = groups[dim]
        at_i, at_a = linalg.IndexOp(i), linalg.IndexOp(a)
        s = arith.ConstantOp(IntegerAttr(windows[dim].stride, IndexType()))
        scaled = arith.MuliOp(at_i.result, s.result)
        position = arith.AddiOp(scaled.result, at_a.result)
        cast = arith.IndexCastOp(position.result, index_t)
        eq = arith.CmpiOp(column, cast.result, "eq")
        ops += [at_i, at_a, s, scaled, position, cast, eq]
        if hit is None:
            hit = eq.result
        else:
            both = arith.AndIOp(hit, eq.result)
            ops.append(both)
            hit = both.result
    region_block = scatter.region.block
    mapping: dict[SSAValue, SSAValue] = {region_block.args[0]: upd_arg, region_block.args[1]: out_arg}
    combined: SSAValue | None = None
    for op in region_block.ops:
        if op is region_block.last_op:
            combined = mapping.get(op.operands[0], op.operands[0])
            break
        ops.append(op.clone(value_mapper=mapping))  # type: ignore[arg-type]
    assert combined is not None and hit is not None
    select = arith.SelectOp(hit, combined, out_arg)
    body.add_ops([*ops, select, linalg.YieldOp(select.result)])
    parallel = IteratorTypeAttr(IteratorType.PARALLEL)
    generic = generic_op(
        GenericOp,
        inputs,
        [expand.result],
        Region(body),
        ArrayAttr([AffineMapAttr(m) for m in maps]),
        ArrayAttr([parallel] * loops),
        [expanded_t],
    )
    collapse = tensor.CollapseShapeOp.create(
        operands=[generic.results[0]], result_types=[orig_t], properties={"reassociation": reassociation}
    )
    new_ops += [generic, collapse]
    for new in new_ops:
        new.location = scatter.location  # type: ignore[attr-defined]
    Rewriter.insert_op(new_ops, InsertPoint.before(scatter))
    scatter.results[0].replace_all_uses_with(collapse.results[0])
    Rewriter.erase_op(scatter)


def scatters_in_windows(module: ModuleOp) -> int:
    """Rewrite every window-bounded scatter (module docstring); returns how many."""
    count = 0
    for scatter in [op for op in module.walk() if isinstance(op, ScatterOp)]:
        found = _window_scatter(scatter)
        if found is None:
            continue
        collapses = [scatter.updates.owner, scatter.indices.owner]
        _rewrite(scatter, *found)
        for op in collapses:
            if isinstance(op, Operation) and not op.results[0].uses and op.parent is not None:
                Rewriter.erase_op(op)
        count += 1
    return count


@dataclass(frozen=True)
class ScatterWindowsPass(ModulePass):
    """Scatters into non-overlapping pooling windows as elementwise generics."""

    name = "scatter-windows"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        scatters_in_windows(op)


__all__ = ["ScatterWindowsPass", "scatters_in_windows"]

