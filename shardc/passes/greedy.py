"""MLIR's greedy pattern rewrite driver (GreedyPatternRewriteDriver.cpp), the one driver
every shardc pass that rewrites to a fixpoint runs under: `canonicalize`, `shard-simplify`,
the `test-grid-*` helper passes and the last phase of `convert-shard-to-mpi`.

xDSL's own walker differs in ways that show in the output (constants are neither uniqued
nor hoisted, the worklist is filled and refilled in another order). This driver follows
MLIR's algorithm:

- every iteration starts with an empty worklist filled by a walk of the IR (pre-order and
  reversed when `top_down`, post-order otherwise); constants met on the way are uniqued
  and moved to the front of the entry block of their isolated-from-above region;
- ops are popped last-in first-out: trivially dead ops are erased, otherwise the op is
  folded (folded attributes materialised right before it), otherwise its patterns are
  tried in order;
- the rewriter reports to the driver as MLIR's listener does: inserted and modified ops
  (with their ancestors) are pushed, erased ops are dropped and the defining ops of their
  operands pushed when at most one other user remains, nested ops erased one by one;
- after the worklist drains, unreachable blocks and dead ops are removed from the regions
  (region simplification); all of this repeats until nothing changes or `max_iterations`.

Patterns come from a `PatternProvider`: a plain sequence of patterns is tried on every op
(`applyPatternsGreedily(op, patterns)`); `canonicalization_patterns()` gives each op its
own (`canonicalize`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from xdsl.context import Context
from xdsl.ir import Attribute, Block, ErasedSSAValue, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import ConstantLike, IsTerminator
from xdsl.utils.exceptions import DiagnosticException

from shardc.ir.traits import has_trait
from shardc.ir.walk import region_blocks
from shardc.passes.folding import (
    OperationFolder,
    is_trivially_dead,
    materialize_constant,
    may_fold,
    op_constant_value,
    try_fold,
    would_be_trivially_dead,
)

NO_LIMIT = -1


# -----------------------------------------------------------------------------------------
# Worklist
# -----------------------------------------------------------------------------------------


class Worklist:
    """LIFO list of ops with set semantics and O(1) removal (removed slots become None).
    Keyed by `id(op)`: an op's `__hash__` is a Python call (xDSL's `id(self)`), and
    every op in the map is alive, held by the list."""

    __slots__ = ("_list", "_map")

    def __init__(self) -> None:
        self._list: list[Operation | None] = []
        self._map: dict[int, int] = {}

    def clear(self) -> None:
        self._list.clear()
        self._map.clear()

    def __bool__(self) -> bool:
        items = self._list
        while items and items[-1] is None:
            items.pop()
        return bool(items)

    def __contains__(self, op: Operation) -> bool:
        return id(op) in self._map

    def push(self, op: Operation) -> None:
        key = id(op)
        if key not in self._map:
            self._map[key] = len(self._list)
            self._list.append(op)

    def pop(self) -> Operation:
        items = self._list
        while (op := items.pop()) is None:
            pass
        del self._map[id(op)]
        return op

    def remove(self, op: Operation) -> None:
        index = self._map.pop(id(op), None)
        if index is not None:
            self._list[index] = None

    def reverse(self) -> None:
        self._list.reverse()
        self._map = {id(op): i for i, op in enumerate(self._list) if op is not None}


# -----------------------------------------------------------------------------------------
# The rewriter patterns see: every change is reported to the driver the way MLIR's
# RewriterBase reports it to its listener.
# -----------------------------------------------------------------------------------------


_new_point = object.__new__
_set_field = object.__setattr__


class DriverRewriter(PatternRewriter):
    """A PatternRewriter whose notifications follow MLIR's RewriterBase."""

    def __init__(self, driver: GreedyDriver, start: InsertPoint):
        super().__init__(start)
        self._driver = driver
        self.operation_insertion_handler.append(driver.add_to_worklist)
        self.operation_modification_handler.append(driver.add_to_worklist)

    def reset(self, op: Operation) -> None:
        self.has_done_action = False
        self._current_operation = op
        # `InsertPoint.before(op)`, made directly (once per op the driver pops): the
        # same frozen point, whose check (`op.parent is block`) holds by construction
        block = op.parent
        if block is None:
            raise ValueError("Operation insertion point must have a parent block")
        point = _new_point(InsertPoint)
        _set_field(point, "block", block)
        _set_field(point, "insert_before", op)
        self.insertion_point = point
        self._name_hint = None  # what the `name_hint` setter stores for None, unvalidated

    def erase(self, op: Operation, safe_erase: bool = True) -> None:
        self.has_done_action = True
        self._driver.notify_erase_tree(op)
        Rewriter.erase_op(op, safe_erase=safe_erase)

    def replace_all_uses_with(
        self, from_value: SSAValue, to_value: SSAValue | None, safe_erase: bool = True
    ) -> None:
        if from_value is to_value:
            return
        users = [use.operation for use in from_value.uses]
        if to_value is None:
            from_value.erase(safe_erase=safe_erase)
        else:
            from_value.replace_all_uses_with(to_value)
        if users:
            self.has_done_action = True
        for user in users:
            self.handle_operation_modification(user)
        if to_value is None:
            self.has_done_action = True

    def inline_block(
        self,
        block: Block,
        insertion_point: InsertPoint,
        arg_values: Sequence[SSAValue] = (),
    ) -> None:
        self.has_done_action = True
        for arg, value in zip(block.args, arg_values, strict=False):
            self.replace_all_uses_with(arg, value)
        moved = list(block.ops)
        Rewriter.inline_block(block, insertion_point)
        for op in moved:
            self.handle_operation_insertion(op)


# -----------------------------------------------------------------------------------------
# The driver
# -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GreedyRewriteConfig:
    """MLIR's GreedyRewriteConfig. Its defaults are `applyPatternsGreedily`'s (bottom-up);
    the canonicalizer sets `top_down=True`."""

    top_down: bool = False
    """useTopDownTraversal: seed the worklist in pre-order rather than post-order."""
    region_simplify: Literal["disabled", "normal", "aggressive"] = "normal"
    """Erase unreachable blocks and dead ops/arguments after each drained worklist."""
    max_iterations: int = 10
    """Fill-and-drain rounds before giving up (NO_LIMIT for none)."""
    max_num_rewrites: int = NO_LIMIT
    """Successful pattern applications per round (NO_LIMIT for none)."""
    fold: bool = True
    """Try the op's folder before its patterns."""
    cse_constants: bool = True
    """Unique and hoist constants while seeding the worklist."""


class PatternProvider(Protocol):
    """Which patterns to try on an op, in order (MLIR's FrozenRewritePatternSet)."""

    def patterns_for(self, op: Operation) -> Sequence[RewritePattern]: ...


@dataclass(frozen=True)
class PatternList:
    """The same patterns for every op. A pattern with a `root_ops` attribute (the op
    classes it can rewrite) is left out, for other ops, of the (cached per class) list:
    it would return without acting anyway."""

    patterns: tuple[RewritePattern, ...]
    _by_class: dict[type[Operation], tuple[RewritePattern, ...]] = field(
        default_factory=dict[type[Operation], tuple[RewritePattern, ...]], compare=False
    )

    def patterns_for(self, op: Operation) -> Sequence[RewritePattern]:
        cls = type(op)
        found = self._by_class.get(cls)
        if found is None:
            found = self._by_class[cls] = tuple(
                p
                for p in self.patterns
                if (roots := getattr(p, "root_ops", None)) is None or issubclass(cls, roots)
            )
        return found


@dataclass
class GreedyDriver:
    """Simplifies one isolated-from-above region to a fixpoint."""

    ctx: Context | None
    scope: Region
    patterns: PatternProvider
    config: GreedyRewriteConfig = field(default_factory=GreedyRewriteConfig)

    worklist: Worklist = field(default_factory=Worklist, init=False)
    _erasing: set[Operation] = field(default_factory=set[Operation], init=False)

    # ---- worklist maintenance (the listener side) -------------------------------------

    def add_to_worklist(self, op: Operation) -> None:
        """Push `op` and its ancestors below the scope; ops outside the scope are ignored."""
        ancestors = [op]
        while True:
            block = op.parent
            region = block.parent if block is not None else None
            if region is self.scope:
                for ancestor in ancestors:
                    self.worklist.push(ancestor)
                return
            if region is None or (parent := region.parent) is None:
                return
            op = parent
            ancestors.append(op)

    def _add_operand_defs(self, op: Operation) -> None:
        """Push the defining ops of `op`'s operands that will have at most one user left
        once `op` (and the ops being erased with it) are gone."""
        erasing = self._erasing
        for operand in op._operands:  # pyright: ignore[reportPrivateUsage]
            owner = operand.owner
            if type(owner) is Block or not isinstance(owner, Operation):  # (Block: no ABC test)
                continue
            other: Operation | None = None
            more = False
            for use in operand.uses:
                user = use.operation
                if user is op or user is other or user in erasing:
                    continue
                if other is None:
                    other = user
                    continue
                more = True
                break
            if not more:
                self.add_to_worklist(owner)

    def _notify_erased(self, op: Operation) -> None:
        self._add_operand_defs(op)
        self.worklist.remove(op)

    def notify_erase_tree(self, op: Operation) -> None:
        """The notifications of MLIR's `eraseOp`: nested ops first (regions backwards,
        successor blocks before predecessors, ops backwards), then `op`."""
        if not op.regions:
            self._notify_erased(op)
            return
        outer = not self._erasing
        try:
            self._erase_tree(op)
        finally:
            if outer:
                self._erasing.clear()

    def _erase_tree(self, op: Operation) -> None:
        for region in reversed(op.regions):
            for block in _post_order(region):
                for nested in reversed(list(block.ops)):
                    self._erase_tree(nested)
        self._notify_erased(op)
        self._erasing.add(op)

    # ---- the main loop --------------------------------------------------------------------

    def simplify(self) -> bool:
        """Run to a fixpoint; returns whether it converged."""
        config = self.config
        iteration = 0
        rewriter = DriverRewriter(self, InsertPoint.at_start(Block()))
        continue_rewrites = False
        while True:
            iteration += 1
            if config.max_iterations != NO_LIMIT and iteration > config.max_iterations:
                break
            self.worklist.clear()
            self._populate(rewriter)
            continue_rewrites = self._process_worklist(rewriter)
            # After the first iteration, a worklist that changed nothing leaves the IR
            # as the last region simplification left it (a fixed point: it erases every
            # unreachable block and dead op), so running it again would find nothing.
            if config.region_simplify != "disabled" and (continue_rewrites or iteration == 1):
                continue_rewrites |= simplify_regions([self.scope])
            if not continue_rewrites:
                break
        return not continue_rewrites

    def _populate(self, rewriter: DriverRewriter) -> None:
        def replace(op: Operation, values: Sequence[SSAValue]) -> None:
            rewriter.reset(op)
            rewriter.replace(op, [], list(values))

        folder = OperationFolder(replace)
        cse = self.config.cse_constants

        def known_constant(op: Operation) -> bool:
            """True when `op` was a duplicate constant and is gone."""
            if not cse:
                return False
            value = op_constant_value(op)
            return value is not None and not folder.insert_known_constant(op, value)

        if self.config.top_down:
            worklist = self.worklist
            push = worklist.push

            def visit_pre(op: Operation) -> bool:
                # `add_to_worklist(op)`: in pre-order every ancestor of `op` below the
                # scope was visited (and pushed) first, so `op` is the one push that
                # changes the worklist
                if known_constant(op):
                    return False
                push(op)
                return True

            _walk_pre_order(self.scope, visit_pre)
            worklist.reverse()
        else:

            def visit_post(op: Operation) -> None:
                if not known_constant(op):
                    self.add_to_worklist(op)

            _walk_post_order(self.scope, visit_post)

    def _process_worklist(self, rewriter: DriverRewriter) -> bool:
        changed = False
        num_rewrites = 0
        limit = self.config.max_num_rewrites
        worklist = self.worklist
        while worklist and (limit == NO_LIMIT or num_rewrites < limit):
            op = worklist.pop()
            rewriter.reset(op)

            if is_trivially_dead(op):
                rewriter.erase(op)
                changed = True
                continue

            if self.config.fold and not has_trait(op, ConstantLike, False) and may_fold(op):
                folded = self._fold(op, rewriter)
                if folded:
                    changed = True
                    continue

            applied = False
            for pattern in self.patterns.patterns_for(op):
                try:
                    pattern.match_and_rewrite(op, rewriter)
                except DiagnosticException:
                    raise
                except Exception as err:  # a broken pattern: report it on the op
                    op.emit_error(
                        f"Error while applying pattern: {err}", underlying_error=err
                    )
                if rewriter.has_done_action:
                    applied = True
                    break
            if applied:
                changed = True
                num_rewrites += 1
        return changed

    def _fold(self, op: Operation, rewriter: DriverRewriter) -> bool:
        result = try_fold(op)
        if result is None:
            return False
        if result.values is None:  # folded in place
            self.add_to_worklist(op)
            return True
        replacements: list[SSAValue] = []
        created: list[Operation] = []
        for value, old in zip(result.values, op.results, strict=True):
            if isinstance(value, SSAValue):
                replacements.append(value)
                continue
            assert isinstance(value, Attribute)
            constant = materialize_constant(self.ctx, op, value, old.type)
            if constant is None:
                for made in reversed(created):
                    rewriter.erase(made)
                return False
            rewriter.insert(constant, InsertPoint.before(op))
            created.append(constant)
            replacements.append(constant.results[0])
        rewriter.replace(op, [], replacements)
        return True


# -----------------------------------------------------------------------------------------
# Walks with MLIR's iteration rules (the next op is taken before visiting one)
# -----------------------------------------------------------------------------------------


# The walks read xDSL's `_first_op` / `_next_op` fields behind the `first_op` /
# `next_op` properties: a property is a Python call, made once for every op of every
# iteration of every greedy run.


def _walk_pre_order(region: Region, visit: Callable[[Operation], bool]) -> None:
    for block in region_blocks(region):
        op = block._first_op  # pyright: ignore[reportPrivateUsage]
        while op is not None:
            following = op._next_op  # pyright: ignore[reportPrivateUsage]
            if visit(op):
                for nested in op.regions:
                    _walk_pre_order(nested, visit)
            op = following


def _walk_post_order(region: Region, visit: Callable[[Operation], None]) -> None:
    for block in region_blocks(region):
        op = block._first_op  # pyright: ignore[reportPrivateUsage]
        while op is not None:
            following = op._next_op  # pyright: ignore[reportPrivateUsage]
            for nested in op.regions:
                _walk_post_order(nested, visit)
            visit(op)
            op = following


def _post_order(region: Region) -> Iterable[Block]:
    """Blocks in post-order of the successor graph, repeated over the unvisited blocks
    until all are listed (how MLIR's eraseOp visits a region)."""
    return _post_order_from(region.blocks)


def _post_order_from(starts: Iterable[Block]) -> list[Block]:
    """Depth-first post-order of the successor graph from each of `starts` in turn,
    skipping blocks already listed."""
    seen: set[Block] = set()
    order: list[Block] = []
    for start in starts:
        if start in seen:
            continue
        seen.add(start)
        stack: list[tuple[Block, Iterable[Block]]] = [(start, iter(_successors(start)))]
        while stack:
            block, successors = stack[-1]
            for succ in successors:
                if succ not in seen:
                    seen.add(succ)
                    stack.append((succ, iter(_successors(succ))))
                    break
            else:
                stack.pop()
                order.append(block)
    return order


def _successors(block: Block) -> Sequence[Block]:
    last = block.last_op
    return tuple(last.successors) if last is not None else ()


# -----------------------------------------------------------------------------------------
# Region simplification (mlir/lib/Transforms/Utils/RegionUtils.cpp): the "normal" level,
# unreachable blocks and dead ops / block arguments. Its notifications need not reach the
# worklist: the next iteration starts from a fresh one.
# -----------------------------------------------------------------------------------------


def simplify_regions(regions: Sequence[Region]) -> bool:
    """Erase unreachable blocks, then dead ops and block arguments. The liveness
    analysis runs first: when every region it walked has one block (the common case),
    no block can be unreachable, so its result stands and the walk looking for
    unreachable blocks is skipped; otherwise both steps run in MLIR's order."""
    liveness = _analyse(regions)
    if not liveness.multi_block:
        return _delete_dead(regions, liveness)
    erased_blocks = erase_unreachable_blocks(regions)
    erased_dead = run_region_dce(regions)
    return erased_blocks or erased_dead


def _reachable(region: Region) -> set[Block]:
    entry = region.blocks.first
    assert entry is not None
    seen = {entry}
    stack = [entry]
    while stack:
        for succ in _successors(stack.pop()):
            if succ not in seen:
                seen.add(succ)
                stack.append(succ)
    return seen


def erase_unreachable_blocks(regions: Sequence[Region]) -> bool:
    erased = False
    worklist = list(regions)
    while worklist:
        region = worklist.pop()
        first = region.blocks.first
        if first is None:
            continue
        if first.next_block is None:
            worklist.extend(r for op in first.ops for r in op.regions)
            continue
        reachable = _reachable(region)
        for block in list(region.blocks):
            if block not in reachable:
                region.erase_block(block, safe_erase=False)
                erased = True
                continue
            worklist.extend(r for op in block.ops for r in op.regions)
    return erased


def _successor_operands(op: Operation) -> list[list[int]] | None:
    """Operand indices forwarded to each successor's arguments, for the branch ops we
    know (MLIR's BranchOpInterface); None for other terminators."""
    if not op.name.startswith("cf."):
        return None
    from xdsl.dialects import cf  # loaded with the first cf op (a program without any: never)

    if isinstance(op, cf.BranchOp):
        return [list(range(len(op.operands)))]
    if isinstance(op, cf.ConditionalBranchOp):
        n_then = len(op.then_arguments)
        return [
            list(range(1, 1 + n_then)),
            list(range(1 + n_then, 1 + n_then + len(op.else_arguments))),
        ]
    return None


class _Liveness:
    def __init__(self) -> None:
        self.live: set[int] = set()
        """Live values and ops, by `id` (their `__hash__` is a Python call). Every value
        and op looked up was in the IR while the analysis ran, so alive, and no two of
        them share an id; what the deletion creates is never looked up (but the
        terminator it rebuilds, added by its own id)."""
        self.changed = False
        self._removable: dict[int, bool] = {}
        """`would_be_trivially_dead` per op: the analysis changes no op, and runs over
        the regions until nothing changes."""
        self.probed_dead: list[SSAValue] = []
        """Values `value` found dead during the current walk, in order."""
        self.dead_ops: list[Operation] = []
        """Removable ops that were not live when a walk visited them, in the order of the
        walks (the deletion's order: reverse, a live op's regions at its place). Liveness
        only grows, so the dead ops of the fixed point are those still not live."""
        self.multi_block = False
        """Whether a walk met a region with several blocks (successor operands and block
        arguments may die there: only the whole deletion walk handles those)."""

    def mark(self, item: int) -> None:
        if item not in self.live:
            self.live.add(item)
            self.changed = True

    def use_known_dead(self, op: Operation, index: int) -> bool:
        forwarded = _successor_operands(op)
        if forwarded is None:
            return False
        for succ, indices in zip(op.successors, forwarded):
            if index in indices:
                return id(succ.args[indices.index(index)]) not in self.live
        return False

    def value(self, value: SSAValue) -> None:
        key = id(value)
        if key in self.live:
            return
        for use in value.uses:
            if self.use_known_dead(use.operation, use.index):
                continue
            if id(use.operation) in self.live:
                self.mark(key)
                return
        self.probed_dead.append(value)

    def recheck(self) -> bool:
        """Probe again, against the final live set, every value the last walk found
        dead; True when one is live now. When none is, another walk would find exactly
        what this one did (each op and block argument it left dead was judged only on
        those values, and liveness only grows), so the fixed point is reached."""
        self.changed = False
        probed, self.probed_dead = self.probed_dead, []
        for value in probed:
            self.value(value)
        return self.changed

    def terminator(self, op: Operation) -> None:
        self.mark(id(op))
        forwarded = _successor_operands(op)
        for i, succ in enumerate(op.successors):
            count = len(succ.args) if forwarded is None else 0
            for arg in succ.args[:count]:
                self.mark(id(arg))

    def op(self, op: Operation) -> None:
        for region in op.regions:
            self.region(region)
        if has_trait(op, IsTerminator, True):
            self.terminator(op)
            return
        key = id(op)
        if key in self.live:
            return
        removable = self._removable.get(key)
        if removable is None:
            removable = self._removable[key] = would_be_trivially_dead(op)
        if not removable:
            self.mark(key)
            return
        for result in op.results:
            self.value(result)
            if id(result) in self.live:
                self.mark(key)
        if key not in self.live:
            self.dead_ops.append(op)

    def region(self, region: Region) -> None:
        entry = region.blocks.first
        if entry is None:
            return
        if entry.next_block is not None:
            self.multi_block = True
        for block in _reachable_post_order(entry):
            for op in reversed(block.ops):  # the analysis changes no op
                self.op(op)
            if block is not entry:
                for arg in block.args:
                    self.value(arg)


def _reachable_post_order(entry: Block) -> list[Block] | tuple[Block]:
    if entry.next_block is None:  # a single block: the common case, no graph to walk
        return (entry,)
    return _post_order_from((entry,))


def run_region_dce(regions: Sequence[Region]) -> bool:
    """MLIR's runRegionDCE: propagate liveness to a fixed point, then delete the dead.
    A walk that marked something is followed by a re-check of what it found dead
    instead of a whole second walk, unless that re-check finds something live."""
    return _delete_dead(regions, _analyse(regions))


def _analyse(regions: Sequence[Region]) -> _Liveness:
    """Liveness of `regions` at its fixed point (the IR is not changed)."""
    liveness = _Liveness()
    liveness.changed = True
    while liveness.changed:
        liveness.changed = False
        liveness.probed_dead = []
        for region in regions:
            liveness.region(region)
        if liveness.changed:
            liveness.changed = liveness.recheck()
    return liveness


def _delete_dead(regions: Sequence[Region], liveness: _Liveness) -> bool:
    """Erase what the liveness analysis left dead. Where every region walked had one
    block, only ops can be dead, and the analysis listed them (`dead_ops`) in the order
    the deletion walk would meet them: erasing those alone is that walk's result without
    visiting every op again (most runs find nothing dead)."""
    if liveness.multi_block:
        return _delete_dead_walk(regions, liveness)
    return _delete_listed(liveness)


def _erase_dead_op(op: Operation) -> None:
    for result in op.results:
        for use in list(result.uses):
            use.operation.operands[use.index] = ErasedSSAValue(result.type, result)
    block = op.parent
    assert block is not None
    block.erase_op(op, safe_erase=False)


def _delete_listed(liveness: _Liveness) -> bool:
    """`_delete_dead_walk` for single-block regions: the listed ops still dead, skipping
    those inside another dead op (erased with it)."""
    live = liveness.live
    dead: dict[int, Operation] = {}
    for op in liveness.dead_ops:
        key = id(op)
        if key not in live and key not in dead:
            dead[key] = op
    if not dead:
        return False
    for op in list(dead.values()):
        if _inside_any(op, dead):
            continue
        _erase_dead_op(op)
    return True


def _inside_any(op: Operation, ops: dict[int, Operation]) -> bool:
    """Whether an op enclosing `op` is one of `ops` (by id)."""
    block = op.parent
    while block is not None:
        region = block.parent
        parent = region.parent if region is not None else None
        if parent is None:
            return False
        if id(parent) in ops:
            return True
        block = parent.parent
    return False


def _delete_dead_walk(regions: Sequence[Region], liveness: _Liveness) -> bool:
    erased = False
    for region in regions:
        entry = region.blocks.first
        if entry is None:
            continue
        single = entry.next_block is None
        for block in _reachable_post_order(entry):
            if not single and (term := block.last_op) is not None:
                erased |= _drop_dead_successor_operands(term, liveness)
            for op in reversed(list(block.ops)):
                if id(op) not in liveness.live:
                    erased = True
                    _erase_dead_op(op)
                else:
                    erased |= _delete_dead_walk(op.regions, liveness)
        for block in list(region.blocks)[1:]:
            for arg in reversed(block.args):
                if id(arg) not in liveness.live:
                    block.erase_arg(arg, safe_erase=False)
    return erased


def _drop_dead_successor_operands(term: Operation, liveness: _Liveness) -> bool:
    forwarded = _successor_operands(term)
    if forwarded is None:
        return False
    keep: list[list[SSAValue]] = []
    dropped = False
    for succ, indices in zip(term.successors, forwarded):
        values = [term.operands[i] for i in indices]
        live = [v for v, a in zip(values, succ.args) if id(a) in liveness.live]
        dropped |= len(live) != len(values)
        keep.append(live)
    if not dropped:
        return False
    from xdsl.dialects import cf  # a cf op, by _successor_operands

    if isinstance(term, cf.BranchOp):
        new: Operation = cf.BranchOp(term.successor, *keep[0])
    else:
        assert isinstance(term, cf.ConditionalBranchOp)
        new = cf.ConditionalBranchOp(
            term.cond, term.then_block, keep[0], term.else_block, keep[1]
        )
    new.attributes.update(term.attributes)
    Rewriter.replace_op(term, new)
    liveness.live.add(id(new))
    return True



# -----------------------------------------------------------------------------------------
# Entry point
# -----------------------------------------------------------------------------------------


def apply_patterns_greedily(
    op: Operation,
    patterns: PatternProvider | Sequence[RewritePattern],
    *,
    config: GreedyRewriteConfig | None = None,
    ctx: Context | None = None,
) -> bool:
    """MLIR's `applyPatternsGreedily`: simplify each region of `op` (isolated from above)
    to a fixpoint. `ctx` gives the dialects' constant materializers. Returns whether
    every region converged."""
    provider = PatternList(tuple(patterns)) if isinstance(patterns, Sequence) else patterns
    converged = True
    for region in op.regions:
        driver = GreedyDriver(ctx, region, provider, config or GreedyRewriteConfig())
        converged &= driver.simplify()
    return converged
