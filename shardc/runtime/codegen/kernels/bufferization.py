"""bufferization: the tensor/memref boundary. to_buffer copies (so writes never reach an
immutable tensor) unless it is read_only; to_tensor shares the buffer (MLIR forbids
writing it afterwards)."""

from __future__ import annotations

from xdsl.dialects import bufferization
from xdsl.ir import Operation

from shardc.runtime.codegen.builder import FunctionBuilder, register
from shardc.runtime.execute.dtypes import np_dtype
from shardc.runtime.codegen.kernels._common import elem, shape_tuple
from shardc.runtime.codegen.kernels.arith import dt_expr


@register(bufferization.ToBufferOp)
def _to_buffer(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, bufferization.ToBufferOp)
    src = g.v(op.tensor)
    if op.read_only is not None:
        g.bind(op.memref, src)
    else:
        g.assign(op, f"_np.array({src})")


@register(bufferization.ToTensorOp)
def _to_tensor(op: Operation, g: FunctionBuilder) -> None:
    g.bind(op.results[0], g.v(op.operands[0]))


@register(bufferization.CloneOp)
def _clone(op: Operation, g: FunctionBuilder) -> None:
    g.assign(op, f"_np.array({g.v(op.operands[0])})")


@register(bufferization.AllocTensorOp)
def _alloc_tensor(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, bufferization.AllocTensorOp)
    if op.copy is not None:
        g.assign(op, f"_np.array({g.v(op.copy)})")
    else:
        t = op.tensor.type
        g.assign(op, f"_np.empty({shape_tuple(g, t, op.dynamic_sizes)}, {dt_expr(g, np_dtype(elem(t)))})")


@register(bufferization.MaterializeInDestinationOp)
def _materialize(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, bufferization.MaterializeInDestinationOp)
    src, dest = g.v(op.source), g.v(op.dest)
    if op.result is not None:
        g.bind(op.result, src)
    else:
        g.emit(f"{dest}[...] = {src}")
