"""A small builder for tensor IR written in einsum style.

Every tensor op is a `linalg.generic` whose loops are named by letters, as in
`numpy.einsum`: `fb.einsum("bti,ihd->bthd", x, w)` is a contraction, `fb.map("mul",
"btc,c->btc", x, g)` an elementwise op with broadcasting, `fb.einsum("btc->bt", x)` a sum.
Keeping every op a generic with projected-permutation maps is what lets
sharding-propagation and shard-partition split any named dimension (a weight's `heads`,
the vocabulary, the batch) without a reshape in the way.

The builder records each op on a *tape* (`FuncBuilder.tape`) with its kind, spec and
operands; `shardc.training.autodiff` walks the tape backwards and emits the vector-Jacobian
products with this same builder. Composite layers are built from the primitives;
cross-entropy is differentiated through them, while softmax, layernorm, GELU and
attention are recorded whole with derivatives of their own, which decide what the
backward keeps: attention, and layernorm or GELU followed by a contraction, keep only
what they cannot cheaply make again (q, k, v and a logsumexp; xhat; GELU's input), and
their derivatives recompute the rest in forms CSE cannot merge with the forward's ops.

The embedding lookup is `onehot(tokens, vocab_ids)` followed by a contraction with the
table: the vocabulary ids come in as a function argument (an iota), not from
`linalg.index`, so splitting the vocabulary dimension splits the ids with it and each
shard compares tokens against its own global ids (`linalg.index` would yield local
indices on a split dimension). The causal mask does use `linalg.index`: its dimensions
(query and key positions) are never split.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, func, math, tensor
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
)
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap

from shardc.ir.linalg_build import fill_op, generic_op
from shardc.ir.op_init import create_op

# ---------------------------------------------------------------------------------------
# Values and the tape
# ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class Value:
    """An SSA value of the function being built (a tensor, or a scalar)."""

    ssa: SSAValue
    fb: FuncBuilder

    @property
    def type(self) -> Attribute:
        return self.ssa.type

    @property
    def shape(self) -> tuple[int, ...]:
        t = self.ssa.type
        return tuple(t.get_shape()) if isinstance(t, TensorType) else ()

    @property
    def element_type(self) -> Attribute:
        t = self.ssa.type
        return t.get_element_type() if isinstance(t, TensorType) else t

    @property
    def is_float(self) -> bool:
        return isinstance(self.element_type, AnyFloat)


@dataclass(eq=False)
class Node:
    """One recorded op: `kind` in einsum | map | max | onehot | take | stack, or a layer
    recorded whole with its own derivative (softmax | layernorm | layernorm_einsum |
    gelu | gelu_einsum | attention; `attrs` keeps the intermediates the derivative
    reads)."""

    kind: str
    spec: str
    inputs: tuple[Value, ...]
    output: Value
    attrs: dict[str, object] = field(default_factory=dict)


def parse_spec(spec: str) -> tuple[list[str], str]:
    """`"bti,ihd->bthd"` -> (["bti", "ihd"], "bthd"); an empty entry is a scalar."""
    if "->" not in spec:
        raise ValueError(f"einsum spec {spec!r} lacks '->'")
    lhs, out = spec.split("->")
    ins = lhs.split(",")
    for s in [*ins, out]:
        if len(set(s)) != len(s) or not all(c.isalpha() for c in s):
            raise ValueError(f"einsum spec {spec!r}: each operand needs distinct letters")
    return ins, out


# Scalar body ops of `map`: name -> (arity, emitter(body, args, const) -> value).
BodyFn = Callable[["Body", Sequence[SSAValue]], Sequence[SSAValue]]


def _same_type(cls: type[Operation], *operands: SSAValue) -> Operation:
    """`cls(*operands)` for an op whose result has its first operand's type (arith's and
    math's float ops), made by `create_op`: the same op, without IRDL's argument
    building (the step module's 18,000 ops took 0.4 s of its build that way)."""
    return create_op(cls, operands=operands, result_types=(operands[0].type,))


class Body:
    """Appends scalar ops to a linalg.generic body block."""

    def __init__(self, block: Block, float_type: Attribute):
        self.block = block
        self.ft = float_type

    def add_op(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def const(self, value: float, t: Attribute | None = None) -> SSAValue:
        t = t or self.ft
        attr = FloatAttr(value, t) if isinstance(t, AnyFloat) else IntegerAttr(int(value), t)  # type: ignore[arg-type]
        return self.add_op(create_op(arith.ConstantOp, result_types=(t,), properties={"value": attr}))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(_same_type(arith.AddfOp, a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(_same_type(arith.SubfOp, a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(_same_type(arith.MulfOp, a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(_same_type(arith.DivfOp, a, b))

    def neg(self, a: SSAValue) -> SSAValue:
        return self.add_op(_same_type(arith.NegfOp, a))

    def maximum(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(_same_type(arith.MaximumfOp, a, b))

    def sqrt(self, a: SSAValue) -> SSAValue:
        return self.add_op(_same_type(math.SqrtOp, a))

    def select(self, c: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(arith.SelectOp(c, a, b))

    def index(self, dim: int) -> SSAValue:
        return self.add_op(linalg.IndexOp(dim))

    def cmpi(self, a: SSAValue, b: SSAValue, pred: str) -> SSAValue:
        return self.add_op(arith.CmpiOp(a, b, pred))


MAP_OPS: dict[str, tuple[int, Callable[[Body, Sequence[SSAValue], float], SSAValue]]] = {
    "add": (2, lambda b, a, c: b.add(a[0], a[1])),
    "sub": (2, lambda b, a, c: b.sub(a[0], a[1])),
    "mul": (2, lambda b, a, c: b.mul(a[0], a[1])),
    "div": (2, lambda b, a, c: b.div(a[0], a[1])),
    "neg": (1, lambda b, a, c: b.neg(a[0])),
    "scale": (1, lambda b, a, c: b.mul(a[0], b.const(c))),
    "shift": (1, lambda b, a, c: b.add(a[0], b.const(c))),
    "square": (1, lambda b, a, c: b.mul(a[0], a[0])),
    "exp": (1, lambda b, a, c: b.add_op(_same_type(math.ExpOp, a[0]))),
    "log": (1, lambda b, a, c: b.add_op(_same_type(math.LogOp, a[0]))),
    "tanh": (1, lambda b, a, c: b.add_op(_same_type(math.TanhOp, a[0]))),
    "sqrt": (1, lambda b, a, c: b.sqrt(a[0])),
    "rsqrt": (1, lambda b, a, c: b.add_op(_same_type(math.RsqrtOp, a[0]))),
    "gelu": (1, lambda b, a, c: _gelu_body(b, a[0], _gelu_tanh(b, a[0]))),
    "gelu_grad": (2, lambda b, a, c: _gelu_grad_body(b, a[0], a[1], _gelu_tanh(b, a[1]))),
}


GELU_A = 0.044715
GELU_S = pymath.sqrt(2.0 / pymath.pi)


def _gelu_tanh(b: Body, x: SSAValue) -> SSAValue:
    """tanh(S (x + A x^3)), as x * x^2 then the scalings, in this order."""
    x3 = b.mul(x, b.mul(x, x))
    return b.add_op(_same_type(math.TanhOp, b.mul(b.add(x, b.mul(x3, b.const(GELU_A))), b.const(GELU_S))))


def _gelu_body(b: Body, x: SSAValue, t: SSAValue) -> SSAValue:
    """0.5 x (1 + t), t = `_gelu_tanh(x)`."""
    return b.mul(b.mul(x, b.const(0.5)), b.add(t, b.const(1.0)))


def _gelu_grad_body(b: Body, g: SSAValue, x: SSAValue, t: SSAValue) -> SSAValue:
    """g (0.5 ((S + 3 A S x^2)(1 - t^2) x + (1 + t))), t = `_gelu_tanh(x)`."""
    poly = b.add(b.mul(b.mul(x, x), b.const(3 * GELU_A * GELU_S)), b.const(GELU_S))
    sech2 = b.add(b.neg(b.mul(t, t)), b.const(1.0))
    slope = b.add(b.mul(b.mul(poly, sech2), x), b.add(t, b.const(1.0)))
    return b.mul(g, b.mul(slope, b.const(0.5)))


# Attributes are immutable: one object per distinct tensor type, map and iterator list
# (building and verifying a new one per op was 0.2 s of the GPT step's build).
_TENSOR_TYPES: dict[tuple[Attribute, tuple[int, ...]], TensorType] = {}
_MAPS: dict[tuple[int, tuple[int, ...]], AffineMapAttr] = {}
_ITERATORS: dict[tuple[bool, ...], ArrayAttr[IteratorTypeAttr]] = {}


def _tensor_type(elem: Attribute, shape: tuple[int, ...]) -> TensorType:
    key = (elem, shape)
    found = _TENSOR_TYPES.get(key)
    if found is None:
        if len(_TENSOR_TYPES) >= 4096:
            _TENSOR_TYPES.clear()
        found = _TENSOR_TYPES[key] = TensorType(elem, list(shape))
    return found


def _affine_map(n: int, dims: tuple[int, ...]) -> AffineMapAttr:
    found = _MAPS.get((n, dims))
    if found is None:
        found = _MAPS[(n, dims)] = AffineMapAttr(AffineMap(n, 0, tuple(AffineDimExpr(d) for d in dims)))
    return found


def _iterators(parallel: tuple[bool, ...]) -> ArrayAttr[IteratorTypeAttr]:
    found = _ITERATORS.get(parallel)
    if found is None:
        found = _ITERATORS[parallel] = ArrayAttr([IteratorTypeAttr(IteratorType.PARALLEL if p else IteratorType.REDUCTION) for p in parallel])
    return found


# ---------------------------------------------------------------------------------------
# Function builder
# ---------------------------------------------------------------------------------------


class FuncBuilder:
    """Builds one `func.func`: arguments first, then ops, then `ret(...)`."""

    def __init__(self, name: str, args: Sequence[tuple[str, Attribute]], float_type: Attribute):
        self.name = name
        self.ft = float_type
        self.arg_names = [n for n, _ in args]
        self.block = Block(arg_types=[t for _, t in args])
        self.args: list[Value] = []
        for (n, _), a in zip(args, self.block.args):
            a.name_hint = _hint(n)
            self.args.append(Value(a, self))
        self.tape: list[Node] = []
        self.func: func.FuncOp | None = None

    # -- plumbing -------------------------------------------------------------------------
    def add_op(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def tensor_type(self, shape: Sequence[int], elem: Attribute | None = None) -> TensorType:
        return _tensor_type(elem or self.ft, tuple(shape))

    def empty(self, shape: Sequence[int], elem: Attribute | None = None) -> SSAValue:
        return self.add_op(create_op(tensor.EmptyOp, result_types=(self.tensor_type(shape, elem),))).results[0]

    def filled(self, shape: Sequence[int], value: float) -> SSAValue:
        cst = self.add_op(create_op(arith.ConstantOp, result_types=(self.ft,), properties={"value": FloatAttr(value, self.ft)})).results[0]  # type: ignore[arg-type]
        init = self.empty(shape)
        return self.add_op(fill_op([cst], [init], [init.type])).results[0]

    def zeros(self, shape: Sequence[int]) -> SSAValue:
        return self.filled(shape, 0.0)

    def scalar(self, op: Operation) -> Value:
        """Append a scalar op (arith/math on scalars) and wrap its result."""
        return Value(self.add_op(op).results[0], self)

    def ret(self, *values: Value) -> func.FuncOp:
        self.add_op(func.ReturnOp(*[v.ssa for v in values]))
        ftype = ([a.type for a in self.block.args], [v.type for v in values])
        self.func = func.FuncOp(self.name, ftype, Region(self.block))
        return self.func

    # -- the one generic constructor ------------------------------------------------------
    def generic(
        self,
        spec: str,
        ins: Sequence[Value],
        out_elems: Sequence[Attribute],
        body: BodyFn,
        sizes: dict[str, int] | None = None,
        init_zero: bool = False,
        n_outs: int = 1,
    ) -> list[SSAValue]:
        """A linalg.generic from an einsum spec: output letters are parallel loops, the
        others reductions. All outputs share the output spec. `sizes` gives the extent of
        output letters no input has."""
        in_specs, out_spec = parse_spec(spec)
        if len(in_specs) != len(ins):
            raise ValueError(f"spec {spec!r} names {len(in_specs)} operands, got {len(ins)}")
        extent: dict[str, int] = dict(sizes or {})
        for s, v in zip(in_specs, ins):
            if len(s) != len(v.shape):
                raise ValueError(f"spec {spec!r}: operand {s!r} has shape {v.shape}")
            for c, n in zip(s, v.shape):
                if extent.setdefault(c, n) != n:
                    raise ValueError(f"spec {spec!r}: letter {c!r} is {extent[c]} and {n}")
        red = [c for s in in_specs for c in s if c not in out_spec]
        letters = list(out_spec) + list(dict.fromkeys(red))
        missing = [c for c in out_spec if c not in extent]
        if missing:
            raise ValueError(f"spec {spec!r}: no size for output letters {missing}")
        pos = {c: i for i, c in enumerate(letters)}
        n = len(letters)

        def amap(s: str) -> AffineMapAttr:
            return _affine_map(n, tuple(pos[c] for c in s))

        out_shape = [extent[c] for c in out_spec]
        outs = [self.zeros(out_shape) if init_zero else self.empty(out_shape, e) for e in out_elems[:n_outs]]
        block = Block(arg_types=[v.element_type for v in ins] + [e for e in out_elems[:n_outs]])
        b = Body(block, self.ft)
        yields = body(b, list(block.args))
        block.add_op(create_op(linalg.YieldOp, operands=tuple(yields)))
        op = generic_op(
            linalg.GenericOp,
            [v.ssa for v in ins],
            outs,
            Region(block),
            ArrayAttr([amap(s) for s in in_specs] + [amap(out_spec)] * len(outs)),
            _iterators(tuple(c in out_spec for c in letters)),
            [o.type for o in outs],
        )
        self.add_op(op)
        return list(op.results)

    # -- primitives (recorded on the tape) ------------------------------------------------
    def _record(self, kind: str, spec: str, ins: Sequence[Value], out: SSAValue, **attrs: object) -> Value:
        v = Value(out, self)
        self.tape.append(Node(kind, spec, tuple(ins), v, dict(attrs)))
        return v

    def einsum(self, spec: str, *xs: Value, sizes: dict[str, int] | None = None, scale: float | None = None) -> Value:
        """Sum over the letters missing from the output of the product of the operands,
        times the constant `scale` if given: a factor in the body, which the runtime
        hands to BLAS as its alpha (no pass over the result, none over an operand)."""
        in_specs, out_spec = parse_spec(spec)
        reduces = any(c not in out_spec for s in in_specs for c in s)

        def body(b: Body, args: Sequence[SSAValue]) -> list[SSAValue]:
            prod = args[0]
            for a in args[1 : len(xs)]:
                prod = b.mul(prod, a)
            if scale is not None:
                prod = b.mul(prod, b.const(scale))
            return [b.add(args[len(xs)], prod)] if reduces else [prod]

        (out,) = self.generic(spec, xs, [self.ft], body, sizes=sizes, init_zero=reduces)
        return self._record("einsum", spec, xs, out, **({} if scale is None else {"scale": scale}))

    def map(self, name: str, spec: str, *xs: Value, c: float = 0.0) -> Value:
        """Elementwise `name` (a key of MAP_OPS) with broadcasting: every letter of an
        input must be an output letter."""
        arity, fn = MAP_OPS[name]
        in_specs, out_spec = parse_spec(spec)
        if len(xs) != arity or any(ch not in out_spec for s in in_specs for ch in s):
            raise ValueError(f"map {name!r} with spec {spec!r} is not an elementwise op on {len(xs)} operands")
        (out,) = self.generic(spec, xs, [self.ft], lambda b, a: [fn(b, a, c)])
        return self._record("map", spec, xs, out, op=name, c=c)

    def reduce_max(self, spec: str, x: Value) -> Value:
        """Max over the missing letters; not differentiated (used as a stop-gradient shift)."""
        in_specs, out_spec = parse_spec(spec)
        extent = dict(zip(in_specs[0], x.shape))
        init = self.filled([extent[ch] for ch in out_spec], float("-inf"))
        letters = list(out_spec) + [ch for ch in in_specs[0] if ch not in out_spec]
        pos = {ch: i for i, ch in enumerate(letters)}
        n = len(letters)
        block = Block(arg_types=[self.ft, self.ft])
        block.add_op(mx := arith.MaximumfOp(block.args[1], block.args[0]))
        block.add_op(linalg.YieldOp(mx.result))
        amap = lambda s: AffineMapAttr(AffineMap(n, 0, tuple(AffineDimExpr(pos[ch]) for ch in s)))  # noqa: E731
        op = linalg.GenericOp(
            [x.ssa], [init], Region(block), [amap(in_specs[0]), amap(out_spec)],
            [IteratorTypeAttr(IteratorType.PARALLEL if ch in out_spec else IteratorType.REDUCTION) for ch in letters],
            [init.type],
        )
        self.add_op(op)
        return self._record("max", spec, (x,), op.results[0])

    def causal_mask(self, s: str, x: Value, query: str, key: str) -> Value:
        """`x` (letters `s`) where key position <= query position, else -inf: `x` plus a
        [query, key] bias of 0 and -inf made from linalg.index (positions are never
        split). Its derivative is the add's, the identity: the softmax after it already
        gives masked entries a zero gradient, so no backward pass is spent on the mask."""
        nq, nk = x.shape[s.index(query)], x.shape[s.index(key)]
        init = self.empty([nq, nk])
        block = Block(arg_types=[self.ft])
        b = Body(block, self.ft)
        keep = b.cmpi(b.index(1), b.index(0), "ule")
        block.add_op(linalg.YieldOp(b.select(keep, b.const(0.0), b.const(float("-inf")))))
        ident = AffineMapAttr(AffineMap.identity(2))
        op = linalg.GenericOp([], [init], Region(block), [ident], [IteratorTypeAttr(IteratorType.PARALLEL)] * 2, [init.type])
        self.add_op(op)
        bias = Value(op.results[0], self)  # a constant: not on the tape
        return self.add(f"{s},{query}{key}->{s}", x, bias)

    def onehot(self, spec: str, tokens: Value, ids: Value) -> Value:
        """`out[..., v] = 1.0 if tokens[...] == ids[v] else 0.0` (spec like `"bt,v->btv"`)."""

        def body(b: Body, a: Sequence[SSAValue]) -> list[SSAValue]:
            return [b.select(b.cmpi(a[0], a[1], "eq"), b.const(1.0), b.const(0.0))]

        (out,) = self.generic(spec, [tokens, ids], [self.ft], body)
        return self._record("onehot", spec, (tokens, ids), out)

    def take(self, s: str, x: Value, axis: str, index: int, group: int | None = None) -> Value:
        """Slice `index` of `x` (letters `s`) along letter `axis`: a contraction with a
        constant one-hot selector, so it stays a projected-permutation generic that any
        split of the other letters carries through (the runtime reads it as an index).
        Takes of one `group` are differentiated together (see `unstack`)."""
        n = x.shape[s.index(axis)]
        sel = self.scalar(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(TensorType(self.ft, [n]), [float(index == j) for j in range(n)])))
        rest = s.replace(axis, "")
        (out,) = self.generic(f"{s},{axis}->{rest}", [x, sel], [self.ft], lambda b, a: [b.add(a[2], b.mul(a[0], a[1]))], init_zero=True)
        group = len(self.tape) if group is None else group
        return self._record("take", f"{s}->{rest}", (x,), out, axis=axis, index=index, group=group)

    def unstack(self, s: str, x: Value, axis: str) -> list[Value]:
        """Every slice of `x` (letters `s`) along letter `axis`, as one group of takes:
        their gradients come back as one `stack`, so a fused weight (q/k/v in one
        `[n_embd, 3, heads, head_dim]` tensor) gets one gradient contraction, not one per
        slice with two thirds zeros."""
        group = len(self.tape)
        return [self.take(s, x, axis, i, group) for i in range(x.shape[s.index(axis)])]

    def stack(self, s: str, parts: Sequence[Value], axis: str) -> Value:
        """`out[..., i, ...] = parts[i]` in letters `s`, the parts lacking `axis`. The
        entry is chosen with `linalg.index` on `axis`, so that letter must not be split
        (it is the unsplit q/k/v axis where the autodiff uses it)."""
        n = len(parts)
        spec = ",".join([s.replace(axis, "")] * n) + f"->{s}"
        dim = s.index(axis)

        def body(b: Body, a: Sequence[SSAValue]) -> list[SSAValue]:
            at = b.index(dim)
            out = a[n - 1]
            for i in reversed(range(n - 1)):
                out = b.select(b.cmpi(at, b.const(i, IndexType()), "eq"), a[i], out)
            return [out]

        (out,) = self.generic(spec, parts, [self.ft], body, sizes={axis: n})
        return self._record("stack", spec, parts, out, axis=axis)

    # -- conveniences over the primitives ---------------------------------------------------
    def add(self, spec: str, a: Value, b: Value) -> Value:
        return self.map("add", spec, a, b)

    def sub(self, spec: str, a: Value, b: Value) -> Value:
        return self.map("sub", spec, a, b)

    def mul(self, spec: str, a: Value, b: Value) -> Value:
        return self.map("mul", spec, a, b)

    def div(self, spec: str, a: Value, b: Value) -> Value:
        return self.map("div", spec, a, b)

    def unary(self, name: str, s: str, x: Value, c: float = 0.0) -> Value:
        return self.map(name, f"{s}->{s}", x, c=c)

    def mean(self, spec: str, x: Value) -> Value:
        in_specs, out_spec = parse_spec(spec)
        count = pymath.prod(n for ch, n in zip(in_specs[0], x.shape) if ch not in out_spec)
        return self.unary("scale", out_spec, self.einsum(spec, x), 1.0 / count)

    # -- layers -----------------------------------------------------------------------------
    def _layer(self, kind: str, spec: str, ins: Sequence[Value], build: Callable[[], Value], **attrs: object) -> Value:
        """Build a layer from primitives, then record it on the tape as one node: the
        autodiff applies the layer's own derivative (a few passes over the activations)
        instead of walking back through every primitive. `attrs` may name values that
        `build` stores in the dict it is given."""
        start = len(self.tape)
        out = build()
        del self.tape[start:]
        return self._record(kind, spec, ins, out.ssa, **attrs)

    def softmax(self, s: str, x: Value, axis: str) -> Value:
        """Softmax over letter `axis` of `x` (spec letters `s`), shifted by its max."""
        r = s.replace(axis, "")

        def build() -> Value:
            m = self.reduce_max(f"{s}->{r}", x)
            e = self.unary("exp", s, self.sub(f"{s},{r}->{s}", x, m))
            return self.div(f"{s},{r}->{s}", e, self.einsum(f"{s}->{r}", e))

        return self._layer("softmax", f"{s}->{s}", (x,), build, axis=axis)

    def attention(self, q: Value, k: Value, v: Value, scale: float) -> Value:
        """Causal attention softmax(scale q k^T + mask) v on q, k, v [b, t, h, d] (keys
        and values at positions u), recorded as one layer whose derivative reads only
        q, k, v and the logsumexp of each score row [b, h, t]: it recomputes the
        probabilities from these (flash attention's recompute), so no [b, h, t, u]
        array lives from the forward to the backward. The forward's ops are those of
        scale, `causal_mask` and `softmax`, in that order, except that the softmax's
        division by the row sums comes after the product with v (as flash attention's
        does): one pass over [b, t, h, d] instead of one over [b, h, t, u] (t / d times
        the size)."""
        saved: dict[str, Value] = {}

        def build() -> Value:
            att = self.unary("scale", "bhtu", self.einsum("bthd,buhd->bhtu", q, k), scale)
            masked = self.causal_mask("bhtu", att, query="t", key="u")
            m = self.reduce_max("bhtu->bht", masked)
            e = self.unary("exp", "bhtu", self.sub("bhtu,bht->bhtu", masked, m))
            z = self.einsum("bhtu->bht", e)
            saved["lse"] = self.add("bht,bht->bht", m, self.unary("log", "bht", z))
            return self.div("bthd,bht->bthd", self.einsum("bhtu,buhd->bthd", e, v), z)

        return self._layer("attention", "bthd,buhd,buhd->bthd", (q, k, v), build, scale=scale, saved=saved)

    def layernorm(self, s: str, x: Value, w: Value, bias: Value | None, eps: float = 1e-5) -> Value:
        """LayerNorm over the last letter of `s`, with gain `w` and optional `bias`."""
        c, r = s[-1], s[:-1]
        saved: dict[str, Value] = {}

        def build() -> Value:
            xc = self.sub(f"{s},{r}->{s}", x, self.mean(f"{s}->{r}", x))
            var = self.unary("scale", r, self.einsum(f"{s},{s}->{r}", xc, xc), 1.0 / x.shape[-1])
            saved["rstd"] = self.unary("rsqrt", r, self.unary("shift", r, var, eps))
            saved["xhat"] = self.mul(f"{s},{r}->{s}", xc, saved["rstd"])
            y = self.mul(f"{s},{c}->{s}", saved["xhat"], w)
            return self.add(f"{s},{c}->{s}", y, bias) if bias is not None else y

        ins = (x, w) if bias is None else (x, w, bias)
        spec = f"{s},{c}->{s}" if bias is None else f"{s},{c},{c}->{s}"
        return self._layer("layernorm", spec, ins, build, saved=saved)

    def layernorm_einsum(self, s: str, x: Value, w: Value, bias: Value | None, spec: str, weight: Value, eps: float = 1e-5) -> Value:
        """`einsum(spec, layernorm(x), weight)` (layernorm letters `s`, the einsum's
        first operand): one layer that keeps xhat and rstd, not the normalised output.
        The weight gradient needs that output; with a bias the derivative makes it again
        from xhat (one generic, computing it as the forward does, to the bit), so the
        [b, t, c] array dies right after the contraction reads it. Without a bias the
        recompute would be the forward's own op, which CSE merges: then it is kept."""
        saved: dict[str, Value] = {}

        def build() -> Value:
            y = self.layernorm(s, x, w, bias, eps)
            saved.update(self.tape[-1].attrs["saved"])  # type: ignore[arg-type]
            return self.einsum(spec, y, weight)

        ins = (x, w, weight) if bias is None else (x, w, bias, weight)
        return self._layer("layernorm_einsum", spec, ins, build, saved=saved, ln=s)

    def affine(self, s: str, xhat: Value, w: Value, bias: Value) -> Value:
        """xhat w + bias over the last letter of `s`, as one generic (a backward op,
        not on the tape): layernorm's output made again from its saved xhat."""
        c = s[-1]
        (y,) = self.generic(f"{s},{c},{c}->{s}", [xhat, w, bias], [self.ft], lambda b, a: [b.add(b.mul(a[0], a[1]), a[2])])
        return Value(y, self)

    def gelu(self, s: str, x: Value) -> Value:
        """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
        one elementwise generic recorded as a layer whose derivative (`gelu_grad`, also
        one generic) recomputes the tanh from x. Written as chains of small maps, the
        backward's x^2, tanh and 1 + tanh would be the forward's ops again, and CSE
        would keep them alive from the forward to the backward: three more [b, t, n_mlp]
        arrays per layer. So the backward keeps only x (and the output, for the next
        contraction's weight gradient)."""
        return self._layer("gelu", f"{s}->{s}", (x,), lambda: self.unary("gelu", s, x))

    def gelu_einsum(self, spec: str, x: Value, w: Value) -> Value:
        """`einsum(spec, gelu(x), w)` (an MLP's second projection), one layer that keeps
        only x: its derivative recomputes gelu(x) for the weight gradient in the same
        generic that computes GELU's slope (`gelu_backward`), so the [b, t, n_mlp]
        activation dies right after the contraction reads it, as x alone is kept."""
        (sa, _), _ = parse_spec(spec)
        return self._layer("gelu_einsum", spec, (x, w), lambda: self.einsum(spec, self.unary("gelu", sa, x), w))

    def gelu_backward(self, s: str, g: Value, x: Value) -> tuple[Value, Value]:
        """(g gelu'(x), gelu(x)) in letters `s`: one two-result generic, the tanh computed
        once for both (a backward op: not on the tape). gelu(x) is computed as the
        forward computes it, to the bit."""

        def body(b: Body, a: Sequence[SSAValue]) -> list[SSAValue]:
            t = _gelu_tanh(b, a[1])
            return [_gelu_grad_body(b, a[0], a[1], t), _gelu_body(b, a[1], t)]

        dx, y = self.generic(f"{s},{s}->{s}", [g, x], [self.ft, self.ft], body, n_outs=2)
        return Value(dx, self), Value(y, self)

    def cross_entropy(self, s: str, logits: Value, targets: Value, ids: Value) -> Value:
        """Mean over all positions of -log softmax(logits)[target]; `s` ends with the
        class letter; the result is a 0-d tensor."""
        v, r = s[-1], s[:-1]
        m = self.reduce_max(f"{s}->{r}", logits)
        z = self.sub(f"{s},{r}->{s}", logits, m)
        lse = self.unary("log", r, self.einsum(f"{s}->{r}", self.unary("exp", s, z)))
        picked = self.einsum(f"{s},{s}->{r}", self.onehot(f"{r},{v}->{s}", targets, ids), z)
        return self.mean(f"{r}->", self.sub(f"{r},{r}->{r}", lse, picked))


def _hint(name: str) -> str | None:
    h = "".join(ch if ch.isalnum() else "_" for ch in name)
    return h if h and not h[0].isdigit() else None


def module_of(*funcs: func.FuncOp) -> ModuleOp:
    return ModuleOp(list(funcs))


def int_tensor(shape: Sequence[int], width: int = 32) -> TensorType:
    return TensorType(IntegerType(width), list(shape))


__all__ = ["Body", "FuncBuilder", "Node", "Value", "int_tensor", "module_of", "parse_spec"]
