"""`sharding-propagation`: annotate every tensor value of a function with a sharding.

Upstream's algorithm, op by op over the single block of each `func.func`, in the given
traversal order(s). For an op with a sharding implementation, the annotations around it
are collected: a `shard.shard` for users defining an operand, or a `shard.shard` for the
producer using a result, *must* be honoured; the others are *optional*. Every combination
(must ones fixed, optional ones with and without) is tried, results outermost; the first
one needing no resharding of existing annotations wins, else the first with the least
resharding of annotations that explicitly target this op. The op then gets annotations on
all its operands and results.

Diagnostics are upstream's: a function with other than one block, an op with no sharding
implementation (not a terminator, not a constant, not an annotation), options that cannot
be computed. Like mlir-opt, a failed traversal does not stop the next one, and errors the
interface reports while options are tried do not fail the pass by themselves.

With `explain=true`, every inserted annotation says which user annotations its sharding
came from and through which ops (a remark at the annotation).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FileLineColLoc, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import PassFailedException

from shardc.dialects.shard import ShardingOp, ShardOp
from shardc.ir import diagnostics
from shardc.passes.greedy import paused_gc
from shardc.interfaces.sharding import (
    ConflictingUserShardings,
    ShardingInfo,
    ShardingInterface,
    ShardingOption,
    collect_diagnostics,
    emit_op_error,
    get_sharding_interface,
    is_annotation_op,
    is_constant_like,
    listen_to_annotations,
    operand_annotation,
    pass_cache,
    result_annotation,
)

Traversal = Literal["forward", "backward", "forward-backward", "backward-forward"]

NO_RESHARDING = 0
NO_RESHARDING_FOR_EXPLICIT_ANNOTATIONS = 1
RESHARDING_FOR_EXPLICIT_ANNOTATIONS = 2

Combination = list[ShardingInfo | None]


def ordered_possible_shardings(
    must: Sequence[ShardingInfo | None], optional: Sequence[ShardingInfo | None]
) -> list[Combination]:
    """All combinations: must shardings fixed, each optional one first taken then left
    out, earlier positions varying slowest (upstream's order)."""
    combos: list[Combination] = [[]]
    for m, o in zip(must, optional):
        if m is not None:
            choices: list[ShardingInfo | None] = [m]
        elif o is not None:
            choices = [o, None]
        else:
            choices = [None]
        combos = [[*c, s] for c in combos for s in choices]
    return combos


def resharding_requirement(op: Operation, shardings: Sequence[ShardingInfo | None]) -> int:
    """How much resharding of existing annotations `shardings` needs (lower is better)."""
    res = NO_RESHARDING
    n = len(op.operands)
    for operand, sharding in zip(op.operands, shardings[:n]):
        owner = operand.owner
        if not isinstance(owner, ShardOp):
            continue
        if sharding is None or not sharding.same_as(ShardingInfo.of(owner.sharding)):
            if owner.for_users:
                return RESHARDING_FOR_EXPLICIT_ANNOTATIONS
            res = NO_RESHARDING_FOR_EXPLICIT_ANNOTATIONS
    for result, sharding in zip(op.results, shardings[n:]):
        for use in result.uses:
            user = use.operation
            if not isinstance(user, ShardOp):
                continue
            if sharding is None or not sharding.same_as(ShardingInfo.of(user.sharding)):
                if not user.for_users:
                    return RESHARDING_FOR_EXPLICIT_ANNOTATIONS
                res = NO_RESHARDING_FOR_EXPLICIT_ANNOTATIONS
    return res


@dataclass
class Choice:
    option: ShardingOption
    operands: Combination = field(default_factory=Combination)
    results: Combination = field(default_factory=Combination)


def select_sharding_option(
    impl: ShardingInterface,
    op: Operation,
    possible_operands: Sequence[Combination],
    possible_results: Sequence[Combination],
) -> Choice | None:
    """The preferred option among all combinations (None: an option's annotations could
    not be computed; an empty option: nothing to derive one from)."""
    best: tuple[int, Choice] | None = None
    for results in possible_results:
        for operands in possible_operands:
            option = impl.get_sharding_option(op, operands, results)
            if option is None or option.empty:
                continue
            shardings = impl.get_sharding_annotations(op, option)
            if shardings is None:
                return None
            kind = resharding_requirement(op, shardings)
            choice = Choice(option, list(operands), list(results))
            if kind == NO_RESHARDING:
                return choice
            if best is None or kind < best[0]:
                best = (kind, choice)
    return best[1] if best is not None else Choice(ShardingOption.make_empty())


# =========================================================================================
# Explanations: where each inserted annotation's sharding came from
# =========================================================================================


@dataclass(frozen=True)
class Provenance:
    sources: tuple[str, ...]
    path: tuple[str, ...]


def _location(op: Operation) -> str | None:
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    return None


class Explainer:
    """Tracks, for every shard.shard op, the user annotations its sharding derives from."""

    def __init__(self, function: func.FuncOp):
        self.provenance: dict[ShardOp, Provenance] = {}
        count = 0
        for op in function.body.ops:
            if isinstance(op, ShardOp):
                count += 1
                where = _location(op)
                sharding = ShardingInfo.of(op.sharding)
                kind = "for users" if op.for_users else "for its producer"
                text = f"annotation #{count} ({sharding}, {kind}"
                text += f", at {where})" if where else ")"
                self.provenance[op] = Provenance((text,), ())
        self.current: Provenance | None = None

    def begin(self, op: Operation, choice: Choice) -> None:
        """`op` is about to be annotated for `choice`."""
        contributing: list[ShardOp] = []
        for value, sharding in zip(op.operands, choice.operands):
            if sharding is not None and isinstance(value.owner, ShardOp):
                contributing.append(value.owner)
        for result, sharding in zip(op.results, choice.results):
            if sharding is None:
                continue
            contributing.extend(
                use.operation for use in result.uses if isinstance(use.operation, ShardOp)
            )
        sources: list[str] = []
        path: tuple[str, ...] = ()
        for shard in contributing:
            known = self.provenance.get(shard)
            if known is None:
                continue
            sources.extend(s for s in known.sources if s not in sources)
            if not path:
                path = known.path
        self.current = Provenance(tuple(sources), (*path, op.name))

    def inserted(self, shard: ShardOp, sharding: ShardingOp) -> None:
        if self.current is None:
            return
        self.provenance[shard] = self.current
        sources = "; ".join(self.current.sources) or "no annotation"
        message = (
            f"sharding {ShardingInfo.of(sharding.result)} derived from {sources} "
            f"through {' -> '.join(self.current.path)}"
        )
        _explain(shard, message)


def _explain(op: Operation, message: str) -> None:
    diagnostics.emit_remark(op, message)


# =========================================================================================
# The pass
# =========================================================================================


def _collect(
    values: Iterable[SSAValue], annotation, *, must_when_for_users: bool
) -> tuple[Combination, Combination]:
    must: Combination = []
    optional: Combination = []
    for value in values:
        found = annotation(value)
        must.append(None)
        optional.append(None)
        if found is None:
            continue
        for_users, sharding = found
        if for_users == must_when_for_users:
            must[-1] = sharding
        else:
            optional[-1] = sharding
    return must, optional


def visit_op(op: Operation, explainer: Explainer | None = None) -> bool:
    """Annotate `op` if its surroundings determine a sharding; False on failure."""
    impl = get_sharding_interface(op)
    if (
        op.has_trait(IsTerminator)
        or (impl is None and is_constant_like(op))
        or is_annotation_op(op)
    ):
        return True
    if impl is None:
        emit_op_error(op, "sharding interface is not implemented.")
        return False
    try:
        result_must, result_optional = _collect(
            op.results, result_annotation, must_when_for_users=False
        )
    except ConflictingUserShardings as e:
        index = op.results.index(e.value)  # type: ignore[arg-type]
        emit_op_error(
            op,
            f"users of result #{index} annotate it with different shardings "
            "(upstream asserts: only support all shard ops have the same grid sharding attr)",
        )
        return False
    operand_must, operand_optional = _collect(
        [op.operands[i] for i in range(len(op.operands))],
        operand_annotation,
        must_when_for_users=True,
    )
    choice = select_sharding_option(
        impl,
        op,
        ordered_possible_shardings(operand_must, operand_optional),
        ordered_possible_shardings(result_must, result_optional),
    )
    if choice is None:
        emit_op_error(op, "fail to get sharding option.")
        return False
    if choice.option.empty:
        return True
    if explainer is not None:
        explainer.begin(op, choice)
    if not impl.add_sharding_annotations(op, choice.option):
        emit_op_error(op, "fail to set sharding annotations.")
        return False
    return True


def propagate_function(function: func.FuncOp, traversal: Traversal, explain: bool) -> bool:
    """Run the traversals on one function; False if any failed."""
    if len(function.body.blocks) != 1:
        emit_op_error(function, "only one block is supported!")
        return False
    block = function.body.blocks.first
    assert block is not None
    explainer = Explainer(function) if explain else None
    ok = True

    def traverse(ops: list[Operation]) -> None:
        nonlocal ok
        # Ops inserted meanwhile are annotations, which the walk would skip anyway.
        for op in ops:
            if not visit_op(op, explainer):
                ok = False
                return

    listener = explainer.inserted if explainer is not None else (lambda _s, _o: None)
    with listen_to_annotations(listener):
        if traversal in ("backward", "backward-forward"):
            traverse(list(block.ops)[::-1])
        if traversal != "backward":
            traverse(list(block.ops))
        if traversal == "forward-backward":
            traverse(list(block.ops)[::-1])
    return ok


@dataclass(frozen=True)
class ShardingPropagationPass(ModulePass):
    """Propagate shard.shard annotations through every func.func of the module."""

    name = "sharding-propagation"

    traversal: Traversal = "backward-forward"
    """Order(s) in which the ops of a function are visited."""

    explain: bool = False
    """Say, for each inserted annotation, where its sharding came from."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        failed = False
        with collect_diagnostics() as found, pass_cache(), paused_gc():
            for function in [f for f in op.ops if isinstance(f, func.FuncOp)]:
                if not propagate_function(function, self.traversal, self.explain):
                    failed = True
        # Like mlir-opt: every error is reported in order; the last one fails the pass.
        if failed and found:
            for diag in found[:-1]:
                diagnostics.emit(diag.op, diag.severity, diag.message)
            raise diagnostics.error(found[-1].op, found[-1].message)
        for diag in found:
            diagnostics.emit(diag.op, diag.severity, diag.message)
        if failed:
            raise PassFailedException("sharding propagation failed")
