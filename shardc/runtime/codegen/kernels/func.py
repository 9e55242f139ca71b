"""func and builtin ops: return, call, unrealized casts."""

from xdsl.dialects import builtin, func
from xdsl.ir import Operation

from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, register, targets


@register(func.ReturnOp)
def _return(op: Operation, g: FunctionBuilder) -> None:
    names = g.vs(op.operands)
    if not names:
        g.emit("return None")
    elif len(names) == 1:
        g.emit(f"return {names[0]}")
    else:
        g.emit(f"return ({', '.join(names)})")


@register(func.CallOp)
def _call(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, func.CallOp)
    callee = op.callee.root_reference.data
    if g.cg.symbol(callee) is None:
        raise compile_error(op, f"call to unknown function @{callee}")
    call = f"{g.cg.func_pyname(callee)}({', '.join(g.vs(op.operands))})"
    if not op.results:
        g.emit(call)
    elif len(op.results) == 1:
        g.assign(op, call)
    else:
        names = [g.res(op, i) for i in range(len(op.results))]
        g.emit(f"{targets(names)} = {call}")


@register(builtin.UnrealizedConversionCastOp)
def _unrealized(op: Operation, g: FunctionBuilder) -> None:
    if len(op.operands) != len(op.results):
        raise compile_error(op, "only 1:1 unrealized_conversion_cast is supported")
    for a, r in zip(op.operands, op.results):
        g.bind(r, g.v(a), like=a)
