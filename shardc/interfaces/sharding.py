"""The ShardingInterface: what the sharding passes need to know about a foreign op.

MLIR attaches `ShardingInterface` to linalg, tosa, tensor and arith ops as external
models. We keep xDSL's classes untouched and use a registry instead: implementations are
registered by op class (found through the class's MRO, so one registration covers a
whole family such as every linalg structured op) or, for ops whose class lives in an
overlay still in flux, by op name.

An op is described by its loop nest: iterator types (parallel / reduction), one indexing
map per operand and per result (from loops to tensor dimensions), and the reduction kind
of each reduction loop. From that the shared algorithms below derive, as upstream does:

* `default_get_sharding_option`: which grid axes split which loop, given the shardings
  already known on some operands and results (or None on a conflict);
* `default_get_sharding_annotations`: the operand and result shardings an option implies;
* `default_add_sharding_annotations`: the `shard.sharding`/`shard.shard` ops that make the
  IR say so (incl. `annotate_for_users` on operands).

Beyond upstream: a map result may be a constant (torch-mlir's `(d0, d1, d2) -> (d0, d1, 0)`
for a reduction that keeps a size-one dimension): that dimension maps to no loop and is
never split. `allows_option` lets an implementation refuse options the completion after
upstream's traversals would otherwise consider (splits its `partition` cannot emit).

`partition` is the hook the partition pass calls to emit an op on local shards, with the
helpers upstream's implementations share (`partition_trivially_shardable`,
`partition_fully_replicated`, `local_type`, the loop-to-grid-axes assignment).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from io import StringIO
from typing import Iterator, TypeVar

from xdsl.dialects.builtin import AnyFloat, IndexType, IntegerType, TensorType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.builder import Builder
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.printer import Printer
from xdsl.rewriter import InsertPoint
from xdsl.traits import ConstantLike

from shardc.dialects.shard import (
    DYNAMIC,
    GetShardingOp,
    GridAxesArrayAttr,
    GridOp,
    ReductionKind,
    Sharding,
    ShardingOp,
    ShardOp,
    collective_group_size,
    lookup_grid,
)
from shardc.ir import diagnostics
from shardc.ir.clone import clone_region_into
from shardc.ir.insert import insert_op
from shardc.ir.op_init import create_op
from shardc.ir.traits import is_instance

__all__ = [
    "IteratorType",
    "ReductionKind",
    "ShardingInfo",
    "ShardingInterface",
    "ShardingOption",
    "get_sharding_interface",
    "register_sharding_interface",
]

GridAxes = tuple[int, ...]

# =========================================================================================
# Values: shardings as the algorithms see them, sharding options
# =========================================================================================


@dataclass(frozen=True)
class ShardingInfo:
    """A sharding as upstream's algorithms see it: the split axes exactly as written or
    built (MLIR keeps empty sub-arrays, e.g. `[[]]`, and the option computation sees
    them), plus the dialect's value view, whose equality is MLIR's `Sharding::operator==`.
    """

    sharding: Sharding
    split_axes: tuple[GridAxes, ...]

    @property
    def grid(self) -> str:
        return self.sharding.grid

    @staticmethod
    def of(value: SSAValue) -> ShardingInfo:
        """The sharding a `!shard.sharding` value defines (MLIR's `Sharding(Value)`)."""
        op = value.owner
        assert isinstance(op, ShardingOp)
        memo = _memo
        if memo is not None:
            found = memo["info"].get(op)
            if found is not None:
                return found
        info = ShardingInfo(Sharding.of(op), op.split_axes.as_tuple())
        if memo is not None:
            memo["info"][op] = info
        return info

    @staticmethod
    def get(grid: str, split_axes: Sequence[Sequence[int]]) -> ShardingInfo:
        """MLIR's `Sharding::get(grid, splitAxes)` without halos or offsets."""
        return _sharding_info(grid, tuple(map(tuple, split_axes)))

    def same_as(self, other: ShardingInfo | None) -> bool:
        return other is not None and self.sharding == other.sharding

    def __str__(self) -> str:
        axes = ", ".join("[" + ", ".join(map(str, sub)) + "]" for sub in self.split_axes)
        return f"@{self.grid} split_axes = [{axes}]"


@dataclass
class ShardingOption:
    """Grid axes assigned to each loop of an op (MLIR's `ShardingOption`); `empty` when
    nothing was known to derive it from."""

    sharding_array: list[list[int]] = field(default_factory=list[list[int]])
    grid: str | None = None
    empty: bool = False

    @staticmethod
    def make_empty() -> ShardingOption:
        return ShardingOption(empty=True)


@lru_cache(maxsize=4096)
def _sharding_info(grid: str, axes: tuple[GridAxes, ...]) -> ShardingInfo:
    return ShardingInfo(Sharding(grid, axes), axes)


def remove_trailing_empty_sub_arrays(array: list[list[int]]) -> None:
    """Drop trailing empty sub-arrays down to a length of one, as upstream does."""
    while len(array) > 1 and not array[-1]:
        array.pop()


# =========================================================================================
# Diagnostics: upstream reports some problems without failing the pass
# =========================================================================================


@dataclass
class Diagnostic:
    """An `emit_op_error` made inside `collect_diagnostics`: kept for the caller, which
    decides whether the pass fails."""

    op: Operation
    message: str
    severity: str = "error"


_diagnostics: ContextVar[list[Diagnostic] | None] = ContextVar("sharding_diagnostics", default=None)


@contextmanager
def collect_diagnostics() -> Iterator[list[Diagnostic]]:
    """Collect the diagnostics emitted by the interface while the block runs."""
    sink: list[Diagnostic] = []
    token = _diagnostics.set(sink)
    try:
        yield sink
    finally:
        _diagnostics.reset(token)


def emit_op_error(op: Operation, message: str) -> None:
    """MLIR's `op->emitOpError() << message`: recorded, not raised; the caller decides
    whether the pass fails. Outside `collect_diagnostics` it is reported at once."""
    diag = Diagnostic(op, f"'{op.name}' op {message}")
    sink = _diagnostics.get()
    if sink is None:
        from shardc.ir import diagnostics

        diagnostics.emit(op, diag.severity, diag.message)
    else:
        sink.append(diag)


# =========================================================================================
# The interface and its registry
# =========================================================================================


class ShardingInterface:
    """Base class of sharding implementations (one instance per op family); every method
    takes the op. Defaults follow MLIR's interface defaults."""

    in_upstream: bool = True
    """Whether upstream MLIR attaches a sharding model to the ops this one serves; false
    for shardc's extensions (reshapes, slices, scatters...), on which upstream's
    traversals fail, so a function holding one has no upstream result to keep."""

    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        return []

    def get_reduction_loop_iterator_kinds(self, op: Operation) -> list[ReductionKind]:
        return []

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        return []

    def get_sharding_option(
        self,
        op: Operation,
        operand_shardings: Sequence[ShardingInfo | None],
        result_shardings: Sequence[ShardingInfo | None],
    ) -> ShardingOption | None:
        """The loop sharding implied by the given (possibly partial) shardings; None when
        they conflict."""
        return default_get_sharding_option(self, op, operand_shardings, result_shardings)

    def get_sharding_annotations(
        self, op: Operation, option: ShardingOption
    ) -> list[ShardingInfo | None] | None:
        """Operand then result shardings the op needs for `option` (None: impossible)."""
        return default_get_sharding_annotations(self, op, option)

    def annotations_follow_signature(self, op: Operation) -> bool:
        """Whether `get_sharding_annotations` reads of `op` only its maps, loop count and
        operand/result ranks, so that propagation may share its answer between ops alike.
        An override that reads more (say, the padding of a producer) answers False."""
        return type(self).get_sharding_annotations is ShardingInterface.get_sharding_annotations

    def add_sharding_annotations(self, op: Operation, option: ShardingOption) -> bool:
        """Annotate every operand and result of `op` for `option`."""
        return default_add_sharding_annotations(self, op, option)

    def allows_option(self, op: Operation, option: ShardingOption) -> bool:
        """Whether the completion after upstream's traversals may choose `option` (an op
        may be unable to partition some splits, e.g. a reduction without a combiner)."""
        return True

    def reshard_result(
        self,
        op: Operation,
        source: Sharding,
        target: Sharding,
        local: SSAValue,
        partitioner: Partitioner,
        reshard: Callable[[Sharding, Sharding, Attribute, SSAValue], SSAValue],
    ) -> SSAValue | None:
        """`local`, the local form `partition` gave `op`'s result under `source`, moved to
        `target`, for an op whose local form is not the planner's (a pad split with halos
        counted in its source's frame, interfaces/conv.py); None: the planner's resharding
        applies. `reshard(src, tgt, global_type, value)` is the planner's."""
        return None

    def partition(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        operand_shardings: Sequence[Sharding | None],
        result_shardings: Sequence[Sharding | None],
        partitioner: Partitioner,
    ) -> None:
        """Emit `op` on local shards (operands already partitioned) and map its results in
        `partitioner.mapping`; raise a diagnostic when it cannot. MLIR's default: the op
        must be fully replicated and is cloned."""
        partition_fully_replicated(op, operands, operand_shardings, result_shardings, partitioner)


_BY_CLASS: dict[type[Operation], ShardingInterface] = {}
_BY_NAME: dict[str, ShardingInterface] = {}
_CACHE: dict[type[Operation], ShardingInterface | None] = {}

# Dialect name -> the module whose `register()` attaches shardc's implementations to that
# dialect's ops; it is imported when an op of the dialect is first looked up, so a run
# loads only the models (and the dialects they import) its program uses.
_MODELS: dict[str, str | tuple[str, ...]] = {
    "linalg": ("shardc.interfaces.linalg", "shardc.interfaces.conv"),
    "tosa": "shardc.interfaces.tosa",
    "tensor": ("shardc.interfaces.tensor", "shardc.interfaces.conv"),
    "arith": "shardc.interfaces.arith",
    "tm_tensor": "shardc.interfaces.tm_tensor",
}
_LOADED: set[str] = set()


def register_sharding_interface(
    key: type[Operation] | str, impl: ShardingInterface
) -> None:
    """Attach `impl` to an op class (and its subclasses) or to an op name."""
    if isinstance(key, str):
        _BY_NAME[key] = impl
    else:
        _BY_CLASS[key] = impl
    _CACHE.clear()


def load_models(dialect: str) -> None:
    """Register shardc's implementations for the ops of `dialect` (once; `_MODELS`)."""
    if dialect in _LOADED:
        return
    _LOADED.add(dialect)
    if dialect == "func":
        # func.return, as upstream's func extension; propagation skips terminators anyway.
        register_sharding_interface("func.return", IndependentParallelIteratorDomainShardingInterface())
    elif dialect in _MODELS:
        import importlib

        modules = _MODELS[dialect]
        for module in (modules,) if isinstance(modules, str) else modules:
            importlib.import_module(module).register()


def get_sharding_interface(op: Operation) -> ShardingInterface | None:
    """The implementation for `op`: by class through the MRO, else by op name."""
    cls = type(op)
    if cls not in _CACHE:
        load_models(op.name.partition(".")[0])
        found = next((_BY_CLASS[c] for c in cls.__mro__ if c in _BY_CLASS), None)
        _CACHE[cls] = found if found is not None else _BY_NAME.get(op.name)
    impl = _CACHE[cls]
    if impl is None and cls.__name__ == "UnregisteredOp":
        load_models(op.name.partition(".")[0])
        return _BY_NAME.get(op.name)
    return impl


# =========================================================================================
# Per-pass memo of per-op derived data
# =========================================================================================
# Propagation visits each op several times (every traversal, every combination of
# shardings) and partition reads each op's maps more than once; an op's indexing maps,
# loop types and the validity of its implementation depend only on its own attributes and
# operand/result types, which neither pass changes on an op it has not finished with.

_memo: dict[str, dict] | None = None


@contextmanager
def pass_cache() -> Iterator[None]:
    """Within the block, per-op derived data (indexing maps, loop iterator types, the
    interface check, the sharding a `shard.sharding` op defines, whether its body reads
    a tensor) is computed once."""
    global _memo
    saved = _memo
    _memo = {"maps": {}, "loops": {}, "valid": {}, "info": {}, "sharding": {}, "grid": {}, "captures": {}, "annotations": {}, "options": {}, "option_sig": {}, "option_sig_ids": {}, "annotation_sig": {}, "annotation_sig_ids": {}}
    try:
        yield
    finally:
        _memo = saved


T = TypeVar("T")


def _memoized(table: str, key: Hashable, compute: Callable[[], T]) -> T:
    """`compute()`, once per key of `table` inside `pass_cache` (every call outside)."""
    memo = _memo
    if memo is None:
        return compute()
    entries = memo[table]
    if key in entries:
        return entries[key]
    found = entries[key] = compute()
    return found


def indexing_maps(impl: ShardingInterface, op: Operation) -> list[AffineMap]:
    """`impl.get_indexing_maps(op)`, once per op inside `pass_cache` (do not mutate)."""
    memo = _memo
    if memo is None:
        return impl.get_indexing_maps(op)
    entries = memo["maps"]
    found = entries.get(op)
    if found is None:
        found = entries[op] = impl.get_indexing_maps(op)
    return found


def sharding_of(value: SSAValue) -> Sharding:
    """`Sharding.of(value)`, once per `shard.sharding` op inside `pass_cache` (for passes
    that do not modify sharding ops)."""
    memo = _memo
    if memo is None:
        return Sharding.of(value)
    entries = memo["sharding"]
    owner = value.owner
    found = entries.get(owner)
    if found is None:
        found = entries[owner] = Sharding.of(value)
    return found


def cached_lookup_grid(op: Operation, name: str) -> GridOp | None:
    """`lookup_grid(op, name)`, once per block and name inside `pass_cache` (for passes
    that do not add, remove or rename grids)."""
    return _memoized("grid", (op.parent_block(), name), lambda: lookup_grid(op, name))


def loop_iterator_types(impl: ShardingInterface, op: Operation) -> list[IteratorType]:
    """`impl.get_loop_iterator_types(op)`, once per op inside `pass_cache`."""
    memo = _memo
    if memo is None:
        return impl.get_loop_iterator_types(op)
    entries = memo["loops"]
    found = entries.get(op)
    if found is None:
        found = entries[op] = impl.get_loop_iterator_types(op)
    return found


# =========================================================================================
# Helpers on types, values and affine expressions
# =========================================================================================


def ranked_tensor_rank(t: Attribute) -> int | None:
    return len(t.get_shape()) if isinstance(t, TensorType) else None


_INT_INDEX_OR_FLOAT = IntegerType | IndexType | AnyFloat  # built once, not per call


def is_int_index_or_float(t: Attribute) -> bool:
    """Once per attribute class (an isinstance test of these ABC classes is a Python
    call; propagation asks for every operand and result type)."""
    return is_instance(t, _INT_INDEX_OR_FLOAT)


_CONSTANT_LIKE_NAMES = frozenset({"tosa.const", "tosa.const_shape"})


def is_constant_like(op: Operation) -> bool:
    """MLIR's `ConstantLike` trait (xDSL's tosa.const lacks it)."""
    from shardc.ir.traits import has_trait  # once per class

    return has_trait(op, ConstantLike) or op.name in _CONSTANT_LIKE_NAMES


def operand_expr_loops(expr: AffineExpr, num_dims: int) -> list[int] | None:
    """Loops an operand dimension depends on, for exprs of the form
    `c_i * d_i + d_j + ...` (each loop once); None for anything else."""
    loops = _expr_loops(expr, num_dims)
    return None if loops is None else list(loops)


@lru_cache(maxsize=8192)
def _expr_loops(expr: AffineExpr, num_dims: int) -> tuple[int, ...] | None:
    seen = [False] * num_dims

    def visit(e: AffineExpr) -> bool:
        if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Add:
            return visit(e.lhs) and visit(e.rhs)
        if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Mul:
            if isinstance(e.lhs, AffineDimExpr) and isinstance(e.rhs, AffineConstantExpr):
                return visit(e.lhs)
            if isinstance(e.rhs, AffineDimExpr) and isinstance(e.lhs, AffineConstantExpr):
                return visit(e.rhs)
            return False
        if isinstance(e, AffineDimExpr):
            if e.position >= num_dims or seen[e.position]:
                return False
            seen[e.position] = True
            return True
        return False

    if not visit(expr):
        return None
    return tuple(i for i, s in enumerate(seen) if s)


def verify_sharding_interface_impl(impl: ShardingInterface, op: Operation) -> bool:
    """MLIR's `verifyShardingInterfaceImpl`: ranked tensors or scalars only, one map per
    operand and result, projected-permutation maps for results (once per op inside
    `pass_cache`)."""
    memo = _memo
    if memo is None:
        return _verify_impl(impl, op)
    entries = memo["valid"]
    found = entries.get(op)
    if found is None:
        found = entries[op] = _verify_impl(impl, op)
    return found


def _verify_impl(impl: ShardingInterface, op: Operation) -> bool:
    for t in (*op.operand_types, *op.result_types):
        if not isinstance(t, TensorType) and not is_int_index_or_float(t):
            return False
    maps = indexing_maps(impl, op)
    if not maps or len(maps) != len(op.operands) + len(op.results):
        return False
    n = len(op.operands)
    for i, result in enumerate(op.results):
        if not isinstance(result.type, TensorType):
            return False
        if not is_projected_permutation_or_constant(maps[n + i]):
            return False
    return True


def is_projected_permutation_or_constant(map_: AffineMap) -> bool:
    """Distinct loops or constants (a size-one dimension kept by a reduction, as
    torch-mlir writes `(d0, d1, d2) -> (d0, d1, 0)`); upstream allows no constants."""
    if map_.is_projected_permutation():
        return True
    dims = [e.position for e in map_.results if isinstance(e, AffineDimExpr)]
    return len(set(dims)) == len(dims) and all(
        isinstance(e, AffineDimExpr | AffineConstantExpr) for e in map_.results
    )


# =========================================================================================
# The sharding option (MLIR's detail::defaultGetShardingOption)
# =========================================================================================


def _fill_sharding_option(
    option: ShardingOption, grid: str | None, axes: Sequence[int], loop: int
) -> bool:
    """Assign `axes` to `loop`; False on a conflict with what the option already says."""
    if loop >= len(option.sharding_array):
        return False
    current = option.sharding_array[loop]
    if (option.grid and grid and option.grid != grid) or (current and current != list(axes)):
        return False
    for i, other in enumerate(option.sharding_array):
        if i != loop and any(a in other for a in axes):
            return False
    if grid:
        option.grid = grid
    if not current:
        current.extend(axes)
    return True


def default_get_sharding_option(
    impl: ShardingInterface,
    op: Operation,
    operand_shardings: Sequence[ShardingInfo | None],
    result_shardings: Sequence[ShardingInfo | None],
) -> ShardingOption | None:
    """MLIR's `defaultGetShardingOption` (a fresh option each call). Inside `pass_cache`
    it is computed once per option signature of the op (`_option_signature`) and the
    grids and split axes of the given shardings: propagation asks it for every op of a
    chain or a layer's repeats, several times each, with the same few shardings. A
    refusal (None) is never remembered, so each op reports its own diagnostics."""
    memo = _memo
    if memo is None:
        return _default_sharding_option(impl, op, operand_shardings, result_shardings)
    key = (
        _option_signature(memo, impl, op),
        *[None if s is None else (s.sharding.grid, s.split_axes) for s in operand_shardings],
        _RESULTS_FOLLOW,
        *[None if s is None else (s.sharding.grid, s.split_axes) for s in result_shardings],
    )
    entries = memo["options"]
    found = entries.get(key)
    if found is None:
        found = _default_sharding_option(impl, op, operand_shardings, result_shardings)
        if found is None:
            return None
        entries[key] = found
    return ShardingOption([list(a) for a in found.sharding_array], found.grid, found.empty)


_RESULTS_FOLLOW = object()
"""Separates operand from result shardings in an option memo key."""


def _option_signature(memo: dict[str, dict], impl: ShardingInterface, op: Operation) -> int:
    """A number shared by the ops `_default_sharding_option` cannot tell apart: it reads
    of an op only its maps, its loop count, its operand count and whether the interface
    check passes (once per op inside `pass_cache`)."""
    return _signature(
        memo,
        "option_sig",
        op,
        lambda: (type(impl), tuple(indexing_maps(impl, op)), len(loop_iterator_types(impl, op)), len(op.operands), verify_sharding_interface_impl(impl, op)),
    )


def _signature(memo: dict[str, dict], table: str, op: Operation, key: Callable[[], object]) -> int:
    """The number of `op`'s `key()` (computed once per op, `_memoized`): one per distinct
    key, numbered in `memo[table + "_ids"]`."""
    ids = memo[table + "_ids"]
    return _memoized(table, op, lambda: ids.setdefault(key(), len(ids)))


def _default_sharding_option(
    impl: ShardingInterface,
    op: Operation,
    operand_shardings: Sequence[ShardingInfo | None],
    result_shardings: Sequence[ShardingInfo | None],
) -> ShardingOption | None:
    if not verify_sharding_interface_impl(impl, op):
        emit_op_error(op, "invalid sharding interface implementation")
        return None
    maps = indexing_maps(impl, op)
    num_operands = len(op.operands)
    option = ShardingOption([[] for _ in loop_iterator_types(impl, op)])
    visited: set[int] = set()
    any_sharding = False

    # 1. Results: their maps are projected permutations, each dimension one loop.
    for index, sharding in enumerate(result_shardings):
        if sharding is None:
            continue
        map_ = maps[num_operands + index]
        any_sharding = True
        if not sharding.split_axes or not map_.results:
            option.grid = sharding.grid
            continue
        for expr, axes in zip(map_.results, sharding.split_axes):
            if not isinstance(expr, AffineDimExpr):
                if axes:
                    return None  # a fixed index cannot be split
                # Still a sharding on this grid (upstream's results are all loops, each
                # of which records the grid): without it the option has no grid.
                if option.grid and option.grid != sharding.grid:
                    return None
                option.grid = sharding.grid
                continue
            visited.add(expr.position)
            if not _fill_sharding_option(option, sharding.grid, axes, expr.position):
                return None

    # 2. Operands. As upstream, the last annotated operand decides whether the option is
    # empty (an assignment, not an "or").
    for index, sharding in enumerate(operand_shardings):
        if sharding is None:
            continue
        any_sharding = bool(sharding.split_axes)
        # Upstream takes the grid only from split dimensions; a 0-d operand (a loss, a
        # scalar-like tensor) has none, and would leave a non-empty option gridless.
        if option.grid is None and any_sharding:
            option.grid = sharding.grid
        map_ = maps[index]
        for expr, axes in zip(map_.results, sharding.split_axes):
            if isinstance(expr, AffineConstantExpr) and not axes:
                continue  # a fixed index into an unsplit (size-one) dimension
            loops = _expr_loops(expr, map_.num_dims)
            if loops is None:
                emit_op_error(
                    op,
                    "operand's affine expression is restricted to const_i * dim_i + "
                    "const_j + dim_j + ...",
                )
                return None
            if len(loops) == 1:
                visited.add(loops[0])
                if not _fill_sharding_option(option, sharding.grid, axes, loops[0]):
                    return None
            elif len(loops) > 1 and not any(loop in visited for loop in loops):
                emit_op_error(
                    op,
                    f"the operand {index} has multiple loop indices in a dimension, but "
                    "none of them could be found in the exactly specified annotation of "
                    "op results or operands.",
                )
                return None

    remove_trailing_empty_sub_arrays(option.sharding_array)
    if not any_sharding:
        option.empty = True
    return option


# =========================================================================================
# Operand and result shardings implied by an option
# =========================================================================================


def result_sharding_for_option(
    result: SSAValue, option: ShardingOption, map_: AffineMap
) -> ShardingInfo:
    rank = ranked_tensor_rank(result.type) or 0
    split: list[list[int]] = [[] for _ in range(rank)]
    for i, expr in enumerate(map_.results):
        if not isinstance(expr, AffineDimExpr):
            continue
        if expr.position < len(option.sharding_array) and i < rank:
            split[i].extend(option.sharding_array[expr.position])
    remove_trailing_empty_sub_arrays(split)
    assert option.grid is not None
    return ShardingInfo.get(option.grid, split)


class _Impossible(Exception):
    """No sharding can express the option for this operand."""


def operand_sharding_for_option(
    value: SSAValue, option: ShardingOption, map_: AffineMap
) -> ShardingInfo | None:
    """The operand's sharding (None for a scalar); raises `_Impossible`."""
    rank = ranked_tensor_rank(value.type)
    if rank is None:
        if is_int_index_or_float(value.type):
            return None
        raise _Impossible
    assert option.grid is not None
    if rank == 0:
        return ShardingInfo.get(option.grid, [])
    split: list[list[int]] = [[] for _ in range(rank)]
    for i, expr in enumerate(map_.results):
        if isinstance(expr, AffineConstantExpr):
            continue  # a fixed index: that dimension stays whole
        loops = _expr_loops(expr, map_.num_dims)
        if loops is None:
            raise _Impossible
        sharded = [
            loop
            for loop in loops
            if loop < len(option.sharding_array) and option.sharding_array[loop]
        ]
        if len(sharded) > 1:
            raise _Impossible
        # An indexing map with more results than the operand's rank (tosa.mul's shift
        # under the elementwise model) is undefined behaviour upstream; we drop them.
        if sharded and i < rank:
            split[i].extend(option.sharding_array[sharded[0]])
    remove_trailing_empty_sub_arrays(split)
    return ShardingInfo.get(option.grid, split)


def default_get_sharding_annotations(
    impl: ShardingInterface, op: Operation, option: ShardingOption
) -> list[ShardingInfo | None] | None:
    """Once per option and annotation signature inside `pass_cache`: they read only an
    op's maps and the ranks of its operand/result types (`_annotation_signature`), which
    the passes keep while the cache lives, so ops alike share them."""
    memo = _memo
    if memo is None:
        return _sharding_annotations(impl, op, option)
    key = (_annotation_signature(memo, impl, op), option.grid, tuple(map(tuple, option.sharding_array)))
    entries = memo["annotations"]
    found = entries.get(key, _NOT_FOUND)
    if found is _NOT_FOUND:
        found = entries[key] = _sharding_annotations(impl, op, option)
    return None if found is None else list(found)


_NOT_FOUND = object()


def _type_key(t: Attribute) -> int:
    """What `operand/result_sharding_for_option` read of a type: a tensor's rank, else
    whether it is a scalar (-1) or not (-2)."""
    if isinstance(t, TensorType):
        return len(t.get_shape())
    return -1 if is_int_index_or_float(t) else -2


def _annotation_signature(memo: dict[str, dict], impl: ShardingInterface, op: Operation) -> int:
    """A number shared by the ops `_sharding_annotations` cannot tell apart: the option
    signature (maps, loop and operand counts) and the operand and result type keys
    (once per op inside `pass_cache`)."""
    return _signature(
        memo,
        "annotation_sig",
        op,
        lambda: (_option_signature(memo, impl, op), tuple([_type_key(v.type) for v in op.operands]), tuple([_type_key(r.type) for r in op.results])),
    )


def _sharding_annotations(
    impl: ShardingInterface, op: Operation, option: ShardingOption
) -> list[ShardingInfo | None] | None:
    maps = indexing_maps(impl, op)
    n = len(op.operands)
    res: list[ShardingInfo | None] = []
    try:
        for i, operand in enumerate(op.operands):
            res.append(operand_sharding_for_option(operand, option, maps[i]))
    except _Impossible:
        return None
    for i, result in enumerate(op.results):
        res.append(result_sharding_for_option(result, option, maps[n + i]))
    return res


# =========================================================================================
# Reading and writing annotations in the IR
# =========================================================================================

AnnotationListener = Callable[[ShardOp, ShardingOp], None]
"""Called for every shard.shard op the propagation inserts (with its sharding op)."""

_listener: ContextVar[AnnotationListener | None] = ContextVar("annotation_listener", default=None)


@contextmanager
def listen_to_annotations(listener: AnnotationListener) -> Iterator[None]:
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def _notify(shard: ShardOp, sharding: ShardingOp) -> None:
    listener = _listener.get()
    if listener is not None:
        listener(shard, sharding)


def is_shard_op(op: Operation | Block | None) -> bool:
    return isinstance(op, ShardOp)


def sharding_of_shard_op(op: ShardOp) -> ShardingInfo:
    return ShardingInfo.of(op.sharding)


class ConflictingUserShardings(Exception):
    """Users of a value annotate it for users with different shardings (upstream asserts
    here)."""

    def __init__(self, value: SSAValue):
        super().__init__()
        self.value = value


def result_annotation(result: SSAValue) -> tuple[bool, ShardingInfo] | None:
    """MLIR's `getSharding(OpResult)`: (annotate_for_users, sharding) from the value's
    shard.shard users; a shard.shard for the producer counts only if it is the only use."""
    users = [use.operation for use in result.uses]
    shard_users = [u for u in users if isinstance(u, ShardOp)]
    if any(not u.for_users for u in shard_users):
        if not result.has_one_use():
            return None
        first = users[0]
        assert isinstance(first, ShardOp)
        return False, sharding_of_shard_op(first)
    if shard_users:
        first = sharding_of_shard_op(shard_users[0])
        for other in shard_users[1:]:
            if not first.same_as(sharding_of_shard_op(other)):
                raise ConflictingUserShardings(result)
        return True, first
    return None


def operand_annotation(value: SSAValue) -> tuple[bool, ShardingInfo] | None:
    """MLIR's `getSharding(OpOperand)`: the shard.shard that defines the operand."""
    owner = value.owner
    if isinstance(owner, ShardOp):
        return owner.for_users, sharding_of_shard_op(owner)
    return None


def _insertion_after_value(value: SSAValue) -> InsertPoint:
    if isinstance(value, OpResult):
        return InsertPoint.after(value.op)
    assert isinstance(value, BlockArgument)
    return InsertPoint.at_start(value.block)


def _build_sharding(sharding: ShardingInfo, value: SSAValue) -> ShardingOp:
    op = ShardingOp(sharding.grid, split_axes_attr_for(sharding, value), halo_sizes=sharding.sharding.static_halo_sizes)
    op.location = _location_of(value)
    return op


def split_axes_attr_for(
    sharding: ShardingInfo, value: SSAValue
) -> GridAxesArrayAttr | tuple[tuple[int, ...], ...]:
    """The split axes to write for `value`: trunk's `[]` for a 0-d tensor not split (it
    has no dimension), the sharding's own otherwise (`[[]]` at least)."""
    if ranked_tensor_rank(value.type) == 0 and not any(sharding.split_axes):
        return GridAxesArrayAttr.for_scalar()
    return sharding.split_axes


def _location_of(value: SSAValue):
    if isinstance(value, OpResult):
        return value.op.location
    assert isinstance(value, BlockArgument)
    return value.location


def _replace_uses_in(owner: Operation, old: SSAValue, new: SSAValue) -> None:
    for i, operand in enumerate(owner.operands):
        if operand is old:
            owner.operands[i] = new


def _hoist_annotation(shard: ShardOp, result: SSAValue) -> None:
    """Move an annotation that is about to serve every user of `result` up to right after
    its definition when another user comes first: reusing it in place (as upstream does)
    would have that user read a value defined after it. Its sharding op moves along,
    or is copied when something else uses it too."""
    block = shard.parent_block()
    if block is None or not any(
        use.operation is not shard
        and use.operation.parent_block() is block
        and use.operation.is_before_in_block(shard)
        for use in result.uses
    ):
        return
    point = _insertion_after_value(result)
    sharding_owner = shard.sharding.owner
    shard.detach()
    if isinstance(sharding_owner, ShardingOp) and sharding_owner.parent_block() is block:
        if sharding_owner.result.has_one_use():
            sharding_owner.detach()
        else:
            sharding_owner = _build_sharding(ShardingInfo.of(sharding_owner.result), result)
            shard.operands[1] = sharding_owner.result
        insert_op(sharding_owner, point)
    insert_op(shard, point)


def insert_result_annotation(sharding: ShardingInfo, result: SSAValue) -> None:
    """MLIR's `maybeInsertTargetShardingAnnotation`: make every user of `result` see it
    through one shard.shard (for the producer) with `sharding`, reusing an equal one."""
    new_shard: ShardOp | None = None
    owners = [use.operation for use in result.uses]
    # An equal producer annotation is reused whatever the order of the uses (otherwise a
    # user listed first gets a new one and the value ends with two).
    owners.sort(key=lambda o: not (isinstance(o, ShardOp) and not o.for_users and sharding.same_as(sharding_of_shard_op(o))))
    for owner in owners:
        point = _insertion_after_value(result)
        existing = owner if isinstance(owner, ShardOp) else None
        if existing is not None and not existing.for_users and sharding.same_as(
            sharding_of_shard_op(existing)
        ):
            if new_shard is None:
                new_shard = existing
                _hoist_annotation(existing, result)
            continue
        if new_shard is None:
            sharding_op = _build_sharding(sharding, result)
            new_shard = ShardOp(result, sharding_op.result, annotate_for_users=False)
            new_shard.location = sharding_op.location
            insert_op(sharding_op, point)
            insert_op(new_shard, point)
            _notify(new_shard, sharding_op)
        _replace_uses_in(owner, result, new_shard.result)
        if existing is None or existing.for_users:
            continue
        # The user was a shard.shard with another sharding: keep it, fed from ours
        # through an annotation for users.
        for_users = ShardOp(new_shard.result, new_shard.sharding, annotate_for_users=True)
        for_users.location = new_shard.location
        insert_op(for_users, point)
        sharding_owner = new_shard.sharding.owner
        assert isinstance(sharding_owner, ShardingOp)
        _notify(for_users, sharding_owner)
        for use in list(new_shard.result.uses):
            if use.operation is not for_users:
                use.operation.operands[use.index] = for_users.result


def insert_operand_annotation(
    sharding: ShardingInfo | None, op: Operation, index: int
) -> None:
    """MLIR's `maybeInsertSourceShardingAnnotation`: annotate operand `index` of `op` for
    its users with `sharding`, unless it already is."""
    value = op.operands[index]
    source = value.owner if isinstance(value, OpResult) else None
    if not isinstance(value.type, TensorType) and source is not None and is_constant_like(
        source
    ):
        return
    if sharding is None:
        # A scalar operand not defined by a constant: upstream builds a sharding op from a
        # null sharding (and crashes); there is nothing to annotate.
        return
    existing = source if isinstance(source, ShardOp) else None
    if existing is not None and existing.for_users and sharding.same_as(
        sharding_of_shard_op(existing)
    ):
        return
    point = InsertPoint.before(op)
    sharding_op = _build_sharding(sharding, value)
    new_shard = ShardOp(value, sharding_op.result, annotate_for_users=True)
    new_shard.location = sharding_op.location
    insert_op(sharding_op, point)
    insert_op(new_shard, point)
    _replace_uses_in(op, value, new_shard.result)
    _notify(new_shard, sharding_op)
    if source is None or existing is None or not existing.for_users:
        return
    # The operand was annotated for its users with another sharding: reshard it from
    # there, the new sharding being that of the producer.
    preceding = ShardOp(value, sharding_op.result, annotate_for_users=False)
    preceding.location = new_shard.location
    insert_op(preceding, InsertPoint.before(new_shard))
    new_shard.operands[0] = preceding.result
    _notify(preceding, sharding_op)


def default_add_sharding_annotations(
    impl: ShardingInterface, op: Operation, option: ShardingOption
) -> bool:
    """Annotate every result, then every operand, for `option`. The shardings are
    `default_get_sharding_annotations`' (memoized: the traversal computed them when it
    chose the option); where an operand has none, the results and the operands before
    it are annotated one by one, as upstream does, before failing."""
    assert not option.empty and option.grid is not None
    shardings = default_get_sharding_annotations(impl, op, option)
    n = len(op.operands)
    if shardings is not None:
        for i, result in enumerate(op.results):
            insert_result_annotation(shardings[n + i], result)  # type: ignore[arg-type]
        for i in range(n):
            insert_operand_annotation(shardings[i], op, i)
        return True
    maps = indexing_maps(impl, op)
    for i, result in enumerate(op.results):
        insert_result_annotation(result_sharding_for_option(result, option, maps[n + i]), result)
    for i in range(n):
        try:
            sharding = operand_sharding_for_option(op.operands[i], option, maps[i])
        except _Impossible:
            return False
        insert_operand_annotation(sharding, op, i)
    return True


def is_annotation_op(op: Operation) -> bool:
    """Ops the propagation leaves alone: shard.shard, shard.sharding, shard.get_sharding.
    Answered once per class: an op class is an ABC, whose isinstance test of another
    class (most ops) is a Python call, and every traversal asks for every op."""
    cls = type(op)
    found = _IS_ANNOTATION.get(cls)
    if found is None:
        found = _IS_ANNOTATION[cls] = isinstance(op, _ANNOTATION_OPS)
    return found


_ANNOTATION_OPS = (ShardOp, ShardingOp, GetShardingOp)
_IS_ANNOTATION: dict[type[Operation], bool] = {}


# =========================================================================================
# Helpers for `partition` implementations (MLIR's ShardingInterfaceImpl.h)
# =========================================================================================


@dataclass
class Partitioner:
    """What `partition` implementations build with: the insertion point in the partitioned
    block, the map from unpartitioned values to their local counterparts (MLIR's
    IRMapping) and grid lookup (MLIR's SymbolTableCollection), and the resharding
    planner, which the partitioning pass hands in (`shardc.passes.resharding` builds on
    this package)."""

    builder: Builder
    mapping: dict[SSAValue, SSAValue]
    resharder: Callable[..., SSAValue] | None = None
    """`resharder(builder, op, source, target, global_type, grid_shape, value,
    value_name)`: `value` (local under `source`) under `target`, or a located
    "Cannot partition" error at `op` where no collectives connect the two."""

    def reshard(
        self,
        op: Operation,
        source: Sharding,
        target: Sharding,
        global_type: Attribute,
        grid_shape: Sequence[int | None],
        value: SSAValue,
        value_name: str,
    ) -> SSAValue:
        """`value` resharded from `source` to `target` at the insertion point (`resharder`)."""
        assert self.resharder is not None, "a Partitioner without the resharding planner"
        return self.resharder(self.builder, op, source, target, global_type, grid_shape, value, value_name)

    def insert(self, op: _OpT) -> _OpT:
        self.builder.insert(op)
        return op

    def local(self, value: SSAValue) -> SSAValue:
        return self.mapping.get(value, value)

    def grid(self, op: Operation, name: str) -> GridOp:
        grid = cached_lookup_grid(op, name)
        if grid is None:
            raise diagnostics.op_error(op, f"undefined symbol reference to grid @{name}")
        return grid


_OpT = TypeVar("_OpT", bound=Operation)


def describe_sharding(sharding: Sharding) -> str:
    """A sharding as its `shard.sharding` op spells it (without the `shard.sharding`)."""
    text = f"@{sharding.grid} split_axes = ["
    text += ", ".join("[" + ", ".join(map(str, sub)) + "]" for sub in sharding.split_axes or ((),))
    text += "]"
    for name, values in (
        ("halo_sizes", sharding.static_halo_sizes),
        ("sharded_dims_offsets", sharding.static_sharded_dims_offsets),
    ):
        if values:
            text += f" {name} = [" + ", ".join("?" if v == DYNAMIC else str(v) for v in values) + "]"
    return text


def local_type(
    type_: Attribute, grid: GridOp, sharding: Sharding | None, what: str, where: Operation
) -> Attribute:
    """MLIR's `shardType`: the type of the local shard of a value of `type_` (other types
    are unchanged). A split dimension that does not divide evenly is an error (upstream
    asserts) unless the sharding gives `sharded_dims_offsets`."""
    if not isinstance(type_, TensorType) or sharding is None:
        return type_
    shape = type_.get_shape()
    gshape = grid.shape_tuple
    if not sharding.static_sharded_dims_offsets:
        for dim, axes in enumerate(sharding.split_axes):
            if dim >= len(shape) or any(a >= len(gshape) for a in axes):
                raise diagnostics.error(
                    where,
                    f"Cannot partition: {what} of type {type_text(type_)} has no dimension "
                    f"or grid axis for sharding {describe_sharding(sharding)}",
                )
            shards = collective_group_size(axes, gshape)
            size = shape[dim]
            if shards and size != DYNAMIC and size % shards:
                raise diagnostics.error(
                    where,
                    f"Cannot partition: {what} of type {type_text(type_)} with sharding "
                    f"{describe_sharding(sharding)}: dimension {dim} of size {size} does not "
                    f"split evenly into {shards} shards (uneven shards need "
                    "sharded_dims_offsets)",
                )
    local = sharding.shard_shape(shape, gshape)
    return _tensor_type(type_.get_element_type(), tuple(local))


@lru_cache(maxsize=4096)
def _tensor_type(element_type: Attribute, shape: tuple[int, ...]) -> TensorType:
    """Types are immutable: one object per local type instead of one built and verified
    per partitioned value."""
    return TensorType(element_type, shape)


def type_text(type_: Attribute) -> str:
    out = StringIO()
    Printer(stream=out).print_attribute(type_)
    return out.getvalue()


def clone_op(
    op: Operation,
    mapping: dict[SSAValue, SSAValue],
    result_types: Sequence[Attribute] | None = None,
) -> Operation:
    """`op` with operands (also those used inside its regions) looked up in `mapping`,
    optionally with new result types; its results are added to `mapping`."""
    new = create_op(
        type(op),
        operands=[mapping.get(v, v) for v in op.operands],
        result_types=list(op.result_types if result_types is None else result_types),
        attributes=op.attributes.copy(),
        properties=op.properties.copy(),
        successors=list(op.successors),
        regions=[Region() for _ in op.regions],
    )
    new.location = op.location
    for old_region, new_region in zip(op.regions, new.regions):
        clone_region_into(old_region, new_region, mapping)
    for old, result in zip(op.results, new.results):
        mapping[old] = result
    return new


def _is_fully_replicated_for(value: SSAValue, sharding: Sharding | None) -> bool:
    if isinstance(value.type, TensorType):
        return sharding is None or sharding.is_fully_replicated
    return sharding is None


def partition_fully_replicated(
    op: Operation,
    operands: Sequence[SSAValue],
    operand_shardings: Sequence[Sharding | None],
    result_shardings: Sequence[Sharding | None],
    partitioner: Partitioner,
) -> None:
    """MLIR's `partitionFullyReplicatedOperation`: an op that cannot be partitioned runs
    whole on every process, so its tensors must be fully replicated (upstream asserts)."""
    for kind, values, shardings in (
        ("operand", op.operands, operand_shardings),
        ("result", op.results, result_shardings),
    ):
        for index, (value, sharding) in enumerate(zip(values, shardings)):
            if not _is_fully_replicated_for(value, sharding):
                assert sharding is not None
                raise diagnostics.op_error(
                    op,
                    "has no partitioning for sharded tensors and must be fully replicated, "
                    f"but {kind} #{index} has sharding {describe_sharding(sharding)}",
                )
    partitioner.insert(clone_op(op, partitioner.mapping))


def partition_trivially_shardable(
    op: Operation,
    operands: Sequence[SSAValue],
    operand_shardings: Sequence[Sharding | None],
    result_shardings: Sequence[Sharding | None],
    partitioner: Partitioner,
    mapping: dict[SSAValue, SSAValue] | None = None,
) -> Operation:
    """MLIR's `partitionTriviallyShardableOperation`: the same op on the local operands,
    its result types replaced by their local shard types."""
    mapping = partitioner.mapping if mapping is None else mapping
    types: list[Attribute] = []
    for index, (result, sharding) in enumerate(zip(op.results, result_shardings)):
        if sharding is None:
            types.append(result.type)
            continue
        grid = partitioner.grid(op, sharding.grid)
        types.append(local_type(result.type, grid, sharding, f"result #{index}", op))
    types.extend(r.type for r in op.results[len(types) :])
    return partitioner.insert(clone_op(op, mapping, types))


def grid_axis_assignment_for_loop_iterators(
    operand_shardings: Sequence[Sharding | None],
    loop_types: Sequence[IteratorType],
    operand_maps: Sequence[AffineMap],
) -> list[list[int]]:
    """Grid axes of each loop, read from the operand shardings (maps are projected
    permutations); dimensions past the split axes are replicated. As upstream (whose
    result shardings fall off a `zip`), only operands are read: the inits of a
    destination-style op carry the results' loops."""
    assignment: list[list[int] | None] = [None] * len(loop_types)
    for sharding, map_ in zip(operand_shardings, operand_maps):
        if sharding is None:
            continue
        for i, expr in enumerate(map_.results):
            if not isinstance(expr, AffineDimExpr) or expr.position >= len(assignment):
                continue
            axes = list(sharding.split_axes[i]) if i < len(sharding.split_axes) else []
            known = assignment[expr.position]
            if known is None:
                assignment[expr.position] = axes
            elif known != axes:
                raise LoopShardingConflict(expr.position, known, axes)
    return [a if a is not None else [] for a in assignment]


class LoopShardingConflict(Exception):
    """Two operands split one loop along different grid axes (upstream asserts)."""

    def __init__(self, loop: int, first: list[int], second: list[int]):
        super().__init__(
            f"Cannot partition: the operand shardings split loop {loop} along different "
            f"grid axes ({first} and {second})"
        )


def is_at_least_one_reduction_iterator_sharded(
    loop_types: Sequence[IteratorType], assignment: Sequence[Sequence[int]]
) -> bool:
    return any(t == IteratorType.REDUCTION and a for t, a in zip(loop_types, assignment))


def reduction_grid_axes(
    loop_types: Sequence[IteratorType], assignment: Sequence[Sequence[int]]
) -> list[int]:
    return [
        axis
        for t, axes in zip(loop_types, assignment)
        if t == IteratorType.REDUCTION
        for axis in axes
    ]


class SplittableLoopsInterface(ShardingInterface):
    """Ops that can split only some of their loops (`splittable_loops`): upstream's option
    with the other loops left whole, and the completion refused options that split them."""

    def splittable_loops(self, op: Operation) -> set[int]:
        raise NotImplementedError

    def get_sharding_option(
        self,
        op: Operation,
        operand_shardings: Sequence[ShardingInfo | None],
        result_shardings: Sequence[ShardingInfo | None],
    ) -> ShardingOption | None:
        option = default_get_sharding_option(self, op, operand_shardings, result_shardings)
        if option is None or option.empty:
            return option
        keep = self.splittable_loops(op)
        for loop, axes in enumerate(option.sharding_array):
            if loop not in keep:
                axes.clear()
        return option

    def allows_option(self, op: Operation, option: ShardingOption) -> bool:
        keep = self.splittable_loops(op)
        return all(not axes or i in keep for i, axes in enumerate(option.sharding_array))


class TriviallyShardableInterface(ShardingInterface):
    """Ops partitioned by running them as they are on the local shards (upstream's
    `partitionTriviallyShardableOperation`)."""

    def partition(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        operand_shardings: Sequence[Sharding | None],
        result_shardings: Sequence[Sharding | None],
        partitioner: Partitioner,
    ) -> None:
        partition_trivially_shardable(
            op, operands, operand_shardings, result_shardings, partitioner
        )


class IndependentParallelIteratorDomainShardingInterface(TriviallyShardableInterface):
    """Ops whose tensor dimensions are independent parallel loops (func.return, as
    upstream): partitioned by using the local tensors as they are."""

    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        types = (*op.operand_types, *op.result_types)
        return [IteratorType.PARALLEL] * sum(ranked_tensor_rank(t) or 0 for t in types)


def identity_maps(rank: int, count: int) -> list[AffineMap]:
    return [AffineMap.identity(rank)] * count


class ElementwiseShardingInterface(TriviallyShardableInterface):
    """Elementwise ops: one parallel loop per dimension of operand 0, identity maps for
    every operand and result (broadcast dimensions of size one included, as upstream)."""

    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        rank = ranked_tensor_rank(op.operands[0].type) if op.operands else None
        return [] if rank is None else [IteratorType.PARALLEL] * rank

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        rank = ranked_tensor_rank(op.operands[0].type) if op.operands else None
        if rank is None:
            return []
        return identity_maps(rank, len(op.operands) + len(op.results))
