"""affine: maps compiled to Python integer expressions (floordiv/mod as Python's // and %,
which round like MLIR's for positive divisors)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, DenseArrayBase
from xdsl.ir import Operation
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap, AffineSymExpr

from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, register, register_name, single_block
from shardc.runtime.codegen.kernels._common import scalar_read


def expr_py(e: AffineExpr, dims: Sequence[str], syms: Sequence[str]) -> str:
    if isinstance(e, AffineDimExpr):
        return dims[e.position]
    if isinstance(e, AffineSymExpr):
        return syms[e.position]
    if isinstance(e, AffineConstantExpr):
        return f"({e.value})"
    assert isinstance(e, AffineBinaryOpExpr)
    a, b = expr_py(e.lhs, dims, syms), expr_py(e.rhs, dims, syms)
    match e.kind:
        case AffineBinaryOpKind.Add:
            return f"({a} + {b})"
        case AffineBinaryOpKind.Mul:
            return f"({a} * {b})"
        case AffineBinaryOpKind.FloorDiv:
            return f"({a} // {b})"
        case AffineBinaryOpKind.CeilDiv:
            return f"(-((-{a}) // {b}))"
        case AffineBinaryOpKind.Mod:
            return f"({a} % {b})"
    raise AssertionError(e.kind)


def map_py(m: AffineMap, operands: Sequence[str]) -> list[str]:
    dims, syms = operands[: m.num_dims], operands[m.num_dims :]
    return [expr_py(e, dims, syms) for e in m.results]


@register(affine.ApplyOp)
def _apply(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, affine.ApplyOp)
    (expr,) = map_py(op.map.data, g.vs(op.mapOperands))
    g.assign(op, expr)


@register(affine.MinOp)
def _min(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, affine.MinOp)
    exprs = map_py(op.map.data, g.vs(op.arguments))
    g.assign(op, exprs[0] if len(exprs) == 1 else f"min({', '.join(exprs)})")


@register_name("affine.max")
def _max(op: Operation, g: FunctionBuilder) -> None:
    m = op.properties.get("map") or op.attributes.get("map")
    if not isinstance(m, AffineMapAttr):
        raise compile_error(op, "expected a 'map' property")
    exprs = map_py(m.data, g.vs(op.operands))
    g.assign(op, exprs[0] if len(exprs) == 1 else f"max({', '.join(exprs)})")


def _basis(op: Operation, g: FunctionBuilder, dynamic: Sequence[object]) -> list[str]:
    from shardc.runtime.codegen.kernels._common import mixed

    static = op.properties.get("static_basis") or op.attributes.get("static_basis")
    if not isinstance(static, DenseArrayBase):
        raise compile_error(op, "expected a 'static_basis' property")
    return mixed(g, static, dynamic)  # type: ignore[arg-type]


def _prod(xs: Sequence[str]) -> str:
    return " * ".join(xs) if xs else "1"


@register_name("affine.delinearize_index")
def _delinearize(op: Operation, g: FunctionBuilder) -> None:
    idx = g.v(op.operands[0])
    basis = _basis(op, g, list(op.operands[1:]))
    n = len(op.results)
    if len(basis) == n:
        basis = basis[1:]  # the outer bound does not change the results
    if len(basis) != n - 1:
        raise compile_error(op, "basis size does not match the number of results")
    names = [g.res(op, i) for i in range(n)]
    for i in range(n):
        stride = _prod(basis[i:])
        q = f"{idx} // ({stride})" if basis[i:] else idx
        g.emit(f"{names[i]} = {q}" if i == 0 else f"{names[i]} = ({q}) % {basis[i - 1]}")


@register_name("affine.linearize_index")
def _linearize(op: Operation, g: FunctionBuilder) -> None:
    multi = getattr(op, "multi_index", None)
    dyn = getattr(op, "dynamic_basis", None)
    if multi is None or dyn is None:
        raise compile_error(op, "expected 'multi_index' and 'dynamic_basis' operands")
    idx = g.vs(list(multi))
    basis = _basis(op, g, list(dyn))
    if len(basis) == len(idx):
        basis = basis[1:]
    terms = [f"{i} * ({_prod(basis[k:])})" if basis[k:] else i for k, i in enumerate(idx)]
    g.assign(op, " + ".join(terms) if terms else "0")


@register(affine.LoadOp)
def _load(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, affine.LoadOp)
    idx = map_py(op.map.data, g.vs(op.indices))
    g.assign(op, scalar_read(f"{g.v(op.memref)}[{', '.join(idx)}{',' if len(idx) == 1 else ''}]" if idx else f"{g.v(op.memref)}[()]", op.result.type))


@register(affine.StoreOp)
def _store(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, affine.StoreOp)
    idx = map_py(op.map.data, g.vs(op.indices))
    g.emit(f"{g.v(op.memref)}[{', '.join(idx) + (',' if len(idx) == 1 else '') if idx else '()'}] = {g.v(op.value)}")


@register(affine.ForOp)
def _for(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, affine.ForOp)
    lbs = map_py(op.lowerBoundMap.data, g.vs(op.lowerBoundOperands))
    ubs = map_py(op.upperBoundMap.data, g.vs(op.upperBoundOperands))
    lb = lbs[0] if len(lbs) == 1 else f"max({', '.join(lbs)})"
    ub = ubs[0] if len(ubs) == 1 else f"min({', '.join(ubs)})"
    block = single_block(op.body)
    carried = [g.fresh("it") for _ in block.args[1:]]
    for c, init in zip(carried, g.vs(op.inits)):
        g.emit(f"{c} = {init}")
    iv = g.fresh("iv")
    g.emit(f"for {iv} in range({lb}, {ub}, {op.step.value.data}):")
    with g.indented():
        g.bind_block_args(block, [iv, *carried])
        term = g.emit_block_body(block)
        vals = g.vs(term.operands)
        if carried:
            g.emit(f"{', '.join(carried)} = {', '.join(vals)}")
    for r, c in zip(op.results, carried):
        g.bind(r, c)
