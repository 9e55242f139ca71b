"""tensor: immutable numpy arrays. Slices are views of their (immutable) source; ops
that "modify" a tensor copy it first."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import tensor
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.builtin import DYNAMIC_INDEX, ShapedType
from xdsl.ir import Operation

from shardc.ir.segments import ins_outs
from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, describe, register, single_block
from shardc.runtime.execute.dtypes import np_dtype
from shardc.runtime.codegen.kernels._common import elem, mixed, rank_reduction_keep, scalar_read, shape_of, shape_tuple, slice_exprs
from shardc.runtime.codegen.kernels.arith import dt_expr
from shardc.runtime.execute.kernels.tensor_run import gather


def _dt(g: FunctionBuilder, t: object) -> str:
    return dt_expr(g, np_dtype(elem(t)))  # type: ignore[arg-type]


def only_shapes_inits(op: tensor.EmptyOp) -> bool:
    """Whether every reader of `op`'s tensor takes only its shape: it is an init of a
    structured op (`linalg.generic`, `linalg.fill`, ...) whose body never reads that
    init's block argument (a tensor result is a new array, `structured_run._finish`).
    CSE leaves one `tensor.empty` per type for the whole function, so such an array
    lived from its first reader to its last: in a training step, from the forward to
    the backward (a bf16 GPT at n_layer 12, n_embd 768: about 110 MiB of unread buffers
    held at the step's peak)."""
    for use in op.tensor.uses:
        user = use.operation
        if not isinstance(user, LinalgStructuredOperation) or use.index < len(ins_outs(user)[0]):
            return False
        block = user.body.blocks.first
        if block is None or len(block.args) != len(user.operands) or block.args[use.index].uses:
            return False
    return True


@register(tensor.EmptyOp)
def _empty(op: Operation, g: FunctionBuilder) -> None:
    """`np.empty`, or where only the shape is read (`only_shapes_inits`) a read-only
    zero-stride view of one element: no memory of its size."""
    assert isinstance(op, tensor.EmptyOp)
    t = op.tensor.type
    shape = shape_tuple(g, t, op.dynamic_sizes)
    if only_shapes_inits(op):
        g.assign(op, f"_np.broadcast_to(_np.empty((), {_dt(g, t)}), {shape})", 0)
    else:
        g.assign(op, f"_np.empty({shape}, {_dt(g, t)})", 0)


@register(tensor.CastOp)
def _cast(op: Operation, g: FunctionBuilder) -> None:
    g.bind(op.results[0], g.v(op.operands[0]))


@register(tensor.DimOp)
def _dim(op: Operation, g: FunctionBuilder) -> None:
    src, idx = g.vs(op.operands)
    g.assign(op, f"{src}.shape[{idx}]")


def _slice_parts(op: Operation, g: FunctionBuilder, small_type: object) -> str:
    offsets = mixed(g, op.static_offsets, op.offsets)  # type: ignore[attr-defined]
    sizes = mixed(g, op.static_sizes, op.sizes)  # type: ignore[attr-defined]
    strides = mixed(g, op.static_strides, op.strides)  # type: ignore[attr-defined]
    static_sizes = list(op.static_sizes.get_values())  # type: ignore[attr-defined]
    keep = rank_reduction_keep(op, [1 if s == 1 else (-1 if s == DYNAMIC_INDEX else s) for s in static_sizes], shape_of(small_type))
    return slice_exprs(offsets, sizes, strides, keep)


@register(tensor.ExtractSliceOp)
def _extract_slice(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tensor.ExtractSliceOp)
    g.assign(op, f"{g.v(op.source)}[{_slice_parts(op, g, op.result.type)}]")


@register(tensor.InsertSliceOp)
def _insert_slice(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tensor.InsertSliceOp)
    r = g.res(op)
    g.emit(f"{r} = {g.v(op.dest)}.copy()")
    g.emit(f"{r}[{_slice_parts(op, g, op.source.type)}] = {g.v(op.source)}")


def _index_tuple(names: list[str]) -> str:
    return "()" if not names else ", ".join(names) + ("," if len(names) == 1 else "")


@register(tensor.ExtractOp)
def _extract(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tensor.ExtractOp)
    if any(g.is_arr(i) for i in op.indices):  # inside a linalg body: a gather
        grid_dims = tuple(i.owner.dim.value.data if isinstance(i.owner, linalg.IndexOp) else None for i in op.indices)
        fn = g.const(gather, "gather")
        idx = "(" + "".join(f"{x}, " for x in g.vs(op.indices)) + ")"
        name = g.res(op, vec=True)
        g.emit(f"{name} = {fn}({g.v(op.tensor)}, {idx}, {g.const(grid_dims, 'grid')}, {g.const(describe(op), 'where')})")
        return
    g.assign(op, scalar_read(f"{g.v(op.tensor)}[{_index_tuple(g.vs(op.indices))}]", op.result.type))


@register(tensor.InsertOp)
def _insert(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tensor.InsertOp)
    r = g.res(op)
    g.emit(f"{r} = {g.v(op.dest)}.copy()")
    g.emit(f"{r}[{_index_tuple(g.vs(op.indices))}] = {g.v(op.scalar)}")


def _reshape_to(g: FunctionBuilder, op: Operation, src: str, t: object, dynamic: list[str]) -> None:
    dyn = iter(dynamic)
    parts = [next(dyn) if s == DYNAMIC_INDEX else str(s) for s in shape_of(t)]  # type: ignore[arg-type]
    g.assign(op, f"{src}.reshape(({', '.join(parts)}{',' if len(parts) == 1 else ''}))")


@register(tensor.CollapseShapeOp)
def _collapse(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tensor.CollapseShapeOp)
    src = g.v(op.src)
    shape = shape_of(op.result.type)
    groups = [[i.value.data for i in grp] for grp in op.reassociation.data]  # type: ignore[attr-defined]
    dyn = [" * ".join(f"{src}.shape[{i}]" for i in grp) or "1" for s, grp in zip(shape, groups) if s == DYNAMIC_INDEX]
    _reshape_to(g, op, src, op.result.type, dyn)


@register(tensor.ExpandShapeOp)
def _expand(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tensor.ExpandShapeOp)
    _reshape_to(g, op, g.v(op.src), op.result.type, g.vs(op.dynamic_output_shape))


@register(tensor.ReshapeOp)
def _reshape(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tensor.ReshapeOp)
    g.assign(op, f"{g.v(op.source)}.reshape({g.v(op.shape)}.tolist())")


@register(tensor.ConcatOp)
def _concat(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tensor.ConcatOp)
    names = g.vs(op.inputs)
    g.assign(op, f"_np.concatenate(({', '.join(names)}{',' if len(names) == 1 else ''}), axis={op.dim.value.data})")


@register(tensor.SplatOp)
def _splat(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tensor.SplatOp)
    t = op.result.type
    g.assign(op, f"_np.full({shape_tuple(g, t, op.dynamicSizes)}, {g.v(op.input)}, {_dt(g, t)})")


@register(tensor.FromElementsOp)
def _from_elements(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tensor.FromElementsOp)
    t = op.result.type
    shape = shape_of(t)
    g.assign(op, f"_np.array([{', '.join(g.vs(op.elements))}], {_dt(g, t)}).reshape({tuple(shape)})")


@register(tensor.PadOp)
def _pad(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, tensor.PadOp)
    block = single_block(op.region)
    for o in block.ops:
        if any(a in block.args for a in o.operands):
            raise compile_error(op, "tensor.pad with an index-dependent padding value is not supported")
    term = g.emit_block_body(block)
    value = g.v(term.operands[0])
    low = mixed(g, op.static_low, op.low)
    high = mixed(g, op.static_high, op.high)
    widths = ", ".join(f"({lo}, {hi})" for lo, hi in zip(low, high))
    g.assign(op, f"_np.pad({g.v(op.source)}, ({widths}{',' if len(low) == 1 else ''}), constant_values={value})")


# shardc's tensor overlay: rank, generate (parallel_insert_slice is part of scf.forall).
from shardc.dialects import tensor as stensor  # noqa: E402
from shardc.runtime.codegen.builder import CompileError  # noqa: E402


@register(stensor.RankOp)
def _rank(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, f"_np.ndim({g.v(op.operands[0])})")


@register(stensor.GenerateOp)
def _generate(op: Operation, g: FunctionBuilder) -> None:
    """The body runs once on whole index grids (vectorized); a body that cannot (say, a
    gather through tensor.extract) runs once per element."""
    assert isinstance(op, stensor.GenerateOp)
    t = op.result.type
    shape = shape_tuple(g, t, list(op.dynamic_extents))
    dt = dt_expr(g, np_dtype(elem(t)))
    block = single_block(op.body)
    r = g.res(op)
    mark = (len(g.lines), dict(g.names), set(g.vec_values))
    try:
        grid = g.fresh("ix")
        g.emit(f"{grid} = _np.indices({shape}, dtype=_np.int64)")
        saved = g.vector
        g.vector = True
        g.bind_block_args(block, [f"{grid}[{k}]" for k in range(len(block.args))], vec=True)
        term = g.emit_block_body(block)
        g.vector = saved
        g.emit(f"{r} = _np.broadcast_to(_np.asarray({g.v(term.operands[0])}, dtype={dt}), {shape}).copy()")
        return
    except CompileError:
        g.vector = False
        del g.lines[mark[0] :]
        g.names.clear()
        g.names.update(mark[1])
        g.vec_values.clear()
        g.vec_values.update(mark[2])
    r = g.res(op, vec=False)
    g.emit(f"{r} = _np.empty({shape}, dtype={dt})")
    idx = g.fresh("i")
    g.emit(f"for {idx} in _np.ndindex(*{shape}):")
    with g.indented():
        g.bind_block_args(block, [f"{idx}[{k}]" for k in range(len(block.args))])
        term = g.emit_block_body(block)
        g.emit(f"{r}[{idx}] = {g.v(term.operands[0])}")
