"""Reverse-mode automatic differentiation over the builder's tape.

Why at the builder level rather than as a pass over the forward IR: the tape keeps what
the builder knew when it emitted each op (the einsum spec, the elementwise op's name and
constant, which operand is broadcast), so every vector-Jacobian product is again an
einsum or an elementwise op of the same family, written with the same builder. A pass
would first have to recover all of that from affine maps and region bodies. The
backward IR therefore stays in the same einsum-style form as the forward IR, and the
sharding passes split it the same way (a contraction's gradient w.r.t. a weight
contracts over the batch letters, which becomes the data-parallel gradient reduction).

Primitives and their VJPs (g is the output cotangent, in the output's letters):
  einsum     d x_i = einsum(out, other operands -> x_i)  (also sums, transposes, broadcasts)
  map        the elementwise derivative, then summed over the letters x_i was broadcast on
  take       the slices of one `unstack` together: one `stack` of their cotangents (zeros
             for a slice the loss does not use), so the source gets a single cotangent
  stack      each part: its slice of the cotangent
  max, onehot  not differentiated: max only shifts softmax/logsumexp (shift-invariant),
             onehot reads integer tokens
Layers recorded whole, with their own derivatives:
  softmax    y (g - sum(g y)) over the softmax letter
  layernorm  x: rstd (gw - mean(gw) - xhat mean(gw xhat)); gain: sum(g xhat); bias: sum(g)
  gelu       g times its slope, from the forward's tanh
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shardc.training.ir_builder import GELU_A, GELU_S, FuncBuilder, Node, Value, parse_spec

LETTERS = "abcdefghijklmnopqrstuvwxyz"

# name -> VJP for input i: (fb, node, i, g, in_specs, out_spec) -> cotangent in out letters
MapVJP = Callable[[FuncBuilder, Node, int, Value, list[str], str], Value]


def _ew(so: str, *specs: str) -> str:
    return f"{','.join(specs)}->{so}"


def _vjp_add(fb: FuncBuilder, n: Node, i: int, g: Value, si: list[str], so: str) -> Value:
    return g


def _vjp_sub(fb: FuncBuilder, n: Node, i: int, g: Value, si: list[str], so: str) -> Value:
    return g if i == 0 else fb.unary("neg", so, g)


def _vjp_mul(fb: FuncBuilder, n: Node, i: int, g: Value, si: list[str], so: str) -> Value:
    j = 1 - i
    return fb.mul(_ew(so, so, si[j]), g, n.inputs[j])


def _vjp_div(fb: FuncBuilder, n: Node, i: int, g: Value, si: list[str], so: str) -> Value:
    if i == 0:
        return fb.div(_ew(so, so, si[1]), g, n.inputs[1])
    go = fb.mul(_ew(so, so, so), g, n.output)
    return fb.unary("neg", so, fb.div(_ew(so, so, si[1]), go, n.inputs[1]))


def _unary_vjp(fn: Callable[[FuncBuilder, Node, Value, str], Value]) -> MapVJP:
    return lambda fb, n, i, g, si, so: fn(fb, n, g, so)


MAP_VJPS: dict[str, MapVJP] = {
    "add": _vjp_add,
    "sub": _vjp_sub,
    "mul": _vjp_mul,
    "div": _vjp_div,
    "neg": _unary_vjp(lambda fb, n, g, s: fb.unary("neg", s, g)),
    "scale": _unary_vjp(lambda fb, n, g, s: fb.unary("scale", s, g, float(n.attrs["c"]))),  # type: ignore[arg-type]
    "shift": _unary_vjp(lambda fb, n, g, s: g),
    "square": _unary_vjp(lambda fb, n, g, s: fb.unary("scale", s, fb.mul(_ew(s, s, s), g, n.inputs[0]), 2.0)),
    "exp": _unary_vjp(lambda fb, n, g, s: fb.mul(_ew(s, s, s), g, n.output)),
    "log": _unary_vjp(lambda fb, n, g, s: fb.div(_ew(s, s, s), g, n.inputs[0])),
    "tanh": _unary_vjp(
        lambda fb, n, g, s: fb.mul(
            _ew(s, s, s), g, fb.unary("shift", s, fb.unary("neg", s, fb.unary("square", s, n.output)), 1.0)
        )
    ),
    "sqrt": _unary_vjp(lambda fb, n, g, s: fb.div(_ew(s, s, s), fb.unary("scale", s, g, 0.5), n.output)),
    "rsqrt": _unary_vjp(
        lambda fb, n, g, s: fb.mul(
            _ew(s, s, s),
            g,
            fb.unary("scale", s, fb.mul(_ew(s, s, s), n.output, fb.unary("square", s, n.output)), -0.5),
        )
    ),
}


def _sum_to(fb: FuncBuilder, g: Value, so: str, si: str) -> Value:
    """Sum a cotangent in letters `so` down to an operand broadcast from letters `si`."""
    return g if so == si else fb.einsum(f"{so}->{si}", g)


def vjp(fb: FuncBuilder, node: Node, i: int, g: Value) -> Value:
    """The cotangent of `node.inputs[i]` given the output cotangent `g` (takes are
    differentiated a group at a time, by `grad`)."""
    si, so = parse_spec(node.spec)
    x = node.inputs[i]
    if node.kind == "einsum":
        others = [(s, v) for j, (s, v) in enumerate(zip(si, node.inputs)) if j != i]
        spec = ",".join([so, *(s for s, _ in others)]) + "->" + si[i]
        return fb.einsum(spec, g, *(v for _, v in others), sizes=dict(zip(si[i], x.shape)))
    if node.kind == "map":
        rule = MAP_VJPS[str(node.attrs["op"])]
        return _sum_to(fb, rule(fb, node, i, g, si, so), so, si[i])
    if node.kind == "stack":
        return fb.take(so, g, str(node.attrs["axis"]), i)
    if node.kind == "softmax":
        return _softmax_vjp(fb, node, g, so)
    if node.kind == "layernorm":
        return _layernorm_vjp(fb, node, i, g, so)
    if node.kind == "gelu":
        return _gelu_vjp(fb, node, g, so)
    raise ValueError(f"no derivative for a {node.kind!r} node")


def _softmax_vjp(fb: FuncBuilder, node: Node, g: Value, s: str) -> Value:
    """y (g - sum(g y)), the sum over the softmax letter."""
    y = node.output
    r = s.replace(str(node.attrs["axis"]), "")
    gy = fb.mul(_ew(s, s, s), g, y)
    return fb.sub(_ew(s, s, s), gy, fb.mul(_ew(s, s, r), y, fb.einsum(f"{s}->{r}", gy)))


def _layernorm_vjp(fb: FuncBuilder, node: Node, i: int, g: Value, s: str) -> Value:
    """Inputs (x, gain[, bias]); normalised over the last letter of `s`."""
    saved: dict[str, Value] = node.attrs["saved"]  # type: ignore[assignment]
    xhat, rstd = saved["xhat"], saved["rstd"]
    c, r = s[-1], s[:-1]
    if i == 1:
        return fb.einsum(f"{s},{s}->{c}", g, xhat)
    if i == 2:
        return fb.einsum(f"{s}->{c}", g)
    gw = fb.mul(_ew(s, s, c), g, node.inputs[1])
    inv_n = 1.0 / xhat.shape[-1]
    m1 = fb.unary("scale", r, fb.einsum(f"{s}->{r}", gw), inv_n)
    m2 = fb.unary("scale", r, fb.einsum(f"{s},{s}->{r}", gw, xhat), inv_n)
    centred = fb.sub(_ew(s, s, r), gw, m1)
    return fb.mul(_ew(s, s, r), fb.sub(_ew(s, s, s), centred, fb.mul(_ew(s, s, r), xhat, m2)), rstd)


def _gelu_vjp(fb: FuncBuilder, node: Node, g: Value, s: str) -> Value:
    """g (0.5 (1 + t) + 0.5 x (1 - t^2) S (1 + 3 A x^2)), t the forward's tanh."""
    saved: dict[str, Value] = node.attrs["saved"]  # type: ignore[assignment]
    x, t = node.inputs[0], saved["tanh"]
    e = _ew(s, s, s)
    poly = fb.unary("shift", s, fb.unary("scale", s, fb.unary("square", s, x), 3 * GELU_A * GELU_S), GELU_S)
    sech2 = fb.unary("shift", s, fb.unary("neg", s, fb.unary("square", s, t)), 1.0)
    slope = fb.add(e, fb.mul(e, fb.mul(e, poly, sech2), x), fb.unary("shift", s, t, 1.0))
    return fb.mul(e, g, fb.unary("scale", s, slope, 0.5))


def _stack_vjp(fb: FuncBuilder, takes: Sequence[Node], cot: dict[int, Value]) -> Value:
    """The cotangent of the source of `takes` (slices of one unstack): their cotangents
    stacked back along the unstacked letter, zeros for the slices without one."""
    (si,), so = parse_spec(takes[0].spec)
    axis = str(takes[0].attrs["axis"])
    x = takes[0].inputs[0]
    by_index = {int(n.attrs["index"]): cot.get(id(n.output)) for n in takes}
    part_shape = [n for c, n in zip(si, x.shape) if c != axis]
    parts = [by_index.get(i) or Value(fb.zeros(part_shape), fb) for i in range(x.shape[si.index(axis)])]
    return fb.stack(si, parts, axis)


DIFFERENTIABLE = ("einsum", "map", "take", "stack", "softmax", "layernorm", "gelu")


def grad(fb: FuncBuilder, loss: Value, wrt: Sequence[Value]) -> list[Value]:
    """Emit the gradients of the 0-d `loss` w.r.t. each of `wrt` (zeros where it does not
    depend on one). Walks a snapshot of the tape backwards; the VJPs append to it."""
    if loss.shape != ():
        raise ValueError(f"grad needs a 0-d loss, got shape {loss.shape}")
    active: set[int] = {id(v) for v in wrt}
    tape = list(fb.tape)
    for node in tape:
        if node.kind in DIFFERENTIABLE and any(id(x) in active for x in node.inputs):
            active.add(id(node.output))
    cot: dict[int, Value] = {id(loss): Value(fb.filled([], 1.0), fb)}

    def accumulate(x: Value, g: Value) -> None:
        prev = cot.get(id(x))
        if prev is None:
            cot[id(x)] = g
        else:
            s = LETTERS[: len(x.shape)]
            cot[id(x)] = fb.add(f"{s},{s}->{s}", prev, g)

    # The slices of an unstack are consecutive on the tape and used only after it: when
    # the backward walk reaches the last one, all of their cotangents are complete.
    groups: dict[object, list[Node]] = {}
    for node in tape:
        if node.kind == "take":
            groups.setdefault(node.attrs["group"], []).append(node)
    for node in reversed(tape):
        if node.kind == "take":
            takes = groups.pop(node.attrs["group"], None)
            if takes and id(node.inputs[0]) in active and any(id(n.output) in cot for n in takes):
                accumulate(node.inputs[0], _stack_vjp(fb, takes, cot))
            continue
        g = cot.get(id(node.output))
        if g is None or node.kind not in DIFFERENTIABLE:
            continue
        for i, x in enumerate(node.inputs):
            if id(x) in active:
                accumulate(x, vjp(fb, node, i, g))
    return [cot[id(v)] if id(v) in cot else Value(fb.zeros(v.shape), fb) for v in wrt]
