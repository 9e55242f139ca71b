"""`shard-simplify`: MLIR's Shard simplifications, and the greedy driver they run under.

Patterns (upstream `Simplify.cpp` / `Simplifications.cpp`):
- all-reduce endomorphisms: `f(all_reduce(x), all_reduce(y))` -> `all_reduce(f(x, y))` for
  arith.addf/addi over `sum`, minimumf/minsi/minui over `min`, maximumf/maxsi/maxui over
  `max`, when every operand of `f` is an all-reduce with one use, the same attributes
  (grid, grid_axes, reduction) and an element type the all-reduce does not change;
- `all_slice(all_reduce(x))` -> `reduce_scatter(x)` (one-use all-reduce, same grid/axes);
- `all_slice(all_gather(x))` and `all_gather(all_slice(x))` -> `x` (same grid, axes and
  tensor axis);
- `grid_shape` of static grid axes -> `arith.constant` (dynamic axes stay queried).

Beyond upstream (shard-simplify only; `canonicalize` keeps upstream's behaviour): a
collective whose grid axes (at least one) all have static size 1 (all_reduce, all_gather, all_slice,
all_to_all, reduce_scatter, broadcast, gather, scatter, reduce, and shift when it rotates
or does not move) is an identity, replaced by its input when the types match or by a
`tensor.cast` when only static/dynamic sizes differ. A grid `(dp, tp)` with tp=1 then
leaves no collective over the tp axis.

`simplification_patterns()` is upstream's older `populateSimplificationPatterns` (what
mlir-opt's `test-grid-simplifications` runs: endomorphisms and grid_shape folding only);
`simplify_patterns()` is `populateSimplifyPatterns`, the `shard-simplify` set.

Not included although tempting: minnumf/maxnumf. They ignore NaNs while the `min`/`max`
reduction (MLIR's reference semantics, and our runtime's np.minimum) propagates them, so
`minnumf(all_reduce_min(x), all_reduce_min(y))` and `all_reduce_min(minnumf(x, y))` differ
when a NaN is present. Upstream leaves them out for the same reason.

The patterns run under MLIR's greedy driver with its default configuration
(`shardc.passes.greedy`), which also folds the ops they create.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, IntegerAttr, ModuleOp, ShapedType, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from shardc.dialects import shard
from shardc.passes.gc_pause import paused_gc
from shardc.passes.greedy import apply_patterns_greedily

# =========================================================================================
# Patterns
# =========================================================================================


def _element_type(t: Attribute) -> Attribute | None:
    return t.get_element_type() if isinstance(t, ShapedType) else None  # pyright: ignore


def _same_grid_and_axes(a: shard.CollectiveOp, b: shard.CollectiveOp) -> bool:
    return a.grid == b.grid and a.grid_axes_tuple == b.grid_axes_tuple


def is_endomorphism(
    op: Operation | None, reduction: shard.ReductionKind, reference: shard.AllReduceOp | None
) -> bool:
    """Upstream's `isEndomorphismOp` for all-reduce: `op` is a one-use all-reduce of kind
    `reduction` keeping its element type, and has `reference`'s attributes."""
    if not isinstance(op, shard.AllReduceOp):
        return False
    in_elem = _element_type(op.input.type)
    if in_elem != _element_type(op.result.type) or op.reduction.data != reduction:
        return False
    if not op.result.has_one_use():
        return False
    if reference is None:
        return True
    return (
        reference.properties == op.properties
        and reference.attributes == op.attributes
        and in_elem == _element_type(reference.result.type)
    )


@dataclass(frozen=True)
class AllReduceEndomorphism(RewritePattern):
    """`f(all_reduce(x1), ..., all_reduce(xn))` -> `all_reduce(f(x1, ..., xn))` for an
    algebraic op `f` that the reduction distributes over."""

    algebraic_op: type[Operation]
    reduction: shard.ReductionKind

    @property
    def root_ops(self) -> tuple[type[Operation], ...]:
        """What the greedy driver tries this pattern on (`PatternList`)."""
        return (self.algebraic_op,)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if type(op) is not self.algebraic_op or not op.operands:
            return
        first = op.operands[0].owner
        if not isinstance(first, shard.AllReduceOp):
            return
        if not is_endomorphism(first, self.reduction, None):
            return
        if not all(is_endomorphism(v.owner, self.reduction, first) for v in op.operands):
            return
        inputs = [v.owner.input for v in op.operands]  # pyright: ignore
        algebraic = op.clone()
        algebraic.operands = inputs
        rewriter.insert(algebraic)
        reduced = first.clone()
        reduced.operands = [algebraic.results[0]]
        rewriter.insert(reduced)
        rewriter.replace_all_uses_with(op.results[0], reduced.results[0])


def endomorphism_patterns() -> list[RewritePattern]:
    """Upstream's eight all-reduce endomorphism patterns, in upstream's order."""
    kinds = shard.ReductionKind
    return [
        AllReduceEndomorphism(arith.AddfOp, kinds.SUM),
        AllReduceEndomorphism(arith.AddiOp, kinds.SUM),
        AllReduceEndomorphism(arith.MinimumfOp, kinds.MIN),
        AllReduceEndomorphism(arith.MinSIOp, kinds.MIN),
        AllReduceEndomorphism(arith.MinUIOp, kinds.MIN),
        AllReduceEndomorphism(arith.MaximumfOp, kinds.MAX),
        AllReduceEndomorphism(arith.MaxSIOp, kinds.MAX),
        AllReduceEndomorphism(arith.MaxUIOp, kinds.MAX),
    ]


class AllReduceAllSliceToReduceScatter(RewritePattern):
    """`all_slice(all_reduce(x))` -> `reduce_scatter(x)`: half the traffic, 1/N the
    memory. The all-reduce must have no other use and the same grid and grid axes."""

    root_ops = (shard.AllSliceOp,)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, shard.AllSliceOp):
            return
        reduce = op.input.owner
        if not isinstance(reduce, shard.AllReduceOp) or not reduce.result.has_one_use():
            return
        if not _same_grid_and_axes(reduce, op):
            return
        new = shard.ReduceScatterOp.create(
            operands=[reduce.input],
            result_types=[op.result.type],
            properties={
                "grid": op.grid,
                "grid_axes": op.grid_axes,
                "reduction": reduce.reduction,
                "scatter_axis": op.slice_axis,
            },
        )
        rewriter.replace(op, new)


def gather_slice_cancel(gather: shard.AllGatherOp, slice_op: shard.AllSliceOp) -> bool:
    """Upstream's `isAllGatherAllSliceFoldable`: same grid, grid axes and tensor axis."""
    return (
        _same_grid_and_axes(gather, slice_op)
        and gather.gather_axis.value.data == slice_op.slice_axis.value.data
    )


class AllGatherAllSliceCancel(RewritePattern):
    """`all_slice(all_gather(x))` and `all_gather(all_slice(x))` -> `x`, when they undo
    each other (the inner op may have other uses: it is not erased then)."""

    root_ops = (shard.AllSliceOp, shard.AllGatherOp)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, shard.AllSliceOp):
            inner = op.input.owner
            if isinstance(inner, shard.AllGatherOp) and gather_slice_cancel(inner, op):
                rewriter.replace(op, [], [inner.input])
        elif isinstance(op, shard.AllGatherOp):
            inner = op.input.owner
            if isinstance(inner, shard.AllSliceOp) and gather_slice_cancel(op, inner):
                rewriter.replace(op, [], [inner.input])


class GridShapeFolder(RewritePattern):
    """`grid_shape` -> `arith.constant` for each static axis; the dynamic ones stay, in
    a narrower `grid_shape ... axes = [...]`."""

    root_ops = (shard.GridShapeOp,)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, shard.GridShapeOp):
            return
        grid = shard.lookup_grid(op, op.grid)
        if grid is None:
            return
        shape = grid.shape_tuple
        axes = op.axes.get_values() or tuple(range(grid.rank))
        if any(not 0 <= a < len(shape) for a in axes):
            return
        if all(shape[a] is None for a in axes):
            return
        new_ops: list[Operation] = []
        results: list[SSAValue | None] = [None] * len(axes)
        dynamic = [i for i, a in enumerate(axes) if shape[a] is None]
        for i, a in enumerate(axes):
            size = shape[a]
            if size is not None:
                constant = arith.ConstantOp(IntegerAttr(size, IndexType()))
                new_ops.append(constant)
                results[i] = constant.result
        if dynamic:
            query = shard.GridShapeOp(grid.sym_name.data, [axes[i] for i in dynamic])
            new_ops.append(query)
            for i, value in zip(dynamic, query.results):
                results[i] = value
        rewriter.replace(op, new_ops, results)


_SINGLE_PROCESS_IDENTITIES = (
    shard.AllReduceOp,
    shard.AllGatherOp,
    shard.AllSliceOp,
    shard.AllToAllOp,
    shard.ReduceScatterOp,
    shard.BroadcastOp,
    shard.GatherOp,
    shard.ScatterOp,
    shard.ReduceOp,
    shard.ShiftOp,
)


def _single_process_groups(op: shard.CollectiveOp) -> bool:
    """Every group of `op` is one process: it has grid axes, all of static size 1 (empty
    grid axes are canonicalize's, as upstream)."""
    axes = op.grid_axes_tuple
    if not axes:
        return False
    grid = shard.lookup_grid(op, op.grid)
    if grid is None:
        return False
    shape = grid.shape_tuple
    return all(0 <= a < len(shape) and shape[a] == 1 for a in axes)


def _compatible_tensor_types(a: Attribute, b: Attribute) -> bool:
    """Ranked tensors of one element type and rank whose static sizes agree (`tensor.cast`
    goes between them)."""
    if not isinstance(a, TensorType) or not isinstance(b, TensorType):
        return False
    if a.get_element_type() != b.get_element_type():
        return False
    sa, sb = a.get_shape(), b.get_shape()
    return len(sa) == len(sb) and all(x == y or DYNAMIC_INDEX in (x, y) for x, y in zip(sa, sb))


class SingleProcessCollectiveFolder(RewritePattern):
    """A collective whose groups are single processes (all its grid axes of static size 1)
    moves nothing: its result is its input (through a `tensor.cast` where only static and
    dynamic sizes differ). Beyond upstream; a shift folds only when it rotates or its
    offset is 0 (otherwise the lone process receives nothing), and a collective that
    changes the element type (an all_reduce into a wider accumulator) stays."""

    root_ops = _SINGLE_PROCESS_IDENTITIES

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, _SINGLE_PROCESS_IDENTITIES):
            return
        if isinstance(op, shard.ShiftOp) and op.rotate is None and op.offset.value.data != 0:
            return
        source, result = op.operands[0], op.results[0]
        if not isinstance(source.type, TensorType) or not _single_process_groups(op):
            return
        if source.type == result.type:
            rewriter.replace(op, [], [source])
        elif _compatible_tensor_types(source.type, result.type):
            rewriter.replace(op, tensor.CastOp(source, result.type))


def folding_patterns() -> list[RewritePattern]:
    """Upstream's `populateFoldingPatterns`."""
    return [GridShapeFolder()]


def simplification_patterns() -> list[RewritePattern]:
    """Upstream's `populateSimplificationPatterns` (test-grid-simplifications)."""
    return [*endomorphism_patterns(), *folding_patterns()]


def simplify_patterns() -> list[RewritePattern]:
    """Upstream's `populateSimplifyPatterns` (shard-simplify)."""
    return [
        *endomorphism_patterns(),
        AllReduceAllSliceToReduceScatter(),
        AllGatherAllSliceCancel(),
        SingleProcessCollectiveFolder(),
        *folding_patterns(),
    ]


@dataclass(frozen=True)
class ShardSimplifyPass(ModulePass):
    """Applies the Shard simplification patterns (all-reduce endomorphisms, all_slice of
    all_reduce to reduce_scatter, all_gather/all_slice cancellation, static grid_shape to
    constants) with MLIR's greedy driver, plus (beyond upstream) the folding of
    collectives over size-1 grid axes."""

    name = "shard-simplify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        with paused_gc():
            apply_patterns_greedily(op, simplify_patterns(), ctx=ctx)
