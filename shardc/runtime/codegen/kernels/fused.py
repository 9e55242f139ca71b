"""Fused elementwise kernels: a whole elementwise body in a few passes over memory.

The numpy path evaluates a fused generic's body (`shardc.runtime.codegen.fusion`) one ufunc
call per op, each reading and writing the whole array. Here the body becomes loop nests
compiled by numba: each element is loaded once per nest, the chain runs in registers,
each result is stored once. exp and tanh of float32 arrays stay in the nest as
`kernels.vecmath`'s arithmetic-only versions, which LLVM vectorizes (a GELU's tanh chain
in one nest 1.4x faster than split around numpy's tanh, measured); elsewhere (log,
float64) nests are split where the body applies one to an array: numba would call libm
per element (5-40 ns, measured) where numpy's SIMD loops take 1.5 ns, so those run as a
numpy ufunc in place between two nests (in place over a temporary read for the last
time). A nest never writes over an array it reads: aliased, LLVM's
runtime alias check fails and the loop runs unvectorized. Broadcast arguments are
passed unbroadcast and read at index 0 along their extent-1 loops (a stride-0 view
defeats vectorization too); those broadcast along the innermost loop are read once per
row, with what depends only on them.
Chosen by measurement on the GPT step's chains (GELU and its derivative, layernorm,
softmax with the causal bias, residual adds, AdamW): a GELU-derivative chain ran 4.6x
faster than numpy with numba, 1.2x with numexpr (blocked evaluation), so numexpr is
not used; the step's elementwise time fell from about 100 ms to 38 ms.

The kernel's source follows the IR-is-data rule of `shardc.runtime.codegen.codegen_safe` at its
strictest: it is built from the fixed templates below, keyed by op class, over names
that are only numbering (`q3` arguments, `x7` values, `r1`/`w0` temporaries); constants
and scalar operands are kernel arguments, never text. A body with any op outside the
whitelist (a gather, an assert, `linalg.index`, a value from outside the body other
than a scalar constant) keeps the numpy path, as does a body
where no pass would be saved.

Kernels compile lazily, on the first call with at least `MIN_ELEMENTS` elements (small
arrays, and so most tests, never pay numba's compile time), and numba caches the
machine code on disk beside the kernel's source in a directory only the user can read
or write (`cache_dir`); the helpers kernels call (exp32, tanh32, erf32) are cached there
the same way. `SHARDC_KERNELS=numpy`, checked at every call, or numba not
installed (the `[fast]` extra) keeps today's numpy path everywhere.

What a process pays, measured on the GPT step (n_layer 12, n_embd 768) under
`mpiexec -n 2`: importing numba 0.14-0.22 s, then on the first kernel loaded or compiled
numba's CPU target, 0.32-0.45 s (its registries; importing scipy.linalg, for numba's BLAS
check, is 0.17 s of it); after that a cached kernel loads in 2-9 ms (15 signatures of 14
kernels: 0.05 s in all), so fewer or larger kernels would not pay. Cold, a kernel
compiles in 0.12-0.3 s; the AdamW group's took 6.4 s until it took tuples of
`horizontal.CHUNK` members.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import BFloat16Type, Float32Type, FloatAttr, IntegerAttr, ShapedType
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from shardc.runtime.execute.dtypes import UnsupportedTypeError, np_dtype
from shardc.runtime.execute.kernels.bf16_run import Bf16Results
from shardc.runtime.execute.kernels.fused_run import (  # noqa: F401  (the run time, re-exported)
    MIN_ELEMENTS,
    FusedKernel,
    InplaceUfunc,
    check_kernel_source,
    Nest,
    Stage,
    active_path,
    cache_dir,
    enabled,
    kernel_stats,
)

BINARY: dict[type[Operation], str] = {
    arith.AddfOp: "({0} + {1})",
    arith.SubfOp: "({0} - {1})",
    arith.MulfOp: "({0} * {1})",
    arith.DivfOp: "({0} / {1})",
}
UNARY: dict[type[Operation], str] = {
    arith.NegfOp: "(-{0})",
    mathd.SqrtOp: "math.sqrt({0})",
    mathd.RsqrtOp: "(1.0 / math.sqrt({0}))",
    mathd.AbsFOp: "abs({0})",
}
# Per element, numba calls libm's scalar exp/tanh (5-40 ns each, measured) where numpy
# runs SIMD loops (1.5 ns): over arrays these are a stage of their own, a numpy ufunc
# between two loop nests; on loop-invariant scalars they are computed once, in place.
_UFUNC: dict[type[Operation], Callable[..., np.ndarray]] = {mathd.ExpOp: np.exp, mathd.LogOp: np.log, mathd.TanhOp: np.tanh}
# ... except over float32, where these vectorizable versions keep them in the nest.
VEC32: dict[type[Operation], str] = {mathd.ExpOp: "exp32({0})", mathd.TanhOp: "tanh32({0})"}
_SCALAR: dict[type[Operation], str] = {
    mathd.ExpOp: "math.exp({0})", mathd.LogOp: "math.log({0})", mathd.TanhOp: "math.tanh({0})",
    mathd.PowFOp: "({0} ** {1})",
}
# erf over f32 arrays: the numpy path's rational fit (kernels/math.py), the same float64
# operations in the same order, so results are the same; it is arithmetic only, no libm.
ERF: dict[str, str] = {"float32": "erf32({0})", "float64": "math.erf({0})"}
CAST: tuple[type[Operation], ...] = (arith.SIToFPOp, arith.ExtFOp, arith.TruncFOp)
# arith.cmpf predicates: ordered ones are false on NaN as Python's comparisons are;
# unordered ones are the negation of the opposite ordered one.
CMPF: dict[int, str] = {
    1: "({0} == {1})", 2: "({0} > {1})", 3: "({0} >= {1})", 4: "({0} < {1})", 5: "({0} <= {1})",
    6: "(({0} < {1}) or ({0} > {1}))", 8: "(not (({0} < {1}) or ({0} > {1})))",
    9: "(not ({0} <= {1}))", 10: "(not ({0} < {1}))", 11: "(not ({0} >= {1}))", 12: "(not ({0} > {1}))", 13: "({0} != {1})",
}
CMPI: dict[int, str] = {0: "({0} == {1})", 1: "({0} != {1})", 2: "({0} < {1})", 3: "({0} <= {1})", 4: "({0} > {1})", 5: "({0} >= {1})"}
# The element types a kernel handles, as the numba/numpy constructor named in its source.
DTYPES: dict[str, str] = {"float32": "np.float32", "float64": "np.float64", "int32": "np.int32", "int64": "np.int64", "bool": "np.bool_"}


BF16_BITS = "uint16"
"""A kernel's type of a bf16 value: its 16 bits (numba has no bf16). An `arith.truncf`
f32 -> bf16 in a body (the mixed-precision pass's cast of a product's operand, fused
with the ops that make the value) stores them into a uint16 array that is then viewed
as bf16 (`bf16_run.Bf16Results`, `row_fusion`'s emitter): the cast costs no pass of its
own over the array. A bf16 input that the body only widens (`arith.extf` to float32: a
product's epilogue saved in bf16 for the backward) is passed as a uint16 view of its
bits and widened on load (`FusedKernel`'s "bits" arguments): the widening costs no
pass either. Other bf16 inputs and arithmetic on bf16 are not taken (the numpy path)."""

TO_BF16 = (
    "np.uint32(((np.float32({0}).view(np.uint32) >> np.uint32(16)) | np.uint32(64)) if (np.float32({0}).view(np.uint32) & np.uint32(2147483647)) > np.uint32(2139095040)"
    " else ((np.float32({0}).view(np.uint32) + np.uint32(32767) + ((np.float32({0}).view(np.uint32) >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)))"
)
"""float32 -> bf16 bits, rounded to nearest even, a NaN kept a quiet NaN of its sign:
`bf16_cast.round_to_bfloat16`'s arithmetic. Both arms are uint32 (numba widens the
rounding sum to uint64): with arms of two types the select stayed scalar and a GELU
nest storing its bf16 copy ran 1.5x slower than with them alike (0.75 vs 0.57 ms on
2M elements, one process)."""

FROM_BF16 = "np.uint32(np.uint32({0}) << np.uint32(16)).view(np.float32)"
"""bf16 bits -> float32 (exact)."""


def widened_only(arg: SSAValue) -> bool:
    """Whether every use of `arg` widens it to float32 (`arith.extf`): the one way a bf16
    input enters a fused kernel (`BF16_BITS`), and so the one way fusion lets it into a
    fused op (`fusion._bf16_only_cast`)."""
    return all(isinstance(u.operation, arith.ExtFOp) and isinstance(u.operation.result.type, Float32Type) for u in arg.uses)


def is_bf16(t: Attribute) -> bool:
    """Whether `t` is bf16 or a shaped type of bf16."""
    et = t.get_element_type() if isinstance(t, ShapedType) else t  # type: ignore[attr-defined]
    return isinstance(et, BFloat16Type)


_NAMES: dict[np.dtype, str] = {}


def _name(dt: np.dtype) -> str:
    """`dt.name`, remembered: numpy computes it in Python on every read (5,000 reads
    building the GPT step's kernels at n_layer 4)."""
    name = _NAMES.get(dt)
    if name is None:
        name = _NAMES[dt] = dt.name
    return name


def kernel_dtype(t: Attribute) -> np.dtype | None:
    """The runtime's dtype of `t` (`np_dtype`), None where it has none; callers keep only
    the `DTYPES` a kernel handles."""
    try:
        return np_dtype(t)
    except UnsupportedTypeError:
        return None


# One op of these over arrays, written over a donated input: `InplaceUfunc`.
_INPLACE_UFUNC: dict[type[Operation], np.ufunc] = {arith.AddfOp: np.add, arith.SubfOp: np.subtract, arith.MulfOp: np.multiply, arith.DivfOp: np.divide}


def _inplace_ufunc(block: Block, n_ins: int, yields: Sequence[SSAValue], arg_shaped: Sequence[bool], inplace: Mapping[int, int]) -> InplaceUfunc | None:
    """The body `yield op(a, b)` of one binary float op over array inputs, its result
    written over input `inplace[0]`: one ufunc call into that input."""
    ops = list(block.ops)
    if len(ops) != 2 or len(yields) != 1 or list(inplace) != [0]:
        return None
    op = ops[0]
    ufunc = _INPLACE_UFUNC.get(type(op))
    if ufunc is None or yields[0] is not op.results[0]:
        return None
    k = inplace[0]
    args = list(block.args)
    operands = []
    for o in op.operands:
        if not isinstance(o, BlockArgument) or o.block is not block or o.index >= n_ins or not arg_shaped[o.index]:
            return None
        operands.append(o.index)
    if k not in operands or not arg_shaped[k] or args[k].type != op.results[0].type:
        return None
    return InplaceUfunc(ufunc, tuple(operands), k)


def build_kernel(
    block: Block, n_ins: int, yields: Sequence[SSAValue], arg_shaped: Sequence[bool], n_loops: int, inplace: Mapping[int, int] | None = None
) -> FusedKernel | InplaceUfunc | None:
    """The passes for an all-parallel body yielding `yields`, or None when some op is
    off the whitelist or the passes would not be fewer than numpy's one per op.
    `arg_shaped[k]`: block argument k is an array. `inplace` maps a yield to the input
    block argument whose array it overwrites (a donated buffer, `shardc.runtime.codegen.donation`):
    the nest computing it stores into that same kernel argument (`q[i] = f(q[i], ...)`,
    one argument read and written, which LLVM vectorises; an output aliasing a distinct
    argument would not), and None is returned unless no later pass reads the argument.
    A lone binary op written in place is one numpy ufunc call (`InplaceUfunc`)."""
    inplace = dict(inplace or {})
    if n_loops == 0 or not yields:
        return None
    if inplace and (one := _inplace_ufunc(block, n_ins, yields, arg_shaped, inplace)) is not None:
        return one
    names: dict[SSAValue, str] = {}
    varying: set[SSAValue] = set()
    params: list[tuple[str, object]] = []
    param_of: dict[SSAValue, int] = {}  # array block argument -> its kernel argument
    counter = iter(range(1 << 30))
    pre: list[str] = []  # loop-invariant statements, in every kernel before its loops

    def constant(op: Operation) -> bool:
        val, dt = getattr(op, "value", None), kernel_dtype(op.results[0].type)
        if not isinstance(val, FloatAttr | IntegerAttr) or dt is None or _name(dt) not in DTYPES:
            return False
        q, x = len(params), f"x{next(counter)}"
        params.append(("const", np.asarray(val.value.data, dtype=dt)[()]))
        pre.append(f"{x} = q{q}")
        names[op.results[0]] = x
        return True

    bits: set[SSAValue] = set()  # bf16 values, as their bits (`BF16_BITS`)
    for k, arg in enumerate(block.args):
        if arg.first_use is None:
            continue
        if arg_shaped[k] and k < n_ins and is_bf16(arg.type) and k not in inplace.values():
            if not widened_only(arg):
                return None
            q, x = len(params), f"x{next(counter)}"
            names[arg] = x
            params.append(("bits", k))
            param_of[arg] = q
            varying.add(arg)
            bits.add(arg)
            continue
        dt = kernel_dtype(arg.type)
        if dt is None or _name(dt) not in DTYPES:
            return None
        q, x = len(params), f"x{next(counter)}"
        names[arg] = x
        if arg_shaped[k]:
            params.append(("array", k))
            param_of[arg] = q
            varying.add(arg)
        else:
            params.append(("scalar", k))
            pre.append(f"{x} = {DTYPES[_name(dt)]}(q{q})")
    # Stages in order: ("k", [(result, statement, operands)]) or ("u", op).
    stages: list[tuple[str, object]] = []
    n_varying = 0

    def place(res: SSAValue, stmt: str, operands: list[SSAValue], vary: bool) -> int:
        """`stmt` computing `res`: before the loop when nothing it reads varies, else in the
        current kernel stage; 1 when `res` varies (counted by the caller)."""
        if not vary:
            pre.append(stmt)
            return 0
        varying.add(res)
        if not stages or stages[-1][0] != "k":
            stages.append(("k", []))
        stages[-1][1].append((res, stmt, operands))  # type: ignore[union-attr]
        return 1

    for op in list(block.ops)[:-1]:
        if len(op.results) != 1:
            return None
        res = op.results[0]
        operands = list(op.operands)
        if isinstance(op, arith.TruncFOp) and is_bf16(res.type) and _name(kernel_dtype(operands[0].type) or np.dtype(np.bool_)) == "float32":
            if operands[0] not in names:
                return None
            x = names[res] = f"x{next(counter)}"
            bits.add(res)
            n_varying += place(res, f"{x} = np.uint16({TO_BF16.format(names[operands[0]])})", operands, operands[0] in varying)
            continue
        if any(o in bits for o in operands) and not isinstance(op, arith.ExtFOp):
            return None  # arithmetic on bf16: the numpy path
        dt = kernel_dtype(res.type)
        if dt is None or _name(dt) not in DTYPES:
            return None
        for o in operands:
            if o not in names and not (isinstance(o.owner, arith.ConstantOp) and constant(o.owner)):
                return None  # a value from outside the body that is not a scalar constant
        if isinstance(op, arith.ConstantOp):
            if not constant(op):
                return None
            continue
        vary = any(o in varying for o in operands)
        a = [names[o] for o in operands]
        if vary and type(op) in _UFUNC and not (_name(dt) == "float32" and type(op) in VEC32):
            names[res] = f"x{next(counter)}"
            varying.add(res)
            stages.append(("u", op))
            n_varying += 1
            continue
        if type(op) in BINARY:
            expr = BINARY[type(op)].format(*a)
        elif type(op) in UNARY:
            expr = UNARY[type(op)].format(*a)
        elif vary and type(op) in VEC32:  # float32: the cases above took the rest
            expr = VEC32[type(op)].format(*a)
        elif isinstance(op, mathd.ErfOp) and _name(dt) in ERF:
            expr = ERF[_name(dt)].format(*a)
        elif not vary and type(op) in _SCALAR:
            expr = _SCALAR[type(op)].format(*a)
        elif isinstance(op, arith.ExtFOp) and operands[0] in bits:
            if _name(dt) != "float32":
                return None
            expr = FROM_BF16.format(a[0])
        elif isinstance(op, CAST):
            expr = a[0]
        elif isinstance(op, arith.CmpfOp) and op.predicate.value.data in CMPF:
            expr = CMPF[op.predicate.value.data].format(*a)
        elif isinstance(op, arith.CmpiOp) and op.predicate.value.data in CMPI:
            expr = CMPI[op.predicate.value.data].format(*a)
        elif isinstance(op, arith.SelectOp):
            expr = f"({a[1]} if {a[0]} else {a[2]})"
        else:
            return None
        x = names[res] = f"x{next(counter)}"
        n_varying += place(res, f"{x} = {DTYPES[_name(dt)]}({expr})", operands, vary)
    if any(y not in varying for y in yields):
        return None  # a yielded scalar or outside value: rare, numpy broadcasts it
    if len(stages) >= n_varying:
        return None  # no pass saved (a copy, a lone op, exp of a difference)
    # Which values cross stages (or are yielded) and so live in temporary arrays.
    defined: dict[SSAValue, int] = {}
    for t, (kind, what) in enumerate(stages):
        for res in [what.results[0]] if kind == "u" else [r for r, _, _ in what]:  # type: ignore[union-attr,misc]
            defined[res] = t
    last_use: dict[SSAValue, int] = {}
    for t, (kind, what) in enumerate(stages):
        for o in what.operands if kind == "u" else [o for _, _, ops in what for o in ops]:  # type: ignore[union-attr,misc]
            last_use[o] = t
    for y in yields:
        last_use[y] = len(stages)
    slot: dict[SSAValue, int] = {}
    for v, t in defined.items():
        if last_use.get(v, t) > t:
            slot[v] = len(slot)
    into: dict[SSAValue, int] = {}  # in-place yield -> the block argument it overwrites
    for j, k in inplace.items():
        y, arg = yields[j], block.args[k]
        t = defined.get(y)
        if t is None or stages[t][0] != "k" or arg not in param_of or y in into or yields.count(y) != 1:
            return None
        later = [o for kind, what in stages[t + 1 :] for o in (what.operands if kind == "u" else [o for _, _, ops in what for o in ops])]  # type: ignore[union-attr,misc]
        if arg in later:
            return None  # a later pass would read the overwritten value
        into[y] = k
    out_stages: list[Stage] = []
    for t, (kind, what) in enumerate(stages):
        if kind == "u":
            op = what  # type: ignore[assignment]
            src, res = op.operands[0], op.results[0]  # type: ignore[union-attr]
            if res not in slot:
                slot[res] = len(slot)  # a ufunc always writes an array (maybe dead: rare)
            st = Stage(ufunc=_UFUNC[type(op)], writes=[slot[res]], dtypes=[kernel_dtype(res.type)])  # type: ignore[list-item]
            if src in slot:
                st.reads = [slot[src]]
                st.inplace = last_use.get(src) == t and src not in yields
            else:
                st.arg = param_of[src]
            out_stages.append(st)
            continue
        ops = what  # type: ignore[assignment]
        mine = {r for r, _, _ in ops}  # type: ignore[union-attr]
        reads: list[SSAValue] = []
        for _, _, operands in ops:  # type: ignore[union-attr]
            for o in operands:
                if o in varying and o not in mine and o not in reads:
                    reads.append(o)
        over = {r: param_of[block.args[into[r]]] for r, _, _ in ops if r in into}  # type: ignore[union-attr]
        writes = [r for r, _, _ in ops if r in slot and r not in over]  # type: ignore[union-attr]
        sig = [*(f"q{j}" for j in range(len(params))), *(f"r{slot[o]}" for o in reads if o not in param_of), *(f"w{slot[r]}" for r in writes)]
        header = [f"def kernel({', '.join(sig)}):", *(f"    {p}" for p in pre)]
        header.append(f"    n = w{slot[writes[0]]}.shape" if writes else f"    n = q{next(iter(over.values()))}.shape" if over else "    return")
        nest = Nest(
            header,
            n_loops,
            [(names[o], f"q{param_of[o]}", param_of[o]) if o in param_of else (names[o], f"r{slot[o]}", None) for o in reads],
            [(names[r], stmt, [names[o] for o in operands]) for r, stmt, operands in ops],  # type: ignore[union-attr]
            [(f"w{slot[r]}", names[r]) for r in writes] + [(f"q{q}", names[r]) for r, q in over.items()],
        )
        source = nest.render(frozenset())
        check_kernel_source(source)
        every = frozenset((q, d) for q in nest.loaded for d in range(n_loops))
        for q in nest.loaded:  # the unbroadcast variants are checked as the plain one is
            check_kernel_source(nest.render(frozenset(p for p in every if p[0] == q)))
        check_kernel_source(nest.render(every))
        st = Stage(source=source, reads=[slot[o] for o in reads if o not in param_of], writes=[slot[r] for r in writes], dtypes=[np.dtype(BF16_BITS) if r in bits else kernel_dtype(r.type) for r in writes], nest=nest)  # type: ignore[misc]
        st.donated = [(slot[r], q) for r, q in over.items()]
        out_stages.append(st)
    results = [("slot", slot[y]) if y in slot else ("arg", block.args.index(y)) for y in yields]  # type: ignore[arg-type]
    for j, k in inplace.items():
        results[j] = ("arg", k)  # the donated array itself, written by its nest
    donated = frozenset(param_of[block.args[k]] for k in inplace.values())
    kernel = FusedKernel(out_stages, n_loops, params, results, len(slot), donated=donated)  # type: ignore[arg-type]
    if any(y in bits for y in yields):
        if any(y in bits and k in inplace for k, y in enumerate(yields)):
            return None
        return Bf16Results(kernel, tuple(k for k, y in enumerate(yields) if y in bits))  # type: ignore[return-value]
    return kernel


__all__ = ["BF16_BITS", "FROM_BF16", "MIN_ELEMENTS", "TO_BF16", "FusedKernel", "is_bf16", "InplaceUfunc", "active_path", "build_kernel", "cache_dir", "enabled", "kernel_stats", "widened_only"]
