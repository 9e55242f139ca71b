"""Canonicalization patterns of the shard dialect, those trunk `ShardOps.cpp` registers.

- collectives over no grid axes (and with input type == result type) are removed;
- `shard.sharding` moves constant dynamic halo sizes / offsets into the static lists and
  drops all-zero halos and evenly spaced offsets (which say nothing beyond the default);
- a `shard.shard` of a value already annotated just before it is folded into that one.

Upstream has no folders for these ops; `shard.shift` has no pattern either.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.traits import ConstantLike

from shardc.dialects.shard import (
    DYNAMIC,
    CollectiveOp,
    Sharding,
    ShardingOp,
    ShardOp,
    mixed_values,
)


class RemoveEmptyGridAxesCollective(RewritePattern):
    """A collective over an empty group of grid axes is the identity."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CollectiveOp, rewriter: PatternRewriter) -> None:
        source, result = op.operands[0], op.results[0]
        if op.grid_axes_tuple or source.type != result.type:
            return
        rewriter.replace(op, [], [source])


def _constant_int(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, Operation) and owner.has_trait(ConstantLike):
        attr = owner.properties.get("value", owner.attributes.get("value"))
        if isinstance(attr, IntegerAttr):
            return attr.value.data
    return None


def _fold_constants(
    static: Sequence[int], dynamic: Sequence[SSAValue]
) -> tuple[list[int], list[SSAValue], bool]:
    """Moves non-negative constant dynamic entries into the static list, as MLIR's
    `foldDynamicIndexList(..., onlyNonNegativeValues=true)`."""
    new_static: list[int] = []
    new_dynamic: list[SSAValue] = []
    values = iter(dynamic)
    folded = False
    for s in static:
        if s != DYNAMIC:
            new_static.append(s)
            continue
        value = next(values)
        constant = _constant_int(value)
        if constant is not None and constant >= 0:
            new_static.append(constant)
            folded = True
        else:
            new_static.append(DYNAMIC)
            new_dynamic.append(value)
    return new_static, new_dynamic, folded


def _evenly_spaced(offsets: Sequence[int]) -> bool:
    # Upstream compares every step with the first one over the whole flattened list.
    if len(offsets) <= 2:
        return False
    step = offsets[1] - offsets[0]
    return all(b - a == step for a, b in zip(offsets[1:], offsets[2:]))


class NormalizeSharding(RewritePattern):
    """Constant dynamic halos/offsets become static; trivial halos/offsets are dropped."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ShardingOp, rewriter: PatternRewriter) -> None:
        halos, dyn_halos, folded_halos = _fold_constants(
            op.static_halo_sizes.get_values(), op.dynamic_halo_sizes
        )
        offsets, dyn_offsets, folded_offsets = _fold_constants(
            op.static_sharded_dims_offsets.get_values(), op.dynamic_sharded_dims_offsets
        )
        modified = folded_halos or folded_offsets
        if not dyn_halos and halos and halos[0] == 0 and len(set(halos)) == 1:
            halos, modified = [], True
        if not dyn_offsets and offsets and _evenly_spaced(offsets):
            offsets, modified = [], True
        if not modified:
            return
        new = ShardingOp(
            op.grid,
            op.split_axes,
            halo_sizes=mixed_values(halos, dyn_halos),
            sharded_dims_offsets=mixed_values(offsets, dyn_offsets),
        )
        new.attributes.update(op.attributes)
        new.location = op.location
        rewriter.replace(op, new)


class FoldDuplicateShard(RewritePattern):
    """`shard.shard` of a value whose latest other user is an earlier `shard.shard`: with an
    equal sharding the op is replaced by that one, otherwise it annotates that one's
    result. (MLIR looks at the first entry of the use list, i.e. the latest user.)"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ShardOp, rewriter: PatternRewriter) -> None:
        value = op.src
        if isinstance(value.owner, ShardOp):
            return
        others = [use.operation for use in value.uses if use.operation is not op]
        if not others or any(o.parent is not op.parent for o in others):
            return
        latest = max(others, key=_position)
        if not isinstance(latest, ShardOp) or not latest.is_before_in_block(op):
            return
        if not all(isinstance(s.sharding.owner, ShardingOp) for s in (op, latest)):
            return
        if Sharding.of(op.sharding) == Sharding.of(latest.sharding):
            rewriter.replace(op, [], [latest.result])
        else:
            op.operands = [latest.result, op.sharding]
            rewriter.notify_op_modified(op)


def _position(op: Operation) -> int:
    block = op.parent
    assert block is not None
    return block.get_operation_index(op)
