"""`sharding-propagation`: annotate every tensor value of a function with a sharding.

First upstream's algorithm, op by op over the single block of each `func.func`, in the
given traversal order(s). For an op with a sharding implementation, the annotations
around it are collected: a `shard.shard` for users defining an operand, or a `shard.shard`
for the producer using a result, *must* be honoured; the others are *optional*. Every
combination (must ones fixed, optional ones with and without) is tried, results
outermost; the first one needing no resharding of existing annotations wins, else the
first with the least resharding of annotations that explicitly target this op. The op
then gets annotations on all its operands and results.

Completing (`complete=true`, the default), a function upstream cannot propagate (it holds
an op upstream has no sharding model for, `beyond_upstream`: torch-mlir's reshapes, say)
is traversed forward before a backward-first order. Backward first, an op whose only
annotated neighbour is a replicated weight runs replicated and asks for its activation
whole, so an input's batch split met later is gathered: upstream's result, kept where
upstream has one; where it has none, the inputs' splits go first.

Then (`complete=true`) the completion, for every function holding an
annotation, so that `shard-partition` needs nothing more from the user. Upstream's
traversals leave values with several uses, unannotated arguments, users that disagree,
ops without an interface and dead results unannotated, or fail on them; the completion
finishes the job without changing what they did:

* ops the traversals annotated fully and consistently keep their annotations;
* the others are decided by a worklist run to a fixed point: an op is decided once any
  neighbour's sharding is known (an operand's nearest annotation or decided producer, a
  result's annotation or decided users), then its neighbours are queued; the candidates
  are the options each known neighbour implies alone, plus fully replicated; an op no
  annotation reaches is replicated and the run goes on from there. Each op is decided
  once, so the pass stays linear in the program size; the interface's default option
  and annotation computations are memoized over ops alike (same maps, loop count,
  ranks), so a program of repeated ops costs little more than its traversals;
* the cost rule, lexicographic: explicit (user-written) annotations of the op overridden,
  then annotations the traversals gave it overridden, then bytes moved per rank (the
  resharding planner's figure, summed over operands and result users), then the elements
  of the local shards (memory), then the candidate order. Candidates whose shardings do
  not split their tensors evenly, or that the interface refuses (`allows_option`), are
  skipped. Users that disagree are not a conflict: each use gets its own annotation and
  partition reshards between them;
* an op without a sharding interface runs fully replicated, its operands and results
  resharded at its boundary (a warning names it);
* an unannotated argument takes, of its users' shardings and replicated, the one that
  moves the fewest bytes per rank, ties going to the smaller local shard: the users'
  sharding when they agree (nothing moves and each rank holds only its shard), replicated
  when they disagree. The choice is recorded as a producer `shard.shard` of the argument
  (which `shardc-run` reads to scatter global inputs), and `explain=true` says why;
* tensors a region reads from outside its op (the table of an embedding gather in a
  generic body, `tensor.extract %t[...]`) get an annotation for users right before the
  op, the body reading that: replicated, except the dimensions that follow a loop (every
  extract indexes them with that loop's `linalg.index`, see `captured_loop_dims`), split
  like the loop. The cost rule counts the bytes moved to bring a capture to that
  sharding, and a capture's sharding proposes a candidate (its followed dimensions'
  axes on their loops), so a table split on such a dimension stays split; an
  unannotated argument read that way asks for it as its users do.

The form left behind, for partition: every tensor result of a non-annotation op has
exactly one use, a producer `shard.shard`; every block argument exactly one use, a
`shard.shard` (producer, or for users where the traversals left that); every tensor
operand of a non-annotation op (not `func.return`, not a constant) is a `shard.shard ...
annotate_for_users` whose source is that producer annotation (or a chain of annotations:
partition reshards at each link); `func.return` reads producer annotations; one value's
uses may read it in different shardings.

Diagnostics are upstream's where not completing (`complete=false`): a function with other
than one block, an op with no sharding implementation (not a terminator, not a constant,
not an annotation), options that cannot be computed. Like mlir-opt, a failed traversal
does not stop the next one, and errors the interface reports while options are tried do
not fail the pass by themselves. Completing, only a function of several blocks is an
error, and so is a declaration
(trunk's `'func.func' op only one block is supported!`).

With `explain=true`, every annotation the traversals insert says which user annotations
its sharding came from and through which ops, and every op and argument the completion
decides says why (remarks).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FileLineColLoc, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import PassFailedException

from shardc.dialects.shard import DYNAMIC, GetShardingOp, ShardingOp, ShardOp
from shardc.ir import diagnostics
from shardc.ir.diagnostics import DiagnosticError
from shardc.ir.walk import block_ops
from shardc.ir.traits import has_trait
from shardc.passes.gc_pause import paused_gc
from shardc.interfaces.linalg import capture_split_axes, captured_loop_dims, may_capture_tensor
from shardc.interfaces.sharding import (
    ConflictingUserShardings,
    LoopShardingConflict,
    ShardingInfo,
    ShardingInterface,
    ShardingOption,
    cached_lookup_grid,
    collect_diagnostics,
    emit_op_error,
    get_sharding_interface,
    grid_axis_assignment_for_loop_iterators,
    indexing_maps,
    insert_result_annotation,
    is_annotation_op,
    is_int_index_or_float,
    is_constant_like,
    listen_to_annotations,
    loop_iterator_types,
    operand_annotation,
    pass_cache,
    result_annotation,
    split_axes_attr_for,
    verify_sharding_interface_impl,
)

from shardc.passes.options import Traversal  # noqa: E402 - re-exported

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
    """The sharding option chosen for an op and the operand and result shardings it was
    chosen for (None where a value was left open)."""

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
    """Why a shard.shard op has its sharding (`explain=true`): the user annotations it
    derives from and the ops it went through."""

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
# Completion: every tensor value annotated, whatever upstream's traversals left
# =========================================================================================


@dataclass
class _Decision:
    """Operand then result shardings an op is given (None: a scalar, nothing to say)."""

    shardings: list[ShardingInfo | None]
    why: str


_INF = float("inf")


def _type_key(t: Attribute) -> int:
    """What the default option and annotation computations read of a type: a tensor's
    rank, else whether it is a scalar (-1) or not (-2)."""
    if isinstance(t, TensorType):
        return len(t.shape.data)
    return -1 if is_int_index_or_float(t) else -2


def _key(s: ShardingInfo | None) -> tuple | None:
    """What the default option computation reads of a sharding."""
    return None if s is None else (s.sharding.grid, s.split_axes)


class Completion:
    """The fixed point after upstream's traversals (see the module docstring)."""

    def __init__(self, function: func.FuncOp, explicit: set[ShardOp], explain: bool):
        block = function.body.blocks.first
        assert block is not None
        self.block = block
        self.explicit = explicit
        self.explain = explain
        self.grid = next(
            (op.grid.string_value() for op in block.ops if isinstance(op, ShardingOp)), None
        )
        self.decided: dict[Operation, _Decision] = {}
        self.args: dict[BlockArgument, ShardingInfo] = {}
        self._moves: dict[tuple, float] = {}
        self._elements: dict[tuple, float | None] = {}
        self.ops: list[Operation] = self.real_ops(block)
        self.upstream_done: set[Operation] = set()
        # The interface's default computations are pure in an op's maps, loop count and
        # types: ops alike (a layer's repeats, a chain's links) share their results.
        self._signatures: dict[Operation, int] = {}
        self._signature_ids: dict[tuple, int] = {}
        self._options: dict[tuple, ShardingOption | None] = {}
        self._annotations: dict[tuple, list[ShardingInfo | None] | None] = {}
        self._follows: dict[Operation, dict[SSAValue, tuple[int | None, ...]]] = {}

    # ---- the graph of real ops through annotation chains --------------------------------

    @staticmethod
    def real_ops(block: Block) -> list[Operation]:
        """The ops to annotate: not annotations, not terminators, touching a tensor (the
        completion only inserts annotations, so the list is computed once)."""
        return [
            op
            for op in block.ops
            if not is_annotation_op(op)
            and not has_trait(op, IsTerminator)
            and (
                any(isinstance(r.type, TensorType) for r in op.results)
                or any(isinstance(v.type, TensorType) for v in op.operands)
            )
        ]

    # ---- the interface, memoized over ops alike -------------------------------------------

    def signature(self, impl: ShardingInterface, op: Operation) -> int:
        """A number shared by the ops the interface's default option and annotation
        computations cannot tell apart."""
        found = self._signatures.get(op)
        if found is None:
            # Of a type they read only the rank of a tensor, else whether it is a scalar.
            key = (
                type(impl),
                tuple(indexing_maps(impl, op)),
                len(loop_iterator_types(impl, op)),
                verify_sharding_interface_impl(impl, op),
                *[_type_key(t) for t in op.operand_types],
                None,
                *[_type_key(t) for t in op.result_types],
            )
            found = self._signature_ids.setdefault(key, len(self._signature_ids))
            self._signatures[op] = found
        return found

    def option_for(
        self,
        impl: ShardingInterface,
        op: Operation,
        operands: Sequence[ShardingInfo | None],
        results: Sequence[ShardingInfo | None],
    ) -> ShardingOption | None:
        """`impl.get_sharding_option` (a fresh option; diagnostics are dropped),
        memoized over ops alike unless `impl` overrides it."""
        if type(impl).get_sharding_option is not ShardingInterface.get_sharding_option:
            with collect_diagnostics():
                return impl.get_sharding_option(op, operands, results)
        sig = self.signature(impl, op)
        key = (sig, *[_key(s) for s in operands], None, *[_key(s) for s in results])
        if key not in self._options:
            with collect_diagnostics():
                self._options[key] = impl.get_sharding_option(op, operands, results)
        found = self._options[key]
        if found is None:
            return None
        return ShardingOption([list(a) for a in found.sharding_array], found.grid, found.empty)

    def annotations_for(
        self, impl: ShardingInterface, op: Operation, option: ShardingOption
    ) -> list[ShardingInfo | None] | None:
        """`impl.get_sharding_annotations` (diagnostics are dropped), memoized over ops
        alike unless `impl` reads more of an op (`annotations_follow_signature`)."""
        if not impl.annotations_follow_signature(op):
            with collect_diagnostics():
                return impl.get_sharding_annotations(op, option)
        sig = self.signature(impl, op)
        key = (sig, option.grid, option.empty, *[tuple(a) for a in option.sharding_array])
        if key not in self._annotations:
            with collect_diagnostics():
                self._annotations[key] = impl.get_sharding_annotations(op, option)
        found = self._annotations[key]
        return None if found is None else list(found)

    # ---- captured tensors (a gather's table) -------------------------------------------

    def follows(self, op: Operation) -> dict[SSAValue, tuple[int | None, ...]]:
        """`captured_loop_dims(op)`, once per op."""
        found = self._follows.get(op)
        if found is None:
            found = self._follows[op] = captured_loop_dims(op) if op.regions else {}
        return found

    def capture_targets(
        self, impl: ShardingInterface, op: Operation, shardings: Sequence[ShardingInfo | None]
    ) -> dict[SSAValue, ShardingInfo]:
        """The sharding each capture with followed dimensions is read in when `op` gets
        `shardings` (its operand shardings give the loops' axes)."""
        follows = self.follows(op)
        n = len(op.operands)
        grid = next((s.grid for s in shardings if s is not None), self.grid)
        if not follows or grid is None:
            return {}
        maps = indexing_maps(impl, op)[:n]
        try:
            assignment = grid_axis_assignment_for_loop_iterators(
                [s.sharding if s is not None else None for s in shardings[:n]],
                loop_iterator_types(impl, op),
                maps,
            )
        except LoopShardingConflict:
            assignment = [[] for _ in loop_iterator_types(impl, op)]
        targets: dict[SSAValue, ShardingInfo] = {}
        for value, dims in follows.items():
            axes = capture_split_axes(dims, assignment)
            while axes and not axes[-1]:
                axes.pop()
            targets[value] = ShardingInfo.get(grid, axes)
        return targets

    def capture_options(self, impl: ShardingInterface, op: Operation) -> list[ShardingOption]:
        """The loop sharding each known capture sharding implies through its followed
        dimensions (the other loops left whole)."""
        options: list[ShardingOption] = []
        loops = len(loop_iterator_types(impl, op))
        for value, dims in self.follows(op).items():
            seen = self.seen(value)
            if seen is None or seen.sharding.is_fully_replicated:
                continue
            axes: list[list[int]] = [[] for _ in range(loops)]
            for dim, loop in enumerate(dims):
                if loop is not None and dim < len(seen.split_axes):
                    axes[loop] = list(seen.split_axes[dim])
            if any(axes):
                options.append(ShardingOption(axes, seen.grid))
        return options

    def producer(self, value: SSAValue) -> Operation | None:
        while isinstance(value.owner, ShardOp):
            value = value.owner.src
        return value.owner if isinstance(value, OpResult) else None

    def users(self, value: SSAValue) -> Iterable[tuple[Operation, int]]:
        for use in list(value.uses):
            user = use.operation
            if isinstance(user, ShardOp):
                if use.index == 0:
                    yield from self.users(user.result)
            elif user.parent_block() is self.block:
                yield user, use.index

    def seen(self, value: SSAValue) -> ShardingInfo | None:
        """The sharding an operand reads `value` in: its nearest annotation, else the
        sharding decided for its producer."""
        owner = value.owner
        if isinstance(owner, ShardOp):
            return ShardingInfo.of(owner.sharding)
        if isinstance(value, BlockArgument):
            return self.args.get(value)
        decision = self.decided.get(owner)  # type: ignore[arg-type]
        if decision is None:
            return None
        assert isinstance(value, OpResult)
        return decision.shardings[len(owner.operands) + value.index]  # type: ignore[union-attr]

    def demands(self, value: SSAValue) -> list[tuple[ShardingInfo, bool]]:
        """Shardings the uses of `value` ask for (with whether the user wrote them)."""
        found: list[tuple[ShardingInfo, bool]] = []
        for use in value.uses:
            user = use.operation
            if isinstance(user, ShardOp):
                found.append((ShardingInfo.of(user.sharding), user in self.explicit))
            elif user in self.decided:
                wanted = self.decided[user].shardings[use.index]
                if wanted is not None:
                    found.append((wanted, False))
            elif user.parent_block() is not self.block:
                # Read inside a decided op's region: a capture, in the sharding it follows.
                outer = self.block.find_ancestor_op_in_block(user)
                impl = get_sharding_interface(outer) if outer is not None else None
                if outer in self.decided and impl is not None:
                    target = self.capture_targets(impl, outer, self.decided[outer].shardings).get(value)
                    if target is not None:
                        found.append((target, False))
        return found

    def own_annotation(self, value: SSAValue) -> tuple[ShardingInfo, bool] | None:
        """A producer annotation of `value` (an explicit one first)."""
        shards = [
            u.operation
            for u in value.uses
            if isinstance(u.operation, ShardOp) and not u.operation.for_users
        ]
        shards.sort(key=lambda s: s not in self.explicit)
        if not shards:
            return None
        return ShardingInfo.of(shards[0].sharding), shards[0] in self.explicit

    # ---- costs ----------------------------------------------------------------------------

    def grid_shape(self, op: Operation, grid: str) -> tuple[int | None, ...] | None:
        found = cached_lookup_grid(op, grid)
        return None if found is None else found.shape_tuple

    def move(self, op: Operation, type_: Attribute, src: ShardingInfo, tgt: ShardingInfo) -> float:
        """Bytes each rank receives to reshard a value of `type_` (the planner's figure)."""
        if src.same_as(tgt):
            return 0.0
        key = (src.sharding, tgt.sharding, type_)
        found = self._moves.get(key)
        if found is not None:
            return found
        cost = _INF
        gshape = self.grid_shape(op, src.grid)
        if isinstance(type_, TensorType) and gshape is not None:
            # imported when first needed: 5 ms of start-up, for a run that may reshard nothing
            from shardc.passes.resharding import ReshardingError, bytes_moved, plan_resharding

            try:
                plan = plan_resharding(src.sharding, tgt.sharding, type_.get_shape(), gshape)
                cost = bytes_moved(plan, type_.get_element_type())
            except (ReshardingError, ValueError):
                cost = _INF
        self._moves[key] = cost
        return cost

    def local_elements(self, op: Operation, type_: Attribute, s: ShardingInfo | None) -> float | None:
        """Elements of the local shard (None: the sharding cannot split this type)."""
        if not isinstance(type_, TensorType):
            return 0.0
        if s is None:
            return float(math.prod(max(d, 1) for d in type_.get_shape()))
        key = (type_, s.sharding.grid, s.sharding.split_axes, op.parent_block())
        if key in self._elements:
            return self._elements[key]
        found = self._elements[key] = self._local_elements(op, type_, s)
        return found

    def _local_elements(self, op: Operation, type_: TensorType, s: ShardingInfo) -> float | None:
        gshape = self.grid_shape(op, s.grid)
        if gshape is None:
            return None
        shape = type_.get_shape()
        if len(s.sharding.split_axes) > len(shape):
            return None
        count = 1.0
        for dim, size in enumerate(shape):
            axes = s.sharding.split_axes[dim] if dim < len(s.sharding.split_axes) else ()
            if any(a >= len(gshape) for a in axes):
                return None
            shards = math.prod((gshape[a] or 1) for a in axes)
            if size == DYNAMIC:
                size = 1
            if size % shards:
                return None
            count *= size // shards
        return count

    # ---- deciding one op -------------------------------------------------------------------

    def around(
        self, op: Operation
    ) -> tuple[list[ShardingInfo | None], list[tuple[ShardingInfo, bool] | None], list[list[tuple[ShardingInfo, bool]]]]:
        """What `op`'s neighbours say (read once per decision; nothing changes meanwhile):
        the sharding each operand is seen in, each result's own annotation, and what the
        uses of a result without one ask for."""
        seen = [self.seen(v) for v in op.operands]
        own = [self.own_annotation(r) for r in op.results]
        demands = [[] if o is not None else self.demands(r) for r, o in zip(op.results, own)]
        return seen, own, demands

    def candidates(
        self,
        impl: ShardingInterface,
        op: Operation,
        known_operands: list[ShardingInfo | None],
        own: list[tuple[ShardingInfo, bool] | None],
        demands: list[list[tuple[ShardingInfo, bool]]],
    ) -> list[ShardingOption]:
        n = len(op.operands)
        m = len(op.results)
        options: list[ShardingOption | None] = []
        known_results: list[list[ShardingInfo]] = [
            [o[0]] if o else [s for s, _ in d] for o, d in zip(own, demands)
        ]
        with collect_diagnostics():
            for i, s in enumerate(known_operands):
                if s is not None:
                    shardings: Combination = [None] * n
                    shardings[i] = s
                    options.append(self.option_for(impl, op, shardings, [None] * m))
            if op.regions:
                options.extend(self.capture_options(impl, op))
            for j, found in enumerate(known_results):
                for s in found:
                    shardings = [None] * m
                    shardings[j] = s
                    options.append(self.option_for(impl, op, [None] * n, shardings))
        grid = self.grid or next(
            (s.grid for s in known_operands if s is not None), None
        )
        valid: list[ShardingOption] = []
        for option in options:
            if option is None or option.empty:
                continue
            if option.grid is None:
                option.grid = grid
            if option.grid is not None and impl.allows_option(op, option):
                valid.append(option)
        if grid is not None:
            loops = loop_iterator_types(impl, op)
            valid.append(ShardingOption([[] for _ in loops] or [[]], grid))
        return valid

    def cost(
        self,
        op: Operation,
        shardings: Sequence[ShardingInfo | None],
        known_operands: list[ShardingInfo | None],
        own: list[tuple[ShardingInfo, bool] | None],
        demands: list[list[tuple[ShardingInfo, bool]]],
    ) -> tuple[int, int, float, float]:
        """(explicit annotations of the op overridden, annotations the traversals gave it
        overridden, bytes moved per rank, local elements)."""
        n = len(op.operands)
        explicit, inferred, moved, local = 0, 0, 0.0, 0.0
        for value, s, seen in zip(op.operands, shardings[:n], known_operands):
            if s is None or not isinstance(value.type, TensorType):
                continue
            elements = self.local_elements(op, value.type, s)
            if elements is None:
                return (0, 0, _INF, _INF)
            local += elements
            if seen is None:
                continue
            owner = value.owner
            if isinstance(owner, ShardOp) and owner.for_users and not seen.same_as(s):
                if owner in self.explicit:
                    explicit += 1
                else:
                    inferred += 1
            moved += self.move(op, value.type, seen, s)
        for result, s, o, d in zip(op.results, shardings[n:], own, demands):
            if s is None or not isinstance(result.type, TensorType):
                continue
            elements = self.local_elements(op, result.type, s)
            if elements is None:
                return (0, 0, _INF, _INF)
            local += elements
            wanted = [o] if o is not None else d
            for want, is_explicit in wanted:
                if o is not None and not want.same_as(s):
                    if is_explicit:
                        explicit += 1
                    else:
                        inferred += 1
                moved += self.move(op, result.type, s, want)
        impl = get_sharding_interface(op)
        if op.regions and impl is not None:
            for value, target in self.capture_targets(impl, op, shardings).items():
                seen = self.seen(value)
                if seen is not None:
                    moved += self.move(op, value.type, seen, target)
        return (explicit, inferred, moved, local)

    def decide(self, op: Operation) -> bool:
        """Give `op` the cheapest option its neighbours allow; False if none is known."""
        impl = get_sharding_interface(op)
        if impl is None or (is_constant_like(op) and not op.results):
            return self.decide_replicated(op, "no sharding interface")
        with collect_diagnostics():
            valid = verify_sharding_interface_impl(impl, op)
        if not valid:
            return self.decide_replicated(op, "its sharding interface does not apply")
        best: tuple[tuple[int, int, float, float], int, list[ShardingInfo | None]] | None = None
        known = self.around(op)
        candidates = self.candidates(impl, op, *known)
        for index, option in enumerate(candidates):
            shardings = self.annotations_for(impl, op, option)
            if shardings is None:
                continue
            cost = self.cost(op, shardings, *known)
            if cost[2] == _INF:
                continue
            if best is None or (cost, index) < (best[0], best[1]):
                best = (cost, index, list(shardings))
        if best is None:
            return self.decide_replicated(op, "no option of its neighbours applies")
        (explicit, inferred, moved, _), _, shardings = best
        if not self.explain:  # the reason is only ever printed as a remark
            self.decided[op] = _Decision(shardings, "")
            return True
        results = ", ".join(
            str(r) for r in shardings[len(op.operands) :] if r is not None
        ) or "no tensor result"
        why = (
            f"results {results}: the cheapest of {len(candidates)} candidate(s) its "
            f"neighbours imply, {moved:g} bytes moved per rank"
        )
        if explicit or inferred:
            why += f", {explicit + inferred} annotation(s) of the op resharded"
        self.decided[op] = _Decision(shardings, why)
        return True

    def decide_replicated(self, op: Operation, reason: str) -> bool:
        grid = self.grid
        if grid is None:
            return False
        shardings: list[ShardingInfo | None] = []
        for value in (*op.operands, *op.results):
            is_tensor = isinstance(value.type, TensorType)
            shardings.append(ShardingInfo.get(grid, []) if is_tensor else None)
        self.decided[op] = _Decision(shardings, f"fully replicated ({reason})")
        return True

    def already_annotated(self, op: Operation) -> list[ShardingInfo | None] | None:
        """The shardings of an op upstream's traversals left fully annotated and
        consistent, else None."""
        shardings: list[ShardingInfo | None] = []
        for value in op.operands:
            if not isinstance(value.type, TensorType):
                shardings.append(None)
                continue
            owner = value.owner
            if not isinstance(owner, ShardOp) or not owner.for_users:
                return None
            shardings.append(ShardingInfo.of(owner.sharding))
        for result in op.results:
            if not isinstance(result.type, TensorType):
                shardings.append(None)
                continue
            user = result.get_user_of_unique_use()
            if not isinstance(user, ShardOp) or user.for_users:
                return None
            shardings.append(ShardingInfo.of(user.sharding))
        impl = get_sharding_interface(op)
        if impl is None:
            ok = all(s is None or not s.sharding.split_axes for s in shardings)
            return shardings if ok else None
        n = len(op.operands)
        if not verify_sharding_interface_impl(impl, op):  # reports nothing
            return None
        option = self.option_for(impl, op, shardings[:n], shardings[n:])
        if option is None:
            return None
        if option.empty:
            return shardings if all(s is None or not s.sharding.split_axes for s in shardings) else None
        implied = self.annotations_for(impl, op, option)
        if implied is None:
            return None
        for value, have, want in zip((*op.operands, *op.results), shardings, implied):
            if have is None or not isinstance(value.type, TensorType):
                continue
            if not value.type.get_shape():
                continue
            if want is None or not have.same_as(want):
                return None
        return shardings

    # ---- the fixed point -------------------------------------------------------------------

    def neighbours(self, op: Operation) -> Iterable[Operation]:
        for value in op.operands:
            producer = self.producer(value)
            if producer is not None and producer.parent_block() is self.block:
                yield producer
        for result in op.results:
            for user, _ in self.users(result):
                yield user

    def knows_something(self, op: Operation) -> bool:
        if any(self.seen(v) is not None for v in op.operands):
            return True
        return any(self.own_annotation(r) or self.demands(r) for r in op.results)

    def run(self) -> None:
        ops = self.ops
        for op in ops:
            found = self.already_annotated(op)
            if found is not None:
                self.decided[op] = _Decision(found, "annotated by the traversals")
        pending = [op for op in ops if op not in self.decided]
        self.upstream_done = set(self.decided)
        queue = deque(op for op in pending if self.knows_something(op))
        queued = set(queue)
        position = 0
        while True:
            while queue:
                op = queue.popleft()
                queued.discard(op)
                if op in self.decided or not self.decide(op):
                    continue
                for other in self.neighbours(op):
                    if other not in self.decided and other not in queued:
                        queue.append(other)
                        queued.add(other)
            # Nothing known reaches what is left: replicate the first such op and go on.
            while position < len(pending) and pending[position] in self.decided:
                position += 1
            if position == len(pending):
                break
            op = pending[position]
            if not self.decide_replicated(op, "no annotation reaches it"):
                break
            queue.extend(o for o in self.neighbours(op) if o not in self.decided)
            queued.update(queue)
        for arg in self.block.args:
            if isinstance(arg.type, TensorType):
                self.decide_argument(arg)

    def decide_argument(self, arg: BlockArgument) -> None:
        own = self.own_annotation(arg)
        if own is not None:
            self.args[arg] = own[0]
            return
        uses = list(arg.uses)
        if len(uses) == 1 and isinstance(uses[0].operation, ShardOp):
            # Annotated for its one user (by the traversals): partition reads that.
            self.args[arg] = ShardingInfo.of(uses[0].operation.sharding)
            return
        demands = [s for s, _ in self.demands(arg)]
        if self.grid is None:
            return
        replicated = ShardingInfo.get(self.grid, [])
        best: tuple[float, float, int, ShardingInfo] | None = None
        owner = arg.block.parent_op()
        assert owner is not None
        for index, s in enumerate([*demands, replicated]):
            elements = self.local_elements(owner, arg.type, s)
            if elements is None:
                continue
            moved = sum(self.move(owner, arg.type, s, d) for d in demands)
            key = (moved, elements, index, s)
            if best is None or key[:3] < best[:3]:
                best = key
        assert best is not None
        self.args[arg] = best[3]
        if self.explain:
            asked = ", ".join(str(d) for d in demands) or "nothing"
            diagnostics.emit_remark(
                owner,
                f"argument #{arg.index} has no annotation: it is given {best[3]} "
                f"({best[0]:g} bytes moved per rank; its users ask for {asked})",
            )

    # ---- writing the annotations -----------------------------------------------------------

    def apply(self) -> None:
        replicated: list[Operation] = []
        for op in self.ops:
            decision = self.decided.get(op)
            if decision is None:
                continue
            if op not in self.upstream_done:
                if get_sharding_interface(op) is None and not is_constant_like(op):
                    replicated.append(op)
                self.annotate(op, decision)
            self.annotate_captures(op, decision)
        self.normalize()
        if replicated:
            _warn_replicated(replicated)

    def annotate(self, op: Operation, decision: _Decision) -> None:
        if get_sharding_interface(op) is None and not is_constant_like(op):
            pass  # one warning for all of them (`_warn_replicated`)
        elif self.explain:
            diagnostics.emit_remark(op, f"sharding completed: {decision.why}")
        n = len(op.operands)
        for i, s in enumerate(decision.shardings[:n]):
            if s is not None and isinstance(op.operands[i].type, TensorType):
                self.annotate_operand(op, i, s)
        for result, s in zip(op.results, decision.shardings[n:]):
            if s is not None and isinstance(result.type, TensorType):
                insert_result_annotation(s, result)

    @staticmethod
    def annotate_operand(op: Operation, index: int, sharding: ShardingInfo) -> None:
        """Operand `index` (only that use: a value read twice by one op may be read in
        two shardings) through an annotation for users with `sharding`."""
        value = op.operands[index]
        owner = value.owner
        if isinstance(owner, ShardOp) and owner.for_users and sharding.same_as(
            ShardingInfo.of(owner.sharding)
        ):
            return
        sharding_op = _build_annotation(sharding, value)
        shard = ShardOp(value, sharding_op.result, annotate_for_users=True)
        shard.location = op.location
        Rewriter.insert_op([sharding_op, shard], InsertPoint.before(op))
        op.operands[index] = shard.result

    def annotate_captures(self, op: Operation, decision: _Decision) -> None:
        """Tensors read inside `op`'s regions but defined outside (a gather's table) get an
        annotation for users right before `op`: replicated (partition reads them whole, at
        global indices), or split along the dimensions that follow a loop as the loop
        is (read at local indices)."""
        if not op.regions or self.grid is None or not may_capture_tensor(op):
            return  # (no op inside reads a tensor: a matmul's body, say)
        impl = get_sharding_interface(op)
        targets = self.capture_targets(impl, op, decision.shardings) if impl is not None else {}
        captured: dict[SSAValue, list[tuple[Operation, int]]] = {}
        for inner in op.walk():
            if inner is op:
                continue
            for use_index, value in enumerate(inner.operands):
                if not isinstance(value.type, TensorType):
                    continue
                defining = value.owner
                block = defining if isinstance(defining, Block) else defining.parent_block()
                if block is self.block:
                    captured.setdefault(value, []).append((inner, use_index))
        for value, uses in captured.items():
            sharding = targets.get(value) or ShardingInfo.get(self.grid, [])
            owner = value.owner
            if isinstance(owner, ShardOp) and owner.for_users and sharding.same_as(
                ShardingInfo.of(owner.sharding)
            ):
                continue
            sharding_op = ShardingOp(sharding.grid, sharding.split_axes)
            shard = ShardOp(value, sharding_op.result, annotate_for_users=True)
            Rewriter.insert_op([sharding_op, shard], InsertPoint.before(op))
            for inner, index in uses:
                inner.operands[index] = shard.result
            if self.explain:
                diagnostics.emit_remark(
                    op, f"a tensor its body reads from outside is annotated {sharding}"
                )

    def normalize(self) -> None:
        """The form partition reads: each tensor value used once, by its producer
        annotation; each tensor operand read through an annotation for users."""
        # the block's order, numbered once: asking xDSL whether an op precedes another
        # walks the block, once per use of a value with many users (quadratic)
        self._order = {op: i for i, op in enumerate(self.block.ops)}
        values: list[SSAValue] = [a for a in self.block.args if isinstance(a.type, TensorType)]
        for op in self.ops:
            values.extend(r for r in op.results if isinstance(r.type, TensorType))
        for value in values:
            self.normalize_value(value)
        # Ops outside `self.ops` (annotations, terminators, ops on no tensor) read no
        # tensor through an annotation here.
        for op in self.ops:
            if is_constant_like(op):
                continue
            for index, operand in enumerate(op.operands):
                if not isinstance(operand.type, TensorType):
                    continue
                owner = operand.owner
                if isinstance(owner, ShardOp) and owner.for_users:
                    continue
                if not isinstance(owner, ShardOp):
                    continue  # not a value of this block
                shard = ShardOp(operand, owner.sharding, annotate_for_users=True)
                shard.location = owner.location
                Rewriter.insert_op(shard, InsertPoint.before(op))
                op.operands[index] = shard.result

    def normalize_value(self, value: SSAValue) -> None:
        if isinstance(value, BlockArgument) and self.merge_agreeing_annotations(value):
            return
        only = value.get_unique_use()
        if only is not None and isinstance(only.operation, ShardOp) and only.index == 0:
            # Partition reads an argument through any one annotation, a result through
            # its producer annotation.
            if isinstance(value, BlockArgument) or not only.operation.for_users:
                return
        uses = list(value.uses)
        hub: ShardOp | None = None
        for use in uses:
            user = use.operation
            if isinstance(user, ShardOp) and not user.for_users and use.index == 0:
                if user.parent_block() is self.block and (hub is None or user in self.explicit):
                    hub = user
        if hub is None:
            sharding = self.sharding_of_value(value)
            if sharding is None:
                return
            sharding_op = _build_annotation(sharding, value)
            hub = ShardOp(value, sharding_op.result, annotate_for_users=False)
            hub.location = sharding_op.location
            Rewriter.insert_op([sharding_op, hub], _point_after(value))
        elif hub.parent_block() is self.block and any(
            u.operation is not hub
            and u.operation.parent_block() is self.block
            and self.before(u.operation, hub)
            for u in uses
        ):
            hub.detach()
            self._order.pop(hub, None)  # moved: its old number no longer holds
            Rewriter.insert_op(hub, _point_after(value))
            sharding_owner = hub.sharding.owner
            # the hub now follows the value's producer (or opens the block) directly
            owner_first = isinstance(value, OpResult) and isinstance(sharding_owner, ShardingOp) and self.before(sharding_owner, value.op)
            if isinstance(sharding_owner, ShardingOp) and not owner_first:
                sharding_op = _build_annotation(ShardingInfo.of(hub.sharding), value)
                Rewriter.insert_op(sharding_op, InsertPoint.before(hub))
                hub.operands[1] = sharding_op.result
        for use in uses:
            if use.operation is not hub:
                use.operation.operands[use.index] = hub.result

    def before(self, a: Operation, b: Operation) -> bool:
        """Whether `a` precedes `b` in the block (both in it), by the numbers `normalize`
        gave the block's ops; xDSL's walk for ops inserted since."""
        i, j = self._order.get(a), self._order.get(b)
        if i is None or j is None or a.parent_block() is not self.block:
            return a.is_before_in_block(b)
        return i < j

    def merge_agreeing_annotations(self, arg: BlockArgument) -> bool:
        """An argument read only through annotations for users that agree (what the
        traversals leave on an unannotated argument with several uses): those become
        one, the first, which partition and shardc-run read. That is upstream's result
        after cse, with no producer annotation added. False (nothing done) otherwise."""
        uses = list(arg.uses)
        if len(uses) < 2:
            return False
        annotations: list[ShardOp] = []
        for use in uses:
            user = use.operation
            if not (isinstance(user, ShardOp) and user.for_users and use.index == 0):
                return False
            if user.parent_block() is not self.block:
                return False
            annotations.append(user)
        first = annotations[0]
        for a in annotations[1:]:
            if self.before(a, first):
                first = a
        sharding = ShardingInfo.of(first.sharding)
        if not all(sharding.same_as(ShardingInfo.of(a.sharding)) for a in annotations):
            return False
        for other in annotations:
            if other is first:
                continue
            other.result.replace_all_uses_with(first.result)
            sharding_op = other.sharding.owner
            other.detach()
            other.erase()
            if isinstance(sharding_op, ShardingOp) and not sharding_op.result.uses:
                sharding_op.detach()
                sharding_op.erase()
        return True

    def sharding_of_value(self, value: SSAValue) -> ShardingInfo | None:
        if isinstance(value, BlockArgument):
            return self.args.get(value)
        decision = self.decided.get(value.owner)  # type: ignore[arg-type]
        if decision is not None:
            assert isinstance(value, OpResult)
            s = decision.shardings[len(value.op.operands) + value.index]
            if s is not None:
                return s
        return ShardingInfo.get(self.grid, []) if self.grid is not None else None


_LISTED = 5
"""How many of the ops without a sharding interface the summary warning names."""


def _warn_replicated(ops: list[Operation]) -> None:
    """One warning, at the first op without a sharding interface, for all of them: a
    program of thousands of such ops gets one line and its count, not a line each (and
    no source context printed per op)."""
    first = ops[0]
    message = (
        f"'{first.name}' has no sharding interface: it runs fully replicated, "
        "its operands and results resharded at its boundary"
    )
    if len(ops) > 1:
        file = first.location.filename.data if isinstance(first.location, FileLineColLoc) else None

        def where(op: Operation) -> str:
            loc = op.location
            if not isinstance(loc, FileLineColLoc):
                return ""
            return f" at {loc.line.data}:{loc.column.data}" if loc.filename.data == file else f" at {_location(op)}"

        named = ", ".join(f"'{op.name}'{where(op)}" for op in ops[1 : 1 + _LISTED])
        more = len(ops) - 1 - _LISTED
        message += f"; so do {len(ops) - 1} more ops without one ({named}{f', and {more} more' if more > 0 else ''})"
    diagnostics.emit_warning(first, message)


def _point_after(value: SSAValue) -> InsertPoint:
    if isinstance(value, OpResult):
        return InsertPoint.after(value.op)
    assert isinstance(value, BlockArgument)
    return InsertPoint.at_start(value.block)


def _build_annotation(sharding: ShardingInfo, value: SSAValue) -> ShardingOp:
    op = ShardingOp(sharding.grid, split_axes_attr_for(sharding, value), halo_sizes=sharding.sharding.static_halo_sizes)
    if isinstance(value, OpResult):
        op.location = value.op.location
    return op


def complete_function(function: func.FuncOp, explicit: set[ShardOp], explain: bool) -> None:
    """Annotate what the traversals left (see the module docstring)."""
    block = function.body.blocks.first
    if block is None or not any(isinstance(op, ShardOp) for op in block.ops):
        return
    completion = Completion(function, explicit, explain)
    completion.run()
    completion.apply()


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
    # annotations first: after the first traversal most ops are
    if is_annotation_op(op) or has_trait(op, IsTerminator):
        return True
    impl = get_sharding_interface(op)
    if impl is None and is_constant_like(op):
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
        op._operands,  # pyright: ignore[reportPrivateUsage] - the tuple `operands` views
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


def beyond_upstream(block: Block) -> bool:
    """Whether upstream's traversals fail on `block`: it holds an op with no sharding
    model upstream (shardc's extensions, `ShardingInterface.in_upstream`, or none at all;
    torch-mlir's reshapes, for one). Completing, such a function is first traversed
    forward (see the module docstring)."""
    for op in block.ops:
        if is_annotation_op(op) or has_trait(op, IsTerminator):
            continue
        impl = get_sharding_interface(op)
        if impl is None and not is_constant_like(op) or impl is not None and not impl.in_upstream:
            return True
    return False


def propagate_function(
    function: func.FuncOp,
    traversal: Traversal,
    explain: bool,
    complete: bool = False,
    trunk_forward: bool = False,
) -> bool:
    """Run the traversals on one function, then (`complete`) the completion; False if
    the function cannot be propagated (upstream's failures when not `complete`). With
    `trunk_forward`, a forward traversal that leaves trunk's form is not completed
    (`forward_form_is_trunks`)."""
    # A declaration (no block) is refused too, as trunk does, completing or not.
    if len(function.body.blocks) != 1:
        emit_op_error(function, "only one block is supported!")
        return False
    block = function.body.blocks.first
    assert block is not None
    explicit = {op for op in block.ops if isinstance(op, ShardOp)}
    explainer = Explainer(function) if explain else None
    ok = True

    def traverse(ops: list[Operation]) -> None:
        nonlocal ok
        # Ops inserted meanwhile are annotations, which the walk would skip anyway.
        for op in ops:
            if not visit_op(op, explainer):
                ok = False
                if not complete:
                    return

    listener = explainer.inserted if explainer is not None else (lambda _s, _o: None)
    with listen_to_annotations(listener):
        if complete and traversal.startswith("backward") and beyond_upstream(block):
            traverse(block_ops(block))
        if traversal in ("backward", "backward-forward"):
            traverse(block_ops(block)[::-1])
        if traversal != "backward":
            traverse(block_ops(block))
        if traversal == "forward-backward":
            traverse(block_ops(block)[::-1])
    if not complete:
        return ok
    if trunk_forward and traversal == "forward" and ok and forward_form_is_trunks(block):
        return True
    complete_function(function, explicit, explain)
    return True


_INIT_TENSOR_OPS = ("tensor.empty", "linalg.fill")


def forward_form_is_trunks(block: Block) -> bool:
    """Whether the forward traversal left `block` as trunk's `traversal=forward` prints
    it, with nothing for the completion to do but annotate init tensors (a `tensor.empty`,
    a `linalg.fill`): every other tensor value has a producer annotation and is read
    through annotations only; an init tensor may be annotated for its users alone, or
    read by another init op unannotated. Then the forward mode keeps trunk's output as
    it is. (`shard-partition` wants producer annotations on those init tensors, as
    trunk's does: a program to partition goes through another traversal or a pipeline
    with the completion.)"""
    for op in block.ops:
        if isinstance(op, (ShardOp, ShardingOp)):
            continue
        init = op.name in _INIT_TENSOR_OPS
        for value in op.results:
            if not isinstance(value.type, TensorType):
                continue
            users = [use.operation for use in value.uses]
            if not users:
                return False
            if init:
                if not all(isinstance(u, ShardOp) or u.name in _INIT_TENSOR_OPS for u in users):
                    return False
            elif not all(isinstance(u, ShardOp) for u in users) or all(u.for_users for u in users):
                return False
    for arg in block.args:
        if isinstance(arg.type, TensorType):
            uses = [use.operation for use in arg.uses]
            if not uses or not all(isinstance(u, ShardOp) and not u.for_users for u in uses):
                return False
    return True


@dataclass(frozen=True)
class ShardingPropagationPass(ModulePass):
    """Propagate shard.shard annotations through every func.func of the module."""

    name = "sharding-propagation"

    keeps_trunk_forward_form: ClassVar[bool] = True
    """`traversal=forward` prints trunk's output where it is (`forward_form_is_trunks`)."""

    traversal: Traversal = "backward-forward"
    """Order(s) in which the ops of a function are visited."""

    explain: bool = False
    """Say, for each inserted annotation, where its sharding came from."""

    complete: bool = True
    """After the traversals, annotate every tensor value of each annotated function
    (false: stop after upstream's traversals, with upstream's errors)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        failed = False
        with collect_diagnostics() as found, pass_cache(), paused_gc():
            for function in [f for f in op.ops if isinstance(f, func.FuncOp)]:
                mark = len(found)
                try:
                    propagated = propagate_function(
                        function, self.traversal, self.explain, self.complete,
                        trunk_forward=self.keeps_trunk_forward_form,
                    )
                except DiagnosticError as refused:  # an interface refused an op: the
                    found.append(refused.diagnostic)  # other functions still report theirs
                    propagated = False
                if not propagated:
                    failed = True
                elif self.complete:
                    del found[mark:]  # what the completion settled is no error
        # Like mlir-opt: every error is reported in order; the last one fails the pass.
        if failed and found:
            for diag in found[:-1]:
                diagnostics.emit(diag.op, diag.severity, diag.message)
            raise diagnostics.error(found[-1].op, found[-1].message)
        for diag in found:
            diagnostics.emit(diag.op, diag.severity, diag.message)
        if failed:
            raise PassFailedException("sharding propagation failed")


@dataclass(frozen=True)
class PartitionablePropagationPass(ShardingPropagationPass):
    """`sharding-propagation` whose output `shard-partition` always reads: the completion
    runs after every traversal, `forward` included (the pipelines run this one)."""

    keeps_trunk_forward_form: ClassVar[bool] = False
