"""Row-chain kernels: a chain of elementwise generics and last-axis reductions as one
loop over rows (`shardc.runtime.codegen.row_fusion` finds the chains; `kernels/rows_run.py`
runs them).

Softmax, layernorm, cross-entropy and the attention backward's `p (dp - sum(p dp))`
are each a few full-array passes on the fused elementwise path: a reduction ends every
chain, and what follows reads the array again from memory. Here one compiled kernel
runs, for each row, pass after pass over that row alone: a reduction's result feeds
the next pass of the same row, and what a later pass reads again (or what a
reduction reduces) sits in a buffer of one row's length, in cache. Each input row is
read from memory once and each yielded array written once.

The space is (rows..., n): a member is *full* (all-parallel over it, results through
the identity), a *reduction* (parallel over the rows, reducing the last loop, its
result read per row) or a *row* op (all-parallel over the rows, or over rows x 1 as
torch-mlir's keepdim tensors are). Operands outside the chain are read through their
maps as projections (a [t, u] causal bias in a [b, h, t, u] chain), a constant 0 for a
unit dimension. Body statements use `kernels.fused`'s templates (numbered names only,
constants as arguments, never IR text); exp and tanh over float32 are vecmath's, as
in the fused kernels. Anything else returns None: the chain's own ops run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, TensorType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr

from shardc.runtime.codegen.kernels.fused import BF16_BITS, BINARY, CAST, CMPF, CMPI, DTYPES, ERF, FROM_BF16, TO_BF16, UNARY, VEC32, is_bf16, kernel_dtype
from shardc.runtime.execute.kernels.fused_run import check_kernel_source
from shardc.runtime.execute.kernels.rows_run import RowKernel
from shardc.ir.segments import ins_outs

_LIBM: dict[type[Operation], str] = {mathd.ExpOp: "math.exp({0})", mathd.LogOp: "math.log({0})", mathd.TanhOp: "math.tanh({0})"}
_COMBINE: dict[type[Operation], str] = {arith.AddfOp: "rsum", arith.MaximumfOp: "rmax", arith.MinimumfOp: "rmin"}
_BODY_OPS: tuple[type[Operation], ...] = (
    *BINARY, *UNARY, *_LIBM, mathd.ErfOp, *CAST, arith.CmpfOp, arith.CmpiOp, arith.SelectOp, arith.ConstantOp,
)

FULL, RED, ROW, ROW1 = "full", "reduction", "row", "row1"

_CTOR: dict[str, str] = {**DTYPES, BF16_BITS: "np.uint16"}


def static_shape(v: SSAValue) -> tuple[int, ...] | None:
    t = v.type
    if not isinstance(t, TensorType):
        return None
    shape = tuple(t.get_shape())
    return shape if all(s >= 0 for s in shape) else None


def classify(op: Operation, space: tuple[int, ...]) -> str | None:
    """What `op` is in the row space `space` (rows..., n): FULL, RED, ROW, ROW1 or None."""
    if not isinstance(op, GenericOp) or not op.results or op.attributes.get("shardc.inplace") or op.attributes.get("shardc.inplace_init"):
        return None
    k = len(space) - 1
    iters = [t.data for t in op.iterator_types.data]  # pyright: ignore[reportUnknownMemberType]
    if len(iters) not in (k, k + 1):
        return None
    inputs, outputs = ins_outs(op)
    outs = [static_shape(v) for v in outputs]
    if any(o is None or len(o) not in (k, k + 1) for o in outs):
        return None
    maps = [m.data for m in op.indexing_maps.data]
    n_in = len(inputs)
    body = list(op.body.block.ops)
    comb = body[-1].operands[0].owner if len(body[-1].operands) == 1 else None
    if any(not isinstance(o, _BODY_OPS) for o in body[:-1] if o is not comb or type(o) not in _COMBINE):
        return None  # (a reduction's combiner is checked as one below)
    rows = space[:-1]
    ident = [AffineDimExpr(d) for d in range(len(iters))]
    if all(t == IteratorType.PARALLEL for t in iters):
        if any(not isinstance(o, _BODY_OPS) for o in body[:-1]):
            return None
        if len(iters) == k + 1 and all(o == space for o in outs) and all(list(m.results) == ident for m in maps[n_in:]):
            return FULL
        if len(iters) == k and all(o == rows for o in outs) and all(list(m.results) == ident for m in maps[n_in:]):
            return ROW
        if len(iters) == k + 1 and all(o == (*rows, 1) for o in outs) and all(list(m.results) == ident for m in maps[n_in:]):
            return ROW1
        return None
    if len(iters) != k + 1 or iters[-1] != IteratorType.REDUCTION or any(t != IteratorType.PARALLEL for t in iters[:-1]):
        return None
    if len(outputs) != 1 or outs[0] not in (rows, (*rows, 1)) or type(comb) not in _COMBINE:
        return None
    row_map = ident[:k] if outs[0] == rows else [*ident[:k], AffineConstantExpr(0)]
    if list(maps[n_in].results) != row_map:
        return None
    # every input full, through the identity (a matmul's operands are projections)
    if any(static_shape(v) != space or list(m.results) != ident for v, m in zip(inputs, maps[:n_in])):
        return None
    return RED


@dataclass
class _Val:
    space: str  # "full" | "row" | "const"
    level: int
    name: str
    buf: int | None = None  # a per-row buffer holding it, for later passes and reductions


@dataclass
class _Stmt:
    space: str
    level: int
    name: str
    text: str  # a format string over operand refs
    operands: list[SSAValue]
    dtype: str
    stores: list[str] = field(default_factory=list)  # where it is also stored: "t0[j]", "w1[i0, i1, j]"
    reduce: tuple[str, int, str] | None = None  # (helper, buffer, init name) for a reduction


def build_row_kernel(
    members: Sequence[Operation], space: tuple[int, ...], inputs: Sequence[SSAValue], yields: Sequence[SSAValue], kinds: Sequence[str | None] | None = None
) -> RowKernel | None:
    """The kernel computing `yields` (results of `members`, in block order) from
    `inputs` (the values from outside the chain that the members read), or None;
    `kinds`: the members' `classify` when known."""
    k = len(space) - 1
    rows = space[:-1]
    counter = iter(range(1 << 30))
    params: list[tuple[str, object]] = []
    param_of: dict[SSAValue, int] = {}
    shapes: dict[int, tuple[int, ...]] = {}
    pre: list[str] = []
    info: dict[SSAValue, _Val] = {}
    stmts: list[_Stmt] = []
    row_loads: list[str] = []
    n_bufs = [0]
    buf_dtype: dict[int, str] = {}

    def fresh() -> str:
        return f"x{next(counter)}"

    def dt_name(t: object) -> str | None:
        dt = kernel_dtype(t)  # type: ignore[arg-type]
        return dt.name if dt is not None and dt.name in DTYPES else None

    def result_dt(o: Operation, t: object) -> str | None:
        """`dt_name`, and `BF16_BITS` for a float32 -> bf16 `arith.truncf`."""
        if isinstance(o, arith.TruncFOp) and is_bf16(t) and dt_name(o.operands[0].type) == "float32":
            return BF16_BITS
        return dt_name(t)

    def const(op: Operation) -> _Val | None:
        val, dn = getattr(op, "value", None), dt_name(op.results[0].type)
        if not isinstance(val, FloatAttr | IntegerAttr) or dn is None:
            return None
        q = len(params)
        params.append(("const", np.asarray(val.value.data, dtype=dn)[()]))
        x = fresh()
        pre.append(f"{x} = q{q}")
        return _Val("const", 0, x)

    def param(v: SSAValue) -> int | None:
        q = param_of.get(v)
        if q is None:
            if v not in inputs:
                return None
            q = param_of[v] = len(params)
            if isinstance(v.type, TensorType):
                if (shape := static_shape(v)) is None:
                    return None
                params.append(("array", inputs.index(v)))
                shapes[inputs.index(v)] = shape
            else:
                params.append(("scalar", inputs.index(v)))
        return q

    def index(expr: object, kind: str) -> str | None:
        if isinstance(expr, AffineDimExpr):
            d = expr.position
            if d < k:
                return f"i{d}"
            return "0" if kind == ROW1 else "j"
        if isinstance(expr, AffineConstantExpr) and expr.value == 0:
            return "0"
        return None

    def bind_operand(arg: SSAValue, v: SSAValue, amap: object, kind: str) -> bool:
        idx = [index(e, kind) for e in amap.results]  # type: ignore[attr-defined]
        if any(i is None for i in idx):
            return False
        if v in info:  # a value of the chain
            src = info[v]
            full_ident = idx == [*(f"i{d}" for d in range(k)), "j"]
            row_ident = idx[:k] == [f"i{d}" for d in range(k)] and idx[k:] in ([], ["0"])
            if full_ident if src.space == "full" else row_ident or full_ident:  # (a unit row: read per element)
                info[arg] = src
                return True
            return False
        dn = dt_name(arg.type)
        if dn is None:
            return False
        q = param(v)
        if q is None:
            return False
        if not isinstance(v.type, TensorType):
            x = fresh()
            pre.append(f"{x} = {DTYPES[dn]}(q{q})")
            info[arg] = _Val("const", 0, x)
            return True
        if len(idx) != len(v.type.get_shape()):
            return False
        at = f"q{q}[{', '.join(idx)}]" if idx else f"q{q}[()]"
        if "j" in idx:
            info[arg] = _Val("full", 0, at)  # read in place wherever used: no load statement
        else:
            x = fresh()
            row_loads.append(f"{x} = {at}")
            info[arg] = _Val("row", 0, x)
        return True

    def body(ops: list[Operation], kind: str) -> bool:
        for o in ops:
            if len(o.results) != 1:
                return False
            res = o.results[0]
            dn = result_dt(o, res.type)
            if dn is None:
                return False
            for v in o.operands:
                if v not in info:
                    c = v.owner
                    if not isinstance(c, arith.ConstantOp) or (got := const(c)) is None:
                        return False
                    info[v] = got
            if isinstance(o, arith.ConstantOp):
                got = const(o)
                if got is None:
                    return False
                info[res] = got
                continue
            srcs = [info[v] for v in o.operands]
            space_ = "full" if any(s.space == "full" for s in srcs) else "row" if any(s.space == "row" for s in srcs) else "const"
            if type(o) in BINARY:
                text = BINARY[type(o)]
            elif type(o) in UNARY:
                text = UNARY[type(o)]
            elif type(o) in VEC32 and dn == "float32" and space_ == "full":
                text = VEC32[type(o)]
            elif type(o) in _LIBM:
                text = _LIBM[type(o)]
            elif isinstance(o, mathd.ErfOp) and dn in ERF:
                text = ERF[dn]
            elif dn == BF16_BITS:
                text = TO_BF16
            elif isinstance(o, arith.ExtFOp) and is_bf16(o.operands[0].type):
                if dn != "float32":
                    return False
                text = FROM_BF16
            elif any(is_bf16(v.type) for v in o.operands):
                return False
            elif isinstance(o, CAST):
                text = "{0}"
            elif isinstance(o, arith.CmpfOp) and o.predicate.value.data in CMPF:
                text = CMPF[o.predicate.value.data]
            elif isinstance(o, arith.CmpiOp) and o.predicate.value.data in CMPI:
                text = CMPI[o.predicate.value.data]
            elif isinstance(o, arith.SelectOp):
                text = "({1} if {0} else {2})"
            else:
                return False
            x = fresh()
            if space_ == "const":
                pre.append(f"{x} = {_CTOR[dn]}({text.format(*(s.name for s in srcs))})")
                info[res] = _Val("const", 0, x)
                continue
            # (a statement of a full body on row values alone runs once per row: a
            # causal softmax's log of the row sum, in the backward)
            level = max(s.level for s in srcs)
            stmts.append(_Stmt(space_, level, x, text, list(o.operands), dn))
            info[res] = _Val(space_, level, x)
        return True

    def as_full(v: SSAValue, dn: str) -> _Val:
        """`v` as a full statement (a row or constant value yielded by a full op)."""
        src = info[v]
        if src.space == "full" and not src.name.startswith("q"):
            return src
        x = fresh()
        stmts.append(_Stmt("full", src.level, x, "{0}", [v], dn))
        return _Val("full", src.level, x)

    yield_of: dict[SSAValue, _Val] = {}
    for t, op in enumerate(members):
        kind = classify(op, space) if kinds is None else kinds[t]
        if kind is None:
            return None
        assert isinstance(op, GenericOp)
        block = op.body.block
        op_ins, op_outs = ins_outs(op)
        n_in = len(op_ins)
        maps = [m.data for m in op.indexing_maps.data]
        for arg, v, m in zip(block.args[:n_in], op_ins, maps[:n_in]):
            if arg.first_use is not None and not bind_operand(arg, v, m, kind):
                return None
        term = block.last_op
        assert isinstance(term, YieldOp)
        if kind == RED:
            acc = block.args[n_in]
            y = term.operands[0]
            comb = y.owner
            if not isinstance(comb, Operation) or type(comb) not in _COMBINE or comb.parent is not block or acc.uses.get_length() != 1:
                return None
            e = comb.operands[1] if comb.operands[0] is acc else comb.operands[0] if comb.operands[1] is acc else None
            if e is None or e is acc:
                return None
            init = op_outs[0]
            if init in info or not bind_operand(acc, init, maps[n_in], ROW):
                return None
            if info[acc].space != "row":
                return None
            if not body([o for o in list(block.ops)[:-1] if o is not comb], kind):
                return None
            dn = dt_name(y.type)
            if dn is None:
                return None
            ev = as_full(e, dn) if info[e].space != "full" or info[e].name.startswith("q") else info[e]
            if ev.buf is None:
                ev.buf = n_bufs[0]
                buf_dtype[ev.buf] = dn
                n_bufs[0] += 1
                _mark(stmts, ev.name, f"t{ev.buf}[j]")
            helper = _COMBINE[type(comb)]
            if helper == "rsum":
                helper = "rsum32" if dn == "float32" else "rsum64"
            x = fresh()
            stmts.append(_Stmt("row", ev.level + 1, x, "", [], dn, reduce=(helper, ev.buf, info[acc].name)))
            info[op.results[0]] = yield_of[op.results[0]] = _Val("row", ev.level + 1, x)
            continue
        if not body(list(block.ops)[:-1], kind):
            return None
        for r, y in zip(op.results, term.operands):
            if y not in info:
                return None
            dn = BF16_BITS if is_bf16(y.type) else dt_name(y.type)
            if dn is None or (dn == BF16_BITS and (kind != FULL or info[y].space != "full")):
                return None
            if kind == FULL:
                yield_of[r] = as_full(y, dn)
            else:
                src = info[y]
                if src.space == "const":
                    x = fresh()
                    stmts.append(_Stmt("row", 0, x, "{0}", [y], dn))
                    src = _Val("row", 0, x)
                yield_of[r] = src
        # results of this op read by later members
        for r in op.results:
            info[r] = yield_of[r]
    # a full value read in a later pass than its own lives in a row buffer
    by_name = {s.name: s for s in stmts}
    for s in stmts:
        for v in s.operands:
            src = info[v]
            if src.space == "full" and src.level < s.level and not src.name.startswith("q") and src.buf is None:
                src.buf = n_bufs[0]
                buf_dtype[src.buf] = by_name[src.name].dtype
                n_bufs[0] += 1
                _mark(stmts, src.name, f"t{src.buf}[j]")
    outputs: list[tuple[tuple[int, ...], str]] = []
    row_stores: list[str] = []
    for w, y in enumerate(yields):
        src = yield_of.get(y)
        shape = static_shape(y)
        et = y.type.get_element_type() if isinstance(y.type, TensorType) else None  # type: ignore[attr-defined]
        dn = None if et is None else BF16_BITS if is_bf16(et) else dt_name(et)
        if src is None or shape is None or dn is None:
            return None
        outputs.append((shape, dn))
        if shape == space and src.space == "full":
            _mark(stmts, src.name, f"w{w}[{', '.join([*(f'i{d}' for d in range(k)), 'j'])}]")
        elif shape in (rows, (*rows, 1)) and src.space == "row":
            idx = [f"i{d}" for d in range(k)] + (["0"] if len(shape) == k + 1 else [])
            row_stores.append(f"w{w}[{', '.join(idx)}] = {src.name}")
        else:
            return None
    source = _render(stmts, info, space, pre, row_loads, row_stores, buf_dtype, len(params), len(yields))
    if source is None:
        return None
    check_kernel_source(source)
    return RowKernel(source, tuple(space), params, outputs, shapes)


def _mark(stmts: list[_Stmt], name: str, target: str) -> None:
    for s in stmts:
        if s.name == name:
            if target not in s.stores:
                s.stores.append(target)
            return


def _render(
    stmts: list[_Stmt], info: dict[SSAValue, _Val], space: tuple[int, ...], pre: list[str], row_loads: list[str],
    row_stores: list[str], buf_dtype: dict[int, str], n_params: int, n_outs: int,
) -> str | None:
    k = len(space) - 1
    full_levels = [s.level for s in stmts if s.space == "full"]
    if not full_levels or not any(s.reduce for s in stmts):
        return None
    n_pass = max(full_levels) + 1

    def ref(v: SSAValue, level: int) -> str:
        src = info[v]
        if src.space == "full" and not src.name.startswith("q") and src.level < level:
            return f"t{src.buf}[j]"
        return src.name

    # float32 max/min reductions run in the pass producing what they reduce (`_keyed`)
    keyed: dict[str, list[_Stmt]] = {}
    for s in stmts:
        if s.reduce is not None and s.reduce[0] in _KEYED and s.dtype == "float32":
            src = next((t for t in stmts if t.space == "full" and f"t{s.reduce[1]}[j]" in t.stores), None)
            if src is not None and src.level == s.level - 1:
                keyed.setdefault(src.name, []).append(s)
    folded = {id(r) for rs in keyed.values() for r in rs}
    sig = ["n", *(f"q{q}" for q in range(n_params)), *(f"w{w}" for w in range(n_outs))]
    lines = [f"def kernel({', '.join(sig)}):", *(f"    {p}" for p in pre)]
    lines += [f"    t{b} = np.empty(n[{k}], {_CTOR[d]})" for b, d in sorted(buf_dtype.items())]
    for d in range(k):
        lines.append("    " * (d + 1) + f"for i{d} in range(n[{d}]):")
    ind = "    " * (k + 1)
    lines += [ind + s for s in row_loads]

    def row_stmt(s: _Stmt) -> list[str]:
        if s.reduce is not None:
            helper, buf, init = s.reduce
            if id(s) in folded:
                return _keyed(s.name, helper, "result")
            return [f"{s.name} = {_CTOR[s.dtype]}({helper}(t{buf}, n[{k}], {init}))"]
        return [f"{s.name} = {_CTOR[s.dtype]}({s.text.format(*(ref(v, s.level) for v in s.operands))})"]

    for p in range(n_pass + 1):
        lines += [ind + line for s in stmts if s.space == "row" and s.level == p for line in row_stmt(s)]
        if p == n_pass:
            break
        body = [s for s in stmts if s.space == "full" and s.level == p]
        if not body:
            continue
        lines += [ind + line for s in body for r in keyed.get(s.name, ()) for line in _keyed(r.name, r.reduce[0], "init", r.reduce[2])]  # type: ignore[index]
        lines.append(ind + f"for j in range(n[{k}]):")
        for s in body:
            lines.append(ind + "    " + f"{s.name} = {_CTOR[s.dtype]}({s.text.format(*(ref(v, p) for v in s.operands))})")
            lines += [ind + "    " + f"{t} = {s.name}" for t in s.stores]
            lines += [ind + "    " + line for r in keyed.get(s.name, ()) for line in _keyed(r.name, r.reduce[0], "step", s.name)]  # type: ignore[index]
    lines += [ind + s for s in row_stores]
    return "\n".join(lines) + "\n"


_KEYED = ("rmax", "rmin")
_FLIP = "np.int32({0} ^ (({0} >> np.int32(31)) & np.int32(2147483647)))"
"""A float32's bits as an int32 ordered as the floats are (-0 below +0; NaNs with the
sign bit below -inf, the others above +inf), and back: the map is its own inverse."""


def _keyed(name: str, helper: str, part: str, value: str = "") -> list[str]:
    """Lines of a float32 max (`rmax`) or min (`rmin`) over a row, computed in the pass
    that produces the row (`part` "init" before its loop from the reduction's init
    `value`, "step" in it on the element `value`, "result" after it), as the integer
    max and min of `_FLIP`'s keys: LLVM vectorizes integer max and min but no float one
    without fast-math (a softmax's row max was a scalar loop of 8 running maxima in a
    helper: the GPT step's forward softmax 0.66 -> 0.52 ms a call, the same exp, measured
    alone on its recorded operands under load). Both extremes are kept, so a NaN of
    either sign is seen (and the result is NaN, as arith.maximumf/minimumf's); -0 and
    +0 are ordered, as those ops order them. float64 keeps the helpers."""
    k, hi, lo = f"{name}k", f"{name}h", f"{name}l"
    if part == "init":
        return [f"{k} = np.float32({value}).view(np.int32)", f"{k} = {_FLIP.format(k)}", f"{hi} = {k}", f"{lo} = {k}"]
    if part == "step":
        return [
            f"{k} = np.float32({value}).view(np.int32)",
            f"{k} = {_FLIP.format(k)}",
            f"{hi} = {k} if {k} > {hi} else {hi}",
            f"{lo} = {k} if {k} < {lo} else {lo}",
        ]
    key = hi if helper == "rmax" else lo
    return [
        f"if {hi} > np.int32(2139095040) or {lo} < np.int32(-2139095041):",  # the keys of +inf and -inf
        f"    {name} = np.float32(np.nan)",
        "else:",
        f"    {name} = {_FLIP.format(key)}.view(np.float32)",
    ]


__all__ = ["FULL", "RED", "ROW", "ROW1", "build_row_kernel", "classify", "static_shape"]
