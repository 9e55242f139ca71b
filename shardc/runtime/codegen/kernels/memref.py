"""memref: mutable numpy arrays. Subviews, casts and reshapes are numpy views, so
writes through them reach the underlying allocation, as in MLIR."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import memref
from xdsl.dialects.builtin import DYNAMIC_INDEX, DenseIntOrFPElementsAttr, MemRefType
from xdsl.ir import Operation

from shardc.runtime.execute import helpers
from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, register, single_block
from shardc.runtime.execute.dtypes import np_dtype
from shardc.runtime.codegen.kernels._common import elem, mixed, rank_reduction_keep, scalar_read, shape_of, shape_tuple, slice_exprs
from shardc.runtime.codegen.kernels.arith import dt_expr
from shardc.runtime.execute.kernels.memref_run import view_reshape
from shardc.runtime.execute.kernels.memref_run import reinterpret_view


def _index(g: FunctionBuilder, indices: list) -> str:
    names = g.vs(indices)
    return "()" if not names else ", ".join(names) + ("," if len(names) == 1 else "")


@register(memref.AllocOp, memref.AllocaOp)
def _alloc(op: Operation, g: FunctionBuilder) -> None:
    t = op.results[0].type
    g.assign(op, f"_np.empty({shape_tuple(g, t, op.dynamic_sizes)}, {dt_expr(g, np_dtype(elem(t)))})")  # type: ignore[attr-defined]


@register(memref.DeallocOp)
def _dealloc(op: Operation, g: FunctionBuilder) -> None:
    pass


@register(memref.LoadOp)
def _load(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, memref.LoadOp)
    g.assign(op, scalar_read(f"{g.v(op.memref)}[{_index(g, list(op.indices))}]", op.res.type))


@register(memref.StoreOp)
def _store(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, memref.StoreOp)
    g.emit(f"{g.v(op.memref)}[{_index(g, list(op.indices))}] = {g.v(op.value)}")


@register(memref.CopyOp)
def _copy(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, memref.CopyOp)
    g.emit(f"{g.v(op.destination)}[...] = {g.v(op.source)}")


@register(memref.CastOp, memref.MemorySpaceCastOp, memref.AssumeAlignmentOp)
def _cast(op: Operation, g: FunctionBuilder) -> None:
    g.bind(op.results[0], g.v(op.operands[0]))


@register(memref.DimOp)
def _dim(op: Operation, g: FunctionBuilder) -> None:
    src, idx = g.vs(op.operands)
    g.assign(op, f"{src}.shape[{idx}]")


@register(memref.RankOp)
def _rank(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, f"{g.v(op.operands[0])}.ndim")


@register(memref.SubviewOp)
def _subview(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, memref.SubviewOp)
    offsets = mixed(g, op.static_offsets, op.offsets)
    sizes = mixed(g, op.static_sizes, op.sizes)
    strides = mixed(g, op.static_strides, op.strides)
    static_sizes = [(-1 if s == DYNAMIC_INDEX else s) for s in op.static_sizes.get_values()]
    keep = rank_reduction_keep(op, static_sizes, shape_of(op.result.type))
    g.assign(op, f"{g.v(op.source)}[{slice_exprs(offsets, sizes, strides, keep)}]")


@register(memref.CollapseShapeOp)
def _collapse(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, memref.CollapseShapeOp)
    src = g.v(op.src)
    groups = [[i.value.data for i in grp] for grp in op.reassociation.data]  # type: ignore[attr-defined]
    parts = [" * ".join(f"{src}.shape[{i}]" for i in grp) or "1" for grp in groups]
    g.assign(op, f"{g.const(view_reshape, 'view_reshape')}({src}, ({', '.join(parts)}{',' if len(parts) == 1 else ''}))")


@register(memref.ExpandShapeOp)
def _expand(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, memref.ExpandShapeOp)
    shape = mixed(g, op.static_output_shape, op.output_shape)
    g.assign(op, f"{g.const(view_reshape, 'view_reshape')}({g.v(op.src)}, ({', '.join(shape)}{',' if len(shape) == 1 else ''}))")


@register(memref.GetGlobalOp)
def _get_global(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, memref.GetGlobalOp)
    name = op.name_.root_reference.data
    glob = g.cg.symbol(name)
    if not isinstance(glob, memref.GlobalOp):
        raise compile_error(op, f"unknown memref.global @{name}")

    def make() -> np.ndarray:
        t = glob.type
        dt = np_dtype(elem(t))
        shape = tuple(shape_of(t))
        if isinstance(glob.initial_value, DenseIntOrFPElementsAttr):
            arr = helpers.dense_to_array(glob.initial_value, shape, dt)
            return arr.copy() if glob.constant is None else arr
        return np.zeros(shape, dt)

    # One array per symbol, under a fresh name: the symbol never reaches the source.
    g.bind(op.results[0], g.cg.keyed_const(("memref.global", name), make, "global"))


@register(memref.GlobalOp)
def _global(op: Operation, g: FunctionBuilder) -> None:
    pass


@register(memref.AllocaScopeOp)
def _alloca_scope(op: Operation, g: FunctionBuilder) -> None:
    block = single_block(op.regions[0])
    term = g.emit_block_body(block)
    for r, v in zip(op.results, term.operands):
        g.bind(r, g.v(v))


@register(memref.ReinterpretCastOp)
def _reinterpret(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, memref.ReinterpretCastOp)
    offsets = mixed(g, op.static_offsets, op.offsets)
    sizes = mixed(g, op.static_sizes, op.sizes)
    strides = mixed(g, op.static_strides, op.strides)
    fn = g.const(reinterpret_view, "reinterpret")
    g.assign(op, f"{fn}({g.v(op.source)}, {offsets[0]}, ({', '.join(sizes)},), ({', '.join(strides)},))")


