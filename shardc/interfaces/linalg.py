"""Sharding of linalg structured ops (generic and named), from their loop nest.

As upstream, every structured op gets the same model: iterator types and indexing maps
come from the op; the result maps are those of the destination-passing-style inits; only
ops whose result maps are projected permutations can be sharded. The reduction kind of
the reduction loops comes from the combiner in the body (`arith.addf` -> sum, ...).
linalg.reduce and linalg.broadcast are not structured ops in xDSL, so their loop nests
are spelled out here.

Partitioning (upstream's `partition`): with no reduction loop on a split grid axis the op
runs as it is on the local shards. A reduction over split axes keeps the init only on the
lead process of each reduction group (the others start from the combiner's neutral
element), then combines the partial results with `shard.all_reduce` of the combiner's kind.

Beyond upstream: a body reading `linalg.index k` of a split loop sees the global index
(the local one plus this process's offset, `process_multi_index` along the loop's grid
axes times the local loop size; upstream would read the local one). A tensor the body
reads from outside with `tensor.extract` (a gather's table) follows a loop along each
dimension that every extract of it indexes with exactly `linalg.index d` (through index
casts) and whose extent is loop d's (`captured_loop_dims`), or with a pooling window
`s * linalg.index d + linalg.index r` (r a reduction loop no longer than the stride s,
extent s times loop d's: torch-mlir's max_pool2d_with_indices; each block of rows reads
only its own rows, so no halo): that dimension is split like
loop d and read at the local index, so an embedding table split on n_embd stays split;
its other dimensions (indexed by data, say token ids) are read whole, at global
indices, as are the other uses of the index (bounds checks, arithmetic). The completion
after upstream's traversals never splits a reduction loop the partitioning cannot
combine (several inits, or a combiner without a reduction kind and neutral element, as
the max/argmax generic of a softmax).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    SymbolRefAttr,
    TensorType,
)
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation, NamedOperation
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import BroadcastOp, IndexOp, ReduceOp
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from shardc.dialects.shard import (
    DYNAMIC,
    AllReduceOp,
    GridShapeOp,
    ProcessMultiIndexOp,
    ReductionKindAttr,
    Sharding,
    ShardOp,
    grid_axes_attr,
)
from shardc.interfaces import sharding as sharding_mod
from shardc.ir.linalg_build import fill_op
from shardc.ir.segments import ins_outs
from shardc.ir.op_build import cmpi, index_constant, scf_if, scf_yield, tensor_empty
from shardc.ir.types import tensor_type
from shardc.interfaces.sharding import (
    LoopShardingConflict,
    Partitioner,
    ReductionKind,
    ShardingInterface,
    ShardingInfo,
    ShardingOption,
    grid_axis_assignment_for_loop_iterators,
    indexing_maps,
    is_projected_permutation_or_constant,
    is_at_least_one_reduction_iterator_sharded,
    loop_iterator_types,
    partition_trivially_shardable,
    ranked_tensor_rank,
    reduction_grid_axes,
    register_sharding_interface,
    type_text,
)
from shardc.ir import diagnostics

_COMBINER_KINDS: dict[str, ReductionKind] = {
    "arith.addf": ReductionKind.SUM,
    "arith.mulf": ReductionKind.PRODUCT,
    "arith.maximumf": ReductionKind.MAX,
    "arith.minimumf": ReductionKind.MIN,
    "arith.addi": ReductionKind.SUM,
    "arith.ori": ReductionKind.BITWISE_OR,
    "arith.xori": ReductionKind.BITWISE_XOR,
    "arith.andi": ReductionKind.BITWISE_AND,
    "arith.maxui": ReductionKind.MAX,
    "arith.minui": ReductionKind.MIN,
    "arith.maxsi": ReductionKind.MAX,
    "arith.minsi": ReductionKind.MIN,
    "arith.muli": ReductionKind.PRODUCT,
}

_NAMED_GET_INDEXING_MAPS = NamedOperation.get_indexing_maps


def _body(op: Operation) -> Block | None:
    if not op.regions or not op.regions[0].blocks:
        return None
    return op.regions[0].blocks.first


def combiner_op(op: Operation, output: int = 0) -> Operation | None:
    """The single op that combines output block argument `output` with the yielded value
    (MLIR's `matchReduction`), or None."""
    body = _body(op)
    num_inits = len(_inits(op))
    if body is None or body.last_op is None or num_inits <= output:
        return None
    arg: BlockArgument = body.args[len(body.args) - num_inits + output]
    yielded = body.last_op.operands
    if output >= len(yielded):
        return None
    combiner = yielded[output].owner
    if not isinstance(combiner, Operation) or combiner.parent_block() is not body:
        return None
    if len(combiner.operands) != 2 or arg not in combiner.operands:
        return None
    if not arg.has_one_use():
        return None
    return combiner


def reduction_kind(op: Operation) -> ReductionKind:
    combiner = combiner_op(op)
    if combiner is None:
        return ReductionKind.GENERIC
    return _COMBINER_KINDS.get(combiner.name, ReductionKind.GENERIC)


_IS_STRUCTURED: dict[type[Operation], bool] = {}


def _is_structured(op: Operation) -> bool:
    """`isinstance(op, LinalgStructuredOperation)` once per class: every linalg op's
    class is a subclass, whose ABC isinstance test is a Python call."""
    cls = type(op)
    found = _IS_STRUCTURED.get(cls)
    if found is None:
        found = _IS_STRUCTURED[cls] = isinstance(op, LinalgStructuredOperation)
    return found


def _inits(op: Operation):
    if _is_structured(op):
        return ins_outs(op)[1]
    if (inits := getattr(op, "inits", None)) is not None:  # shardc's variadic linalg.reduce
        return inits
    return (op.operands[-1],)


def _projection(num_dims: int, dims: list[int]) -> AffineMap:
    return AffineMap(num_dims, 0, tuple(AffineDimExpr(d) for d in dims))


class StructuredOpSharding(ShardingInterface):
    """Every linalg structured op: loops and maps from the op itself."""

    def _loops_and_maps(self, op: Operation) -> tuple[list[IteratorType], list[AffineMap]]:
        return self._loops(op), self._maps(op)

    def _loops(self, op: Operation) -> list[IteratorType]:
        assert isinstance(op, LinalgStructuredOperation)
        return [t.data for t in op.get_iterator_types()]

    def _maps(self, op: Operation) -> list[AffineMap]:
        assert isinstance(op, LinalgStructuredOperation)
        if type(op).get_indexing_maps is _NAMED_GET_INDEXING_MAPS:
            # What NamedOperation.get_indexing_maps wraps in attributes, unwrapped.
            return list(op.get_default_indexing_maps())  # pyright: ignore[reportAttributeAccessIssue]
        return [m.data for m in op.get_indexing_maps()]

    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        return self._loops(op)

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        maps = self._maps(op)
        inits = _inits(op)
        first_init = len(op.operands) - len(inits)
        # Results are indexed as the destination-passing-style inits they update.
        return [*maps, *(maps[first_init + i] for i in range(len(op.results)))]

    def get_reduction_loop_iterator_kinds(self, op: Operation) -> list[ReductionKind]:
        count = sum(t == IteratorType.REDUCTION for t in loop_iterator_types(self, op))
        return [reduction_kind(op)] * count

    def get_sharding_option(
        self,
        op: Operation,
        operand_shardings: Sequence[ShardingInfo | None],
        result_shardings: Sequence[ShardingInfo | None],
    ) -> ShardingOption | None:
        """Upstream's option, except that reduction loops this op cannot partition when
        split (several inits, as max with argmax; no combiner or neutral element) stay
        whole: upstream would split them and then fail in shard-partition, we gather
        the reduced dimension instead. Loops the option leaves whole take the axes of an
        annotated capture's dimension that follows them (`captured_loop_dims`), so a
        gather keeps its table's split."""
        option = super().get_sharding_option(op, operand_shardings, result_shardings)
        if option is not None and op.regions:
            option = _with_captures(op, option)
        if option is None or option.empty or self.allows_option(op, option):
            return option
        loops = loop_iterator_types(self, op)
        kept = [
            [] if t == IteratorType.REDUCTION else list(axes)
            for t, axes in zip(loops, option.sharding_array)
        ]
        return ShardingOption(kept, option.grid)

    def allows_option(self, op: Operation, option: ShardingOption) -> bool:
        loops = loop_iterator_types(self, op)
        split_reduction = any(
            t == IteratorType.REDUCTION and axes
            for t, axes in zip(loops, option.sharding_array)
        )
        if not split_reduction:
            return True
        return (
            len(_inits(op)) == 1
            and reduction_kind(op) != ReductionKind.GENERIC
            and _neutral_element(op) is not None
        )

    def partition(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        operand_shardings: Sequence[Sharding | None],
        result_shardings: Sequence[Sharding | None],
        partitioner: Partitioner,
    ) -> None:
        partition_structured(self, op, operands, operand_shardings, result_shardings, partitioner)


class SpelledOutSharding(StructuredOpSharding):
    """Structured ops whose loop nest is spelled out here (`_loops_and_maps`)."""

    def _loops(self, op: Operation) -> list[IteratorType]:
        return self._loops_and_maps(op)[0]

    def _maps(self, op: Operation) -> list[AffineMap]:
        return self._loops_and_maps(op)[1]


class ReduceOpSharding(SpelledOutSharding):
    """linalg.reduce: a loop per input dimension, `dimensions` reduced."""

    def _loops_and_maps(self, op: Operation) -> tuple[list[IteratorType], list[AffineMap]]:
        assert isinstance(op, ReduceOp)
        rank = ranked_tensor_rank(op.input.type)
        if rank is None:
            shape = getattr(op.input.type, "get_shape", lambda: ())()
            rank = len(shape)
        reduced = set(op.dimensions.get_values())
        loops = [
            IteratorType.REDUCTION if d in reduced else IteratorType.PARALLEL
            for d in range(rank)
        ]
        kept = [d for d in range(rank) if d not in reduced]
        n = len(getattr(op, "inputs", (op.input,)))  # shardc's linalg.reduce is variadic
        return loops, [AffineMap.identity(rank)] * n + [_projection(rank, kept)] * n


class BroadcastOpSharding(SpelledOutSharding):
    """linalg.broadcast: a parallel loop per init dimension, `dimensions` added."""

    def _loops_and_maps(self, op: Operation) -> tuple[list[IteratorType], list[AffineMap]]:
        assert isinstance(op, BroadcastOp)
        shape = getattr(op.init.type, "get_shape", lambda: ())()
        rank = len(shape)
        added = set(op.dimensions.get_values())
        kept = [d for d in range(rank) if d not in added]
        return [IteratorType.PARALLEL] * rank, [_projection(rank, kept), AffineMap.identity(rank)]


# =========================================================================================
# Partitioning
# =========================================================================================


def partition_structured(
    impl: StructuredOpSharding,
    op: Operation,
    operands: Sequence[SSAValue],
    operand_shardings: Sequence[Sharding | None],
    result_shardings: Sequence[Sharding | None],
    partitioner: Partitioner,
    windows_checked: bool = False,
) -> None:
    """Emit a structured op on its local shards (see the module docstring). Operand maps
    must be projected permutations unless the caller has checked the window dimensions
    (`a*d_out + b*d_window`) of a convolution or pooling op (interfaces/conv.py)."""
    maps = indexing_maps(impl, op)[: len(op.operands)]
    if not windows_checked and not all(is_projected_permutation_or_constant(m) for m in maps):
        raise diagnostics.op_error(
            op, "supports indexing maps that are only projected permutation."
        )
    loops = loop_iterator_types(impl, op)
    try:
        assignment = grid_axis_assignment_for_loop_iterators(operand_shardings, loops, maps)
    except LoopShardingConflict as e:
        raise diagnostics.error(op, str(e)) from None
    if not is_at_least_one_reduction_iterator_sharded(loops, assignment):
        new = partition_trivially_shardable(
            op, operands, operand_shardings, result_shardings, partitioner
        )
        _check_inits_match_results(new)
        _globalize_indices(op, new, assignment, operand_shardings, result_shardings, partitioner)
        return
    grid = next(
        (s.grid for s in (*operand_shardings, *result_shardings) if s is not None), None
    )
    assert grid is not None
    axes = reduction_grid_axes(loops, assignment)
    inits = _inits(op)
    if len(inits) != 1:
        raise diagnostics.op_error(
            op, "partitioning a reduction over split grid axes supports one init only"
        )
    init_index = len(op.operands) - 1
    new_operands = list(operands)
    new_operands[init_index] = _lead_process_init(
        op, operands[init_index], axes, grid, partitioner
    )
    # The op's own operand map, so that the pass-wide one keeps mapping the init.
    internal = dict(zip(op.operands, new_operands))
    partitioned = partition_trivially_shardable(
        op, new_operands, operand_shardings, result_shardings, partitioner, internal
    )
    _check_inits_match_results(partitioned)
    _globalize_indices(
        op, partitioned, assignment, operand_shardings, result_shardings, partitioner
    )
    kind = reduction_kind(op)
    for result, local, sharding in zip(op.results, partitioned.results, result_shardings):
        reduce_grid = sharding.grid if sharding is not None else grid
        all_reduce = AllReduceOp.create(
            operands=[local],
            result_types=[local.type],
            properties={
                "grid": SymbolRefAttr(reduce_grid),
                "grid_axes": grid_axes_attr(axes),
                "reduction": ReductionKindAttr(kind),
            },
        )
        all_reduce.location = op.location
        partitioner.insert(all_reduce)
        partitioner.mapping[result] = all_reduce.result


def _loop_sizes(impl_maps: Sequence[AffineMap], values: Sequence[SSAValue], count: int) -> list[int]:
    """Global size of each loop, read from the tensors its dimension indexes."""
    sizes = [DYNAMIC] * count
    for map_, value in zip(impl_maps, values):
        shape = value.type.get_shape() if isinstance(value.type, TensorType) else ()
        for expr, size in zip(map_.results, shape):
            if isinstance(expr, AffineDimExpr) and expr.position < count:
                if sizes[expr.position] == DYNAMIC:
                    sizes[expr.position] = size
    return sizes


# =========================================================================================
# Gathers: tensors a body reads from outside with tensor.extract
# =========================================================================================


def index_loop(value: SSAValue, op: Operation, extent: int) -> int | None:
    """The loop d when `value` is `linalg.index d` of `op`'s own body, possibly through
    `arith.index_cast`s whose integer types hold every index below `extent`, and through
    `arith.remsi`/`remui` by a constant of at least `extent` or `negative_wrap_source`'s
    select (torch-mlir's wraps of a possibly negative index: the identity on the loop's
    range)."""
    while True:
        step = value.owner
        if isinstance(step, arith.IndexCastOp):
            type_ = step.input.type
            if isinstance(type_, IntegerType) and (1 << (type_.width.data - 1)) <= extent:
                return None  # the cast may wrap
            value = step.input
        elif isinstance(step, (arith.RemSIOp, arith.RemUIOp)) and _constant_at_least(step.rhs, extent):
            value = step.lhs
        elif (unwrapped := negative_wrap_source(value)) is not None:
            value = unwrapped
        else:
            break
    owner = value.owner
    if isinstance(owner, IndexOp) and owner.parent_op() is op:
        return owner.dim.value.data
    return None


def negative_wrap_source(value: SSAValue) -> SSAValue | None:
    """x when `value` is `arith.select (x < 0), x + C, x` (torch-mlir's wrap of a
    negative index, as `mask[arange(B)[:, None], ...]` lowers): x itself wherever x is
    not negative, as a loop index is."""
    select = value.owner
    if not isinstance(select, arith.SelectOp):
        return None
    x, added, condition = select.rhs, select.lhs.owner, select.cond.owner
    if not isinstance(added, arith.AddiOp) or x not in (added.lhs, added.rhs):
        return None
    if not isinstance(condition, arith.CmpiOp) or condition.predicate.value.data != 2 or condition.lhs is not x:
        return None  # 2: slt
    zero = condition.rhs.owner
    if not isinstance(zero, arith.ConstantOp) or not isinstance(zero.value, IntegerAttr) or zero.value.value.data != 0:
        return None
    return x


def _window_loop(value: SSAValue, op: Operation, extent: int, sizes: Sequence[int]) -> int | None:
    """The loop d when `value` is `s * linalg.index d + linalg.index r` (either order)
    of `op`'s body, r a reduction loop of size k <= s, and `extent == s * size(d)`: a
    pooling window (torch-mlir's max_pool2d_with_indices reads its input so). Each
    output row reads rows `[s*d, s*d + k)`, inside block d of a dimension split like
    loop d, so the read is local, no halo. Overlapping windows (k > s) would need rows of
    the next shard and are not followed (the tensor is read whole)."""
    add = value.owner
    if not isinstance(add, arith.AddiOp):
        return None
    iterators = loop_iterator_types(StructuredOpSharding(), op)
    for scaled, offset in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
        mul = scaled.owner
        window = offset.owner
        if not isinstance(mul, arith.MuliOp) or not isinstance(window, IndexOp) or window.parent_op() is not op:
            continue
        r = window.dim.value.data
        for x, c in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
            stride = c.owner
            if not isinstance(stride, arith.ConstantOp) or not isinstance(stride.value, IntegerAttr):
                continue
            s = stride.value.value.data
            d = index_loop(x, op, extent)
            if (
                d is None
                or d == r
                or s < 1
                or r >= len(sizes)
                or iterators[r] != IteratorType.REDUCTION
                or sizes[d] == DYNAMIC
                or sizes[r] == DYNAMIC
                or sizes[r] > s
                or s * sizes[d] != extent
            ):
                continue
            return d
    return None


def _constant_at_least(value: SSAValue, bound: int) -> bool:
    owner = value.owner
    if not isinstance(owner, arith.ConstantOp) or not isinstance(owner.value, IntegerAttr):
        return False
    return owner.value.value.data >= bound


def may_capture_tensor(op: Operation) -> bool:
    """False when no op of `op`'s regions has a tensor operand (a matmul's or an
    elementwise body, scalars only): nothing is captured, no walk needed. Nested
    regions count as possible captures (the full walk decides). Once per op inside
    `pass_cache`: the passes replace captured values, never add or remove them."""
    memo = sharding_mod._memo  # pyright: ignore[reportPrivateUsage]
    if memo is None:
        return _reads_tensor(op)
    entries = memo["captures"]
    found = entries.get(op)
    if found is None:
        found = entries[op] = _reads_tensor(op)
    return found


_IS_TENSOR: dict[type, bool] = {}


def _reads_tensor(op: Operation) -> bool:
    known = _IS_TENSOR
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                if inner.regions:
                    return True
                for value in inner._operands:  # pyright: ignore[reportPrivateUsage]
                    t = value.type
                    cls = type(t)
                    found = known.get(cls)
                    if found is None:  # once per type class (an ABC: a Python call)
                        found = known[cls] = isinstance(t, TensorType)
                    if found:
                        return True
    return False



def captured_loop_dims(op: Operation) -> dict[SSAValue, tuple[int | None, ...]]:
    """For each ranked tensor `op`'s body reads from outside, only by `tensor.extract`,
    the loop each of its dimensions follows (None: read whole). A dimension follows loop
    d when every extract indexes it with `linalg.index d` (or a form equal to it on the
    loop's range, `index_loop`) and its static extent is loop d's; a loop is followed by
    one dimension at most. Tensors not listed are read whole."""
    if not _is_structured(op) or _body(op) is None:
        return {}
    if not may_capture_tensor(op):
        return {}
    loops = len(loop_iterator_types(StructuredOpSharding(), op))
    sizes: list[int] | None = None  # read at the first capture (most bodies have none)
    found: dict[SSAValue, list[int | None]] = {}
    refused: set[SSAValue] = set()
    for inner in op.walk():
        if inner is op:
            continue
        for position, value in enumerate(inner.operands):
            if not isinstance(value.type, TensorType) or value in refused:
                continue
            owner = value.owner
            where = owner.parent_op() if isinstance(owner, Block) else owner
            if where is not None and op.is_ancestor(where):
                continue  # defined inside the op
            if not isinstance(inner, tensor.ExtractOp) or position != 0:
                refused.add(value)
                found.pop(value, None)
                continue
            if sizes is None:
                sizes = _loop_sizes(indexing_maps(StructuredOpSharding(), op), [*op.operands, *op.results], loops)
            shape = value.type.get_shape()
            dims: list[int | None] = []
            for index, extent in zip(inner.indices, shape):
                loop, ok = None, False
                if extent != DYNAMIC:
                    loop = index_loop(index, op, extent)
                    ok = loop is not None and loop < loops and sizes[loop] == extent
                    if loop is None:
                        loop = _window_loop(index, op, extent, sizes)
                        ok = loop is not None
                dims.append(loop if ok else None)
            known = found.setdefault(value, dims)
            if known is not dims:
                found[value] = [a if a == b else None for a, b in zip(known, dims)]
    result: dict[SSAValue, tuple[int | None, ...]] = {}
    for value, dims in found.items():
        seen: set[int] = set()
        kept: list[int | None] = []
        for loop in dims:
            kept.append(loop if loop is not None and loop not in seen else None)
            if loop is not None:
                seen.add(loop)
        if any(loop is not None for loop in kept):
            result[value] = tuple(kept)
    return result


def _with_captures(op: Operation, option: ShardingOption) -> ShardingOption:
    """`option` with each loop it leaves whole split as the annotated capture dimension
    that follows it, where that grid axis is not used by another loop yet."""
    follows = captured_loop_dims(op)
    if not follows:
        return option
    loops = len(op.get_iterator_types()) if isinstance(op, LinalgStructuredOperation) else 0
    array = [list(a) for a in option.sharding_array] if not option.empty else []
    array += [[] for _ in range(loops - len(array))]
    grid = option.grid if not option.empty else None
    used = {a for axes in array for a in axes}
    changed = False
    for value, dims in follows.items():
        owner = value.owner
        if not isinstance(owner, ShardOp):
            continue
        info = ShardingInfo.of(owner.sharding)
        if grid is not None and info.grid != grid:
            continue
        for dim, loop in enumerate(dims):
            axes = list(info.split_axes[dim]) if dim < len(info.split_axes) else []
            if loop is None or not axes or array[loop] or used & set(axes):
                continue
            array[loop] = axes
            used.update(axes)
            grid = info.grid
            changed = True
    if not changed:
        return option
    return ShardingOption(array, grid)


def capture_split_axes(
    dims: Sequence[int | None], assignment: Sequence[Sequence[int]]
) -> list[list[int]]:
    """The split axes of a captured tensor read along `dims` (see `captured_loop_dims`)
    by an op whose loops are split over `assignment`: followed dimensions split as their
    loop, the others whole."""
    return [
        list(assignment[loop]) if loop is not None and loop < len(assignment) else []
        for loop in dims
    ]


def _local_reads(
    op: Operation, new: Operation, assignment: Sequence[Sequence[int]]
) -> list[tuple[tensor.ExtractOp, list[int]]]:
    """The extracts of `new` (the local clone of `op`) and the index positions that read
    a followed dimension of a split loop, so take the local index."""
    follows = captured_loop_dims(op)
    if not follows:
        return []
    reads: list[tuple[tensor.ExtractOp, list[int]]] = []
    for old, local in zip(op.walk(), new.walk()):
        if not isinstance(old, tensor.ExtractOp) or old.tensor not in follows:
            continue
        assert isinstance(local, tensor.ExtractOp)
        dims = follows[old.tensor]
        positions = [p for p, loop in enumerate(dims) if loop is not None and assignment[loop]]
        if positions:
            reads.append((local, positions))
    return reads


def _localized(value: SSAValue, globals_: dict[SSAValue, SSAValue], before: Operation) -> SSAValue:
    """`value` (a global `linalg.index`, possibly cast) computed from the local index."""
    if value in globals_:
        return globals_[value]
    cast = value.owner
    if isinstance(cast, (arith.RemSIOp, arith.RemUIOp)):
        return _localized(cast.lhs, globals_, before)  # the identity on the loop's range
    if (unwrapped := negative_wrap_source(value)) is not None:
        return _localized(unwrapped, globals_, before)  # likewise
    if isinstance(cast, (arith.AddiOp, arith.MuliOp)):  # a window, `_window_loop`
        operands = [
            _localized(v, globals_, before) if _reads_global(v, globals_) else v for v in cast.operands
        ]
        local_op = type(cast)(operands[0], operands[1])
        local_op.location = cast.location
        Rewriter.insert_op(local_op, InsertPoint.before(before))
        return local_op.result
    assert isinstance(cast, arith.IndexCastOp)
    local = arith.IndexCastOp(_localized(cast.input, globals_, before), cast.result.type)
    local.location = cast.location
    Rewriter.insert_op(local, InsertPoint.before(before))
    return local.result


def _reads_global(value: SSAValue, globals_: dict[SSAValue, SSAValue]) -> bool:
    """Whether `value` is computed (through casts, wraps and window arithmetic) from a
    global `linalg.index`."""
    if value in globals_:
        return True
    owner = value.owner
    if isinstance(owner, (arith.IndexCastOp, arith.RemSIOp, arith.RemUIOp, arith.AddiOp, arith.MuliOp, arith.SelectOp)):
        return any(_reads_global(v, globals_) for v in owner.operands)
    return False


def _globalize_indices(
    op: Operation,
    new: Operation,
    assignment: Sequence[Sequence[int]],
    operand_shardings: Sequence[Sharding | None],
    result_shardings: Sequence[Sharding | None],
    partitioner: Partitioner,
) -> None:
    """`linalg.index k` of a split loop k reads the global index in the local op: the
    local index plus this process's offset along the loop's grid axes; only the
    extracts of a captured tensor's followed dimensions keep the local one."""
    body = _body(new)
    if body is None:
        return
    indices = [o for o in body.walk() if isinstance(o, IndexOp) and o.dim.value.data < len(assignment) and assignment[o.dim.value.data]]
    if not indices:
        return
    local_reads = _local_reads(op, new, assignment)
    to_local: dict[SSAValue, SSAValue] = {}
    grid_name = next(
        (s.grid for s in (*operand_shardings, *result_shardings) if s is not None), None
    )
    assert grid_name is not None
    grid = partitioner.grid(op, grid_name)
    impl = StructuredOpSharding()
    maps = indexing_maps(impl, op) if isinstance(op, LinalgStructuredOperation) else []
    sizes = _loop_sizes(maps, [*op.operands, *op.results], len(assignment))
    offsets: dict[int, SSAValue] = {}
    loc = op.location
    for index_op in indices:
        loop = index_op.dim.value.data
        if loop not in offsets:
            axes = list(assignment[loop])
            shards = math.prod((grid.shape_tuple[a] or 1) for a in axes)
            if sizes[loop] == DYNAMIC or sizes[loop] % shards:
                raise diagnostics.op_error(
                    op,
                    f"cannot partition: linalg.index {loop} reads a split loop whose size "
                    "is not known to split evenly",
                )
            created: list[Operation] = []
            process = ProcessMultiIndexOp(grid_name, axes)
            shape = GridShapeOp(grid_name, axes)
            created += [process, shape]
            local = arith.ConstantOp(IntegerAttr(sizes[loop] // shards, IndexType()))
            created.append(local)
            Rewriter.insert_op(created, InsertPoint.before(new))
            collector = _Collector(InsertPoint.before(new))
            linear = _linearize(list(process.results), list(shape.results), collector, loc)  # type: ignore[arg-type]
            offset = arith.MuliOp(linear, local.result)
            Rewriter.insert_op(offset, InsertPoint.before(new))
            for c in (*created, *collector.ops, offset):
                c.location = loc
            offsets[loop] = offset.result
        add = arith.AddiOp(index_op.result, offsets[loop])
        Rewriter.insert_op(add, InsertPoint.after(index_op))
        index_op.result.replace_uses_with_if(add.result, lambda use, add=add: use.operation is not add)
        to_local[add.result] = index_op.result
    # A followed dimension of a captured tensor is split like its loop (partition.py
    # reshards the capture so): its extracts read it at the local index.
    for extract, positions in local_reads:
        for p in positions:
            extract.operands[1 + p] = _localized(extract.operands[1 + p], to_local, extract)


class _Collector:
    """A Partitioner stand-in for `_linearize` that inserts at a fixed point."""

    def __init__(self, point: InsertPoint):
        self.point = point
        self.ops: list[Operation] = []

    def insert(self, op: Operation) -> Operation:
        Rewriter.insert_op(op, self.point)
        self.ops.append(op)
        return op


def _check_inits_match_results(op: Operation) -> None:
    """The local init and result types must agree (MLIR's verifier message): they do not
    when the result's annotation splits differently from the init's."""
    inits = _inits(op)
    first = len(op.operands) - len(inits)
    for i, (init, result) in enumerate(zip(inits, op.results)):
        if init.type != result.type:
            raise diagnostics.op_error(
                op,
                f"expected type of operand #{first + i} ('{type_text(init.type)}') to match "
                f"type of corresponding result ('{type_text(result.type)}')",
            )


def _lead_process_init(
    op: Operation, init: SSAValue, axes: Sequence[int], grid: str, partitioner: Partitioner
) -> SSAValue:
    """`scf.if` on "linear index in the reduction group is 0": the init there, a tensor
    filled with the combiner's neutral element elsewhere (upstream's
    createDestinationPassingStyleInitOperand)."""
    neutral = _neutral_element(op)
    if neutral is None:
        raise diagnostics.op_error(
            op,
            "cannot partition a reduction over split grid axes: its combiner has no "
            "neutral element",
        )
    loc = op.location
    index = ProcessMultiIndexOp(grid, axes)
    sizes = GridShapeOp(grid, axes)
    for new in (index, sizes):
        new.location = loc
        partitioner.insert(new)
    linear = _linearize(list(index.results), list(sizes.results), partitioner, loc)
    zero = partitioner.insert(index_constant(0))
    is_lead = partitioner.insert(cmpi(linear, zero.result, "eq"))
    then_block = Block([scf_yield(init)])
    else_block = Block()
    assert isinstance(init.type, TensorType)
    dynamic: list[SSAValue] = []
    for dim, size in enumerate(init.type.get_shape()):
        if size == DYNAMIC:
            c = else_block.add_op(arith.ConstantOp(IntegerAttr(dim, IndexType())))
            d = tensor.DimOp(init, c)
            else_block.add_op(d)
            dynamic.append(d.result)
    empty = tensor_empty(dynamic, tensor_type(neutral.type, init.type.get_shape()))
    constant = arith.ConstantOp(neutral)
    fill = fill_op([constant.result], [empty.tensor], [init.type])
    for new in (empty, constant, fill):
        else_block.add_op(new)
    else_block.add_op(scf_yield(fill.results[0]))
    if_op = scf_if(is_lead.result, [init.type], then_block, else_block)
    for new in (zero, is_lead, if_op, *then_block.ops, *else_block.ops):
        new.location = loc
    partitioner.insert(if_op)
    return if_op.results[0]


_FLOAT_NEUTRAL: dict[str, float] = {
    "arith.addf": 0.0,
    "arith.mulf": 1.0,
    "arith.maximumf": -math.inf,
    "arith.minimumf": math.inf,
    "arith.maxnumf": -math.nan,
    "arith.minnumf": math.nan,
}


def _int_neutral(name: str, width: int) -> int | None:
    all_ones, smin, smax = -1, -(1 << (width - 1)), (1 << (width - 1)) - 1
    return {
        "arith.addi": 0,
        "arith.ori": 0,
        "arith.xori": 0,
        "arith.andi": all_ones,
        "arith.maxui": 0,
        "arith.minui": all_ones,
        "arith.maxsi": smin,
        "arith.minsi": smax,
        "arith.muli": 1,
    }.get(name)


@lru_cache(maxsize=256)
def _float_attr(combiner: str, type_: Attribute) -> FloatAttr:
    """The float neutral element, one attribute object per combiner and type."""
    return FloatAttr(_FLOAT_NEUTRAL[combiner], type_)


def _neutral_element(op: Operation) -> FloatAttr | IntegerAttr | None:
    """MLIR's `arith::getNeutralElement` of the combiner of output 0."""
    combiner = combiner_op(op)
    return None if combiner is None else neutral_element(combiner)


def neutral_element(combiner: Operation) -> FloatAttr | IntegerAttr | None:
    """MLIR's `arith::getNeutralElement`: the value `combiner` (an arith op of two
    operands) leaves the other operand unchanged with, or None."""
    if not combiner.results:
        return None
    type_: Attribute = combiner.results[0].type
    if isinstance(type_, AnyFloat) and combiner.name in _FLOAT_NEUTRAL:
        return _float_attr(combiner.name, type_)
    if isinstance(type_, IntegerType):
        value = _int_neutral(combiner.name, type_.width.data)
        if value is not None:
            return IntegerAttr(value, type_)
    return None


def _sym(i: int) -> AffineExpr:
    return AffineSymExpr(i)


def _mul(a: AffineExpr, b: AffineExpr) -> AffineExpr:
    return AffineBinaryOpExpr(AffineBinaryOpKind.Mul, a, b)


def _add(a: AffineExpr, b: AffineExpr) -> AffineExpr:
    return AffineBinaryOpExpr(AffineBinaryOpKind.Add, a, b)


def _apply(
    expr: AffineExpr, operands: Sequence[SSAValue], partitioner: Partitioner, loc
) -> SSAValue:
    from xdsl.dialects import affine  # only partition uses it (with memref: 10 ms to import)

    map_ = AffineMap(0, len(operands), (expr,))
    apply = partitioner.insert(affine.ApplyOp(operands, AffineMapAttr(map_)))
    apply.location = loc
    return apply.result


def _linearize(
    index: list[SSAValue], sizes: list[SSAValue], partitioner: Partitioner, loc
) -> SSAValue:
    """The row-major linear index of `index` in a group of shape `sizes`, spelled as MLIR's
    `affine::linearizeIndex` leaves it (composed and simplified affine.apply ops, with
    the stride products it does not erase) for up to four axes."""
    s = _sym
    n = len(index)
    if n == 1:
        return index[0]
    if n == 2:
        return _apply(_add(_mul(s(0), s(1)), s(2)), [index[0], sizes[1], index[1]], partitioner, loc)
    if n == 3:
        _apply(_mul(s(0), s(1)), [sizes[1], sizes[2]], partitioner, loc)
        expr = _add(_add(_mul(s(1), s(2)), s(3)), _mul(s(0), _mul(s(2), s(4))))
        return _apply(expr, [index[0], index[1], sizes[2], index[2], sizes[1]], partitioner, loc)
    if n == 4:
        _apply(_mul(_mul(s(1), s(2)), s(0)), sizes[1:], partitioner, loc)
        _apply(_mul(s(0), s(1)), sizes[2:], partitioner, loc)
        s36 = _mul(s(3), s(6))
        expr = _add(
            _add(_add(_mul(s(2), s(3)), s(4)), _mul(s(0), _mul(s36, s(5)))), _mul(s(1), s36)
        )
        operands = [index[0], index[1], index[2], sizes[3], index[3], sizes[1], sizes[2]]
        return _apply(expr, operands, partitioner, loc)
    # More axes: the same value, strides as products of the trailing sizes.
    expr: AffineExpr = s(0)
    operands = [index[0]]
    for k in range(1, n):
        expr = _add(_mul(expr, s(len(operands))), s(len(operands) + 1))
        operands += [sizes[k], index[k]]
    return _apply(expr, operands, partitioner, loc)


def register() -> None:
    register_sharding_interface(LinalgStructuredOperation, StructuredOpSharding())
    register_sharding_interface(ReduceOp, ReduceOpSharding())
    register_sharding_interface(BroadcastOp, BroadcastOpSharding())
