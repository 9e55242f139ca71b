"""scf: structured control flow as Python control flow (for/if/while), yields as
assignments to the variables that carry values out of a region."""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.ir import Operation, Region

from shardc.runtime.compile import FunctionBuilder, compile_error, register, single_block


def _emit_region_into(g: FunctionBuilder, region: Region, outs: list[str], arg_names: list[str] | None = None) -> None:
    """Emit `region`'s single block; its yield assigns `outs`."""
    block = single_block(region)
    if arg_names is not None:
        g.bind_block_args(block, arg_names)
    term = g.emit_block_body(block)
    vals = g.vs(term.operands)
    if len(vals) != len(outs):
        raise compile_error(term, f"expected {len(outs)} yielded values, got {len(vals)}")
    pairs = [(o, v) for o, v in zip(outs, vals) if o != v]
    if pairs:  # one tuple assignment: yields may permute the carried variables
        g.emit(f"{', '.join(o for o, _ in pairs)} = {', '.join(v for _, v in pairs)}")


@register(scf.ForOp)
def _for(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, scf.ForOp)
    if g.arr_op(op) and g.vector:
        raise compile_error(op, "scf.for inside a vectorized linalg body is not supported")
    block = single_block(op.body)
    carried = [g.fresh(a.name_hint or "it") for a in block.args[1:]]
    for c, init in zip(carried, g.vs(op.iter_args)):
        g.emit(f"{c} = {init}")
    iv = g.fresh(block.args[0].name_hint or "iv")
    g.emit(f"for {iv} in range({g.v(op.lb)}, {g.v(op.ub)}, {g.v(op.step)}):")
    with g.indented():
        _emit_region_into(g, op.body, carried, [iv, *carried])
    for i, c in enumerate(carried):
        g.bind(op.results[i], c)


@register(scf.IfOp)
def _if(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, scf.IfOp)
    if g.is_arr(op.cond):
        raise compile_error(op, "scf.if on a vectorized condition (inside a linalg body) is not supported")
    outs = [g.res(op, i) for i in range(len(op.results))]
    g.emit(f"if {g.v(op.cond)}:")
    with g.indented():
        _emit_region_into(g, op.true_region, outs)
    if op.false_region.blocks:
        g.emit("else:")
        with g.indented():
            _emit_region_into(g, op.false_region, outs)


@register(scf.WhileOp)
def _while(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, scf.WhileOp)
    before = single_block(op.before_region)
    after = single_block(op.after_region)
    bargs = [g.fresh(a.name_hint or "w") for a in before.args]
    for b, init in zip(bargs, g.vs(op.arguments)):
        g.emit(f"{b} = {init}")
    outs = [g.res(op, i) for i in range(len(op.results))]
    g.emit("while True:")
    with g.indented():
        g.bind_block_args(before, bargs)
        cond_op = g.emit_block_body(before)
        if not isinstance(cond_op, scf.ConditionOp):
            raise compile_error(op, "the before region must end with scf.condition")
        cond, *fwd = g.vs(cond_op.operands)
        g.emit(f"if not {cond}:")
        with g.indented():
            for o, v in zip(outs, fwd):
                g.emit(f"{o} = {v}")
            g.emit("break")
        _emit_region_into(g, op.after_region, bargs, fwd)


@register(scf.ExecuteRegionOp)
def _execute_region(op: Operation, g: FunctionBuilder) -> None:
    region = op.regions[0]
    if len(region.blocks) != 1:
        raise compile_error(op, "multi-block regions are not supported")
    outs = [g.res(op, i) for i in range(len(op.results))]
    _emit_region_into(g, region, outs)


@register(scf.IndexSwitchOp)
def _index_switch(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, scf.IndexSwitchOp)
    outs = [g.res(op, i) for i in range(len(op.results))]
    arg = g.v(op.arg)
    for k, (case, region) in enumerate(zip(op.cases.get_values(), op.case_regions)):
        g.emit(f"{'if' if k == 0 else 'elif'} {arg} == {case}:")
        with g.indented():
            _emit_region_into(g, region, outs)
    if op.case_regions:
        g.emit("else:")
        with g.indented():
            _emit_region_into(g, op.default_region, outs)
    else:
        _emit_region_into(g, op.default_region, outs)
