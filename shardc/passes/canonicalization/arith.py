"""MLIR's arith folders (ArithOps.cpp) and canonicalization patterns
(ArithCanonicalization.td) that xDSL's arith lacks or gets differently. Scalar integers
and index only; for other types xDSL's folders still run.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from shardc.passes.canonicalization.common import (
    constant_int,
    insert_constant,
    int_attr,
    signed,
    unsigned,
    width,
)
from shardc.passes.fold_registry import FoldResult, register_folder, register_patterns
from shardc.passes.folding import constant_value

Fold = list[SSAValue | Attribute] | None


# =========================================================================================
# Folders
# =========================================================================================


def _zero(op: Operation) -> Fold:
    return [int_attr(0, op.results[0].type)]


def _const_fold(op: Operation, fn: Callable[[int, int, int], int | None]) -> Fold:
    """`constFoldBinaryOp`: `fn(a, b, bits)` on two constant operands (None: no fold)."""
    t = op.results[0].type
    bits = width(t)
    a, b = constant_int(op.operands[0]), constant_int(op.operands[1])
    if bits is None or a is None or b is None:
        return None
    result = fn(a, b, bits)
    return None if result is None else [int_attr(result, t)]


def _defining(value: SSAValue, cls: type[Operation]) -> Operation | None:
    owner = value.owner
    return owner if isinstance(owner, cls) else None


@register_folder(arith.AddiOp)
def fold_addi(op: arith.AddiOp) -> FoldResult:
    if constant_int(op.rhs) == 0:
        return [op.lhs]
    sub = _defining(op.lhs, arith.SubiOp)
    if sub is not None and sub.operands[1] is op.rhs:
        return [sub.operands[0]]
    sub = _defining(op.rhs, arith.SubiOp)
    if sub is not None and sub.operands[1] is op.lhs:
        return [sub.operands[0]]
    return _const_fold(op, lambda a, b, _: a + b)


@register_folder(arith.SubiOp)
def fold_subi(op: arith.SubiOp) -> FoldResult:
    if op.lhs is op.rhs and width(op.result.type) is not None:
        return _zero(op)
    if constant_int(op.rhs) == 0:
        return [op.lhs]
    add = _defining(op.lhs, arith.AddiOp)
    if add is not None:
        if add.operands[1] is op.rhs:
            return [add.operands[0]]
        if add.operands[0] is op.rhs:
            return [add.operands[1]]
    return _const_fold(op, lambda a, b, _: a - b)


@register_folder(arith.MuliOp)
def fold_muli(op: arith.MuliOp) -> FoldResult:
    rhs = constant_int(op.rhs)
    if rhs == 0:
        return [op.rhs]
    if rhs == 1:
        return [op.lhs]
    return _const_fold(op, lambda a, b, _: a * b)


def _unsigned_op(fn: Callable[[int, int], int]) -> Callable[[int, int, int], int | None]:
    """`fn` on the unsigned values, no fold when dividing by zero."""

    def apply(a: int, b: int, bits: int) -> int | None:
        a, b = unsigned(a, bits), unsigned(b, bits)
        return fn(a, b) if b else None

    return apply


def _sdiv(a: int, b: int, bits: int) -> int | None:
    a, b = signed(a, bits), signed(b, bits)
    if b == 0 or (b == -1 and a == -(1 << (bits - 1))):  # by zero, or overflow
        return None
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _srem(a: int, b: int, bits: int) -> int | None:
    a, b = signed(a, bits), signed(b, bits)
    if b == 0:
        return None
    r = abs(a) % abs(b)
    return -r if a < 0 else r


_DIVISIONS: dict[type[Operation], tuple[Callable[[int, int, int], int | None], bool]] = {
    # op: (constant folder, whether `x op 1` is 0 rather than x)
    arith.DivUIOp: (_unsigned_op(operator.floordiv), False),
    arith.DivSIOp: (_sdiv, False),
    arith.RemUIOp: (_unsigned_op(operator.mod), True),
    arith.RemSIOp: (_srem, True),
}


@register_folder(*_DIVISIONS)
def fold_division(op: Operation) -> FoldResult:
    """`x / 1 -> x`, `x % 1 -> 0`, two constants unless dividing by zero or overflowing."""
    fn, rem = _DIVISIONS[type(op)]
    if constant_int(op.operands[1]) == 1 and width(op.results[0].type) is not None:
        return _zero(op) if rem else [op.operands[0]]
    return _const_fold(op, fn)


_MINMAX: dict[type[Operation], tuple[bool, bool]] = {
    # op: (is_max, is_signed)
    arith.MaxSIOp: (True, True),
    arith.MaxUIOp: (True, False),
    arith.MinSIOp: (False, True),
    arith.MinUIOp: (False, False),
}


@register_folder(*_MINMAX)
def fold_min_max(op: Operation) -> FoldResult:
    """`max(x, x) -> x`; the extreme value of the order absorbs, the other is neutral."""
    lhs, rhs = op.operands
    if lhs is rhs:
        return [lhs]
    bits = width(op.results[0].type)
    if bits is None:
        return None
    is_max, is_signed = _MINMAX[type(op)]
    norm = (lambda v: signed(v, bits)) if is_signed else (lambda v: unsigned(v, bits))
    top = (1 << (bits - 1)) - 1 if is_signed else (1 << bits) - 1
    bottom = -(1 << (bits - 1)) if is_signed else 0
    c = constant_int(rhs)
    if c is not None:
        c = norm(c)
        if c == (top if is_max else bottom):
            return [rhs]
        if c == (bottom if is_max else top):
            return [lhs]

    def pick(a: int, b: int, _: int) -> int:
        a, b = norm(a), norm(b)
        return max(a, b) if is_max else min(a, b)

    return _const_fold(op, pick)


@register_folder(arith.AndIOp)
def fold_andi(op: arith.AndIOp) -> FoldResult:
    bits = width(op.result.type)
    c = constant_int(op.rhs)
    if c is not None and bits is not None:
        if unsigned(c, bits) == 0:
            return [op.rhs]
        if unsigned(c, bits) == (1 << bits) - 1:
            return [op.lhs]
    if op.lhs is op.rhs:
        return [op.lhs]
    return _const_fold(op, lambda a, b, _: a & b)


@register_folder(arith.OrIOp)
def fold_ori(op: arith.OrIOp) -> FoldResult:
    bits = width(op.result.type)
    c = constant_int(op.rhs)
    if c is not None and bits is not None:
        if unsigned(c, bits) == 0:
            return [op.lhs]
        if unsigned(c, bits) == (1 << bits) - 1:
            attr = constant_value(op.rhs)
            assert attr is not None
            return [attr]
    if op.lhs is op.rhs:
        return [op.lhs]
    return _const_fold(op, lambda a, b, _: a | b)


@register_folder(arith.XOrIOp)
def fold_xori(op: arith.XOrIOp) -> FoldResult:
    """`xor(x, 0) -> x`, `xor(x, x) -> 0`, `xor(xor(x, a), a) -> x` (either order)."""
    if constant_int(op.rhs) == 0:
        return [op.lhs]
    if op.lhs is op.rhs and width(op.result.type) is not None:
        return _zero(op)
    inner = _defining(op.lhs, arith.XOrIOp)
    if inner is not None:
        if inner.operands[1] is op.rhs:
            return [inner.operands[0]]
        if inner.operands[0] is op.rhs:
            return [inner.operands[1]]
    inner = _defining(op.rhs, arith.XOrIOp)
    if inner is not None:
        if inner.operands[1] is op.lhs:
            return [inner.operands[0]]
        if inner.operands[0] is op.lhs:
            return [inner.operands[1]]
    return _const_fold(op, lambda a, b, _: a ^ b)


def _shift(op: Operation, fn: Callable[[int, int, int], int]) -> FoldResult:
    if constant_int(op.operands[1]) == 0:
        return [op.operands[0]]

    def guarded(a: int, b: int, bits: int) -> int | None:
        b = unsigned(b, bits)
        return None if b >= bits else fn(a, b, bits)

    return _const_fold(op, guarded)


@register_folder(arith.ShLIOp)
def fold_shli(op: arith.ShLIOp) -> FoldResult:
    return _shift(op, lambda a, b, _: a << b)


@register_folder(arith.ShRUIOp)
def fold_shrui(op: arith.ShRUIOp) -> FoldResult:
    return _shift(op, lambda a, b, bits: unsigned(a, bits) >> b)


@register_folder(arith.ShRSIOp)
def fold_shrsi(op: arith.ShRSIOp) -> FoldResult:
    return _shift(op, lambda a, b, bits: signed(a, bits) >> b)


# cmpi predicates: eq ne slt sle sgt sge ult ule ugt uge
_REFLEXIVE = frozenset({0, 3, 5, 7, 9})
_SWAPPED = {0: 0, 1: 1, 2: 4, 3: 5, 4: 2, 5: 3, 6: 8, 7: 9, 8: 6, 9: 7}
_COMPARE: dict[int, Callable[[int, int], bool]] = {
    0: lambda a, b: a == b,
    1: lambda a, b: a != b,
    2: lambda a, b: a < b,
    3: lambda a, b: a <= b,
    4: lambda a, b: a > b,
    5: lambda a, b: a >= b,
}


_I1 = IntegerType(1)


@register_folder(arith.CmpiOp)
def fold_cmpi(op: arith.CmpiOp) -> FoldResult:
    """Equal operands, two constants, or a constant on the left (moved right, the
    predicate swapped: in place)."""
    lhs, rhs = op.operands  # (the named accessors are descriptor calls; every cmpi comes here)
    bits = width(lhs.type)
    predicate = op.predicate.value.data
    if bits is None or predicate not in _SWAPPED:
        return None
    i1 = _I1
    if lhs is rhs:
        return [IntegerAttr(1 if predicate in _REFLEXIVE else 0, i1)]
    a, b = constant_int(lhs), constant_int(rhs)
    if a is not None and b is not None:
        if predicate < 6:
            holds = _COMPARE[predicate](signed(a, bits), signed(b, bits))
        else:
            holds = _COMPARE[predicate - 4](unsigned(a, bits), unsigned(b, bits))
        return [IntegerAttr(1 if holds else 0, i1)]
    if a is not None:
        op.operands = [rhs, lhs]
        op.predicate = IntegerAttr(_SWAPPED[predicate], IntegerType(64))
        return []
    return None


@register_folder(arith.SelectOp)
def fold_select(op: arith.SelectOp) -> FoldResult:
    true_value, false_value = op.lhs, op.rhs
    if true_value is false_value:
        return [true_value]
    cond = constant_int(op.cond)
    if cond is not None and width(op.cond.type) == 1:
        return [true_value if cond & 1 else false_value]
    if op.result.type == IntegerType(1):
        t, f = constant_int(true_value), constant_int(false_value)
        if t is not None and f is not None and t & 1 and not f & 1:
            return [op.cond]
    cmp = _defining(op.cond, arith.CmpiOp)
    if cmp is not None:
        pair = {cmp.operands[0], cmp.operands[1]}
        if pair == {true_value, false_value} and len(pair) == 2:
            predicate = cmp.predicate.value.data
            if predicate == 0:  # select(x == y, x, y) -> y
                return [false_value]
            if predicate == 1:  # select(x != y, x, y) -> x
                return [true_value]
    return None


@register_folder(arith.IndexCastOp)
def fold_index_cast(op: arith.IndexCastOp) -> FoldResult:
    """A constant cast between an integer type and index: sign-extended or truncated."""
    value = constant_int(op.input)
    bits_in = width(op.input.type)
    if value is None or bits_in is None or width(op.result.type) is None:
        return None
    return [int_attr(signed(value, bits_in), op.result.type)]


# =========================================================================================
# Patterns (ArithCanonicalization.td): reassociation of constants
# =========================================================================================


def _flags(op: Operation) -> arith.IntegerOverflowAttr:
    return op.properties.get("overflowFlags", arith.IntegerOverflowAttr("none"))  # pyright: ignore


def _merge(a: Operation, b: Operation) -> arith.IntegerOverflowAttr:
    """`mergeOverflowFlags`: only what both ops promise."""
    common = set(_flags(a).data) & set(_flags(b).data)
    return arith.IntegerOverflowAttr(common or "none")  # pyright: ignore[reportArgumentType]


def _scalar_int_const(value: SSAValue) -> IntegerAttr | None:
    attr = constant_value(value)
    if isinstance(attr, IntegerAttr) and isinstance(attr.type, IntegerType | IndexType):
        return attr
    return None


class _Reassociate(RewritePattern):
    """`outer(inner(a, b), c)` or `outer(c, inner(a, b))` with two constants among the
    operands rewritten to one op of the folded constant and the remaining value.

    Subclasses give: the outer and inner op classes, which side of each is the constant
    (`"lhs"`/`"rhs"`), how to combine the constants and which op to build."""

    outer: type[Operation]
    inner: type[Operation]
    inner_const_side: str
    outer_const_side: str

    def combine(self, inner_c: int, outer_c: int) -> int:
        raise NotImplementedError

    result_op: type[Operation]
    const_first: bool = False
    """Whether the new op is `op(const, x)` rather than `op(x, const)`."""
    merge_flags: bool = True

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, self.outer):
            return
        outer_c_value, inner_value = (
            (op.operands[1], op.operands[0])
            if self.outer_const_side == "rhs"
            else (op.operands[0], op.operands[1])
        )
        outer_c = _scalar_int_const(outer_c_value)
        inner = inner_value.owner
        if outer_c is None or not isinstance(inner, self.inner):
            return
        inner_c_value, x = (
            (inner.operands[1], inner.operands[0])
            if self.inner_const_side == "rhs"
            else (inner.operands[0], inner.operands[1])
        )
        inner_c = _scalar_int_const(inner_c_value)
        if inner_c is None:
            return
        t = op.results[0].type
        folded = int_attr(self.combine(inner_c.value.data, outer_c.value.data), t)
        constant = insert_constant(rewriter, op, folded)
        operands = [constant, x] if self.const_first else [x, constant]
        flags = _merge(inner, op) if self.merge_flags else arith.IntegerOverflowAttr("none")
        new = self.result_op(*operands, overflow=flags)  # pyright: ignore[reportCallIssue]
        rewriter.replace(op, new)


def _reassociation(
    name: str,
    outer: type[Operation],
    inner: type[Operation],
    sides: tuple[str, str],
    combine: Callable[[int, int], int],
    result_op: type[Operation],
    const_first: bool = False,
    merge_flags: bool = True,
) -> RewritePattern:
    """A named `_Reassociate` pattern (the name is MLIR's, for enable/disable-patterns)."""
    cls = type(
        name,
        (_Reassociate,),
        {
            "outer": outer,
            "inner": inner,
            "inner_const_side": sides[0],
            "outer_const_side": sides[1],
            "combine": lambda self, a, b: combine(a, b),  # pyright: ignore
            "result_op": result_op,
            "const_first": const_first,
            "merge_flags": merge_flags,
            "__doc__": f"MLIR's {name}.",
        },
    )
    return cls()


Add, Sub, Mul = arith.AddiOp, arith.SubiOp, arith.MuliOp

ADDI_PATTERNS = (
    # addi(addi(x, c0), c1) -> addi(x, c0 + c1)
    _reassociation("AddIAddConstant", Add, Add, ("rhs", "rhs"), lambda c0, c1: c0 + c1, Add),
    # addi(subi(x, c0), c1) -> addi(x, c1 - c0)
    _reassociation("AddISubConstantRHS", Add, Sub, ("rhs", "rhs"), lambda c0, c1: c1 - c0, Add),
    # addi(subi(c0, x), c1) -> subi(c0 + c1, x)
    _reassociation(
        "AddISubConstantLHS", Add, Sub, ("lhs", "rhs"), lambda c0, c1: c0 + c1, Sub, True
    ),
)

SUBI_PATTERNS = (
    # subi(addi(x, c0), c1) -> addi(x, c0 - c1)   (flags dropped, as upstream)
    _reassociation(
        "SubIRHSAddConstant", Sub, Add, ("rhs", "rhs"), lambda c0, c1: c0 - c1, Add,
        merge_flags=False,
    ),
    # subi(c1, addi(x, c0)) -> subi(c1 - c0, x)
    _reassociation(
        "SubILHSAddConstant", Sub, Add, ("rhs", "lhs"), lambda c0, c1: c1 - c0, Sub, True
    ),
    # subi(subi(x, c0), c1) -> subi(x, c0 + c1)
    _reassociation(
        "SubIRHSSubConstantRHS", Sub, Sub, ("rhs", "rhs"), lambda c0, c1: c0 + c1, Sub
    ),
    # subi(subi(c0, x), c1) -> subi(c0 - c1, x)
    _reassociation(
        "SubIRHSSubConstantLHS", Sub, Sub, ("lhs", "rhs"), lambda c0, c1: c0 - c1, Sub, True
    ),
    # subi(c1, subi(x, c0)) -> subi(c0 + c1, x)
    _reassociation(
        "SubILHSSubConstantRHS", Sub, Sub, ("rhs", "lhs"), lambda c0, c1: c0 + c1, Sub, True
    ),
    # subi(c1, subi(c0, x)) -> addi(x, c1 - c0)
    _reassociation(
        "SubILHSSubConstantLHS", Sub, Sub, ("lhs", "lhs"), lambda c0, c1: c1 - c0, Add
    ),
)

MULI_PATTERNS = (
    # muli(muli(x, c0), c1) -> muli(x, c0 * c1)
    _reassociation("MulIMulIConstant", Mul, Mul, ("rhs", "rhs"), lambda c0, c1: c0 * c1, Mul),
)


class _AddIMulNegativeOne(RewritePattern):
    """`addi(x, muli(y, -1)) -> subi(x, y)` and `addi(muli(x, -1), y) -> subi(y, x)`
    (MLIR's AddIMulNegativeOneRhs / Lhs, tried in that order)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, arith.AddiOp):
            return
        for mul_side, other in ((op.rhs, op.lhs), (op.lhs, op.rhs)):
            mul = mul_side.owner
            if not isinstance(mul, arith.MuliOp):
                continue
            bits = width(mul.result.type)
            c = constant_int(mul.rhs)
            if bits is not None and c is not None and unsigned(c, bits) == (1 << bits) - 1:
                rewriter.replace(op, arith.SubiOp(other, mul.lhs))
                return


class SubISubILHSRHSLHS(RewritePattern):
    """`subi(subi(a, b), a) -> subi(0, b)`."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, arith.SubiOp):
            return
        inner = op.lhs.owner
        if not isinstance(inner, arith.SubiOp) or inner.lhs is not op.rhs:
            return
        if width(op.result.type) is None:
            return
        zero = insert_constant(rewriter, op, int_attr(0, op.result.type))
        rewriter.replace(op, arith.SubiOp(zero, inner.rhs, overflow=_merge(inner, op)))


class IndexCastOfIndexCast(RewritePattern):
    """`index_cast(index_cast(x)) -> x` when the types round-trip."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, arith.IndexCastOp):
            return
        inner = op.input.owner
        if isinstance(inner, arith.IndexCastOp) and inner.input.type == op.result.type:
            rewriter.replace(op, [], [inner.input])


class RedundantSelect(RewritePattern):
    """`select(p, select(p, a, b), c) -> select(p, a, c)` and
    `select(p, a, select(p, b, c)) -> select(p, a, c)` (RedundantSelectTrue/False)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, arith.SelectOp):
            return
        inner = op.lhs.owner
        if isinstance(inner, arith.SelectOp) and inner.cond is op.cond:
            rewriter.replace(op, arith.SelectOp(op.cond, inner.lhs, op.rhs))
            return
        inner = op.rhs.owner
        if isinstance(inner, arith.SelectOp) and inner.cond is op.cond:
            rewriter.replace(op, arith.SelectOp(op.cond, op.lhs, inner.rhs))


register_patterns(arith.AddiOp, *ADDI_PATTERNS, _AddIMulNegativeOne())
register_patterns(arith.SubiOp, *SUBI_PATTERNS, SubISubILHSRHSLHS())
register_patterns(arith.MuliOp, *MULI_PATTERNS)
register_patterns(arith.IndexCastOp, IndexCastOfIndexCast())
register_patterns(arith.SelectOp, RedundantSelect())
