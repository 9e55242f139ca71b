"""`convert-shard-to-mpi`: lower every shard op to the mpi dialect plus memref,
bufferization, arith, scf, affine, tensor and linalg, as MLIR's ShardToMPI does.

The phases, in order:
1. `get_sharding` becomes the `shard.sharding` that annotates its source;
2. `all_slice` and `process_multi_index` go through the shard lowering patterns
   (`shardc.lowering.{all_slice,process_multi_index}`) when those are available;
3. one pattern per op kind (`shard_to_mpi_collectives`, `shard_to_mpi_indices`);
4. `!shard.sharding` values become three tensors (split axes, halo sizes, sharded dims
   offsets), in function signatures, calls and returns too;
5. `shard.grid_shape` of static grids folds to constants, with upstream's folding
   patterns under the greedy driver (`shardc.passes.greedy`), which also folds and
   uniques the constants of the whole module;
6. any shard op left but `shard.grid` is an error at its location.

A module attribute `#dlti.map<"MPI:comm_world_rank" = N>` specialises the lowering
for rank N: neighbours, communicator colors/keys and halo offsets become constants, so
shapes are static. The process-index ops lower to `mpi.comm_rank` as in trunk, whose
`canonicalize` folds the rank (and the `shard_shape` arithmetic on it) in its order. Patterns never leave a shard op half-lowered:
an unsupported input raises a located diagnostic and the pass fails.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, tensor
from xdsl.rewriter import InsertPoint
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseIntOrFPElementsAttr,
    FunctionType,
    ModuleOp,
    TensorType,
    i16,
    i64,
)
from xdsl.ir import Attribute, Block, ErasedSSAValue, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriterListener,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.utils.worklist import Worklist

from shardc.dialects import shard
from shardc.ir.linalg_build import fill_op
from shardc.ir.walk import all_ops, ops_of_class
from shardc.lowering.shard_to_mpi_builder import Emitter, drop_group_marks, fail, static_grid_shape
from shardc.lowering.shard_to_mpi_collectives import COLLECTIVE_PATTERNS
from shardc.lowering.shard_to_mpi_indices import INDEX_PATTERNS
from shardc.passes.gc_pause import paused_gc
from shardc.passes.greedy import apply_patterns_greedily
from shardc.passes.simplify import folding_patterns

Lowering = Callable[[Operation, PatternRewriter], None]

SHARDING_TENSOR_TYPES: tuple[TensorType, TensorType, TensorType] = (
    TensorType(i16, [DYNAMIC_INDEX, DYNAMIC_INDEX]),
    TensorType(i64, [DYNAMIC_INDEX, DYNAMIC_INDEX]),
    TensorType(i64, [DYNAMIC_INDEX, DYNAMIC_INDEX]),
)
"""What a `!shard.sharding` becomes: split axes (-1 padded), halo sizes (one row of
two per split dimension), sharded dims offsets (one row per split dimension)."""


class _Dispatch(RewritePattern):
    """Applies the lowering registered for the op's class, if any: under xDSL's walker
    (`_run`), the reference `run_lowerings` is tested against."""

    def __init__(self, table: dict[type[Operation], Lowering]):
        self.table = table

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        lowering = self.table.get(type(op))
        if lowering is not None:
            lowering(op, rewriter)


def _holds(module: ModuleOp, classes: tuple[type[Operation], ...]) -> bool:
    """Whether an op of `classes` is in `module` (one walk, far cheaper than a rewrite
    walker that finds nothing to do)."""
    return bool(ops_of_class(module, classes))


def _run(module: ModuleOp, patterns: Sequence[RewritePattern]) -> None:
    PatternRewriteWalker(
        GreedyRewritePatternApplier(list(patterns), dce_enabled=False),
        apply_recursively=True,
    ).rewrite_module(module)


def _push_post_order_reversed(block: Block, table: dict[type[Operation], Lowering], worklist: Worklist[Operation]) -> None:
    """Push the ops of `table`'s classes in `block.walk(reverse=True, region_first=True)`
    order, without a generator per op (the walk visits every op of every body)."""
    op = block.last_op
    while op is not None:
        if op.regions:
            for region in reversed(op.regions):
                for inner in reversed(region.blocks):
                    _push_post_order_reversed(inner, table, worklist)
        if type(op) in table:
            worklist.push(op)
        op = op.prev_op


def run_lowerings(module: ModuleOp, table: dict[type[Operation], Lowering]) -> None:
    """What `_run(module, [_Dispatch(table)])` does, visiting only the ops of `table`'s
    classes: xDSL's walker pushes every op of the module and every op a rewrite
    touches, and calls the pattern on each, though only those classes have a lowering.
    The worklist here receives the same pushes, filtered to those classes, so they are
    lowered in the walker's order (a filtered stack keeps its relative order): the
    module's ops pre-order, an inserted op next, users of replaced results and
    single-use producers of removed operands; then passes again until one changes
    nothing."""

    worklist: Worklist[Operation] = Worklist()

    def push(op: Operation) -> None:
        if type(op) in table:
            worklist.push(op)

    def removed(op: Operation) -> None:
        for operand in op.operands:
            if operand.has_one_use() and not isinstance(operand, ErasedSSAValue) and isinstance(owner := operand.owner, Operation):
                push(owner)
        if op.regions:
            for sub in op.walk():
                worklist.remove(sub)
        else:
            worklist.remove(op)

    def replaced(op: Operation, _new: Sequence[SSAValue | None]) -> None:
        for result in op.results:
            for use in result.uses:
                push(use.operation)

    listener = PatternRewriterListener(
        operation_insertion_handler=[push],
        operation_removal_handler=[removed],
        operation_modification_handler=[push],
        operation_replacement_handler=[replaced],
    )
    while True:
        for block in reversed(module.body.blocks):
            _push_post_order_reversed(block, table, worklist)
        changed = False
        while worklist:
            op = worklist.pop()
            rewriter = PatternRewriter(op)
            rewriter.extend_from_listener(listener)
            try:
                table[type(op)](op, rewriter)
            except Exception as err:  # as xDSL's walker reports a failing pattern
                op.emit_error(f"Error while applying pattern: {err}", underlying_error=err)
            changed |= rewriter.has_done_action
        if not changed:
            return


# =========================================================================================
# get_sharding, sharding
# =========================================================================================


def lower_get_sharding(op: shard.GetShardingOp, rewriter: PatternRewriter) -> None:
    """The sharding of a value annotated by `shard.shard`."""
    annotation = op.source.owner
    if isinstance(annotation, shard.ShardOp) and isinstance(
        annotation.sharding.owner, shard.ShardingOp
    ):
        rewriter.replace(op, [], [annotation.sharding])
        return
    raise _illegal(op)


def sharding_tensors(op: shard.ShardingOp, rewriter: PatternRewriter) -> list[SSAValue]:
    """The three tensors of a sharding, built before `op` (upstream's layout)."""
    e = Emitter(rewriter, op)
    split_axes = op.split_axes.as_tuple()
    width = max((len(a) for a in split_axes), default=0)
    axes_t = e.emit(tensor.EmptyOp([], TensorType(i16, [len(split_axes), width]))).results[0]
    fill = e.const(-1, i16)
    axes_t = e.emit(fill_op([fill], [axes_t], [axes_t.type])).results[0]
    split_dims = [i for i, axes in enumerate(split_axes) if axes]
    for i in split_dims:
        row_t = TensorType(i16, [len(split_axes[i])])
        row = e.emit(
            arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(row_t, list(split_axes[i])))
        ).results[0]
        axes_t = _insert_row(e, row, axes_t, i)

    halos = _mixed_i64(e, op.static_halo_sizes.get_values(), op.dynamic_halo_sizes)
    if halos:
        halo_t = e.emit(
            tensor.FromElementsOp.create(
                operands=halos, result_types=[TensorType(i64, [len(split_dims), 2])]
            )
        ).results[0]
    else:
        halo_t = e.emit(tensor.EmptyOp([], TensorType(i64, [0, 0]))).results[0]

    offsets = _mixed_i64(
        e, op.static_sharded_dims_offsets.get_values(), op.dynamic_sharded_dims_offsets
    )
    if offsets:
        grid = shard.lookup_grid(op, op.grid)
        if grid is None:
            raise fail(op, "Missing grid symbol.")
        shape = static_grid_shape(op, grid)
        counts = [_count(shape, split_axes[i]) for i in split_dims]
        width = max(counts) + 1
        offs_t = e.emit(tensor.EmptyOp([], TensorType(i64, [len(split_dims), width]))).results[0]
        fill = e.const(DYNAMIC_INDEX, i64)
        offs_t = e.emit(fill_op([fill], [offs_t], [offs_t.type])).results[0]
        pos = 0
        for row, count in enumerate(counts):
            values = offsets[pos : pos + count + 1]
            pos += count + 1
            vals = e.emit(
                tensor.FromElementsOp.create(
                    operands=values, result_types=[TensorType(i64, [count + 1])]
                )
            ).results[0]
            offs_t = _insert_row(e, vals, offs_t, row)
    else:
        offs_t = e.emit(tensor.EmptyOp([], TensorType(i64, [0, 0]))).results[0]

    return [
        e.emit(tensor.CastOp(v, t)).results[0]
        for v, t in zip((axes_t, halo_t, offs_t), SHARDING_TENSOR_TYPES)
    ]


def _count(shape: Sequence[int], axes: Sequence[int]) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _mixed_i64(e: Emitter, static: Sequence[int], dynamic: Sequence[SSAValue]) -> list[SSAValue]:
    values = iter(dynamic)
    return [next(values) if s == DYNAMIC_INDEX else e.const(s, i64) for s in static]


def _insert_row(e: Emitter, row: SSAValue, into: SSAValue, index: int) -> SSAValue:
    row_t = row.type
    assert isinstance(row_t, TensorType)
    op = tensor.InsertSliceOp.get(
        row, into, static_offsets=[index, 0], static_sizes=[1, row_t.get_shape()[0]],
        static_strides=[1, 1],
    )
    return e.emit(op).results[0]


# =========================================================================================
# !shard.sharding in signatures, calls and returns
# =========================================================================================


def _is_sharding(t: Attribute) -> bool:
    return isinstance(t, shard.ShardingType)


def _expand_types(types: Sequence[Attribute]) -> list[Attribute]:
    out: list[Attribute] = []
    for t in types:
        out.extend(SHARDING_TENSOR_TYPES if _is_sharding(t) else [t])
    return out


_CONVERTED = (func.FuncOp, shard.ShardingOp, func.ReturnOp, func.CallOp)
#: the first of `_CONVERTED` each op class is an instance of (its length: none), found
#: once per class instead of four ABC isinstance tests per op of the module
_CONVERTED_KINDS: dict[type, int] = {}


class ShardingConversion:
    """Gives every `!shard.sharding` value its three tensors: results of sharding ops,
    function arguments and results, call operands and results; then drops the old."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.parts: dict[SSAValue, list[SSAValue]] = {}
        self.dead: list[Operation] = []

    def run(self) -> None:
        kinds = _CONVERTED_KINDS
        for op in all_ops(self.module):
            kind = kinds.get(type(op))
            if kind is None:
                kind = kinds[type(op)] = next(
                    (i for i, c in enumerate(_CONVERTED) if isinstance(op, c)), len(_CONVERTED)
                )
            if kind == 0:
                self._signature(op)  # type: ignore[arg-type]
            elif kind == 1:
                self.parts[op.result] = sharding_tensors(op, PatternRewriter(op))  # type: ignore[attr-defined]
                self.dead.append(op)
            elif kind == 2 and any(_is_sharding(v.type) for v in op.operands):
                op.operands = self._expand(list(op.operands), op)
            elif kind == 3 and any(
                _is_sharding(v.type) for v in (*op.operands, *op.results)
            ):
                self._call(op)
        for op in reversed(self.dead):
            for result in op.results:
                for use in list(result.uses):
                    raise _illegal(use.operation)
            op.detach()
            op.erase()
        for op in ops_of_class(self.module, func.FuncOp):
            if op.body.blocks:
                block = op.body.blocks[0]
                for arg in [a for a in block.args if _is_sharding(a.type)]:
                    if arg.uses:
                        raise _illegal(next(iter(arg.uses)).operation)
                    block.erase_arg(arg)

    def _expand(self, values: Sequence[SSAValue], user: Operation) -> list[SSAValue]:
        out: list[SSAValue] = []
        for v in values:
            if not _is_sharding(v.type):
                out.append(v)
            elif v in self.parts:
                out.extend(self.parts[v])
            else:
                raise _illegal(user)
        return out

    def _signature(self, f: func.FuncOp) -> None:
        ftype = f.function_type
        if not any(_is_sharding(t) for t in (*ftype.inputs.data, *ftype.outputs.data)):
            return
        f.function_type = FunctionType.from_lists(
            _expand_types(ftype.inputs.data), _expand_types(ftype.outputs.data)
        )
        if not f.body.blocks:
            return
        block = f.body.blocks[0]
        for arg in [a for a in block.args if _is_sharding(a.type)]:
            self.parts[arg] = [
                block.insert_arg(t, arg.index + 1 + k)
                for k, t in enumerate(SHARDING_TENSOR_TYPES)
            ]

    def _call(self, op: func.CallOp) -> None:
        operands = self._expand(list(op.operands), op)
        new = func.CallOp(op.callee, operands, _expand_types([r.type for r in op.results]))
        PatternRewriter(op).insert(new, InsertPoint.before(op))
        results = iter(new.results)
        for r in op.results:
            if _is_sharding(r.type):
                self.parts[r] = [next(results) for _ in SHARDING_TENSOR_TYPES]
            else:
                r.replace_by(next(results))
        self.dead.append(op)


def _illegal(op: Operation) -> Exception:
    return fail(op, f"failed to legalize operation '{op.name}' that was explicitly marked illegal")


# =========================================================================================
# The pass
# =========================================================================================


_UPSTREAM = {
    shard.AllSliceOp: ("all_slice", "AllSliceOpLowering"),
    shard.ProcessMultiIndexOp: ("process_multi_index", "ProcessMultiIndexOpLowering"),
}
"""The op each shard lowering pattern rewrites -> its module and class."""
_UPSTREAM_ROOTS = {cls_name: root for root, (_, cls_name) in _UPSTREAM.items()}


def upstream_table(patterns: Sequence[RewritePattern]) -> dict[type[Operation], Lowering]:
    """`patterns` as a lowering table: each rewrites only the ops of one class (it
    returns on any other), so `run_lowerings` with this table leaves what
    `_run(module, patterns)` leaves, without calling both patterns on every op of the
    module."""
    return {_UPSTREAM_ROOTS[type(p).__name__]: p.match_and_rewrite for p in patterns}


def _upstream_patterns(roots: Sequence[type[Operation]] = tuple(_UPSTREAM)) -> list[RewritePattern]:
    """The shard lowering patterns of the ops `roots` (shardc.lowering.{all_slice,
    process_multi_index}), when those modules exist; a module is imported only for its
    root (all_slice's brings xDSL's affine, memref and cf dialects: about 8 ms)."""
    found: list[RewritePattern] = []
    for root in roots:
        module_name, cls_name = _UPSTREAM[root]
        try:
            cls = getattr(importlib.import_module(f"shardc.lowering.{module_name}"), cls_name)
        except (ImportError, AttributeError):
            continue
        found.append(cls())
    return found


def _leftovers(module: ModuleOp) -> None:
    for op in all_ops(module):
        if op.dialect_name() == "shard" and not isinstance(op, shard.GridOp | shard.GridShapeOp):
            raise _illegal(op)


@dataclass(frozen=True)
class ConvertShardToMPIPass(ModulePass):
    """Lower the shard dialect to mpi (MLIR's `convert-shard-to-mpi`)."""

    name = "convert-shard-to-mpi"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        with paused_gc():
            self._apply(ctx, op)

    def _apply(self, ctx: Context, op: ModuleOp) -> None:
        if _holds(op, (shard.GetShardingOp,)):
            run_lowerings(op, {shard.GetShardingOp: lower_get_sharding})
        # They rewrite only all_slice and process_multi_index ops; all_slice's lowering
        # makes process_multi_index ops, so it comes with both patterns.
        if held := ops_of_class(op, tuple(_UPSTREAM)):
            index_only = all(isinstance(o, shard.ProcessMultiIndexOp) for o in held)
            if upstream := _upstream_patterns((shard.ProcessMultiIndexOp,) if index_only else tuple(_UPSTREAM)):
                run_lowerings(op, upstream_table(upstream))
        table: dict[type[Operation], Lowering] = {**COLLECTIVE_PATTERNS, **INDEX_PATTERNS}
        run_lowerings(op, table)
        drop_group_marks(op)
        ShardingConversion(op).run()
        # Upstream's last step: the folding patterns under the greedy driver.
        apply_patterns_greedily(op, folding_patterns(), ctx=ctx)
        _leftovers(op)
