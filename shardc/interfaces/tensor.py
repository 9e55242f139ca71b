"""Sharding of tensor ops.

tensor.empty and tensor.splat (upstream's set) are creators, one parallel loop per result
dimension and identity maps (the dynamic sizes / splat value are mapped like the result,
as upstream). Partitioned, a creator makes its local shard directly. When the local shape
has a dynamic dimension the global one lacks (uneven shards, a dynamic grid), the size
comes from `shard.shard_shape` for this process (upstream's way).

Beyond upstream:

* tensor.expand_shape / collapse_shape, by factors in the spirit of Shardy: one loop per
  dimension of the expanded side; each collapsed dimension maps to the *major* loop of
  its group (the first one of size above one). A split of a collapsed dimension follows
  that loop, which is exact when it divides the major dimension (the local block of rows
  is then contiguous in both shapes); a split of any other loop of a group has no
  collapsed counterpart, so the group stays replicated there. Partitioned: the same
  reshape of the local shards.
* tensor.extract_slice / insert_slice / concat / pad: one parallel loop per dimension,
  identity maps; only dimensions the op keeps whole (a slice of offset 0, full size and
  stride 1; not the concatenated dimension; no padding) may be split. Partitioned: the
  same op with the local sizes of the split dimensions.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import tensor
from xdsl.dialects.builtin import DenseArrayBase, TensorType, i64
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap

from shardc.dialects.shard import (
    DYNAMIC,
    ProcessMultiIndexOp,
    Sharding,
    ShardShapeOp,
)
from shardc.interfaces.sharding import (
    Partitioner,
    ShardingInterface,
    SplittableLoopsInterface,
    clone_op,
    identity_maps,
    local_type,
    partition_trivially_shardable,
    ranked_tensor_rank,
    register_sharding_interface,
)


class CreatorOpSharding(ShardingInterface):
    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        rank = ranked_tensor_rank(op.results[0].type)
        return [IteratorType.PARALLEL] * (rank or 0)

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        rank = ranked_tensor_rank(op.results[0].type)
        if rank is None:
            return []
        return identity_maps(rank, len(op.operands) + len(op.results))

    def partition(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        operand_shardings: Sequence[Sharding | None],
        result_shardings: Sequence[Sharding | None],
        partitioner: Partitioner,
    ) -> None:
        (sharding,) = result_shardings
        old = op.results[0].type
        assert isinstance(old, TensorType)
        new = old
        if old.get_shape() and sharding is not None:
            grid = partitioner.grid(op, sharding.grid)
            new = local_type(old, grid, sharding, "result #0", op)
        assert isinstance(new, TensorType)
        old_shape, new_shape = old.get_shape(), new.get_shape()
        if DYNAMIC not in new_shape:
            partitioner.insert(clone_op(op, partitioner.mapping, [new]))
            return
        assert sharding is not None
        # Sizes of dimensions that only the sharding makes dynamic come from
        # shard.shard_shape; dynamic global sizes stay the op's own operands.
        sizes = list(operands[1:] if isinstance(op, tensor.SplatOp) else operands)
        shape_op: ShardShapeOp | None = None
        dynamic: list[SSAValue] = []
        for dim, (before, after) in enumerate(zip(old_shape, new_shape)):
            if before != DYNAMIC and after == DYNAMIC:
                if shape_op is None:
                    sharding_op = partitioner.insert(sharding.to_op())
                    device = partitioner.insert(
                        ProcessMultiIndexOp(partitioner.grid(op, sharding.grid))
                    )
                    dims = [DYNAMIC if d == DYNAMIC else d for d in old_shape]
                    mixed = iter(sizes)
                    shape_op = partitioner.insert(
                        ShardShapeOp(
                            [next(mixed) if d == DYNAMIC else d for d in dims],
                            sharding_op.result,
                            list(device.results),
                        )
                    )
                    for new_op in (sharding_op, device, shape_op):
                        new_op.location = op.location
                dynamic.append(shape_op.results[dim])
            elif before == DYNAMIC:
                dynamic.append(sizes[len([d for d in old_shape[:dim] if d == DYNAMIC])])
        if isinstance(op, tensor.SplatOp):
            created: Operation = tensor.SplatOp(operands[0], dynamic, new)
        else:
            created = tensor.EmptyOp(dynamic, new)
        created.location = op.location
        partitioner.insert(created)
        partitioner.mapping[op.results[0]] = created.results[0]


# =========================================================================================
# Reshapes
# =========================================================================================


def _shape(value: SSAValue) -> tuple[int, ...]:
    t = value.type
    return tuple(t.get_shape()) if isinstance(t, TensorType) else ()


def _groups(op: Operation) -> list[list[int]]:
    reassociation = op.properties["reassociation"]
    return [[int(i.value.data) for i in group.data] for group in reassociation.data]  # type: ignore[attr-defined]


def _expanded(op: Operation) -> SSAValue:
    return op.results[0] if isinstance(op, tensor.ExpandShapeOp) else op.operands[0]


def _major_loops(op: Operation) -> tuple[list[int], set[int]]:
    """The loop each collapsed dimension follows, and the loops that may be split."""
    shape = _shape(_expanded(op))
    majors = []
    for group in _groups(op):
        major = next((d for d in group if shape[d] != 1), group[0]) if group else 0
        majors.append(major)
    return majors, set(majors)


class ReshapeSharding(SplittableLoopsInterface):
    """tensor.expand_shape / collapse_shape (see the module docstring)."""

    in_upstream = False

    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        return [IteratorType.PARALLEL] * len(_shape(_expanded(op)))

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        rank = len(_shape(_expanded(op)))
        majors, _ = _major_loops(op)
        collapsed = AffineMap(rank, 0, tuple(AffineDimExpr(d) for d in majors))
        full = AffineMap.identity(rank)
        if isinstance(op, tensor.ExpandShapeOp):
            return [] if op.dynamic_output_shape else [collapsed, full]
        return [full, collapsed]

    def splittable_loops(self, op: Operation) -> set[int]:
        return _major_loops(op)[1]

    def partition(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        operand_shardings: Sequence[Sharding | None],
        result_shardings: Sequence[Sharding | None],
        partitioner: Partitioner,
    ) -> None:
        new = partition_trivially_shardable(
            op, operands, operand_shardings, result_shardings, partitioner
        )
        if isinstance(new, tensor.ExpandShapeOp):
            shape = _shape(new.results[0])
            new.properties["static_output_shape"] = DenseArrayBase.from_list(i64, shape)


# =========================================================================================
# Slices, concatenation, padding
# =========================================================================================


def _static(op: Operation, name: str) -> list[int]:
    attr = op.properties.get(name)
    return list(attr.get_values()) if attr is not None else []  # type: ignore[attr-defined]


def _whole_dims(op: Operation) -> set[int]:
    """Dimensions the op keeps whole (which may be split)."""
    if isinstance(op, tensor.ExtractSliceOp | tensor.InsertSliceOp):
        full = _shape(op.results[0] if isinstance(op, tensor.InsertSliceOp) else op.operands[0])
        part = _shape(op.operands[0] if isinstance(op, tensor.InsertSliceOp) else op.results[0])
        if len(full) != len(part) or op.offsets or op.sizes or op.strides:
            return set()
        offsets, sizes, strides = (_static(op, n) for n in ("static_offsets", "static_sizes", "static_strides"))
        return {
            d
            for d in range(len(full))
            if offsets[d] == 0 and sizes[d] == full[d] and strides[d] == 1 and part[d] == full[d]
        }
    if isinstance(op, tensor.ConcatOp):
        axis = op.dim.value.data
        return {d for d in range(len(_shape(op.results[0]))) if d != axis}
    if isinstance(op, tensor.PadOp):
        if op.low or op.high:
            return set()
        low, high = _static(op, "static_low"), _static(op, "static_high")
        return {d for d in range(len(low)) if low[d] == 0 and high[d] == 0}
    return set()


class DimensionPreservingSharding(SplittableLoopsInterface):
    """Ops whose tensors share one loop per dimension (identity maps on every tensor
    operand and result; index and scalar operands map to no loop); only the dimensions
    the op keeps whole may be split."""

    in_upstream = False

    def get_loop_iterator_types(self, op: Operation) -> list[IteratorType]:
        return [IteratorType.PARALLEL] * len(_shape(op.results[0]))

    def get_indexing_maps(self, op: Operation) -> list[AffineMap]:
        rank = len(_shape(op.results[0]))
        maps = []
        for value in (*op.operands, *op.results):
            t = value.type
            if isinstance(t, TensorType) and len(t.get_shape()) == rank:
                maps.append(AffineMap.identity(rank))
            else:
                maps.append(AffineMap(rank, 0, ()))
        return maps

    def splittable_loops(self, op: Operation) -> set[int]:
        return _whole_dims(op)

    def partition(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        operand_shardings: Sequence[Sharding | None],
        result_shardings: Sequence[Sharding | None],
        partitioner: Partitioner,
    ) -> None:
        new = partition_trivially_shardable(
            op, operands, operand_shardings, result_shardings, partitioner
        )
        if isinstance(new, tensor.ExtractSliceOp | tensor.InsertSliceOp):
            part = new.results[0] if isinstance(new, tensor.ExtractSliceOp) else new.operands[0]
            sizes = _static(new, "static_sizes")
            local = _shape(part)
            if len(sizes) == len(local) and sizes != list(local):
                new.properties["static_sizes"] = DenseArrayBase.from_list(i64, list(local))


def register() -> None:
    creator = CreatorOpSharding()
    register_sharding_interface(tensor.EmptyOp, creator)
    register_sharding_interface(tensor.SplatOp, creator)
    reshape = ReshapeSharding()
    register_sharding_interface(tensor.ExpandShapeOp, reshape)
    register_sharding_interface(tensor.CollapseShapeOp, reshape)
    preserving = DimensionPreservingSharding()
    for cls in (tensor.ExtractSliceOp, tensor.InsertSliceOp, tensor.ConcatOp, tensor.PadOp):
        register_sharding_interface(cls, preserving)
