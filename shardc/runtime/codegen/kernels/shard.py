"""shard: collectives and process queries on the current `Comm` (`comm.current_comm()`).

Each op becomes one call of a run-time function (`execute/kernels/shard_run.py`) with
its static attributes as literals;
the grid is the `shard.grid` the op names, its dynamic dimensions resolved from the
world size. In a partitioned program `shard.shard` is an identity and `!shard.sharding`
values are `RuntimeSharding` objects.

Where MLIR leaves a result undefined (gather/reduce on non-root devices, shift without a
source) the comm returns zeros (gather) or the local input (reduce, shift). `shift` by
`offset` moves data `offset` positions up the axis, like `np.roll`: device i receives
from device i - offset (MLIR's example, offset 2 of 4 with rotate, reads the same
either way).

`all_reduce`, `reduce_scatter` and `all_gather` in a function's top-level block may be
split by the overlap schedule (`shardc.runtime.codegen.overlap`) into a start (the Comm's
nonblocking call, or the blocking one under SHARDC_OVERLAP=0) and a wait that defines
the result.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import DenseArrayBase, MemRefType, ShapedType
from xdsl.ir import Operation, SSAValue

from shardc.dialects import shard
from shardc.runtime.codegen import overlap
from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, register
from shardc.runtime.codegen.codegen_safe import py_literal
from shardc.runtime.execute.dtypes import np_dtype
from shardc.runtime.codegen.kernels._common import elem, mixed
from shardc.runtime.codegen.kernels.arith import dt_expr
from shardc.runtime.execute.kernels.shard_run import GridShape, all_gather, all_reduce, all_slice, all_to_all, broadcast, gather, grid_shape, make_sharding, neighbors, process_linear_index, process_multi_index, recv, reduce, reduce_scatter, scatter, send, shard_shape, shift, start_all_gather, start_all_reduce, start_reduce_scatter, update_halo

# ---------------------------------------------------------------------------------------
# Emitters
# ---------------------------------------------------------------------------------------


def _grid_shape(op: Operation, symbol: object) -> GridShape:
    grid = shard.lookup_grid(op, symbol)  # type: ignore[arg-type]
    if grid is None:
        raise compile_error(op, f"no shard.grid named {symbol}")
    return grid.shape_tuple


def _call(g: FunctionBuilder, fn: object, args: Sequence[object]) -> str:
    return f"{g.const(fn, getattr(fn, '__name__', 'shard'))}({', '.join(str(a) for a in args)})"


def _tuple(xs: Sequence[object]) -> str:
    return "(" + "".join(f"{x}, " for x in xs).rstrip(" ") + ")"


def _mixed_list(g: FunctionBuilder, static: DenseArrayBase | None, dynamic: Sequence[SSAValue]) -> str:
    if static is None:
        return "None"
    return "[" + ", ".join(mixed(g, static, dynamic)) + "]"


def _kind(op: Operation) -> str:
    kind = str(op.reduction.data.value)  # type: ignore[attr-defined]
    if kind == "generic":
        raise compile_error(op, "reduction kind 'generic' cannot be executed")
    return kind


def _rdt(g: FunctionBuilder, op: Operation) -> str:
    return dt_expr(g, np_dtype(elem(op.results[0].type)))


@register(shard.GridOp)
def _grid_op(op: Operation, g: FunctionBuilder) -> None:
    del op, g  # a symbol: nothing runs


@register(shard.GridShapeOp, shard.ProcessMultiIndexOp)
def _grid_query(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.GridShapeOp | shard.ProcessMultiIndexOp)
    fn = grid_shape if isinstance(op, shard.GridShapeOp) else process_multi_index
    shape = _grid_shape(op, op.grid)
    names = [g.res(op, i) for i in range(len(op.results))]
    if names:
        g.emit(f"{', '.join(names)}, = {_call(g, fn, [py_literal(shape), py_literal(op.axes.get_values())])}")


@register(shard.ProcessLinearIndexOp)
def _linear_index(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.ProcessLinearIndexOp)
    g.assign(op, _call(g, process_linear_index, [py_literal(_grid_shape(op, op.grid))]))


@register(shard.NeighborsLinearIndicesOp)
def _neighbors(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.NeighborsLinearIndicesOp)
    down, up = g.res(op, 0), g.res(op, 1)
    args = [py_literal(_grid_shape(op, op.grid)), _tuple(g.vs(op.device)), py_literal(op.split_axes.get_values())]
    g.emit(f"{down}, {up} = {_call(g, neighbors, args)}")


@register(shard.ShardingOp)
def _sharding(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.ShardingOp)
    grid = op.grid.string_value()
    shape = _grid_shape(op, op.grid)
    axes = op.split_axes_tuple
    halos = mixed(g, op.static_halo_sizes, list(op.dynamic_halo_sizes))
    offsets = mixed(g, op.static_sharded_dims_offsets, list(op.dynamic_sharded_dims_offsets))
    if not op.dynamic_halo_sizes and not op.dynamic_sharded_dims_offsets:
        value = make_sharding(grid, shape, axes, [int(h) for h in halos], [int(o) for o in offsets])
        g.bind(op.result, g.const(value, "sharding"))
        return
    g.assign(op, _call(g, make_sharding, [py_literal(grid), py_literal(shape), py_literal(axes), f"[{', '.join(halos)}]", f"[{', '.join(offsets)}]"]))


@register(shard.GetShardingOp)
def _get_sharding(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.GetShardingOp)
    owner = op.source.owner
    if not isinstance(owner, shard.ShardOp):
        raise compile_error(op, "the source of shard.get_sharding must be defined by shard.shard")
    g.bind(op.result, g.v(owner.sharding))


@register(shard.ShardOp)
def _shard(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.ShardOp)
    g.bind(op.result, g.v(op.src))  # local values are already laid out


@register(shard.ShardShapeOp)
def _shard_shape(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.ShardShapeOp)
    dims = _mixed_list(g, op.dims, list(op.dims_dynamic))
    device = _mixed_list(g, op.device, list(op.device_dynamic))
    names = [g.res(op, i) for i in range(len(op.results))]
    if names:
        g.emit(f"{', '.join(names)}, = {_call(g, shard_shape, [dims, g.v(op.sharding), device])}")


def _common(op: shard.CollectiveOp, g: FunctionBuilder) -> list[str]:
    return [g.v(op.operands[0]), py_literal(_grid_shape(op, op.grid)), py_literal(op.grid_axes_tuple)]


def _trusted(op: Operation) -> str:
    """`trusted=True` when the input's shape is static: every device then passes the same
    shape and dtype, and the MPI comm needs no header exchange to check it."""
    t = op.operands[0].type
    static = isinstance(t, ShapedType) and all(d >= 0 for d in t.get_shape())
    return f"trusted={static}"


def _root(g: FunctionBuilder, op: Operation) -> str:
    return _mixed_list(g, op.root, list(op.root_dynamic))  # type: ignore[attr-defined]


@register(shard.AllReduceOp)
def _all_reduce(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.AllReduceOp)
    g.assign(op, _call(g, all_reduce, [*_common(op, g), py_literal(_kind(op)), _rdt(g, op), _trusted(op)]))


def _emit_start(op: Operation, g: FunctionBuilder, fn: object, args: Sequence[object]):
    req = g.fresh("req")
    g.emit(f"{req} = {_call(g, fn, args)}")

    def emit_wait(g: FunctionBuilder) -> None:
        g.assign(op, f"{g.const(overlap.wait, 'overlap_wait')}({req})")

    return emit_wait


@overlap.register_start(shard.AllReduceOp, results_at_wait=True)
def _start_all_reduce(op: Operation, g: FunctionBuilder):
    assert isinstance(op, shard.AllReduceOp)
    return _emit_start(op, g, start_all_reduce, [*_common(op, g), py_literal(_kind(op)), _rdt(g, op), _trusted(op)])


@overlap.register_start(shard.ReduceScatterOp, results_at_wait=True)
def _start_reduce_scatter(op: Operation, g: FunctionBuilder):
    assert isinstance(op, shard.ReduceScatterOp)
    return _emit_start(op, g, start_reduce_scatter, [*_common(op, g), op.scatter_axis.value.data, py_literal(_kind(op)), _rdt(g, op), _trusted(op)])


@overlap.register_start(shard.AllGatherOp, hoist=False, results_at_wait=True)
def _start_all_gather(op: Operation, g: FunctionBuilder):
    assert isinstance(op, shard.AllGatherOp)
    return _emit_start(op, g, start_all_gather, [*_common(op, g), op.gather_axis.value.data, _trusted(op)])


@register(shard.AllGatherOp)
def _all_gather(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.AllGatherOp)
    g.assign(op, _call(g, all_gather, [*_common(op, g), op.gather_axis.value.data, _trusted(op)]))


@register(shard.AllSliceOp)
def _all_slice(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.AllSliceOp)
    g.assign(op, _call(g, all_slice, [*_common(op, g), op.slice_axis.value.data]))


@register(shard.AllToAllOp)
def _all_to_all(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.AllToAllOp)
    g.assign(op, _call(g, all_to_all, [*_common(op, g), op.split_axis.value.data, op.concat_axis.value.data, _trusted(op)]))


@register(shard.ReduceScatterOp)
def _reduce_scatter(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.ReduceScatterOp)
    g.assign(op, _call(g, reduce_scatter, [*_common(op, g), op.scatter_axis.value.data, py_literal(_kind(op)), _rdt(g, op), _trusted(op)]))


@register(shard.BroadcastOp)
def _broadcast(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.BroadcastOp)
    g.assign(op, _call(g, broadcast, [*_common(op, g), _root(g, op), _trusted(op)]))


@register(shard.GatherOp)
def _gather(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.GatherOp)
    g.assign(op, _call(g, gather, [*_common(op, g), op.gather_axis.value.data, _root(g, op), _trusted(op)]))


@register(shard.ReduceOp)
def _reduce(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.ReduceOp)
    g.assign(op, _call(g, reduce, [*_common(op, g), _root(g, op), py_literal(_kind(op)), _rdt(g, op), _trusted(op)]))


@register(shard.ScatterOp)
def _scatter(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.ScatterOp)
    g.assign(op, _call(g, scatter, [*_common(op, g), op.scatter_axis.value.data, _root(g, op), _trusted(op)]))


@register(shard.SendOp)
def _send(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.SendOp)
    dest = _mixed_list(g, op.destination, list(op.destination_dynamic))
    g.assign(op, _call(g, send, [*_common(op, g), dest]))


@register(shard.RecvOp)
def _recv(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.RecvOp)
    source = _mixed_list(g, op.source, list(op.source_dynamic))
    g.assign(op, _call(g, recv, [*_common(op, g), source]))


@register(shard.ShiftOp)
def _shift(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.ShiftOp)
    args = [*_common(op, g), op.shift_axis.value.data, op.offset.value.data, op.rotate is not None]
    g.assign(op, _call(g, shift, args))


@register(shard.UpdateHaloOp)
def _update_halo(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, shard.UpdateHaloOp)
    halos = "[" + ", ".join(mixed(g, op.static_halo_sizes, list(op.halo_sizes))) + "]"
    in_place = isinstance(op.destination.type, MemRefType)  # a memref is updated in place
    args = [g.v(op.destination), py_literal(_grid_shape(op, op.grid)), py_literal(op.split_axes.as_tuple()), halos, in_place]
    g.assign(op, _call(g, update_halo, args))

