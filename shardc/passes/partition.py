"""`shard-partition`: rewrite annotated functions into SPMD form, the program one process
runs on its local shards.

Upstream's algorithm, for every `func.func` block that holds a `shard.shard` (the function
must be fully annotated, as `sharding-propagation` leaves it):

* the block is rebuilt: each tensor argument gets the local type its single `shard.shard`
  user implies (split dimensions divided, halos added, uneven shards dynamic);
* `shard.sharding` ops are dropped (re-created where `shard.get_sharding` asks for one);
* a `shard.shard` whose source is another `shard.shard` moves the local tensor from the
  source sharding to its own: the resharding planner (`resharding.py`) gives the
  collectives; any other `shard.shard` is the identity on local tensors;
* every other op is checked to be fully annotated (operands from `shard.shard` for users,
  results used by exactly one `shard.shard` for the producer; constants are exempt) and is
  partitioned by its ShardingInterface implementation; an op without one must be fully
  replicated and is cloned;
* the function type becomes the local argument types and the returned types.

Beyond trunk, so that any fully annotated program partitions: scalar and 0-d results need
no annotation (no `shard.shard` can give a scalar one), a `func.return` may return a
value in its producer's sharding, and a tensor captured by an op's region (a gather's
table read by `tensor.extract` in a linalg body) is gathered whole for that op, since the
body indexes it globally, except along dimensions that follow a split loop (indexed by
that loop's `linalg.index`, see interfaces/linalg.py): those stay split like the loop.

Diagnostics are trunk's `Cannot partition: ...` messages, one per function that cannot be
partitioned (trunk's pass is a function pass); where upstream asserts (a dimension that
does not split evenly, a sharded op without a partitioning, an impossible resharding) we
report an error naming the value, its type and the sharding.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint
from xdsl.traits import ReturnLike
from xdsl.utils.exceptions import VerifyException

from shardc.dialects.shard import (
    GetShardingOp,
    GridOp,
    Sharding,
    ShardingOp,
    ShardOp,
)
from shardc.interfaces.linalg import (
    capture_split_axes,
    captured_loop_dims,
    may_capture_tensor,
)
from shardc.interfaces.sharding import (
    LoopShardingConflict,
    Partitioner,
    cached_lookup_grid,
    clone_op,
    get_sharding_interface,
    grid_axis_assignment_for_loop_iterators,
    indexing_maps,
    is_constant_like,
    local_type,
    loop_iterator_types,
    partition_fully_replicated,
    pass_cache,
    sharding_of,
    type_text,
)
from shardc.ir import diagnostics
from shardc.ir.diagnostics import DiagnosticError
from shardc.ir.fast_verify import verify_operation
from shardc.ir.traits import has_trait
from shardc.ir.walk import block_ops, ops_of_class
from shardc.passes.gc_pause import paused_gc

if TYPE_CHECKING:
    from shardc.passes.resharding import Step


_SHARDING, _GET_SHARDING, _SHARD, _OTHER = "sharding", "get_sharding", "shard", "other"
_KIND: dict[type[Operation], str] = {}
"""op class -> which of `BlockPartitioner.partition_op`'s cases it takes (the class
tests once per class: an op class is an ABC, whose isinstance test of another class is
a Python call, made three times for every op)."""


def _kind(op: Operation) -> str:
    if isinstance(op, ShardingOp):
        return _SHARDING
    if isinstance(op, GetShardingOp):
        return _GET_SHARDING
    if isinstance(op, ShardOp):
        return _SHARD
    return _OTHER


def _is_ranked_non0(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType) and len(value.type.get_shape()) > 0


def _captured_tensors(op: Operation) -> list[SSAValue]:
    """Ranked tensors (not 0-d) defined outside `op` and used inside its regions."""
    if not op.regions or not may_capture_tensor(op):  # no tensor read inside: no walk
        return []
    found: dict[SSAValue, None] = {}
    for inner in op.walk():
        if inner is op:
            continue
        for value in inner.operands:
            if not _is_ranked_non0(value) or value in found:
                continue
            owner = value.owner
            where = owner.parent_op() if isinstance(owner, Block) else owner
            if where is None or not op.is_ancestor(where):
                found[value] = None
    return list(found)


def _loop_assignment(op: Operation) -> list[list[int]] | None:
    """The grid axes of each loop of `op`, read from its operand annotations (None: no
    interface, or annotations that conflict; the op's partitioning reports those)."""
    impl = get_sharding_interface(op)
    if impl is None:
        return None
    maps = indexing_maps(impl, op)[: len(op.operands)]
    try:
        return grid_axis_assignment_for_loop_iterators(
            operand_shardings(op), loop_iterator_types(impl, op), maps
        )
    except LoopShardingConflict:
        return None


def _grid(op: Operation, sharding: Sharding) -> GridOp:
    grid = cached_lookup_grid(op, sharding.grid)
    if grid is None:
        raise diagnostics.op_error(op, f"undefined symbol reference to grid @{sharding.grid}")
    return grid


# =========================================================================================
# Annotations: checks and shardings of operands and results
# =========================================================================================


def check_block_annotated(block: Block, number: int) -> None:
    """Every tensor argument (not 0-d) has exactly one use, a `shard.shard`."""
    region_owner = block.parent_op()
    assert region_owner is not None
    for arg in block.args:
        if not _is_ranked_non0(arg):
            continue
        uses = list(arg.uses)
        if len(uses) > 1:
            raise diagnostics.error(
                region_owner,
                "Cannot partition: expected a single use for block argument "
                f"{arg.index} in block {number}",
            )
        if not uses or not isinstance(uses[0].operation, ShardOp):
            raise diagnostics.error(
                region_owner,
                "Cannot partition: expected a shard.shard op for block argument "
                f"{arg.index} in block {number}",
            )


def _returns_in_own_sharding(op: Operation) -> bool:
    """A `func.return` of a value annotated only for its producer returns it in that
    sharding. Trunk demands an `annotate_for_users` copy there, which sharding-propagation
    never adds (it skips terminators), so propagation followed by partition would fail on
    every function returning a sharded tensor; we accept it, as MLIR 22.1.8 did."""
    return isinstance(op, func.ReturnOp)


def _is_unannotated_scalar(result: SSAValue) -> bool:
    """A scalar or 0-d tensor result that no `shard.shard` uses: the same on every
    process. Trunk asks for an annotation on every result, but no `shard.shard` takes a
    scalar, so a program computing one (an index in a gather, a norm) could never
    partition."""
    return not _is_ranked_non0(result) and not any(isinstance(u.operation, ShardOp) for u in result.uses)


def check_op_annotated(op: Operation) -> None:
    """Trunk's `checkFullyAnnotated`: tensor operands come from `shard.shard` for users,
    each result has exactly one use, a `shard.shard` for the producer."""
    if is_constant_like(op):
        return
    for index, operand in enumerate(op.operands):
        if not _is_ranked_non0(operand):
            continue
        shard = operand.owner
        if not isinstance(shard, ShardOp):
            raise diagnostics.error(
                op,
                f"Cannot partition: tensor operand {index} must be defined by a shard.shard "
                "operation.",
            )
        if not shard.for_users and not _returns_in_own_sharding(op):
            raise diagnostics.error(
                op,
                f"Cannot partition: shard.shard for operand {index} must set "
                "'annotate_for_users'.",
            )
    for index, result in enumerate(op.results):
        uses = list(result.uses)
        if _is_unannotated_scalar(result):
            continue
        if len(uses) != 1:
            raise diagnostics.error(
                op, f"Cannot partition: result {index} must have exactly one use."
            )
        user = uses[0].operation
        if not isinstance(user, ShardOp):
            raise diagnostics.error(
                op,
                f"Cannot partition: user of result {index} must be shard.shard operation.",
            )
        if user.for_users:
            raise diagnostics.error(
                op,
                f"Cannot partition: shard.shard for result {index} must not set "
                "'annotate_for_users'.",
            )


def operand_shardings(op: Operation) -> list[Sharding | None]:
    """The sharding of each tensor operand (None for scalars and 0-d tensors)."""
    res: list[Sharding | None] = []
    for operand in op.operands:
        owner = operand.owner
        if _is_ranked_non0(operand) and isinstance(owner, ShardOp):
            res.append(sharding_of(owner.sharding))
        else:
            res.append(None)
    return res


def result_shardings(op: Operation) -> list[Sharding | None]:
    """The sharding of each tensor result used by exactly one `shard.shard`; a 0-d result
    without one takes the grid of a sharding operand, as upstream."""
    res: list[Sharding | None] = []
    for result in op.results:
        uses = list(result.uses)
        sharding: Sharding | None = None
        if len(uses) == 1 and isinstance(result.type, TensorType):
            user = uses[0].operation
            if isinstance(user, ShardOp):
                sharding = sharding_of(user.sharding)
            elif not result.type.get_shape():
                grid = next(
                    (o.owner for o in op.operands if isinstance(o.owner, ShardingOp)), None
                )
                if grid is not None:
                    sharding = Sharding(grid.grid.string_value())
        res.append(sharding)
    return res


# =========================================================================================
# The partitioning of one block
# =========================================================================================


@dataclass
class BlockPartitioner:
    """Partitions one block's ops in order, through its function's `Partitioner`."""

    block: Block
    number: int
    partitioner: Partitioner
    origins: list[tuple[Operation, Operation]] = field(
        default_factory=list[tuple[Operation, Operation]]
    )
    """Each op created by a partition implementation, with the op it comes from."""

    @property
    def mapping(self) -> dict[SSAValue, SSAValue]:
        return self.partitioner.mapping

    def argument_types(self) -> list[Attribute]:
        """Local types of the block arguments (MLIR's shardedBlockArgumentTypes)."""
        owner = self.block.parent_op()
        assert owner is not None
        types: list[Attribute] = []
        for arg in self.block.args:
            if not _is_ranked_non0(arg):
                types.append(arg.type)
                continue
            shard = next(iter(arg.uses)).operation
            assert isinstance(shard, ShardOp)
            sharding = sharding_of(shard.sharding)
            grid = _grid(shard, sharding)
            types.append(local_type(arg.type, grid, sharding, f"block argument {arg.index}", owner))
        return types

    def run(self, new_block: Block) -> None:
        for old, new in zip(self.block.args, new_block.args):
            self.mapping[old] = new
        for op in block_ops(self.block):
            self.partition_op(op)
        self.verify_created()

    def verify_created(self) -> None:
        """Annotations that contradict each other (say, operands of an elementwise op split
        differently) give local ops that do not verify: say so at the original op. The
        regions of a clone of the original op hold clones of its verified body (only the
        op's own types changed), so their ops are not verified again."""
        for new, op in self.origins:
            if has_trait(new, ReturnLike):
                continue  # checked against the function type, updated later
            try:
                verify_operation(new, verify_nested_ops=new.name != op.name)
            except VerifyException as e:
                raise diagnostics.error(
                    op, f"Cannot partition: the partitioned op does not verify: {e}"
                ) from None

    def partition_op(self, op: Operation) -> None:
        kind = _KIND.get(type(op))
        if kind is None:
            kind = _KIND[type(op)] = _kind(op)
        if kind is _OTHER:
            self.partition_other(op)
            return
        if kind is _SHARDING:
            return
        if kind is _GET_SHARDING:
            assert isinstance(op, GetShardingOp)
            source = op.source.owner
            if not isinstance(source, ShardOp):
                raise diagnostics.error(op, "expected a shard op as source of get_sharding")
            sharding_op = source.sharding.owner
            assert isinstance(sharding_op, Operation)
            clone = self.partitioner.insert(clone_op(sharding_op, dict(self.mapping)))
            self.mapping[op.result] = clone.results[0]
            return
        assert isinstance(op, ShardOp)  # its own class: isinstance answers at once
        self.partition_shard(op)

    def partition_other(self, op: Operation) -> None:
        """Any op but the annotations: through its sharding interface (or whole)."""
        check_op_annotated(op)
        operands = [self.lookup(op, v) for v in op.operands]
        impl = get_sharding_interface(op)
        with self.replicated_captures(op), self.created() as created:
            if impl is None:
                partition_fully_replicated(
                    op, operands, operand_shardings(op), result_shardings(op), self.partitioner
                )
            else:
                impl.partition(
                    op, operands, operand_shardings(op), result_shardings(op), self.partitioner
                )
        assert all(r in self.mapping for r in op.results)
        self.origins.extend((new, op) for new in created)

    @contextmanager
    def created(self) -> Iterator[list[Operation]]:
        """The ops inserted while the block runs."""
        builder = self.partitioner.builder
        ops: list[Operation] = []
        builder.operation_insertion_handler.append(ops.append)
        try:
            yield ops
        finally:
            builder.operation_insertion_handler.remove(ops.append)

    def lookup(self, op: Operation, value: SSAValue) -> SSAValue:
        local = self.mapping.get(value)
        if local is None:
            if isinstance(value, OpResult) and value.op.parent_block() is self.block:
                raise diagnostics.error(
                    op, "Cannot partition: an operand has no partitioned value"
                )
            return value  # defined outside the partitioned block
        return local

    def partition_shard(self, op: ShardOp) -> None:
        """A chained `shard.shard` reshards; a single one is the identity locally."""
        # operands (src, sharding) and the result read directly: the named accessors
        # are xDSL descriptor calls, and every annotation comes through here
        src_value, sharding_value = op._operands  # pyright: ignore[reportPrivateUsage]
        (result,) = op.results  # unpacked in C, not through SSAValues' `__getitem__`
        source = src_value.owner
        if not isinstance(source, ShardOp):
            self.mapping[result] = self.lookup(op, src_value)
            return
        source_src, source_sharding = source._operands  # pyright: ignore[reportPrivateUsage]
        (source_result,) = source.results
        value = self.lookup(op, source_result)
        src, tgt = sharding_of(source_sharding), sharding_of(sharding_value)
        producer = source_src.owner
        if src != tgt and src.static_halo_sizes and isinstance(producer, Operation):
            impl = get_sharding_interface(producer)
            if impl is not None:
                with self.created() as created:
                    moved = impl.reshard_result(
                        producer, src, tgt, value, self.partitioner,
                        lambda s, t, type_, v: self.reshard(op, s, t, type_, v),
                    )
                for new in created:
                    new.location = op.location
                if moved is not None:
                    self.mapping[result] = moved
                    return
        self.mapping[result] = self.reshard(op, src, tgt, source_src.type, value)

    def reshard(self, op: Operation, src: Sharding, tgt: Sharding, global_type: Attribute, value: SSAValue) -> SSAValue:
        """The local tensor `value` (of a `global_type` tensor laid out by `src`) laid out
        by `tgt`: the planner's collectives, at `op`'s location."""
        if src == tgt or (src.is_fully_replicated and tgt.is_fully_replicated):
            return value
        assert isinstance(global_type, TensorType)
        # imported when first needed: 5 ms of start-up, for a run that may reshard nothing
        from shardc.passes.resharding import ReshardingError, emit_resharding, plan_resharding

        grid = _grid(op, src)
        try:
            plan = plan_resharding(
                src,
                tgt,
                global_type.get_shape(),
                grid.shape_tuple,
                value_name=f"a value of type {type_text(global_type)}",
            )
            with self.created() as created:
                result = value
                for step in plan:
                    result = emit_resharding(self._builder_for(step, result), [step], result)
            for new in created:
                new.location = op.location
        except ReshardingError as e:
            raise diagnostics.error(op, f"Cannot partition: {e}") from None
        return result

    @contextmanager
    def replicated_captures(self, op: Operation) -> Iterator[None]:
        """Tensors of this block that `op`'s regions read directly (a gather's table read
        by `tensor.extract` in a linalg body) are read whole, at global indices, except
        along the dimensions that follow a loop (`captured_loop_dims`): those are split
        like the loop and read at local indices. A capture annotated otherwise is
        resharded for the op (trunk would read the local shard at global indices)."""
        saved: dict[SSAValue, SSAValue] = {}
        follows = captured_loop_dims(op)
        assignment = _loop_assignment(op) if follows else None
        for value in _captured_tensors(op):
            owner = value.owner
            if value in saved or value not in self.mapping or not isinstance(owner, ShardOp):
                continue
            sharding = sharding_of(owner.sharding)
            target = Sharding(sharding.grid)
            if value in follows and assignment is not None:
                target = Sharding(sharding.grid, capture_split_axes(follows[value], assignment))
            if sharding == target or (sharding.is_fully_replicated and target.is_fully_replicated):
                continue
            local = self.mapping[value]
            saved[value] = local
            self.mapping[value] = self.reshard(op, sharding, target, value.type, local)
        try:
            yield
        finally:
            self.mapping.update(saved)

    def _builder_for(self, step: Step, value: SSAValue) -> Builder:
        """Upstream emits all_gather and all_to_all (and their casts) right after the
        definition of the local tensor they read; the other steps where the op is."""
        from shardc.passes.resharding import AllGather, AllToAll

        builder = self.partitioner.builder
        if not isinstance(step, AllGather | AllToAll):
            return builder
        if isinstance(value, OpResult):
            point = InsertPoint.after(value.op)
        else:
            assert isinstance(value, BlockArgument)
            point = InsertPoint.at_start(value.block)
        moved = Builder(point)
        moved.operation_insertion_handler.extend(builder.operation_insertion_handler)
        return moved


# =========================================================================================
# Functions and the pass
# =========================================================================================


def partition_function(function: func.FuncOp) -> None:
    """Partition every annotated block of `function`, then retype the function."""
    region = function.body
    blocks = [b for b in region.blocks if any(isinstance(o, ShardOp) for o in b.ops)]
    mapping: dict[SSAValue, SSAValue] = {}
    numbers = {b: i for i, b in enumerate(region.blocks)}
    new_blocks: list[Block] = []
    try:
        for block in blocks:
            check_block_annotated(block, numbers[block])
            _partition_block(region, block, numbers[block], mapping, new_blocks)
    except DiagnosticError:
        _erase_blocks(region, new_blocks)  # the function stays as it was
        raise
    _drop_original_blocks(region, blocks, whole=len(numbers) == len(blocks))
    if not blocks:
        return
    returned = next(
        (b.last_op for b in region.blocks if b.last_op and b.last_op.has_trait(ReturnLike)),
        None,
    )
    if returned is not None and region.blocks.first is not None:
        function.function_type = FunctionType.from_lists(
            list(region.blocks.first.arg_types), list(returned.operand_types)
        )


def _reshard_or_error(
    builder: Builder,
    op: Operation,
    source: Sharding,
    target: Sharding,
    global_type: TensorType,
    grid_shape: Sequence[int | None],
    value: SSAValue,
    value_name: str,
) -> SSAValue:
    """The resharding planner for `partition` implementations (`Partitioner.reshard`):
    its collectives, or "Cannot partition" located at `op`."""
    # imported when first needed: 5 ms of start-up, for a run that may reshard nothing
    from shardc.passes.resharding import ReshardingError, reshard

    try:
        return reshard(builder, source, target, global_type, grid_shape, value, value_name=value_name)
    except ReshardingError as e:
        raise diagnostics.error(op, f"Cannot partition: {e}") from None


def _partition_block(
    region: Region, block: Block, number: int, mapping: dict[SSAValue, SSAValue], new_blocks: list[Block]
) -> None:
    """Add the partitioned copy of `block` at the end of `region` (and to `new_blocks`)."""
    new_block = Block()
    partitioner = Partitioner(Builder(InsertPoint.at_end(new_block)), mapping, _reshard_or_error)
    worker = BlockPartitioner(block, number, partitioner)
    for arg, type_ in zip(block.args, worker.argument_types()):
        new_arg = new_block.insert_arg(type_, len(new_block.args))
        new_arg.location = arg.location  # pyright: ignore[reportAttributeAccessIssue]
        if arg.name_hint:
            new_arg.name_hint = arg.name_hint
    region.add_block(new_block)
    new_blocks.append(new_block)
    worker.run(new_block)


def _erase_blocks(region: Region, blocks: Sequence[Block]) -> None:
    """Erase the original blocks: `erase_block` drops every reference of their ops, then
    erases them, so each op is visited twice (not three times over)."""
    for block in blocks:
        region.erase_block(block, safe_erase=False)


def _drop_original_blocks(region: Region, blocks: Sequence[Block], whole: bool) -> None:
    """Remove the original blocks once their partitioned copies are in place. When they
    were the whole body (`whole`: every block was partitioned), the function being
    isolated from above, each operand of their ops is a value of theirs, which nothing
    left reads: dropping those uses one by one and marking each result erased changes
    nothing that stays, so the blocks are only detached (the garbage collector takes
    them). Otherwise a kept block may define values they read: erased as usual."""
    if not whole:
        _erase_blocks(region, blocks)
        return
    for block in blocks:
        region.detach_block(block)


@dataclass(frozen=True)
class ShardPartitionPass(ModulePass):
    """Partition every annotated func.func of the module into SPMD form."""

    name = "shard-partition"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Trunk's pass runs per function: each function that cannot be partitioned
        reports its own error and the others are still partitioned; the pass fails
        after the last function with the last error (the earlier ones are emitted)."""
        failed: DiagnosticError | None = None
        with pass_cache(), paused_gc():
            for function in ops_of_class(op, func.FuncOp):
                try:
                    partition_function(function)
                except DiagnosticError as e:
                    if failed is not None:
                        diagnostics.report_exception(failed)
                    failed = e
        if failed is not None:
            raise failed
