"""`shard-simplify`: MLIR's Shard simplifications, and the greedy driver they run under.

Patterns (upstream `Simplify.cpp` / `Simplifications.cpp`):
- all-reduce endomorphisms: `f(all_reduce(x), all_reduce(y))` -> `all_reduce(f(x, y))` for
  arith.addf/addi over `sum`, minimumf/minsi/minui over `min`, maximumf/maxsi/maxui over
  `max`, when every operand of `f` is an all-reduce with one use, the same attributes
  (grid, grid_axes, reduction) and an element type the all-reduce does not change;
- `all_slice(all_reduce(x))` -> `reduce_scatter(x)` (one-use all-reduce, same grid/axes);
- `all_slice(all_gather(x))` and `all_gather(all_slice(x))` -> `x` (same grid, axes and
  tensor axis);
- `grid_shape` of static grid axes -> `arith.constant` (dynamic axes stay queried).

`simplification_patterns()` is upstream's older `populateSimplificationPatterns` (what
mlir-opt's `test-grid-simplifications` runs: endomorphisms and grid_shape folding only);
`simplify_patterns()` is `populateSimplifyPatterns`, the `shard-simplify` set.

Not included although tempting: minnumf/maxnumf. They ignore NaNs while the `min`/`max`
reduction (MLIR's reference semantics, and our runtime's np.minimum) propagates them, so
`minnumf(all_reduce_min(x), all_reduce_min(y))` and `all_reduce_min(minnumf(x, y))` differ
when a NaN is present. Upstream leaves them out for the same reason.

`apply_patterns_greedily` is a port of the behaviour of MLIR's GreedyPatternRewriteDriver
(bottom-up worklist, folding, constant CSE and hoisting to the entry block of the enclosing
isolated region, trivial DCE, iteration to a fixed point), so that passes built on it print
what mlir-opt prints; xDSL's walker neither CSEs nor hoists constants.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialect_interfaces.constant_materialization import ConstantMaterializationInterface
from xdsl.dialects import affine, arith, tensor
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    ShapedType,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriterListener, RewritePattern
from xdsl.traits import Commutative, ConstantLike, HasFolder, IsolatedFromAbove
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from shardc.dialects import shard
from shardc.dialects.affine import DelinearizeIndexOp, LinearizeIndexOp

# =========================================================================================
# Folding: MLIR's folders for the ops the shard patterns create
# =========================================================================================

FoldResult = list[SSAValue | Attribute] | None
"""None: no fold; []: the op was updated in place; else one replacement per result."""


def constant_value(value: SSAValue) -> Attribute | None:
    return ConstantLike.get_constant_value(value) if isinstance(value.owner, Operation) else None


def constant_int(value: SSAValue) -> int | None:
    attr = constant_value(value)
    return attr.value.data if isinstance(attr, IntegerAttr) else None


def _width(t: Attribute) -> int | None:
    if isinstance(t, IndexType):
        return 64
    if isinstance(t, IntegerType):
        return t.width.data
    return None


def _signed(v: int, width: int) -> int:
    v &= (1 << width) - 1
    return v - (1 << width) if v >> (width - 1) else v


def _int_attr(v: int, t: Attribute, width: int) -> IntegerAttr:
    v = v & 1 if width == 1 else _signed(v, width)
    return IntegerAttr(v, t)  # pyright: ignore[reportArgumentType]


def _binary_int(op: Operation) -> FoldResult:
    """arith integer binary ops on scalars: constant folding and MLIR's identities."""
    lhs, rhs = op.operands
    width = _width(op.results[0].type)
    if width is None:
        return None
    a, b = constant_int(lhs), constant_int(rhs)
    t = op.results[0].type
    mask = (1 << width) - 1
    ua, ub = (a & mask if a is not None else None), (b & mask if b is not None else None)
    sa = _signed(a, width) if a is not None else None
    sb = _signed(b, width) if b is not None else None
    match op:
        case arith.AddiOp():
            if ub == 0:
                return [lhs]
            if ua is not None and ub is not None:
                return [_int_attr(ua + ub, t, width)]
        case arith.SubiOp():
            if ub == 0:
                return [lhs]
            if lhs is rhs:
                return [_int_attr(0, t, width)]
            if ua is not None and ub is not None:
                return [_int_attr(ua - ub, t, width)]
        case arith.MuliOp():
            if ub == 0:
                return [rhs]
            if ub == 1:
                return [lhs]
            if ua is not None and ub is not None:
                return [_int_attr(ua * ub, t, width)]
        case arith.DivUIOp():
            if ub == 1:
                return [lhs]
            if ua is not None and ub:
                return [_int_attr(ua // ub, t, width)]
        case arith.DivSIOp():
            if ub == 1:
                return [lhs]
            if sa is not None and sb and not (sb == -1 and sa == -(1 << (width - 1))):
                q = abs(sa) // abs(sb)
                return [_int_attr(q if (sa < 0) == (sb < 0) else -q, t, width)]
        case arith.RemUIOp():
            if ub == 1:
                return [_int_attr(0, t, width)]
            if ua is not None and ub:
                return [_int_attr(ua % ub, t, width)]
        case arith.RemSIOp():
            if ub == 1:
                return [_int_attr(0, t, width)]
            if sa is not None and sb:
                r = abs(sa) % abs(sb)
                return [_int_attr(-r if sa < 0 else r, t, width)]
        case _:
            pass
    return None


_CMPI: dict[int, Callable[[int, int, int, int], bool]] = {
    0: lambda sa, sb, ua, ub: sa == sb,  # eq
    1: lambda sa, sb, ua, ub: sa != sb,  # ne
    2: lambda sa, sb, ua, ub: sa < sb,  # slt
    3: lambda sa, sb, ua, ub: sa <= sb,  # sle
    4: lambda sa, sb, ua, ub: sa > sb,  # sgt
    5: lambda sa, sb, ua, ub: sa >= sb,  # sge
    6: lambda sa, sb, ua, ub: ua < ub,  # ult
    7: lambda sa, sb, ua, ub: ua <= ub,  # ule
    8: lambda sa, sb, ua, ub: ua > ub,  # ugt
    9: lambda sa, sb, ua, ub: ua >= ub,  # uge
}


def _cmpi(op: arith.CmpiOp) -> FoldResult:
    width = _width(op.lhs.type)
    predicate = op.predicate.value.data
    if width is None or predicate not in _CMPI:
        return None
    if op.lhs is op.rhs:
        return [IntegerAttr(1 if predicate in (0, 3, 5, 7, 9) else 0, IntegerType(1))]
    a, b = constant_int(op.lhs), constant_int(op.rhs)
    if a is None or b is None:
        return None
    mask = (1 << width) - 1
    holds = _CMPI[predicate](_signed(a, width), _signed(b, width), a & mask, b & mask)
    return [IntegerAttr(1 if holds else 0, IntegerType(1))]


def _tensor_dim(op: tensor.DimOp) -> FoldResult:
    index = constant_int(op.index)
    source = op.source.type
    if index is None or not isinstance(source, TensorType):
        return None
    shape = source.get_shape()  # pyright: ignore[reportUnknownMemberType]
    if 0 <= index < len(shape) and shape[index] >= 0:
        return [IntegerAttr(shape[index], IndexType())]
    return None


def _tensor_cast(op: tensor.CastOp) -> FoldResult:
    if op.source.type == op.dest.type:
        return [op.source]
    inner = op.source.owner
    if isinstance(inner, tensor.CastOp) and inner.source.type == op.dest.type:
        return [inner.source]
    return None


def _affine_apply(op: affine.ApplyOp) -> FoldResult:
    amap = op.map.data
    expr = amap.results[0]
    operands = list(op.mapOperands)
    if isinstance(expr, affine.AffineDimExpr):
        return [operands[expr.position]]
    if isinstance(expr, affine.AffineSymExpr):
        return [operands[amap.num_dims + expr.position]]
    values = [constant_int(v) for v in operands]
    if any(v is None for v in values):
        return None
    ints = [v for v in values if v is not None]
    result = amap.eval(ints[: amap.num_dims], ints[amap.num_dims :])
    return [IntegerAttr(result[0], IndexType())]


def _basis(op: DelinearizeIndexOp | LinearizeIndexOp) -> FoldResult:
    """The overlay's fold, else MLIR's in-place fold of constant dynamic basis entries
    into the static basis."""
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


def _constant(op: arith.ConstantOp) -> FoldResult:
    return [op.value]


_FOLDERS: dict[type[Operation], Callable[[Operation], FoldResult]] = {
    **{
        cls: _binary_int
        for cls in (
            arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.DivUIOp,
            arith.DivSIOp, arith.RemUIOp, arith.RemSIOp,
        )
    },
    arith.CmpiOp: _cmpi,  # pyright: ignore[reportAssignmentType]
    tensor.DimOp: _tensor_dim,  # pyright: ignore[reportAssignmentType]
    tensor.CastOp: _tensor_cast,  # pyright: ignore[reportAssignmentType]
    affine.ApplyOp: _affine_apply,  # pyright: ignore[reportAssignmentType]
    DelinearizeIndexOp: _basis,  # pyright: ignore[reportAssignmentType]
    LinearizeIndexOp: _basis,  # pyright: ignore[reportAssignmentType]
    arith.ConstantOp: _constant,  # pyright: ignore[reportAssignmentType]
}


def _move_constants_last(op: Operation) -> bool:
    """MLIR's commutative trait fold: constant operands go last (stable); True if moved."""
    if len(op.operands) < 2 or not op.has_trait(Commutative):
        return False
    operands = list(op.operands)
    reordered = [v for v in operands if constant_value(v) is None] + [
        v for v in operands if constant_value(v) is not None
    ]
    if all(a is b for a, b in zip(operands, reordered)):
        return False
    op.operands = reordered
    return True


def fold(op: Operation) -> FoldResult:
    """MLIR's `Operation::fold`: the op's folder, then its traits' (commutative) fold."""
    folder = _FOLDERS.get(type(op))
    result: FoldResult = None
    if folder is not None:
        result = folder(op)
    elif (trait := op.get_trait(HasFolder)) is not None:
        folded = trait.fold(op)
        result = list(folded) if folded is not None else None
    if result is not None and not (len(result) == 1 and result[0] is op.results[0]):
        return result
    return [] if _move_constants_last(op) else None


def materialize_constant(ctx: Context | None, op: Operation, value: Attribute, type: Attribute):
    """What the dialects of our ops materialize: `arith.constant` for integers and index."""
    if isinstance(value, IntegerAttr) and isinstance(type, IntegerType | IndexType):
        return arith.ConstantOp(value, type)
    if ctx is not None:
        dialect = ctx.get_optional_dialect(op.dialect_name())
        interface = dialect.get_interface(ConstantMaterializationInterface) if dialect else None
        if interface is not None:
            return interface.materialize_constant(value, type)
    return None


# =========================================================================================
# Constant uniquing and hoisting (MLIR's OperationFolder)
# =========================================================================================


def insertion_region(block: Block) -> Region:
    """The region folded constants go to: the nearest isolated-from-above (or top) one."""
    region = block.parent
    while region is not None:
        parent = region.parent
        if parent is None or parent.has_trait(IsolatedFromAbove) or parent.parent is None:
            return region
        block = parent.parent
        region = block.parent
    raise ValueError("block is not in a region")


class ConstantFolder:
    """Uniques constants per insertion region and hoists them to its entry block."""

    def __init__(self, erase: Callable[[Operation, list[SSAValue]], None]):
        self._erase = erase
        self._scopes: dict[int, dict[tuple[Attribute, Attribute], Operation]] = {}
        self._owned: dict[int, Operation] = {}

    def owns(self, op: Operation | None) -> bool:
        return op is not None and id(op) in self._owned and self._owned[id(op)] is op

    def _scope(self, region: Region) -> dict[tuple[Attribute, Attribute], Operation]:
        return self._scopes.setdefault(id(region), {})

    def insert_known_constant(self, op: Operation) -> bool:
        """False when `op` duplicated a known constant and was replaced by it."""
        block = op.parent_block()
        assert block is not None
        if self.owns(op):
            if block.first_op is not op and not self.owns(op.prev_op):
                op.detach()
                block.insert_op_before(op, block.first_op) if block.first_op else block.add_op(op)
            return True
        value = constant_value(op.results[0])
        assert value is not None
        region = insertion_region(block)
        key = (value, op.results[0].type)
        scope = self._scope(region)
        if (known := scope.get(key)) is not None:
            self._erase(op, list(known.results))
            return False
        entry = region.blocks[0]
        if block is not entry or (entry.first_op is not op and not self.owns(op.prev_op)):
            op.detach()
            entry.insert_op_before(op, entry.first_op) if entry.first_op else entry.add_op(op)
        scope[key] = op
        self._owned[id(op)] = op
        return True

    def get_or_create(self, region: Region, value: Attribute, type: Attribute,
                      make: Callable[[], Operation | None]) -> Operation | None:
        """The unique constant of `value` in `region`, created at its entry when new."""
        scope = self._scope(region)
        if (known := scope.get((value, type))) is not None:
            return known
        new = make()
        if new is None:
            return None
        entry = region.blocks[0]
        entry.insert_op_before(new, entry.first_op) if entry.first_op else entry.add_op(new)
        scope[(value, type)] = new
        self._owned[id(new)] = new
        return new

    def notify_removal(self, op: Operation) -> None:
        if not self.owns(op):
            return
        del self._owned[id(op)]
        for scope in self._scopes.values():
            for key, known in list(scope.items()):
                if known is op:
                    del scope[key]


# =========================================================================================
# The greedy driver
# =========================================================================================


def _post_order(region: Region) -> Iterator[Operation]:
    for block in region.blocks:
        for op in list(block.ops):
            for inner in op.regions:
                yield from _post_order(inner)
            yield op


def _pre_order(region: Region) -> Iterator[Operation]:
    for block in region.blocks:
        for op in list(block.ops):
            yield op
            for inner in op.regions:
                yield from _pre_order(inner)


class _Worklist:
    def __init__(self) -> None:
        self._ops: list[Operation | None] = []
        self._where: dict[int, int] = {}

    def __bool__(self) -> bool:
        return bool(self._where)

    def push(self, op: Operation) -> None:
        if id(op) not in self._where:
            self._where[id(op)] = len(self._ops)
            self._ops.append(op)

    def pop(self) -> Operation | None:
        while self._ops:
            op = self._ops.pop()
            if op is not None:
                del self._where[id(op)]
                return op
        return None

    def remove(self, op: Operation) -> None:
        if (i := self._where.pop(id(op), None)) is not None:
            self._ops[i] = None

    def reverse(self) -> None:
        self._ops.reverse()
        self._where = {id(op): i for i, op in enumerate(self._ops) if op is not None}


@dataclass
class _Driver:
    scope: Region
    patterns: Sequence[RewritePattern]
    ctx: Context | None
    fold: bool
    top_down: bool

    def __post_init__(self) -> None:
        self.worklist = _Worklist()
        self.folder = ConstantFolder(self._replace_and_erase)
        self.listener = PatternRewriterListener(
            operation_insertion_handler=[self.add],
            operation_removal_handler=[self._on_removal],
            operation_modification_handler=[self.add],
        )

    def _rewriter(self, op: Operation) -> PatternRewriter:
        rewriter = PatternRewriter(op)
        rewriter.extend_from_listener(self.listener)
        return rewriter

    def _replace_and_erase(self, op: Operation, values: list[SSAValue]) -> None:
        rewriter = self._rewriter(op)
        for old, new in zip(op.results, values, strict=True):
            rewriter.replace_all_uses_with(old, new)
        rewriter.erase(op)

    def _in_scope(self, op: Operation) -> list[Operation] | None:
        chain: list[Operation] = []
        current: Operation | None = op
        while current is not None:
            chain.append(current)
            region = current.parent_region()
            if region is self.scope:
                return chain
            current = region.parent if region is not None else None
        return None

    def add(self, op: Operation) -> None:
        """MLIR's addToWorklist: the op and its ancestors below the scope."""
        for each in self._in_scope(op) or ():
            self.worklist.push(each)

    def _on_removal(self, op: Operation) -> None:
        for inner in op.walk():
            self.worklist.remove(inner)
            self.folder.notify_removal(inner)
        for operand in op.operands:
            owner = operand.owner
            if not isinstance(owner, Operation):
                continue
            others = {id(u.operation) for u in operand.uses if u.operation is not op}
            if len(others) <= 1:
                self.add(owner)

    def _populate(self) -> None:
        walk = _pre_order if self.top_down else _post_order
        erased: set[int] = set()
        for op in list(walk(self.scope)):
            if id(op) in erased:
                continue
            if op.has_trait(ConstantLike) and constant_value(op.results[0]) is not None:
                if not self.folder.insert_known_constant(op):
                    erased.add(id(op))
                    continue
            self.add(op)
        if self.top_down:
            self.worklist.reverse()

    def _try_fold(self, op: Operation) -> bool:
        result = fold(op)
        if result is None:
            return False
        if not result:
            self.add(op)
            return True
        rewriter = self._rewriter(op)
        values: list[SSAValue] = []
        for item, res in zip(result, op.results, strict=True):
            if isinstance(item, SSAValue):
                values.append(item)
                continue
            constant = materialize_constant(self.ctx, op, item, res.type)
            if constant is None:
                return False
            rewriter.insert(constant)
            values.append(constant.results[0])
        self._replace_and_erase(op, values)
        return True

    def _process(self) -> bool:
        changed = False
        while (op := self.worklist.pop()) is not None:
            if is_trivially_dead(op):
                self._rewriter(op).erase(op)
                changed = True
                continue
            if self.fold and not op.has_trait(ConstantLike) and self._try_fold(op):
                changed = True
                continue
            for pattern in self.patterns:
                rewriter = self._rewriter(op)
                pattern.match_and_rewrite(op, rewriter)
                if rewriter.has_done_action:
                    changed = True
                    break
        return changed

    def run(self, max_iterations: int) -> bool:
        changed_any = False
        for _ in range(max_iterations):
            self.worklist = _Worklist()
            self.folder = ConstantFolder(self._replace_and_erase)
            self._populate()
            if not self._process():
                break
            changed_any = True
        return changed_any


def apply_patterns_greedily(
    root: Operation,
    patterns: Sequence[RewritePattern],
    ctx: Context | None = None,
    *,
    fold: bool = True,
    top_down: bool = False,
    max_iterations: int = 10,
) -> bool:
    """MLIR's `applyPatternsGreedily(root, patterns)` with its default configuration
    (bottom-up, folding and constant CSE on, at most 10 iterations). True if changed."""
    changed = False
    for region in root.regions:
        driver = _Driver(region, patterns, ctx, fold, top_down)
        changed |= driver.run(max_iterations)
    return changed


# =========================================================================================
# Patterns
# =========================================================================================


def _element_type(t: Attribute) -> Attribute | None:
    return t.get_element_type() if isinstance(t, ShapedType) else None  # pyright: ignore


def _same_grid_and_axes(a: shard.CollectiveOp, b: shard.CollectiveOp) -> bool:
    return a.grid == b.grid and a.grid_axes_tuple == b.grid_axes_tuple


def is_endomorphism(
    op: Operation | None, reduction: shard.ReductionKind, reference: shard.AllReduceOp | None
) -> bool:
    """Upstream's `isEndomorphismOp` for all-reduce: `op` is a one-use all-reduce of kind
    `reduction` keeping its element type, and has `reference`'s attributes."""
    if not isinstance(op, shard.AllReduceOp):
        return False
    in_elem = _element_type(op.input.type)
    if in_elem != _element_type(op.result.type) or op.reduction.data != reduction:
        return False
    if not op.result.has_one_use():
        return False
    if reference is None:
        return True
    return (
        reference.properties == op.properties
        and reference.attributes == op.attributes
        and in_elem == _element_type(reference.result.type)
    )


@dataclass(frozen=True)
class AllReduceEndomorphism(RewritePattern):
    """`f(all_reduce(x1), ..., all_reduce(xn))` -> `all_reduce(f(x1, ..., xn))` for an
    algebraic op `f` that the reduction distributes over."""

    algebraic_op: type[Operation]
    reduction: shard.ReductionKind

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if type(op) is not self.algebraic_op or not op.operands:
            return
        first = op.operands[0].owner
        if not isinstance(first, shard.AllReduceOp):
            return
        if not is_endomorphism(first, self.reduction, None):
            return
        if not all(is_endomorphism(v.owner, self.reduction, first) for v in op.operands):
            return
        inputs = [v.owner.input for v in op.operands]  # pyright: ignore
        algebraic = op.clone()
        algebraic.operands = inputs
        rewriter.insert(algebraic)
        reduced = first.clone()
        reduced.operands = [algebraic.results[0]]
        rewriter.insert(reduced)
        rewriter.replace_all_uses_with(op.results[0], reduced.results[0])


def endomorphism_patterns() -> list[RewritePattern]:
    """Upstream's eight all-reduce endomorphism patterns, in upstream's order."""
    kinds = shard.ReductionKind
    return [
        AllReduceEndomorphism(arith.AddfOp, kinds.SUM),
        AllReduceEndomorphism(arith.AddiOp, kinds.SUM),
        AllReduceEndomorphism(arith.MinimumfOp, kinds.MIN),
        AllReduceEndomorphism(arith.MinSIOp, kinds.MIN),
        AllReduceEndomorphism(arith.MinUIOp, kinds.MIN),
        AllReduceEndomorphism(arith.MaximumfOp, kinds.MAX),
        AllReduceEndomorphism(arith.MaxSIOp, kinds.MAX),
        AllReduceEndomorphism(arith.MaxUIOp, kinds.MAX),
    ]


class AllReduceAllSliceToReduceScatter(RewritePattern):
    """`all_slice(all_reduce(x))` -> `reduce_scatter(x)`: half the traffic, 1/N the
    memory. The all-reduce must have no other use and the same grid and grid axes."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, shard.AllSliceOp):
            return
        reduce = op.input.owner
        if not isinstance(reduce, shard.AllReduceOp) or not reduce.result.has_one_use():
            return
        if not _same_grid_and_axes(reduce, op):
            return
        new = shard.ReduceScatterOp.create(
            operands=[reduce.input],
            result_types=[op.result.type],
            properties={
                "grid": op.grid,
                "grid_axes": op.grid_axes,
                "reduction": reduce.reduction,
                "scatter_axis": op.slice_axis,
            },
        )
        rewriter.replace(op, new)


def gather_slice_cancel(gather: shard.AllGatherOp, slice_op: shard.AllSliceOp) -> bool:
    """Upstream's `isAllGatherAllSliceFoldable`: same grid, grid axes and tensor axis."""
    return (
        _same_grid_and_axes(gather, slice_op)
        and gather.gather_axis.value.data == slice_op.slice_axis.value.data
    )


class AllGatherAllSliceCancel(RewritePattern):
    """`all_slice(all_gather(x))` and `all_gather(all_slice(x))` -> `x`, when they undo
    each other (the inner op may have other uses: it is not erased then)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, shard.AllSliceOp):
            inner = op.input.owner
            if isinstance(inner, shard.AllGatherOp) and gather_slice_cancel(inner, op):
                rewriter.replace(op, [], [inner.input])
        elif isinstance(op, shard.AllGatherOp):
            inner = op.input.owner
            if isinstance(inner, shard.AllSliceOp) and gather_slice_cancel(op, inner):
                rewriter.replace(op, [], [inner.input])


class GridShapeFolder(RewritePattern):
    """`grid_shape` -> `arith.constant` for each static axis; the dynamic ones stay, in
    a narrower `grid_shape ... axes = [...]`."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, shard.GridShapeOp):
            return
        grid = shard.lookup_grid(op, op.grid)
        if grid is None:
            return
        shape = grid.shape_tuple
        axes = op.axes.get_values() or tuple(range(grid.rank))
        if any(not 0 <= a < len(shape) for a in axes):
            return
        if all(shape[a] is None for a in axes):
            return
        new_ops: list[Operation] = []
        results: list[SSAValue | None] = [None] * len(axes)
        dynamic = [i for i, a in enumerate(axes) if shape[a] is None]
        for i, a in enumerate(axes):
            size = shape[a]
            if size is not None:
                constant = arith.ConstantOp(IntegerAttr(size, IndexType()))
                new_ops.append(constant)
                results[i] = constant.result
        if dynamic:
            query = shard.GridShapeOp(grid.sym_name.data, [axes[i] for i in dynamic])
            new_ops.append(query)
            for i, value in zip(dynamic, query.results):
                results[i] = value
        rewriter.replace(op, new_ops, results)


def folding_patterns() -> list[RewritePattern]:
    """Upstream's `populateFoldingPatterns`."""
    return [GridShapeFolder()]


def simplification_patterns() -> list[RewritePattern]:
    """Upstream's `populateSimplificationPatterns` (test-grid-simplifications)."""
    return [*endomorphism_patterns(), *folding_patterns()]


def simplify_patterns() -> list[RewritePattern]:
    """Upstream's `populateSimplifyPatterns` (shard-simplify)."""
    return [
        *endomorphism_patterns(),
        AllReduceAllSliceToReduceScatter(),
        AllGatherAllSliceCancel(),
        *folding_patterns(),
    ]


@dataclass(frozen=True)
class ShardSimplifyPass(ModulePass):
    """Applies the Shard simplification patterns (all-reduce endomorphisms, all_slice of
    all_reduce to reduce_scatter, all_gather/all_slice cancellation, static grid_shape to
    constants) with MLIR's greedy driver."""

    name = "shard-simplify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        apply_patterns_greedily(op, simplify_patterns(), ctx)
