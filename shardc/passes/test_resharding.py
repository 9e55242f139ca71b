"""`test-grid-resharding-partition`: mlir-opt's test pass of the resharding planner.

For every `shard.shard` (not for users) whose result is annotated again by a
`shard.shard ... annotate_for_users` on the same grid, the resharding between the two is
emitted in partitioned form, in front of the first annotation:

    %local = builtin.unrealized_conversion_cast %src : <global> to <source local type>
    ... the plan's collectives ...
    %new = builtin.unrealized_conversion_cast %resharded : <target local type> to <global>

and the users of the second annotation use `%new`. As in mlir-opt, which runs this as a
greedy rewrite, what the folders would remove is not kept (identity casts and slices, a
cast of a cast back to the first type) and trivially dead ops are erased afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType, UnrealizedConversionCastOp
from xdsl.ir import Attribute, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint
from xdsl.transforms.dead_code_elimination import region_dce

from shardc.dialects.shard import GridOp, Sharding, ShardingOp, ShardOp, lookup_grid
from shardc.ir import diagnostics
from shardc.passes.resharding import ReshardingError, emit_resharding, plan_resharding


@dataclass(frozen=True)
class TestReshardingPass(ModulePass):
    """Emit the resharding of every annotated pair, as mlir-opt's test pass does."""

    name = "test-grid-resharding-partition"
    __test__ = False  # a pass, not a pytest test class

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for shard in [o for o in op.walk() if isinstance(o, ShardOp)]:
            if shard.parent is not None and not shard.for_users:
                _reshard_users(shard)
        region_dce(op.body)


def _grid_of(shard: ShardOp) -> GridOp | None:
    owner = shard.sharding.owner
    if not isinstance(owner, ShardingOp):
        return None
    return lookup_grid(shard, owner.grid)


def _reshard_users(source: ShardOp) -> None:
    grid = _grid_of(source)
    if grid is None:
        return
    for use in list(source.result.uses):
        target = use.operation
        if not isinstance(target, ShardOp) or not target.for_users or _grid_of(target) is not grid:
            continue
        _reshard(source, target, grid)


def _reshard(source: ShardOp, target: ShardOp, grid: GridOp) -> None:
    global_type = source.result.type
    assert isinstance(global_type, TensorType)
    src, tgt = Sharding.of(source.sharding), Sharding.of(target.sharding)
    shape, gshape = global_type.get_shape(), grid.shape_tuple
    hint = source.src.name_hint
    try:
        plan = plan_resharding(src, tgt, shape, gshape, f"%{hint}" if hint else "the value")
    except ReshardingError as e:
        raise diagnostics.error(target, str(e)) from e
    builder = Builder(InsertPoint.before(source))
    local_type = TensorType(global_type.get_element_type(), src.shard_shape(shape, gshape))
    local = _cast(builder, source.src, local_type)
    resharded = emit_resharding(builder, plan, local, fold=True)
    target.result.replace_all_uses_with(_cast(builder, resharded, target.result.type))


def _cast(builder: Builder, value: SSAValue, to: Attribute) -> SSAValue:
    """An unrealized cast, folded like MLIR's: none for the same type, and a cast of a
    cast is its input when that has the wanted type."""
    if value.type == to:
        return value
    owner = value.owner
    if (
        isinstance(owner, UnrealizedConversionCastOp)
        and len(owner.inputs) == 1
        and owner.inputs[0].type == to
    ):
        return owner.inputs[0]
    op = UnrealizedConversionCastOp(operands=[[value]], result_types=[[to]])
    return builder.insert(op).results[0]
