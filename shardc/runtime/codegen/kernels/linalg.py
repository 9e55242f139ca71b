"""linalg: every structured op (generic and the named ops, which carry their body and
maps) runs through the vectorized engine in `shardc.runtime.codegen.structured`."""

from __future__ import annotations

from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.builtin import ShapedType
from xdsl.ir import Operation

from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, register, single_block
from shardc.ir.segments import ins_outs
from shardc.runtime.codegen.structured import emit_structured
from shardc.runtime.execute.structured_run import Map
from shardc.runtime.codegen.window import window_maps


@register(LinalgStructuredOperation)
def _structured(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, LinalgStructuredOperation)
    try:
        attr = op.get_indexing_maps()
        iters = [str(t.data) for t in op.get_iterator_types().data]
    except Exception as e:  # xDSL helpers may fail on unusual ops
        raise compile_error(op, f"operation is not supported by the numpy runtime (its indexing maps are unreadable: {e!r})") from None
    ins, outs = ins_outs(op)
    maps, windows = window_maps(op, attr.data, len(ins))
    emit_structured(op, g, list(ins), list(outs), maps, [i.split(".")[-1].lower() for i in iters], single_block(op.body), windows=windows)


@register(linalg.BroadcastOp)
def _broadcast(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, linalg.BroadcastOp)
    out_t = op.init.type
    assert isinstance(out_t, ShapedType)
    rank = len(out_t.get_shape())
    added = set(op.dimensions.get_values())
    in_map: Map = tuple(d for d in range(rank) if d not in added)
    out_map: Map = tuple(range(rank))
    emit_structured(op, g, [op.input], [op.init], [in_map, out_map], ["parallel"] * rank, single_block(op.hidden_region))


@register(linalg.ReduceOp)
def _reduce(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, linalg.ReduceOp)
    in_t = op.input.type
    assert isinstance(in_t, ShapedType)
    rank = len(in_t.get_shape())
    dims = set(op.dimensions.get_values())
    iters = ["reduction" if d in dims else "parallel" for d in range(rank)]
    # shardc's overlay is variadic (`inputs`, `inits`); xDSL's has one of each
    ins, inits = list(getattr(op, "inputs", [op.input])), list(getattr(op, "inits", [op.init]))
    in_map, out_map = tuple(range(rank)), tuple(d for d in range(rank) if d not in dims)
    emit_structured(op, g, ins, inits, [in_map] * len(ins) + [out_map] * len(inits), iters, single_block(op.region))


@register(linalg.IndexOp)
def _index(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, linalg.IndexOp)
    name = g.define(op.result, vec=True)
    g.emit(f"{name} = _ix[{op.dim.value.data}]")


# shardc's linalg overlay: linalg.map (batch_matmul is a named structured op, above).
from shardc.dialects import linalg as slinalg  # noqa: E402


@register(slinalg.MapOp)
def _map(op: Operation, g: FunctionBuilder) -> None:
    """Elementwise: identity maps over the init's shape; the mapper's arguments are the
    inputs' elements followed by the init's (trunk's form), so it runs like a generic."""
    assert isinstance(op, slinalg.MapOp)
    t = op.init.type
    assert isinstance(t, ShapedType)
    rank = len(t.get_shape())
    block = single_block(op.mapper)
    n = len(op.inputs)
    if len(block.args) == n:  # the older form without the init's argument
        raise compile_error(op, "linalg.map whose mapper takes no init argument is not supported")
    ident: Map = tuple(range(rank))
    emit_structured(op, g, list(op.inputs), [op.init], [ident] * (n + 1), ["parallel"] * rank, block)
