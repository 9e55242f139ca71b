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
  layernorm_einsum  einsum(layernorm(x), w): layernorm's output made again from xhat for w's
  gelu       g times its slope at x, the tanh recomputed in the same generic
  gelu_einsum  einsum(gelu(x), w): gelu(x) recomputed, with x's cotangent, for w's
  attention  causal softmax(scale q k^T) v: the probabilities recomputed from q, k and the
             saved logsumexp per row (`_attention_vjp`), so the t x t ones are not kept
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shardc.training.ir_builder import FuncBuilder, Node, Value, parse_spec

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
        return fb.einsum(spec, g, *(v for _, v in others), sizes=dict(zip(si[i], x.shape)), scale=node.attrs.get("scale"))  # type: ignore[arg-type]
    if node.kind == "map":
        rule = MAP_VJPS[str(node.attrs["op"])]
        return _sum_to(fb, rule(fb, node, i, g, si, so), so, si[i])
    if node.kind == "stack":
        return fb.take(so, g, str(node.attrs["axis"]), i)
    if node.kind == "softmax":
        return _softmax_vjp(fb, node, g, so)
    if node.kind == "layernorm":
        return _layernorm_vjp(fb, node.attrs["saved"], node.inputs[1], i, g, so)  # type: ignore[arg-type]
    if node.kind == "gelu":
        return _gelu_vjp(fb, node, g, so)
    raise ValueError(f"no derivative for a {node.kind!r} node")


def _softmax_vjp(fb: FuncBuilder, node: Node, g: Value, s: str) -> Value:
    """y (g - sum(g y)), the sum over the softmax letter."""
    y = node.output
    r = s.replace(str(node.attrs["axis"]), "")
    gy = fb.mul(_ew(s, s, s), g, y)
    return fb.sub(_ew(s, s, s), gy, fb.mul(_ew(s, s, r), y, fb.einsum(f"{s}->{r}", gy)))


def _layernorm_vjp(fb: FuncBuilder, saved: dict[str, Value], w: Value, i: int, g: Value, s: str) -> Value:
    """Inputs (x, gain w[, bias]); normalised over the last letter of `s`."""
    xhat, rstd = saved["xhat"], saved["rstd"]
    c, r = s[-1], s[:-1]
    if i == 1:
        return fb.einsum(f"{s},{s}->{c}", g, xhat)
    if i == 2:
        return fb.einsum(f"{s}->{c}", g)
    gw = fb.mul(_ew(s, s, c), g, w)
    inv_n = 1.0 / xhat.shape[-1]
    m1 = fb.unary("scale", r, fb.einsum(f"{s}->{r}", gw), inv_n)
    m2 = fb.unary("scale", r, fb.einsum(f"{s},{s}->{r}", gw, xhat), inv_n)
    centred = fb.sub(_ew(s, s, r), gw, m1)
    return fb.mul(_ew(s, s, r), fb.sub(_ew(s, s, s), centred, fb.mul(_ew(s, s, r), xhat, m2)), rstd)


def _gelu_vjp(fb: FuncBuilder, node: Node, g: Value, s: str) -> Value:
    """g times GELU's slope at x, one generic that recomputes the tanh (`gelu_grad`)."""
    return fb.map("gelu_grad", f"{s},{s}->{s}", g, node.inputs[0])


def _attention_vjp(fb: FuncBuilder, node: Node, g: Value, active: Sequence[bool]) -> list[Value | None]:
    """Cotangents of (q, k, v) from q, k, v and the saved logsumexp, the
    probabilities recomputed (flash attention's backward):
      p = exp(scale q k^T + mask - lse)       dv = p^T g,  dp = g v^T
      ds = p (dp - sum_u(p dp))               dq = scale ds k,  dk = scale ds^T q
    The row term is summed from the recomputed p, not as flash attention's
    sum_d(g y): the key bias's gradient is zero in exact arithmetic, and this keeps its
    rounding noise at the softmax formulation's (measured: about 2x lower than with
    sum_d(g y); AdamW turns such noise into lr-sized moves). The scores are
    recomputed as one contraction with the scale as a constant factor (BLAS's alpha:
    no pass over q or over the scores), not as the forward's scale (q k^T), so that CSE
    cannot merge them with the forward's and keep them alive in between; a power-of-two
    scale (head_dim a power of four) gives the same scores bit for bit."""
    q, k, v = node.inputs
    scale = float(node.attrs["scale"])  # type: ignore[arg-type]
    saved: dict[str, Value] = node.attrs["saved"]  # type: ignore[assignment]
    s = fb.einsum("bthd,buhd->bhtu", q, k, scale=scale)
    # dp first and dv after ds: p, its row sum with dp and ds follow one another, one
    # row chain (`shardc.runtime.codegen.row_fusion`: s and dp read once, p and ds written once)
    dp = fb.einsum("bthd,buhd->bhtu", g, v) if active[0] or active[1] else None
    p = fb.unary("exp", "bhtu", fb.sub("bhtu,bht->bhtu", fb.causal_mask("bhtu", s, query="t", key="u"), saved["lse"]))
    if dp is None:
        return [None, None, fb.einsum("bhtu,bthd->buhd", p, g) if active[2] else None]
    row = fb.einsum("bhtu,bhtu->bht", p, dp)
    ds = fb.mul("bhtu,bhtu->bhtu", p, fb.sub("bhtu,bht->bhtu", dp, row))
    ds = fb.unary("scale", "bhtu", ds, scale)
    dv = fb.einsum("bhtu,bthd->buhd", p, g) if active[2] else None
    dq = fb.einsum("bhtu,buhd->bthd", ds, k) if active[0] else None
    dk = fb.einsum("bhtu,bthd->buhd", ds, q) if active[1] else None
    return [dq, dk, dv]


def _layernorm_einsum_vjp(fb: FuncBuilder, node: Node, g: Value, active: Sequence[bool]) -> list[Value | None]:
    """einsum(spec, layernorm(x, w[, bias]), weight): the weight's cotangent reads the
    layernorm's output, made again from the saved xhat; the others are the einsum's
    cotangent for that output, then layernorm's."""
    x, w, *rest = node.inputs
    bias, weight = (rest[0] if len(rest) == 2 else None), rest[-1]
    (sy, sw), so = parse_spec(node.spec)
    s = str(node.attrs["ln"])
    saved: dict[str, Value] = node.attrs["saved"]  # type: ignore[assignment]
    out: list[Value | None] = [None] * len(node.inputs)
    if any(active[:-1]):
        dy = fb.einsum(f"{so},{sw}->{sy}", g, weight, sizes=dict(zip(sy, x.shape)))
        for i in range(len(node.inputs) - 1):
            if active[i]:
                out[i] = _layernorm_vjp(fb, saved, w, i, dy, s)
    if active[-1]:
        xhat = saved["xhat"]
        y = fb.affine(s, xhat, w, bias) if bias is not None else fb.mul(f"{s},{s[-1]}->{s}", xhat, w)
        out[-1] = fb.einsum(f"{so},{sy}->{sw}", g, y, sizes=dict(zip(sw, weight.shape)))
    return out


def _gelu_einsum_vjp(fb: FuncBuilder, node: Node, g: Value, active: Sequence[bool]) -> list[Value | None]:
    """einsum(spec, gelu(x), w): the cotangent of gelu(x) as the einsum's, then one
    generic giving x's cotangent and gelu(x) again, which the weight gradient reads."""
    x, w = node.inputs
    (sa, sw), so = parse_spec(node.spec)
    da = fb.einsum(f"{so},{sw}->{sa}", g, w)
    dx, a = fb.gelu_backward(sa, da, x)
    dw = fb.einsum(f"{so},{sa}->{sw}", g, a, sizes=dict(zip(sw, w.shape))) if active[1] else None
    return [dx if active[0] else None, dw]


# Layers whose derivative shares work between their inputs: all cotangents at once.
NodeVJP = Callable[[FuncBuilder, Node, Value, Sequence[bool]], list[Value | None]]
NODE_VJPS: dict[str, NodeVJP] = {"attention": _attention_vjp, "gelu_einsum": _gelu_einsum_vjp, "layernorm_einsum": _layernorm_einsum_vjp}


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


DIFFERENTIABLE = ("einsum", "map", "take", "stack", "softmax", "layernorm", "layernorm_einsum", "gelu", "gelu_einsum", "attention")


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
        if node.kind in NODE_VJPS:
            cots = NODE_VJPS[node.kind](fb, node, g, [id(x) in active for x in node.inputs])
            for x, c in zip(node.inputs, cots):
                if c is not None:
                    accumulate(x, c)
            continue
        for i, x in enumerate(node.inputs):
            if id(x) in active:
                accumulate(x, vjp(fb, node, i, g))
    return [cot[id(v)] if id(v) in cot else Value(fb.zeros(v.shape), fb) for v in wrt]
