"""MLIR's affine folders and the part of `canonicalizeMapAndOperands` that our lowerings
need: `affine.apply` folds to an operand or a constant, and constant operands are folded
into its map (unused operands dropped); `affine.delinearize_index` takes constant basis
entries into its static basis."""

from __future__ import annotations

from xdsl.dialects import affine
from xdsl.dialects.builtin import DYNAMIC_INDEX, AffineMapAttr, DenseArrayBase, IndexType, IntegerAttr, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap, AffineSymExpr
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.traits import IsolatedFromAbove

from shardc.dialects.affine import DelinearizeIndexOp, LinearizeIndexOp
from shardc.passes.canonicalization.common import constant_int
from shardc.passes.fold_registry import FoldResult, register_folder, register_patterns


@register_folder(affine.ApplyOp)
def fold_apply(op: affine.ApplyOp) -> FoldResult:
    amap = op.map.data
    if len(amap.results) != 1:
        return None
    expr = amap.results[0]
    operands = list(op.mapOperands)
    if isinstance(expr, AffineDimExpr):
        return [operands[expr.position]]
    if isinstance(expr, AffineSymExpr):
        return [operands[amap.num_dims + expr.position]]
    values = [constant_int(v) for v in operands]
    if any(v is None for v in values):
        return None
    ints = [v for v in values if v is not None]
    result = amap.eval(ints[: amap.num_dims], ints[amap.num_dims :])
    return [IntegerAttr(result[0], IndexType())]


def is_valid_symbol(value: SSAValue) -> bool:
    """MLIR's `isValidSymbol`, for the common case: defined at the top level of the
    nearest isolated-from-above op (our stand-in for an AffineScope), or a constant."""
    if constant_int(value) is not None:
        return True
    block = value.owner if isinstance(value.owner, Block) else value.owner.parent
    region = block.parent if block is not None else None
    scope = region.parent if region is not None else None
    return scope is not None and scope.has_trait(IsolatedFromAbove)


def _promote_symbols(
    amap: AffineMap, operands: list[SSAValue]
) -> tuple[AffineMap, list[SSAValue]]:
    """`canonicalizePromotedSymbols`: dims whose operand is a valid symbol become
    symbols, numbered after the existing ones."""
    n_dims, n_syms = amap.num_dims, amap.num_symbols
    dims: list[AffineExpr] = []
    kept: list[SSAValue] = []
    promoted: list[SSAValue] = []
    for value in operands[:n_dims]:
        if is_valid_symbol(value):
            dims.append(AffineExpr.symbol(n_syms + len(promoted)))
            promoted.append(value)
        else:
            dims.append(AffineExpr.dimension(len(kept)))
            kept.append(value)
    if not promoted:
        return amap, operands
    syms = [AffineExpr.symbol(i) for i in range(n_syms)]
    new_map = amap.replace_dims_and_symbols(dims, syms, len(kept), n_syms + len(promoted))
    return new_map, [*kept, *operands[n_dims:], *promoted]


def canonicalize_map_and_operands(
    amap: AffineMap, operands: list[SSAValue]
) -> tuple[AffineMap, list[SSAValue]] | None:
    """Dims that are valid symbols become symbols, constant operands become constants
    in the map, repeated operands one, unused ones go; the remaining dims and symbols
    are renumbered in order. None if nothing changes."""
    original_map, original = amap, operands
    amap, operands = _promote_symbols(amap, operands)
    n_dims = amap.num_dims
    used = set[int]()
    for expr in amap.results:
        for sub in expr.dfs():
            if isinstance(sub, AffineDimExpr):
                used.add(sub.position)
            elif isinstance(sub, AffineSymExpr):
                used.add(n_dims + sub.position)
    replacements: list[AffineExpr] = []
    new_operands: list[SSAValue] = []
    new_dims = new_syms = 0
    seen: dict[tuple[bool, SSAValue], AffineExpr] = {}
    for i, value in enumerate(operands):
        is_dim = i < n_dims
        c = constant_int(value) if i in used else None
        if i not in used:
            replacements.append(AffineExpr.constant(0))
        elif c is not None:
            replacements.append(AffineExpr.constant(c))
        elif (is_dim, value) in seen:
            replacements.append(seen[(is_dim, value)])
        else:
            if is_dim:
                expr = AffineExpr.dimension(new_dims)
                new_dims += 1
            else:
                expr = AffineExpr.symbol(new_syms)
                new_syms += 1
            seen[(is_dim, value)] = expr
            replacements.append(expr)
            new_operands.append(value)
    new_map = amap.replace_dims_and_symbols(
        replacements[:n_dims], replacements[n_dims:], new_dims, new_syms
    )
    new_map = AffineMap(
        new_dims, new_syms, tuple(_simplify(e, new_dims, new_syms) for e in new_map.results)
    )
    if new_map == original_map and new_operands == original:
        return None
    return new_map, new_operands


def _simplify(expr: AffineExpr, n_dims: int, n_syms: int) -> AffineExpr:
    try:
        return expr.simplify(n_dims, n_syms)
    except NotImplementedError:
        return expr


class SimplifyAffineApply(RewritePattern):
    """`affine.apply` with constant, repeated or unused operands gets a smaller map."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, affine.ApplyOp):
            return
        done = canonicalize_map_and_operands(op.map.data, list(op.mapOperands))
        if done is None:
            return
        new_map, operands = done
        rewriter.replace(
            op, affine.ApplyOp(operands, AffineMapAttr(new_map))
        )


@register_folder(DelinearizeIndexOp, LinearizeIndexOp)
def fold_basis(op: DelinearizeIndexOp | LinearizeIndexOp) -> FoldResult:
    """The overlay's fold, else MLIR's in-place fold of constant dynamic basis entries
    into the static basis (delinearize)."""
    folded = op.fold()
    if folded is not None:
        return list(folded)
    if not isinstance(op, DelinearizeIndexOp):
        return None
    static = list(op.static_basis.get_values())
    dynamic = list(op.dynamic_basis)
    if all(constant_int(v) is None for v in dynamic):
        return None
    kept: list[SSAValue] = []
    it = iter(dynamic)
    for i, entry in enumerate(static):
        if entry == DYNAMIC_INDEX:
            value = next(it)
            if (c := constant_int(value)) is not None:
                static[i] = c
            else:
                kept.append(value)
    op.operands = [op.operands[0], *kept]
    op.static_basis = DenseArrayBase.from_list(i64, static)
    return []


register_patterns(affine.ApplyOp, SimplifyAffineApply())
