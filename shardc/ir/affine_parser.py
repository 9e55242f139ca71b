"""Affine expressions built as MLIR builds them, and the parser that builds them.

A module of its own (not the affine dialect's) so that parsing an `affine_map<...>`
imports no dialect: shardc-opt's parser mixes `MLIRAffineParsing` in.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
    AffineSymExpr,
)
from xdsl.parser.affine_parser import AffineParser
from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRToken, MLIRTokenKind

# ---------------------------------------------------------------------------
# xDSL's AffineExpr operators simplify at construction, but differently from MLIR: they
# distribute `(d0 + d1) * 4` into `d0 * 4 + d1 * 4`. `MLIRAffineParser` builds the
# binary nodes itself with MLIR's construction-time rules (AffineExpr.cpp's simplifyAdd
# / simplifyMul / simplifyFloorDiv / simplifyCeilDiv / simplifyMod, the common cases), so
# a parsed map prints back as mlir-opt prints it.

_Kind = AffineBinaryOpKind


def _const(e: AffineExpr) -> int | None:
    return e.value if isinstance(e, AffineConstantExpr) else None


def _symbolic_or_constant(e: AffineExpr) -> bool:
    return not any(isinstance(x, AffineDimExpr) for x in e.dfs())


def _divisor(e: AffineExpr) -> int:
    """MLIR's getLargestKnownDivisor."""
    if isinstance(e, AffineConstantExpr):
        return abs(e.value)
    if not isinstance(e, AffineBinaryOpExpr):
        return 1
    lhs, rhs = _divisor(e.lhs), _divisor(e.rhs)
    if e.kind is _Kind.Mul:
        return lhs * rhs
    if e.kind in (_Kind.Add, _Kind.Mod):
        return math.gcd(lhs, rhs)
    c = _const(e.rhs)
    return lhs // c if c and lhs % c == 0 else 1


def _coefficient(e: AffineExpr) -> tuple[AffineExpr, int]:
    """`x * c` as (x, c); anything else as (e, 1)."""
    if isinstance(e, AffineBinaryOpExpr) and e.kind is _Kind.Mul:
        c = _const(e.rhs)
        if c is not None:
            return e.lhs, c
    return e, 1


def mlir_add(lhs: AffineExpr, rhs: AffineExpr) -> AffineExpr:
    lc, rc = _const(lhs), _const(rhs)
    if lc is not None and rc is not None:
        return AffineConstantExpr(lc + rc)
    if lc is not None or (_symbolic_or_constant(lhs) and not _symbolic_or_constant(rhs)):
        return mlir_add(rhs, lhs)
    if rc == 0:
        return lhs
    if isinstance(lhs, AffineBinaryOpExpr) and lhs.kind is _Kind.Add:
        inner = _const(lhs.rhs)
        if inner is not None and rc is not None:
            return mlir_add(lhs.lhs, AffineConstantExpr(inner + rc))
    (first, c1), (second, c2) = _coefficient(lhs), _coefficient(rhs)
    if first == second:
        return mlir_mul(first, AffineConstantExpr(c1 + c2))
    if isinstance(lhs, AffineBinaryOpExpr) and lhs.kind is _Kind.Add and _const(lhs.rhs) is not None:
        return mlir_add(mlir_add(lhs.lhs, rhs), lhs.rhs)
    if (
        isinstance(rhs, AffineBinaryOpExpr)
        and rhs.kind is _Kind.Mul
        and isinstance(rhs.lhs, AffineBinaryOpExpr)
        and rhs.lhs.kind is _Kind.FloorDiv
        and (q := _const(rhs.lhs.rhs)) is not None
        and _const(rhs.rhs) == -q
        and rhs.lhs.lhs == lhs
    ):
        return mlir_div_mod(_Kind.Mod, lhs, AffineConstantExpr(q))
    if isinstance(rhs, AffineBinaryOpExpr) and rhs.kind is _Kind.Add and _const(rhs.rhs) is not None:
        return mlir_add(mlir_add(lhs, rhs.lhs), rhs.rhs)
    return AffineBinaryOpExpr(_Kind.Add, lhs, rhs)


def mlir_mul(lhs: AffineExpr, rhs: AffineExpr) -> AffineExpr:
    lc, rc = _const(lhs), _const(rhs)
    if lc is not None and rc is not None:
        return AffineConstantExpr(lc * rc)
    if _symbolic_or_constant(lhs) or _symbolic_or_constant(rhs):
        if not _symbolic_or_constant(rhs) or lc is not None:
            return mlir_mul(rhs, lhs)
    if rc == 1:
        return lhs
    if rc == 0:
        return rhs
    if isinstance(lhs, AffineBinaryOpExpr) and lhs.kind is _Kind.Mul:
        inner = _const(lhs.rhs)
        if inner is not None:
            if rc is not None:
                return mlir_mul(lhs.lhs, AffineConstantExpr(inner * rc))
            return mlir_mul(mlir_mul(lhs.lhs, rhs), lhs.rhs)
    return AffineBinaryOpExpr(_Kind.Mul, lhs, rhs)


def mlir_div_mod(kind: AffineBinaryOpKind, lhs: AffineExpr, rhs: AffineExpr) -> AffineExpr:
    lc, rc = _const(lhs), _const(rhs)
    if lc is not None and rc is not None and rc != 0:
        if kind is _Kind.FloorDiv:
            return AffineConstantExpr(lc // rc)
        if kind is _Kind.CeilDiv:
            return AffineConstantExpr(-(-lc // rc))
        return AffineConstantExpr(lc % abs(rc))
    if rc is None or rc < 1:
        return AffineBinaryOpExpr(kind, lhs, rhs)
    if rc == 1:
        return AffineConstantExpr(0) if kind is _Kind.Mod else lhs
    if not isinstance(lhs, AffineBinaryOpExpr):
        return AffineBinaryOpExpr(kind, lhs, rhs)
    c = _const(lhs.rhs)
    if kind is _Kind.Mod:
        if _divisor(lhs) % rc == 0:
            return AffineConstantExpr(0)
        if lhs.kind is _Kind.Add:
            if _divisor(lhs.lhs) % rc == 0:
                return mlir_div_mod(kind, lhs.rhs, rhs)
            if _divisor(lhs.rhs) % rc == 0:
                return mlir_div_mod(kind, lhs.lhs, rhs)
        if lhs.kind is _Kind.Mod and c is not None and c % rc == 0:
            return mlir_div_mod(kind, lhs.lhs, rhs)
        return AffineBinaryOpExpr(kind, lhs, rhs)
    if lhs.kind is _Kind.Mul and c is not None and c % rc == 0:
        return mlir_mul(lhs.lhs, AffineConstantExpr(c // rc))
    if kind is _Kind.FloorDiv:
        if lhs.kind is _Kind.Add and (
            _divisor(lhs.lhs) % rc == 0 or _divisor(lhs.rhs) % rc == 0
        ):
            return mlir_add(mlir_div_mod(kind, lhs.lhs, rhs), mlir_div_mod(kind, lhs.rhs, rhs))
    return AffineBinaryOpExpr(kind, lhs, rhs)


_BUILDERS = {
    "+": mlir_add,
    "-": lambda a, b: mlir_add(a, mlir_mul(b, AffineConstantExpr(-1))),
    "*": mlir_mul,
    "floordiv": lambda a, b: mlir_div_mod(_Kind.FloorDiv, a, b),
    "ceildiv": lambda a, b: mlir_div_mod(_Kind.CeilDiv, a, b),
    "mod": lambda a, b: mlir_div_mod(_Kind.Mod, a, b),
}


class MLIRAffineParser(AffineParser):
    """xDSL's affine parser building expressions with MLIR's simplifications, plus
    MLIR's `[%i + symbol(%n)]` SSA-id maps (ids are dimensions unless in `symbol()`)."""

    def _create_binop_expr(self, lhs: AffineExpr, rhs: AffineExpr, binop: MLIRToken) -> AffineExpr:
        build = _BUILDERS.get(binop.text)
        if build is None:
            raise ParseError(binop.span, f"Unknown binary operator {binop.text}")
        if binop.text in ("*",) and not (_symbolic_or_constant(lhs) or _symbolic_or_constant(rhs)):
            raise ParseError(binop.span, "non-affine expression: at least one of the multiply operands has to be either a constant or symbolic")
        return build(lhs, rhs)

    def _parse_primary(self, parse_optional_bare_id: Callable[[], AffineExpr | None]) -> AffineExpr:
        if self._current_token.kind is MLIRTokenKind.MINUS:
            self._consume_token()
            return mlir_mul(self._parse_primary(parse_optional_bare_id), AffineConstantExpr(-1))
        return super()._parse_primary(parse_optional_bare_id)

    def parse_ssa_id_map(self) -> tuple[AffineMap, list[Span], list[Span]]:
        """`[exprs]` over SSA ids: the map (dims, then symbols) and the spans of the
        dimension and symbol operands in order of first use."""
        dims: dict[str, int] = {}
        syms: dict[str, int] = {}
        dim_spans: list[Span] = []
        sym_spans: list[Span] = []

        def ssa_id() -> AffineExpr | None:
            is_symbol = False
            if self._current_token.kind is MLIRTokenKind.BARE_IDENT and self._current_token.text == "symbol":
                self._consume_token()
                self._parse_token(MLIRTokenKind.L_PAREN, "expected '('")
                is_symbol = True
            token = self._parse_optional_token(MLIRTokenKind.PERCENT_IDENT)
            if token is None:
                if is_symbol:
                    self.raise_error("expected SSA operand")
                return None
            table, spans = (syms, sym_spans) if is_symbol else (dims, dim_spans)
            if token.text not in table:
                table[token.text] = len(table)
                spans.append(token.span)
            if is_symbol:
                self._parse_token(MLIRTokenKind.R_PAREN, "expected ')'")
                return AffineSymExpr(table[token.text])
            return AffineDimExpr(table[token.text])

        exprs = self.parse_comma_separated_list(
            self.Delimiter.SQUARE, lambda: self._parse_affine_expr(ssa_id)
        )
        return AffineMap(len(dims), len(syms), tuple(exprs)), dim_spans, sym_spans



class MLIRAffineParsing:
    """Parser mixin: `affine_map<...>` / `affine_set<...>` built as MLIR builds them
    (mix into a `Parser` subclass: `class P(MLIRAffineParsing, Parser)`)."""

    def parse_affine_map(self) -> AffineMap:
        return MLIRAffineParser(self._parser_state).parse_affine_map()  # type: ignore[attr-defined]

    def parse_affine_set(self) -> AffineSet:
        return MLIRAffineParser(self._parser_state).parse_affine_set()  # type: ignore[attr-defined]
