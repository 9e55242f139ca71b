"""Indexing maps beyond projected permutations: an input indexed by affine sums of loop
dims with constant, non-negative coefficients (`d2 * 2 + d5 * 3 + 1`), as convolutions
and pooling read their image, generic or named alike.

Each such input is read at run time as a strided view whose axes are the loop dims its
map names (`window_run.WindowView`); the op's maps become projected permutations over
those views and the structured engine runs it as any other op (contraction on BLAS,
reduction by its combiner). Outputs must still be projected permutations. A
convolution and its gradients run without the view's im2col copy (`shift_plan`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir import Operation
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap

from shardc.runtime.codegen.builder import compile_error, describe
from shardc.runtime.execute.structured_run import Map, StructuredSpec
from shardc.runtime.execute.window_run import DepthwisePlan, ShiftPlan, WindowPlan, WindowView

Linear = tuple[dict[int, int], int]  # loop dim -> coefficient, and the constant


def linear_form(e: AffineExpr) -> Linear | None:
    """`e` as `sum(coef * dim) + const`, or None when it is not one (a product of dims,
    floordiv, mod, symbols)."""
    if isinstance(e, AffineDimExpr):
        return {e.position: 1}, 0
    if isinstance(e, AffineConstantExpr):
        return {}, e.value
    if isinstance(e, AffineBinaryOpExpr):
        a, b = linear_form(e.lhs), linear_form(e.rhs)
        if a is None or b is None:
            return None
        if e.kind == AffineBinaryOpKind.Add:
            out = dict(a[0])
            for d, c in b[0].items():
                out[d] = out.get(d, 0) + c
            return {d: c for d, c in out.items() if c}, a[1] + b[1]
        if e.kind == AffineBinaryOpKind.Mul:
            if a[0] and b[0]:
                return None
            (terms, k), scale = (a, b[1]) if not b[0] else (b, a[1])
            return {d: c * scale for d, c in terms.items() if c * scale}, k * scale
    return None


def _plain(e: AffineExpr) -> int | None:
    """The loop dim `e` is alone, or None (the constant 0 is plain too, handled apart)."""
    return e.position if isinstance(e, AffineDimExpr) else None


def window_maps(op: Operation, attrs: Sequence[AffineMapAttr], n_ins: int) -> tuple[list[Map], WindowPlan | None]:
    """The op's maps as projected permutations, inputs with affine-sum maps replaced by
    the maps of their windowed views, and the plan that builds those views (None when
    every map is a projected permutation already)."""
    maps: list[Map] = []
    views: list[WindowView] = []
    amaps: list[AffineMap] = [a.data for a in attrs]
    for i, amap in enumerate(amaps):
        if amap.num_symbols:
            raise compile_error(op, "indexing maps with symbols are not supported by the runtime")
        if all(isinstance(e, AffineDimExpr) or (isinstance(e, AffineConstantExpr) and e.value == 0) for e in amap.results):
            maps.append(map_dims(op, amap))
            continue
        forms = [linear_form(e) for e in amap.results]
        if i >= n_ins or any(f is None or f[1] < 0 or any(c < 0 for c in f[0].values()) for f in forms):
            raise compile_error(
                op,
                f"indexing map {amap} is neither a projected permutation nor, on an input, a sum of loop "
                "dimensions with non-negative constant coefficients (not supported by the runtime)",
            )
        dims: list[int] = []
        for f in forms:
            assert f is not None
            dims.extend(d for d in f[0] if d not in dims)
        terms = tuple(tuple((dims.index(d), c) for d, c in f[0].items()) for f in forms if f is not None)
        offsets = tuple(f[1] for f in forms if f is not None)
        views.append(WindowView(i, tuple(dims), terms, offsets))
        maps.append(tuple(dims))
    if not views:
        return maps, None
    size_src: list[tuple[int, int]] = []
    for d in range(amaps[0].num_dims if amaps else 0):
        src = next(((i, k) for i, m in enumerate(amaps) for k, e in enumerate(m.results) if _plain(e) == d), None)
        if src is None:
            raise compile_error(op, f"loop dimension d{d} is not bound by any operand's shape (a dimension of its own in some indexing map)")
        size_src.append(src)
    return maps, WindowPlan(tuple(size_src), tuple(views), describe(op))


def shift_plan(windows: WindowPlan, spec: StructuredSpec, leaves_are_inputs: bool) -> ShiftPlan | None:
    """The `ShiftPlan` of a contraction `out += x * w` (the two factors its inputs as
    they are) whose one windowed input reads two adjacent axes as `oh * sh + kh * dh`,
    `ow * sw + kw * dw` (its others plain: nchw or channels-last) and whose output has
    (oh, ow) adjacent; None otherwise."""
    plan = spec.plan
    if spec.kind != "contraction" or plan is None or len(windows.views) != 1 or not leaves_are_inputs:
        return None
    if plan.dropped or plan.fixed or plan.scale is not None or plan.out_take is not None or spec.onehot is not None:
        return None
    if len(spec.factor_inputs) != 2 or not spec.out_is_tensor[0]:
        return None
    view = windows.views[0]
    x = view.input
    others = [i for i in spec.factor_inputs if i != x]
    if len(others) != 1 or x not in spec.factor_inputs or others[0] < 0:
        return None
    w = others[0]
    w_map, out = spec.in_maps[w], spec.out_map
    if None in w_map or None in out or len(out) < 2 or len(view.terms) < 2 or any(view.offsets):
        return None
    windowed = [k for k, terms in enumerate(view.terms) if len(terms) != 1]
    if len(windowed) != 2 or windowed[1] != windowed[0] + 1:
        return None
    lead: list[int] = []
    for k, terms in enumerate(view.terms):
        if k in windowed:
            continue
        if len(terms) != 1 or terms[0][1] != 1:
            return None
        lead.append(view.dims[terms[0][0]])
    picked: list[tuple[int, int, int, int]] = []  # (output dim, kernel dim, stride, dilation) per window axis
    for k in windowed:
        terms = view.terms[k]
        if len(terms) != 2:
            return None
        (p, cp), (q, cq) = ((view.dims[a], c) for a, c in terms)
        if q in out and p not in out:
            (p, cp), (q, cq) = (q, cq), (p, cp)
        if p not in out or q in out or q not in w_map or q not in spec.red_dims:
            return None
        picked.append((p, q, cp, cq))
    (oh, kh, sh, dh), (ow, kw, sw, dw) = picked
    out = tuple(out)
    if oh not in out or out.index(ow) != out.index(oh) + 1 or oh in w_map or ow in w_map or oh in lead or ow in lead:
        return None
    used = {*lead, *w_map}
    if any(d not in used for d in spec.red_dims if d not in (kh, kw)):
        return None
    out_lead = tuple(d for d in out if d not in (oh, ow))
    return ShiftPlan(x, w, tuple(lead), oh, ow, kh, kw, dh, dw, tuple(w_map), out_lead, spec.n_loops, sh, sw, windowed[0], out.index(oh))  # type: ignore[arg-type]


def depthwise_plan(windows: WindowPlan, spec: StructuredSpec, leaves_are_inputs: bool) -> DepthwisePlan | None:
    """The `DepthwisePlan` of a contraction `out[n, c, oh, ow] += x[n, c, oh * sh + kh *
    dh, ow * sw + kw * dw] * w[c, kh, kw]` (the factors its inputs as they are); None
    otherwise."""
    plan = spec.plan
    if spec.kind != "contraction" or plan is None or len(windows.views) != 1 or not leaves_are_inputs:
        return None
    if plan.dropped or plan.fixed or plan.scale is not None or plan.out_take is not None or spec.onehot is not None:
        return None
    view = windows.views[0]
    x = view.input
    others = [i for i in spec.factor_inputs if i != x]
    if len(spec.factor_inputs) != 2 or len(others) != 1 or others[0] < 0 or len(view.terms) != 4 or any(view.offsets):
        return None
    if not spec.out_is_tensor[0]:
        return None
    w = others[0]
    out = tuple(spec.out_map)
    plain = [view.terms[0], view.terms[1]]
    if any(len(t) != 1 or t[0][1] != 1 for t in plain):
        return None
    n, c = (view.dims[t[0][0]] for t in plain)
    factors: list[tuple[int, int, int, int]] = []  # (output dim, kernel dim, stride, dilation)
    for terms in view.terms[2:]:
        if len(terms) != 2:
            return None
        (p, cp), (q, cq) = ((view.dims[a], k) for a, k in terms)
        if q in out and p not in out:
            (p, cp), (q, cq) = (q, cq), (p, cp)
        factors.append((p, q, cp, cq))
    (oh, kh, sh, dh), (ow, kw, sw, dw) = factors
    if out != (n, c, oh, ow) or tuple(spec.in_maps[w]) != (c, kh, kw) or set(spec.red_dims) != {kh, kw}:
        return None
    return DepthwisePlan(x, w, (sh, sw), (dh, dw))


def map_dims(op: Operation, amap: AffineMap) -> Map:
    if amap.num_symbols:
        raise compile_error(op, "indexing maps with symbols are not supported by the runtime")
    out: list[int | None] = []
    for e in amap.results:
        if isinstance(e, AffineDimExpr):
            out.append(e.position)
        elif isinstance(e, AffineConstantExpr) and e.value == 0:
            out.append(None)
        else:
            raise compile_error(op, f"indexing map {amap} is not a projected permutation (not supported by the runtime)")
    return tuple(out)
