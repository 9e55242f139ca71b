"""scf: structured control flow as Python control flow (for/if/while), yields as
assignments to the variables that carry values out of a region."""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.ir import Operation, Region

from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, register, single_block


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


# ---------------------------------------------------------------------------------------
# shardc's scf overlay: forall and parallel, run as sequential loop nests (their
# iterations are independent, so any order gives MLIR's result)
# ---------------------------------------------------------------------------------------

from shardc.dialects import scf as sscf  # noqa: E402
from shardc.dialects import tensor as stensor  # noqa: E402
from shardc.runtime.codegen.kernels._common import mixed, rank_reduction_keep, slice_exprs  # noqa: E402


def _loop_nest(g: FunctionBuilder, lbs: list[str], ubs: list[str], steps: list[str], hints: list[str]) -> list[str]:
    ivs = []
    for lb, ub, st, h in zip(lbs, ubs, steps, hints):
        iv = g.fresh(h or "iv")
        g.emit(f"for {iv} in range({lb}, {ub}, {st}):")
        g.depth += 1
        ivs.append(iv)
    return ivs


@register(sscf.ForallOp)
def _forall(op: Operation, g: FunctionBuilder) -> None:
    """Shared outputs are copied once, then each iteration's parallel_insert_slice
    writes its slice into them in place."""
    assert isinstance(op, sscf.ForallOp)
    rank = op.rank
    ubs = mixed(g, op.staticUpperBound, list(op.dynamicUpperBound))
    lbs = mixed(g, op.staticLowerBound, list(op.dynamicLowerBound)) if len(op.staticLowerBound) else ["0"] * rank
    steps = mixed(g, op.staticStep, list(op.dynamicStep)) if len(op.staticStep) else ["1"] * rank
    block = single_block(op.region)
    outs = [g.res(op, i, vec=False) for i in range(len(op.results))]
    for o, init in zip(outs, g.vs(op.outputs)):
        g.emit(f"{o} = _np.array({init}, copy=True)")
    depth = g.depth
    ivs = _loop_nest(g, lbs, ubs, steps, [a.name_hint or "iv" for a in block.args[:rank]])
    start = len(g.lines)
    g.bind_block_args(block, [*ivs, *outs])
    term = g.emit_block_body(block)
    if not isinstance(term, sscf.InParallelOp):
        raise compile_error(op, "the body must end with scf.forall.in_parallel")
    for ins in single_block(term.region).ops:
        if not isinstance(ins, stensor.ParallelInsertSliceOp):
            raise compile_error(ins, "only tensor.parallel_insert_slice is supported in scf.forall.in_parallel")
        offs = mixed(g, ins.static_offsets, list(ins.offsets))
        sizes = mixed(g, ins.static_sizes, list(ins.sizes))
        strides = mixed(g, ins.static_strides, list(ins.strides))
        src_t = ins.source.type
        src_rank = len(src_t.get_shape())  # type: ignore[attr-defined]
        keep = [True] * len(sizes) if src_rank == len(sizes) else rank_reduction_keep(ins, [int(s) if s.lstrip("-").isdigit() else -1 for s in sizes], list(src_t.get_shape()))  # type: ignore[attr-defined]
        g.emit(f"{g.v(ins.dest)}[{slice_exprs(offs, sizes, strides, keep)}] = {g.v(ins.source)}")
    if len(g.lines) == start:
        g.emit("pass")
    g.depth = depth


@register(sscf.ParallelOp)
def _parallel(op: Operation, g: FunctionBuilder) -> None:
    """Reductions (scf.reduce) fold each iteration's value into an accumulator that
    starts at the init value, in iteration order."""
    assert isinstance(op, sscf.ParallelOp)
    block = single_block(op.body)
    accs = [g.res(op, i, vec=False) for i in range(len(op.results))]
    for a, init in zip(accs, g.vs(op.initVals)):
        g.emit(f"{a} = {init}")
    depth = g.depth
    ivs = _loop_nest(g, g.vs(op.lowerBound), g.vs(op.upperBound), g.vs(op.step), [a.name_hint or "iv" for a in block.args])
    g.bind_block_args(block, ivs)
    term = g.emit_block_body(block)
    if not isinstance(term, scf.ReduceOp):
        raise compile_error(op, "the body must end with scf.reduce")
    for acc, value, region in zip(accs, g.vs(term.args), term.reductions):
        rblock = single_block(region)
        g.bind_block_args(rblock, [acc, value])
        ret = g.emit_block_body(rblock)
        g.emit(f"{acc} = {g.v(ret.operands[0])}")
    if not list(block.ops)[:-1] and not accs:
        g.emit("pass")
    g.depth = depth
