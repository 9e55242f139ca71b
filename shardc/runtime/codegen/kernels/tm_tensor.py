"""tm_tensor.scatter and tm_tensor.scan on numpy.

Scatter: whole-array fancy indexing, no loop over single updates.

The positions of all updates are computed at once (index arrays broadcast over the update
shape). The region decides how they are written: `yield %update` is an assignment
(`out[pos] = upd`), a single commutative-or-ordered arith op of (current, update) a
`ufunc.at` (unbuffered, so repeated positions accumulate; the scatter-add of an
embedding's backward, whole rows, adds the k-th update of every row at once instead:
`add_rows`); any other body is evaluated on whole arrays and assigned, which is exact
only when positions do not repeat, so it needs `unique_indices(true)`.

Scan: a region that is one arith op of (previous, current) is its ufunc's `accumulate`
along the dimension (`np.add.accumulate` is `np.cumsum`; sequential, so the sums are
the scalar definition's, in its order); exclusive scans accumulate the initial
accumulator followed by all but the last input slice. Any other region steps along the
scan dimension with the body evaluated on whole slices.
"""

from __future__ import annotations


import numpy as np
from xdsl.dialects.builtin import i1
from xdsl.ir import Operation

from shardc.dialects.tm_tensor import ScanOp, ScatterOp, YieldOp
from shardc.runtime.codegen.builder import FunctionBuilder, compile_error, register, single_block
from shardc.runtime.codegen.structured import emit_body_fn
from shardc.runtime.execute.kernels.tm_tensor_run import scan_body, scan_ufunc, scatter_assign, scatter_body, scatter_ufunc

# region op (current, update) -> the ufunc whose `.at` applies it in place
_UFUNCS = {
    "arith.addf": np.add,
    "arith.addi": np.add,
    "arith.mulf": np.multiply,
    "arith.muli": np.multiply,
    "arith.maximumf": np.maximum,
    "arith.maxnumf": np.fmax,
    "arith.maxsi": np.maximum,
    "arith.minimumf": np.minimum,
    "arith.minnumf": np.fmin,
    "arith.minsi": np.minimum,
    "arith.ori": np.bitwise_or,
    "arith.andi": np.bitwise_and,
    "arith.xori": np.bitwise_xor,
}
_COMMUTATIVE = {name for name in _UFUNCS}
_ORDERED = {"arith.subf": np.subtract, "arith.subi": np.subtract}  # current - update only


def _combiner(op: ScatterOp) -> tuple[str, object] | None:
    """("assign", None), ("keep", None), ("ufunc", np.ufunc) or None (a general body)."""
    block = single_block(op.region)
    upd, cur = block.args
    term = block.last_op
    assert isinstance(term, YieldOp)
    (y,) = term.operands
    if y is upd:
        return ("assign", None)
    if y is cur:
        return ("keep", None)
    ops = list(block.ops)
    if len(ops) == 2 and ops[0].results and y is ops[0].results[0] and len(ops[0].operands) == 2:
        a, b = ops[0].operands
        name = ops[0].name
        if name in _COMMUTATIVE and {a, b} == {upd, cur}:
            return ("ufunc", _UFUNCS[name])
        if name in _ORDERED and (a, b) == (cur, upd):
            return ("ufunc", _ORDERED[name])
    return None


@register(ScatterOp)
def _scatter(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, ScatterOp)
    if not op.results_:
        raise compile_error(op, "tm_tensor.scatter on memrefs is not supported by the numpy runtime")
    upd, ind, orig = g.vs([op.updates, op.indices, op.original])
    dims = repr(op.dims)
    kind = _combiner(op)
    if kind is None:
        if not op.unique:
            raise compile_error(
                op,
                "tm_tensor.scatter with repeated indices needs a region that is one arith op of "
                "(current, update) or a plain assignment; this region is not supported",
            )
        block = single_block(op.region)
        term = block.last_op
        assert term is not None
        fn = emit_body_fn(g, block, 2, list(term.operands), False)
        g.assign(op, f"{g.const(scatter_body, 'scatter_body')}({fn}, {upd}, {ind}, {orig}, {dims})")
    elif kind[0] == "keep":
        g.bind(op.results[0], orig)
    elif kind[0] == "assign":
        g.assign(op, f"{g.const(scatter_assign, 'scatter_assign')}({upd}, {ind}, {orig}, {dims})")
    else:
        uf = g.const(kind[1], "ufunc")
        g.assign(op, f"{g.const(scatter_ufunc, 'scatter_ufunc')}({uf}, {upd}, {ind}, {orig}, {dims})")


# -- scan ----------------------------------------------------------------------------------


def scan_ufunc_of(op: ScanOp) -> np.ufunc | None:
    """The ufunc whose `accumulate` is `op`'s region (its combiner: commutative ones in
    either order, subtraction as previous - current), or None."""
    combiner = op.combiner()
    if combiner is None or combiner.results[0].type == i1:
        return None  # i1's wrapping and signed orders are not numpy's bool ufuncs'
    if combiner.name in _COMMUTATIVE:
        return _UFUNCS[combiner.name]
    if combiner.name in _ORDERED and tuple(combiner.operands) == tuple(op.region.block.args):
        return _ORDERED[combiner.name]
    return None


@register(ScanOp)
def _scan(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, ScanOp)
    if len(op.results_) != 2:
        raise compile_error(op, "tm_tensor.scan on memrefs is not supported by the numpy runtime")
    x, acc = g.vs([op.input, op.accumulator])
    args = f"{x}, {acc}, {op.dim}, {op.is_inclusive}"
    ufunc = scan_ufunc_of(op)
    if ufunc is not None:
        call = f"{g.const(scan_ufunc, 'scan_ufunc')}({g.const(ufunc, 'ufunc')}, {args})"
    else:
        block = single_block(op.region)
        term = block.last_op
        assert term is not None
        fn = emit_body_fn(g, block, 2, list(term.operands), False)
        call = f"{g.const(scan_body, 'scan_body')}({fn}, {args})"
    out, last = g.res(op, 0), g.res(op, 1)
    g.emit(f"{out}, {last} = {call}")
