"""Communication overlapped with compute: a schedule step of code generation, and the
run-time calls of the code it emits.

A gradient reduction (all-reduce, or reduce-scatter under ZeRO) written in a function's
top-level block is final long before the function needs its result: the backward makes
the last layers' gradients first, and the reduced gradient is read only by the
accumulation at the end, or returned. The step here reorders the block and splits such
a collective into a start and a wait:

- *hoist*: the collective and the ops that exist only to feed it (its gradient's last
  contraction, the reshapes, transposes and copies into the send buffer, the receive
  buffer's allocation) move up to just after the last op they depend on that stays put;
- *sink*: the ops that only consume its result (the accumulation into the gradient
  buffer, the reshape of an all-gathered parameter) move down to just before the op
  that needs them, the return for the step's results;
- the collective becomes a nonblocking start (`mpi.allreduce` -> MPI_Iallreduce, ...),
  waited for just before the first op that reads or writes its buffers (through any
  view), or at the return; a collective with no work between its start and that op
  stays blocking. While a collective is in flight, every structured op is preceded by a
  `progress()` call (MPI_Test): MPICH moves a nonblocking collective on only inside MPI
  calls unless its async progress thread is on (`MPIR_CVAR_ASYNC_PROGRESS=1`, a core).

All-gathers are sunk, never hoisted (hoisting them is a prefetch: FSDP would hold every
gathered parameter at once). Dependencies are SSA uses (within nested regions too),
memory (ops touching the same buffer, through views and `bufferization.to_tensor`, keep
their order) and effects (other communication, asserts, calls and unknown ops keep their
order, and no collective moves above one). Every rank compiles the same schedule, so
collectives start in the same order everywhere, as MPI requires.

Small collectives are also *held* (`comm.hold`, at most `SHARDC_BUCKET_BYTES`, default
64 KiB, per call): a start records them and the first wait of any runs all of them, one
call per (communicator, kind, op, dtype) on a flat buffer. The GPT step's 26 bias and
layernorm gradient all-reduces (1 KiB each), 8 bias reduce-scatters and 8 bias
all-gathers become 3 calls: on a shared machine each synchronisation costs a wait for
the rank that was descheduled last; dp=2's step makes 39 collective calls instead of 79.

Without the schedule (the default) a block is emitted as written but for its small
collectives (a static send buffer of at most `comm.BUCKET_BYTES`): each is held from
where it is written to the first op that needs its buffers, and the ops that only
consume its result on the way to the return (gradient accumulations) move there, so
dp=2's 26 layernorm and bias gradient all-reduces, 8 bias reduce-scatters, the loss's
all-reduce and 8 bias all-gathers run as 3 calls (81 -> 41 MPI calls a step); nothing else moves
(`SHARDC_BUCKET_BYTES=0` at run time runs each where it is written).

Off unless `SHARDC_OVERLAP=1` at compile time. On a quiet 2-core machine the scheduled
step measured slower than the step as written in `bench/train_step.py` (side by side, two
runs each: dp=2 154-157 ms written vs 160-161 scheduled, tp=2 155 vs 160-167, tp=2's peak
memory 300 vs 329 MiB) and 0.97-1.02x in bench/overlap_step.py, held small collectives
included; under load (other processes on the cores) it measured 1.03-1.15x on dp=2 ZeRO,
1.57x on dp=4 and 1.22x on tp=2 x dp=2: MPICH on shared memory finishes a reduction
about as fast as it could hide it unless a rank gets descheduled. With
`SHARDC_OVERLAP=1` at compile time the block is scheduled (the compile-cache key records
it); whether a start is then really nonblocking is decided when it runs:
`SHARDC_OVERLAP=0` makes every start run the blocking collective (small ones are still
held and bucketed; the results are bitwise the same either way: the same MPI reduction;
where MPI's nonblocking call may reduce in another order, `comm.nonblocking_matches`
says so and the start runs the blocking one), `=1` or unset overlaps (`DEFAULT_ON`). `SHARDC_OVERLAP_MAX_INFLIGHT=N` caps the collectives
in flight per rank (the oldest is waited for first; 0, the default, is no cap);
`SHARDC_OVERLAP_PROGRESS=0` drops the MPI_Test calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, Operation, SSAValue

from shardc.runtime.execute.comm import BUCKET_BYTES

# The run time (starts in flight, waits, progress) is in overlap_run.py.
from shardc.runtime.execute.overlap_run import (  # noqa: F401  (the run time, re-exported)
    DEFAULT_ON,
    enabled,
    in_flight,
    launch,
    progress,
    scheduling_asked,
    wait,
)


# ---------------------------------------------------------------------------------------
# Code generation
# ---------------------------------------------------------------------------------------

StartEmitter = Callable[[Operation, Any], Callable[[Any], None]]
"""Emits the start of a collective on a FunctionBuilder and returns what emits its wait."""


@dataclass(frozen=True)
class _Start:
    emit: StartEmitter
    hoist: bool
    results_at_wait: bool


_STARTS: dict[type[Operation], _Start] = {}


def register_start(*op_classes: type[Operation], hoist: bool = True, results_at_wait: bool = False) -> Callable[[StartEmitter], StartEmitter]:
    """Register the start emitter of collectives the schedule may split. `hoist=False`
    for those that must not start earlier than written (all-gathers: a prefetch);
    `results_at_wait` when the wait defines the op's results (tensor collectives), so
    that no op, not even a view, may use them before it."""

    def deco(fn: StartEmitter) -> StartEmitter:
        for cls in op_classes:
            _STARTS[cls] = _Start(fn, hoist, results_at_wait)
        return fn

    return deco


def _start_of(op: Operation) -> _Start | None:
    for cls in type(op).__mro__:
        got = _STARTS.get(cls)  # type: ignore[arg-type]
        if got is not None:
            return got
    return None


# Ops whose result is a view of their first operand (no data is read): a wait is not
# needed before them, only before the ops that use their results.
_VIEWS = frozenset(
    {
        "bufferization.to_tensor",
        "memref.cast",
        "memref.memory_space_cast",
        "memref.assume_alignment",
        "memref.subview",
        "memref.collapse_shape",
        "memref.expand_shape",
        "memref.reinterpret_cast",
    }
)
# Dialects whose ops act only on their operands (memory: through the buffer edges) and
# results; communication (but the queries below), calls and other dialects keep order.
_PURE_DIALECTS = frozenset({"arith", "math", "tensor", "linalg", "bufferization", "memref", "affine", "tosa", "tm_tensor", "vector", "scf", "index", "complex", "shard", "mpi", "func"})
_PURE_COMM = frozenset(
    {
        "mpi.comm_world",
        "mpi.comm_rank",
        "mpi.comm_size",
        "mpi.error_class",
        "mpi.retval_check",
        "mpi.init",
        "shard.grid",
        "shard.grid_shape",
        "shard.process_multi_index",
        "shard.process_linear_index",
        "shard.neighbors_linear_indices",
        "shard.sharding",
        "shard.get_sharding",
        "shard.shard",
        "shard.shard_shape",
    }
)


def _has_effect(op: Operation) -> bool:
    """Communication, calls, asserts and ops of unknown dialects, here or nested."""
    for inner in op.walk():
        name = inner.name
        dialect = name.split(".", 1)[0]
        if dialect not in _PURE_DIALECTS or name in ("func.call", "func.call_indirect"):
            return True
        if dialect in ("mpi", "shard") and name not in _PURE_COMM:
            return True
    return False


def _is_view(op: Operation) -> bool:
    return op.name in _VIEWS or (op.name == "bufferization.to_buffer" and getattr(op, "read_only", None) is not None)


def _heavy(op: Operation) -> bool:
    """Work worth overlapping (and worth an MPI_Test before it)."""
    return not _is_view(op) and (op.name.startswith(("linalg.", "tosa.", "tm_tensor.", "memref.copy")) or bool(op.regions))


def _used_values(op: Operation) -> list[SSAValue]:
    """Operands, and the values nested ops use from outside `op`."""
    vals = list(op.operands)
    if not op.regions:
        return vals
    inside: set[SSAValue] = set()
    nested = [inner for inner in op.walk() if inner is not op]
    for inner in [op, *nested]:
        for r in inner.regions:
            for b in r.blocks:
                inside.update(b.args)
    for inner in nested:
        inside.update(inner.results)
    for inner in nested:
        vals.extend(v for v in inner.operands if v not in inside)
    return vals


@dataclass
class _Graph:
    """Dependencies between the ops of one block (indices in the written order)."""

    ops: list[Operation]
    preds: list[set[int]]
    succs: list[set[int]]
    effect: list[bool]
    start: list[_Start | None]


def _build_graph(ops: Sequence[Operation]) -> _Graph:
    pos = {op: i for i, op in enumerate(ops)}
    n = len(ops)
    g = _Graph(list(ops), [set() for _ in range(n)], [set() for _ in range(n)], [False] * n, [_start_of(op) for op in ops])

    def edge(a: int, b: int) -> None:
        if a != b:
            g.preds[b].add(a)
            g.succs[a].add(b)

    roots: dict[SSAValue, object] = {}

    def root(v: SSAValue) -> object:
        r = roots.get(v)
        if r is None:
            owner = v.owner
            if isinstance(owner, Operation) and owner in pos and _is_view(owner) and owner.operands:
                r = root(owner.operands[0])
            elif isinstance(owner, Operation) and owner.name == "memref.get_global":
                r = ("global", str(owner.attributes.get("name", owner.properties.get("name"))))
            elif isinstance(owner, Block) and isinstance(v.type, MemRefType):
                r = ("arguments",)  # memref arguments may alias each other
            else:
                r = v
            roots[v] = r
        return r

    def tracked(r: object) -> bool:  # tensors are immutable: only buffers order accesses
        return not isinstance(r, SSAValue) or isinstance(r.type, MemRefType)

    last_access: dict[object, int] = {}
    last_effect: int | None = None
    for i, op in enumerate(ops):
        used = _used_values(op)
        for v in used:
            owner = v.owner
            if isinstance(owner, Operation) and owner in pos:
                edge(pos[owner], i)
        for r in {root(v) for v in used} | {root(v) for v in op.results}:
            if tracked(r):
                if r in last_access:
                    edge(last_access[r], i)
                last_access[r] = i
        if g.start[i] is not None:
            if last_effect is not None:
                edge(last_effect, i)  # never above an earlier assert or communication
        elif _has_effect(op):
            g.effect[i] = True
            if last_effect is not None:
                edge(last_effect, i)
            last_effect = i
    return g


def _hoist(order: list[int], g: _Graph, c: int) -> list[int]:
    """Move `c` and the ops before it that feed only it (their other users come after
    it) up to just after the last op they depend on that stays."""
    where = {j: k for k, j in enumerate(order)}
    at = where[c]
    group = {c}
    for k in range(at - 1, -1, -1):
        j = order[k]
        if g.effect[j] or g.start[j] is not None or not (g.succs[j] & group):
            continue
        if all(s in group for s in g.succs[j] if where[s] < at):
            group.add(j)
    needed = set().union(*(g.preds[m] for m in group)) - group
    anchor = max((where[p] for p in needed), default=-1)
    moved = [j for j in order[anchor + 1 : at + 1] if j in group]
    rest = [j for j in order[anchor + 1 : at + 1] if j not in group]
    return order[: anchor + 1] + moved + rest + order[at + 1 :]


def _sink(order: list[int], g: _Graph, c: int, term: int) -> list[int]:
    """Move the ops after `c` whose results reach only the terminator, through one
    another, and that consume `c`'s result (transitively), down to just before it."""
    where = {j: k for k, j in enumerate(order)}
    at = where[c]
    after = order[at + 1 : -1]
    desc = {c}
    for j in after:
        if g.preds[j] & desc and not g.effect[j] and g.start[j] is None:
            desc.add(j)
    tail: set[int] = set()
    for j in reversed(after):
        if j in desc and g.succs[j] and all(s in tail or s == term for s in g.succs[j]):
            tail.add(j)
    if not tail:
        return order
    return order[: at + 1] + [j for j in after if j not in tail] + [j for j in after if j in tail] + [term]


def schedule(ops: Sequence[Operation]) -> tuple[list[Operation], _Graph, list[int]]:
    """The block's ops in overlapped order (the terminator stays last), with the graph
    and the indices (into `ops`) of the collectives that may be split."""
    g = _build_graph(ops)
    n = len(ops)
    term = n - 1
    order = list(range(n))
    colls = [i for i in range(term) if g.start[i] is not None]
    for c in colls:
        if g.start[c].hoist:  # type: ignore[union-attr]
            order = _hoist(order, g, c)
    # Tails go to the end in the order the collectives now start: waited oldest first.
    for c in sorted(colls, key=order.index):
        order = _sink(order, g, c, term)
    assert order[-1] == term and sorted(order) == list(range(n))
    return [ops[i] for i in order], g, colls


SCHEDULE: bool | None = None
"""None: schedule when `SHARDC_OVERLAP=1` at compile time (`scheduling()`, part of the
compile-cache key). True/False force it (tests and bench/overlap_step.py, which compile
with the disk cache off: the key sees only the environment)."""


def scheduling() -> bool:
    """Whether code generation schedules blocks for overlap now."""
    if SCHEDULE is not None:
        return SCHEDULE
    return scheduling_asked()


def emit_block(g: Any, block: Block) -> None:
    """Emit the ops of a function's single block (its terminator last). Scheduled
    (`scheduling()`): in the overlapped order, collectives split into starts and waits
    just before the first op that needs them, MPI_Test calls between. Otherwise as
    written, but a small collective is held until an op needs it (`_small_held`), and
    the ops that only consume its result, up to the return, move there."""
    ops = list(block.ops)
    if len(ops) < 3:
        g.emit_ops(ops)
        return
    if scheduling():
        if not any(_start_of(op) is not None for op in ops[:-1]):
            g.emit_ops(ops)
            return
        ordered, graph, colls = schedule(ops)
        _emit_split(g, ops, ordered, graph, colls, lambda op: _start_of(op).emit, progress_calls=True)  # type: ignore[union-attr]
        return
    held = [i for i, op in enumerate(ops[:-1]) if _small_held(op)]
    if not held:
        g.emit_ops(ops)
        return
    graph = _build_graph(ops)
    order = list(range(len(ops)))
    for c in held:  # what only consumes a held result (an accumulation) waits at the end
        order = _sink(order, graph, c, len(ops) - 1)
    _emit_split(g, ops, [ops[i] for i in order], graph, held, lambda op: _HELD[type(op)].emit, progress_calls=False)


def _emit_split(g: Any, ops: list[Operation], ordered: list[Operation], graph: _Graph, colls: list[int], emitter: Callable[[Operation], StartEmitter], progress_calls: bool) -> None:
    """Emit `ordered` (a topological order of `ops`) with each collective of `colls` that
    has work between it and the first op needing its buffers split by `emitter(op)` into
    a start and a wait before that op (or the terminator); `progress_calls`: an MPI_Test
    before each heavy op while any is in flight."""
    pos = {op: i for i, op in enumerate(ops)}
    coll_set = set(colls)
    last = len(ops) - 1

    def transparent(i: int) -> bool:
        """A view that needs no wait: it reads nothing, and no collective it uses
        directly defines its results only at the wait."""
        if not _is_view(graph.ops[i]):
            return False
        return not any(p in coll_set and graph.start[p].results_at_wait for p in graph.preds[i])  # type: ignore[union-attr]

    needs: dict[int, set[int]] = {}
    for op in ordered:  # a topological order: the preds are done
        i = pos[op]
        got: set[int] = set()
        for p in graph.preds[i]:
            if p in coll_set:
                got.add(p)
            elif transparent(p):
                got |= needs[p]
        needs[i] = got
    split: set[int] = set()
    for c in colls:
        k = ordered.index(graph.ops[c])
        for op in ordered[k + 1 :]:
            i = pos[op]
            if i == last or (c in needs[i] and not transparent(i)):
                break
            if _heavy(op):
                split.add(c)
                break
    waits: dict[int, Callable[[Any], None]] = {}
    started: list[int] = []
    for op in ordered:
        i = pos[op]
        due = set(waits) if i == last else (set() if transparent(i) else needs[i] & set(waits))
        for c in [c for c in started if c in due]:
            waits.pop(c)(g)
            started.remove(c)
        if i in split:
            waits[i] = emitter(op)(op, g)
            started.append(i)
            continue
        if progress_calls and waits and _heavy(op):
            g.emit(f"{g.const(progress, 'overlap_progress')}()")
        g.emit_op(op)
    assert not waits


# ---------------------------------------------------------------------------------------
# Small collectives held in a block emitted as written
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _HeldStart:
    emit: StartEmitter
    send: Callable[[Operation], SSAValue]


_HELD: dict[type[Operation], _HeldStart] = {}


def register_held(*op_classes: type[Operation], send: Callable[[Operation], SSAValue]) -> Callable[[StartEmitter], StartEmitter]:
    """Register the emitter of a held start (`comm.hold`: recorded, run with every
    other held one at the first wait of any) for collectives whose send buffer is
    `send(op)`."""

    def deco(fn: StartEmitter) -> StartEmitter:
        for cls in op_classes:
            _HELD[cls] = _HeldStart(fn, send)
        return fn

    return deco


def _small_held(op: Operation) -> bool:
    """Whether `op` is held in a block emitted as written: a registered collective whose
    send buffer has a static size of at most `comm.BUCKET_BYTES`. The GPT step's bias and
    layernorm gradients are reduced one by one as the backward makes them but read only
    by the accumulation at its end; held, they run there as one call per kind (dp=2: 26
    all-reduces of 1 KiB become one), each call a synchronisation fewer, which on a
    shared machine is a wait fewer for a descheduled rank. The order of the big
    collectives and of all compute but those accumulations stays as written."""
    held = _HELD.get(type(op))
    if held is None:
        return False
    t = held.send(op).type
    if not isinstance(t, MemRefType) or any(d < 0 for d in t.get_shape()):
        return False
    width = getattr(t.get_element_type(), "bitwidth", None)
    return width is not None and math.prod(t.get_shape()) * width <= 8 * BUCKET_BYTES
