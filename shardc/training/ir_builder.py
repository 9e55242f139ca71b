"""A small builder for tensor IR written in einsum style.

Every tensor op is a `linalg.generic` whose loops are named by letters, as in
`numpy.einsum`: `fb.einsum("bti,ihd->bthd", x, w)` is a contraction, `fb.map("mul",
"btc,c->btc", x, g)` an elementwise op with broadcasting, `fb.einsum("btc->bt", x)` a sum.
Keeping every op a generic with projected-permutation maps is what lets
sharding-propagation and shard-partition split any named dimension (a weight's `heads`,
the vocabulary, the batch) without a reshape in the way.

The builder records each op on a *tape* (`FuncBuilder.tape`) with its kind, spec and
operands; `shardc.training.autodiff` walks the tape backwards and emits the vector-Jacobian
products with this same builder. Composite layers (softmax, layernorm, GELU, cross-entropy)
are built from the primitives, so they need no derivative rules of their own.

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
    recorded whole with its own derivative (softmax | layernorm | gelu; `attrs` keeps
    the intermediates the derivative reads)."""

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
        return self.add_op(arith.ConstantOp(attr))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(arith.AddfOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(arith.SubfOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(arith.MulfOp(a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(arith.DivfOp(a, b))

    def neg(self, a: SSAValue) -> SSAValue:
        return self.add_op(arith.NegfOp(a))

    def maximum(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(arith.MaximumfOp(a, b))

    def sqrt(self, a: SSAValue) -> SSAValue:
        return self.add_op(math.SqrtOp(a))

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
    "exp": (1, lambda b, a, c: b.add_op(math.ExpOp(a[0]))),
    "log": (1, lambda b, a, c: b.add_op(math.LogOp(a[0]))),
    "tanh": (1, lambda b, a, c: b.add_op(math.TanhOp(a[0]))),
    "sqrt": (1, lambda b, a, c: b.sqrt(a[0])),
    "rsqrt": (1, lambda b, a, c: b.add_op(math.RsqrtOp(a[0]))),
}


GELU_A = 0.044715
GELU_S = pymath.sqrt(2.0 / pymath.pi)


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
        return TensorType(elem or self.ft, list(shape))

    def empty(self, shape: Sequence[int], elem: Attribute | None = None) -> SSAValue:
        return self.add_op(tensor.EmptyOp([], self.tensor_type(shape, elem))).results[0]

    def filled(self, shape: Sequence[int], value: float) -> SSAValue:
        cst = self.add_op(arith.ConstantOp(FloatAttr(value, self.ft))).results[0]  # type: ignore[arg-type]
        init = self.empty(shape)
        return self.add_op(linalg.FillOp([cst], [init], [init.type])).results[0]

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
            return AffineMapAttr(AffineMap(n, 0, tuple(AffineDimExpr(pos[c]) for c in s)))

        out_shape = [extent[c] for c in out_spec]
        outs = [self.zeros(out_shape) if init_zero else self.empty(out_shape, e) for e in out_elems[:n_outs]]
        block = Block(arg_types=[v.element_type for v in ins] + [e for e in out_elems[:n_outs]])
        b = Body(block, self.ft)
        yields = body(b, list(block.args))
        block.add_op(linalg.YieldOp(*yields))
        iters = [IteratorTypeAttr(IteratorType.PARALLEL if c in out_spec else IteratorType.REDUCTION) for c in letters]
        op = linalg.GenericOp(
            [v.ssa for v in ins],
            outs,
            Region(block),
            [amap(s) for s in in_specs] + [amap(out_spec)] * len(outs),
            iters,
            [o.type for o in outs],
        )
        self.add_op(op)
        return list(op.results)

    # -- primitives (recorded on the tape) ------------------------------------------------
    def _record(self, kind: str, spec: str, ins: Sequence[Value], out: SSAValue, **attrs: object) -> Value:
        v = Value(out, self)
        self.tape.append(Node(kind, spec, tuple(ins), v, dict(attrs)))
        return v

    def einsum(self, spec: str, *xs: Value, sizes: dict[str, int] | None = None) -> Value:
        """Sum over the letters missing from the output of the product of the operands."""
        in_specs, out_spec = parse_spec(spec)
        reduces = any(c not in out_spec for s in in_specs for c in s)

        def body(b: Body, args: Sequence[SSAValue]) -> list[SSAValue]:
            prod = args[0]
            for a in args[1 : len(xs)]:
                prod = b.mul(prod, a)
            return [b.add(args[len(xs)], prod)] if reduces else [prod]

        (out,) = self.generic(spec, xs, [self.ft], body, sizes=sizes, init_zero=reduces)
        return self._record("einsum", spec, xs, out)

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

    def gelu(self, s: str, x: Value) -> Value:
        """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
        recorded as one layer whose derivative reuses the forward's tanh."""
        e = f"{s},{s}->{s}"
        saved: dict[str, Value] = {}

        def build() -> Value:
            x3 = self.mul(e, x, self.unary("square", s, x))
            inner = self.unary("scale", s, self.add(e, x, self.unary("scale", s, x3, GELU_A)), GELU_S)
            saved["tanh"] = self.unary("tanh", s, inner)
            return self.mul(e, self.unary("scale", s, x, 0.5), self.unary("shift", s, saved["tanh"], 1.0))

        return self._layer("gelu", f"{s}->{s}", (x,), build, saved=saved)

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
