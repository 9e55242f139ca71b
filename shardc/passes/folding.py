"""Folding helpers shared by the greedy rewrite driver: MLIR's `m_Constant`, op folding with
constant materialisation, and the `OperationFolder` that uniques constants.

MLIR's greedy driver folds an op before trying its patterns, materialising folded
attributes as constants right before the op; at the start of every iteration it walks the
IR and uniques constants per (dialect, value, type) at the front of the entry block of the
nearest isolated-from-above region (`OperationFolder::insertKnownConstant`). The order in
which that moves constants is observable in the output, so it is reproduced here exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialect_interfaces.constant_materialization import (
    ConstantMaterializationInterface,
)
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, UnregisteredOp
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue
from xdsl.traits import (
    Commutative,
    ConstantLike,
    HasFolder,
    IsolatedFromAbove,
    IsTerminator,
    MemoryEffect,
    MemoryEffectKind,
    MemoryReadEffect,
    MemoryWriteEffect,
    NoMemoryEffect,
    RecursiveMemoryEffect,
    SymbolOpInterface,
)

from shardc.passes.fold_registry import (
    NOT_REGISTERED,
    effect_free_entry,
    per_class,
    registered_constant,
    registered_effect_free,
    registered_folder,
    registered_materializer,
)
from shardc.ir.traits import get_trait, has_trait, traits_of_type


# `cls -> isinstance of the base`, filled as classes are met: xDSL's op, value and
# attribute bases are ABCs, whose isinstance is a Python call (several times a plain class
# test), and the tests below run once per op and operand of every greedy run.
_IS_RESULT: dict[type, bool] = {}
_IS_UNREGISTERED: dict[type, bool] = {}
_IS_INT_BINARY: dict[type, bool] = {}


def _is(table: dict[type, bool], base: type, obj: object) -> bool:
    """`isinstance(obj, base)`, once per class of `obj` (`table` is base's)."""
    cls = type(obj)
    found = table.get(cls)
    if found is None:
        found = table[cls] = isinstance(obj, base)
    return found


def constant_value(value: SSAValue) -> Attribute | None:
    """The attribute of `value` if a ConstantLike op defines it (MLIR's `m_Constant`)."""
    found = _IS_RESULT.get(type(value))
    if found is None:
        found = _is(_IS_RESULT, OpResult, value)
    if not found:
        return None
    op = value.op
    cls = type(op)
    # Most values are results of ops that are neither registered constants nor
    # ConstantLike: answered by one lookup per class (cleared with the registry's).
    if not per_class("maybe_constant", cls, lambda: registered_constant(cls) is not None or has_trait(op, ConstantLike, False)):
        return None
    value_of = registered_constant(cls)
    if value_of is not None:
        return value_of(op)
    if not has_trait(op, ConstantLike, False):
        return None
    trait = get_trait(op, HasFolder)
    if trait is None:
        return None
    folded = trait.fold(op)
    if folded is None:
        return None
    attr = folded[value.index]
    return attr if isinstance(attr, Attribute) else None


def op_constant_value(op: Operation) -> Attribute | None:
    """The value of a single-result ConstantLike op, None for any other op."""
    results = op.results
    if len(results) != 1:
        return None
    return constant_value(_tuple_item(results, 0))  # not SSAValues' Python __getitem__


_tuple_item = tuple.__getitem__


def might_be_isolated(op: Operation) -> bool:
    """`mightHaveTrait<IsIsolatedFromAbove>`: unregistered ops might be."""
    return isinstance(op, UnregisteredOp) or has_trait(op, IsolatedFromAbove)


# -----------------------------------------------------------------------------------------
# Trivially dead ops (mlir/lib/Interfaces/SideEffectInterfaces.cpp)
# -----------------------------------------------------------------------------------------


def _own_effects_are_droppable(op: Operation) -> bool | None:
    """Whether `op`'s own (non-recursive) effects are only reads or allocations of its
    own results; None when it declares no effects at all."""
    if registered_effect_free(op):
        return True
    traits = [
        t for t in traits_of_type(op, MemoryEffect)
        if not isinstance(t, RecursiveMemoryEffect)
    ]
    if not traits:
        return None
    for trait in traits:
        effects = trait.get_effects(op)
        if effects is None:
            return None
        for effect in effects:
            if effect.kind is MemoryEffectKind.READ:
                continue
            if effect.kind is MemoryEffectKind.ALLOC and (
                # xDSL's alloc traits name no value: MLIR's allocs are on the results
                (effect.value is None and op.results)
                or (isinstance(effect.value, OpResult) and effect.value.op is op)
            ):
                continue
            return False
    return True


_PER_OP = object()
"""`_effects_of_class`: the answer depends on the op, not only on its class."""

_STATIC_EFFECTS = {
    NoMemoryEffect.get_effects.__func__: (),  # type: ignore[attr-defined]
    MemoryReadEffect.get_effects.__func__: (MemoryEffectKind.READ,),  # type: ignore[attr-defined]
    MemoryWriteEffect.get_effects.__func__: (MemoryEffectKind.WRITE,),  # type: ignore[attr-defined]
}
"""xDSL's effect traits whose `get_effects` ignores the op: the kinds they return."""


def _effects_of_class(cls: type[Operation], op: Operation) -> tuple[bool, object]:
    """(has RecursiveMemoryEffect, `_own_effects_are_droppable` where every op of `cls`
    answers alike, else `_PER_OP`), once per class (`per_class`: a registration, of an
    effect-free class say, clears it)."""
    return per_class("effects_of_class", cls, lambda: _class_effects(cls, op))


def _class_effects(cls: type[Operation], op: Operation) -> tuple[bool, object]:
    recursive = has_trait(op, RecursiveMemoryEffect)
    own: object = _PER_OP
    entry = effect_free_entry(cls)
    if entry is None:  # registered effect-free, unconditionally
        own = True
    elif entry is NOT_REGISTERED:
        traits = [t for t in traits_of_type(op, MemoryEffect) if not isinstance(t, RecursiveMemoryEffect)]
        kinds = [_STATIC_EFFECTS.get(getattr(type(t).get_effects, "__func__", None)) for t in traits]
        if not traits:
            own = None
        elif all(k is not None for k in kinds):
            own = all(kind is MemoryEffectKind.READ for k in kinds for kind in k)  # type: ignore[union-attr]
    return recursive, own


def would_be_trivially_dead(root: Operation) -> bool:
    """MLIR's `wouldOpBeTriviallyDead`: no effect beyond its results. What an op's
    class decides (its traits, a registration) is looked up once per class
    (`_effects_of_class`), and for most classes that is the whole answer
    (`_dead_by_class`): the greedy driver and region DCE ask for every op."""
    cls = type(root)
    decided = per_class("dead_by_class", cls, lambda: _dead_by_class(cls, root))
    if decided is not None:
        return decided
    stack = [root]
    while stack:
        op = stack.pop()
        recursive, droppable = _effects_of_class(type(op), op)
        if recursive:
            for region in op.regions:
                for block in region.blocks:
                    stack.extend(block.ops)
        if droppable is _PER_OP:
            droppable = _own_effects_are_droppable(op)
        if droppable is False:
            return False
        if droppable is None and not recursive:
            return False
    return True


def _dead_by_class(cls: type[Operation], op: Operation) -> bool | None:
    """`would_be_trivially_dead` of every op of `cls`; None where it depends on the op
    (nested ops of a recursive class, effects a trait computes per op)."""
    if _is(_IS_UNREGISTERED, UnregisteredOp, op) or has_trait(op, IsTerminator):
        return False
    if has_trait(op, SymbolOpInterface):
        return False
    recursive, droppable = _effects_of_class(cls, op)
    if recursive or droppable is _PER_OP:
        return None
    return droppable is True


def is_trivially_dead(op: Operation) -> bool:
    """MLIR's `isOpTriviallyDead`: unused and `would_be_trivially_dead`."""
    for r in op.results:
        if r.first_use is not None:  # `r.uses`, without building the view
            return False
    return would_be_trivially_dead(op)


def is_memory_effect_free(op: Operation) -> bool:
    """MLIR's `isMemoryEffectFree`: no effects, nested ones included for recursive ops."""
    if _is(_IS_UNREGISTERED, UnregisteredOp, op):
        return False
    if registered_effect_free(op):
        return True
    traits = traits_of_type(op, MemoryEffect)
    if not traits:
        return False
    recursive = False
    for trait in traits:
        if isinstance(trait, RecursiveMemoryEffect):
            recursive = True
            continue
        effects = trait.get_effects(op)
        if effects is None or effects:
            return False
    if recursive:
        return all(
            is_memory_effect_free(nested)
            for region in op.regions
            for block in region.blocks
            for nested in block.ops
        )
    return True


# -----------------------------------------------------------------------------------------
# Folding (Operation::fold and the trait folders)
# -----------------------------------------------------------------------------------------


# Ops MLIR declares `Commutative` where xDSL's classes lack the trait (matched by name).
COMMUTATIVE_OPS = frozenset(
    {
        "arith.addi", "arith.muli", "arith.andi", "arith.ori", "arith.xori",
        "arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf",
        "arith.maxnumf", "arith.minnumf", "arith.maxsi", "arith.maxui",
        "arith.minsi", "arith.minui", "arith.addui_extended",
        "arith.mului_extended", "arith.mulsi_extended",
    }
)


def is_commutative(op: Operation) -> bool:
    return op.name in COMMUTATIVE_OPS or has_trait(op, Commutative)


def fold_commutative(op: Operation) -> bool:
    """`OpTrait::impl::foldCommutative`: move constant operands to the back, keeping the
    relative order of both groups. Returns whether the operands changed."""
    operands = list(op.operands)
    if len(operands) < 2:
        return False
    is_constant = [constant_value(v) is not None for v in operands]
    if True not in is_constant:
        return False
    first = is_constant.index(True)
    if all(is_constant[first:]):
        return False
    head = operands[:first]
    tail = operands[first:]
    flags = is_constant[first:]
    new = head + [v for v, c in zip(tail, flags) if not c] + [
        v for v, c in zip(tail, flags) if c
    ]
    for index, value in enumerate(new):
        if op.operands[index] is not value:
            op.operands[index] = value
    return True


@dataclass
class FoldResult:
    """The outcome of folding one op: in place (`values` is None) or replacement values,
    Attributes standing for constants still to be materialised."""

    values: Sequence[SSAValue | Attribute] | None


def _arith_identity_fold(op: Operation) -> Sequence[SSAValue | Attribute] | None:
    """MLIR's arith integer folders test a constant right operand for an identity or
    absorbing value before folding two constants, and answer with the existing value
    (xDSL's folder does it the other way round and materialises a new constant)."""
    if not _is(_IS_INT_BINARY, arith.SignlessIntegerBinaryOperation, op):
        return None
    rhs = constant_value(op.rhs)
    if not isinstance(rhs, IntegerAttr):
        return None
    if op.is_right_zero(rhs):
        # ori(x, all-ones) answers with the attribute, the others with the operand
        return (rhs,) if isinstance(op, arith.OrIOp) else (op.rhs,)
    if op.is_right_unit(rhs):
        return (op.lhs,)
    return None


def may_fold(op: Operation) -> bool:
    """False only where `try_fold(op)` is None for every op of its class: no registered
    folder, not an arith integer binary op, no `HasFolder` trait, not commutative. The
    greedy driver pops thousands of ops (`linalg.yield`, `tensor.empty`, the structured
    ops) that can never fold; once per class, in the registry's lookup table."""
    cls = type(op)
    return per_class(
        "may_fold",
        cls,
        lambda: (
            _is(_IS_UNREGISTERED, UnregisteredOp, op)  # named per op: commutative by name
            or registered_folder(cls) is not None
            or _is(_IS_INT_BINARY, arith.SignlessIntegerBinaryOperation, op)
            or get_trait(op, HasFolder) is not None
            or is_commutative(op)
        ),
    )


def try_fold(op: Operation) -> FoldResult | None:
    """MLIR's `Operation::fold`: the op's folder (the registry's, which replaces xDSL's
    where there is one), then its traits' folders (for commutative ops: constants to
    the right, in place)."""
    folder = registered_folder(type(op))
    if folder is not None:
        folded = folder(op)
    else:
        folded = _arith_identity_fold(op)
        if folded is None:
            trait = get_trait(op, HasFolder)
            folded = trait.fold(op) if trait is not None else None
    if folded is not None and len(folded) == 0 and op.results:
        return FoldResult(None)  # updated in place
    if folded is not None and not (
        len(folded) == 1 and len(op.results) == 1 and folded[0] is op.results[0]
    ):
        return FoldResult(list(folded))
    if is_commutative(op) and fold_commutative(op):
        return FoldResult(None)
    if folded is not None:
        return FoldResult(None)
    return None


def materialize_constant(
    ctx: Context | None, op: Operation, value: Attribute, type: Attribute
) -> Operation | None:
    """The op's dialect's `materializeConstant`: the registry's, else xDSL's
    ConstantMaterializationInterface of the dialect loaded in `ctx`."""
    materializer = registered_materializer(op.dialect_name())
    if materializer is not None:
        return materializer(value, type)
    if ctx is None:
        return None
    dialect = ctx.get_optional_dialect(op.dialect_name())
    if dialect is None:
        return None
    interface = dialect.get_interface(ConstantMaterializationInterface)
    if interface is None:
        return None
    return interface.materialize_constant(value, type)


# -----------------------------------------------------------------------------------------
# OperationFolder: constant uniquing (mlir/lib/Transforms/Utils/FoldUtils.cpp)
# -----------------------------------------------------------------------------------------


def insertion_region(block: Block) -> Region:
    """The region constants of `block` are uniqued in: the nearest one whose parent op is
    isolated from above (or the top-level region)."""
    region = block.parent
    assert region is not None
    while (parent := region.parent) is not None:
        if might_be_isolated(parent):
            break
        outer = parent.parent
        if outer is None or outer.parent is None:
            break
        region = outer.parent
    return region


@dataclass
class OperationFolder:
    """Uniques constants per insertion region, the way `insertKnownConstant` does."""

    replace_op: Callable[[Operation, Sequence[SSAValue]], None]
    """Replaces a duplicate constant through the driver's rewriter."""

    _scopes: dict[tuple[int, str, Attribute, Attribute], Operation] = field(
        default_factory=dict[tuple[int, str, Attribute, Attribute], Operation]
    )
    _owned: set[Operation] = field(default_factory=set[Operation])

    def is_owned(self, op: Operation | None) -> bool:
        return op is not None and op in self._owned

    def insert_known_constant(self, op: Operation, value: Attribute) -> bool:
        """Unique `op`, a constant of `value`. Returns False when `op` was a duplicate and
        got replaced by the known one; True when it is (now) the known one, in which case
        it is moved to the front of its insertion region's entry block unless it already
        sits in the run of uniqued constants there."""
        block = op.parent
        assert block is not None
        if op in self._owned:
            if block.first_op is not op and not self.is_owned(op.prev_op):
                op.detach()
                block.insert_op_before(op, block.first_op)  # type: ignore[arg-type]
            return True
        region = insertion_region(block)
        key = (id(region), op.dialect_name(), value, op.results[0].type)
        known = self._scopes.get(key)
        if known is not None:
            self.replace_op(op, known.results)
            return False
        entry = region.blocks.first
        assert entry is not None
        if block is not entry or (
            entry.first_op is not op and not self.is_owned(op.prev_op)
        ):
            op.detach()
            if entry.first_op is None:
                entry.add_op(op)
            else:
                entry.insert_op_before(op, entry.first_op)
        self._scopes[key] = op
        self._owned.add(op)
        return True

    def get_or_create(
        self,
        region: Region,
        value: Attribute,
        type: Attribute,
        make: Callable[[], Operation | None],
    ) -> Operation | None:
        """`getOrCreateConstant`: the known constant of `value` in `region`, else `make()`
        placed at the front of the region's entry block and remembered."""
        for (scope, _, known_value, known_type), known in self._scopes.items():
            if scope == id(region) and known_value == value and known_type == type:
                return known
        new = make()
        if new is None:
            return None
        entry = region.blocks.first
        assert entry is not None
        if entry.first_op is None:
            entry.add_op(new)
        else:
            entry.insert_op_before(new, entry.first_op)
        self._scopes[(id(region), new.dialect_name(), value, type)] = new
        self._owned.add(new)
        return new
