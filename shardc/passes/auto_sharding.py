"""`auto-sharding`: choose every tensor value's sharding by an integer program.

For each function of a module with one `shard.grid`, every top-level op offers strategies:
the assignments of grid axes to its loops that its ShardingInterface accepts (each loop
split only by axes whose product divides it; reductions only where the interface can
partition them), each implying its operand and result shardings
(`get_sharding_annotations`, the same the propagation uses). Ops without an interface
offer one: everything replicated; function arguments offer every sharding a user asks of
them, plus replicated. The pass then minimizes, as Alpa and XLA's auto-sharding do,

    sum of chosen strategies' compute time (cost_model: FLOPs at the BLAS rate, bytes at
        the elementwise bandwidth, an all_reduce for a split reduction)
  + sum over producer->consumer edges of the time to reshard between their choices
        (the resharding planner's collectives, priced per kind by alpha-beta)

subject to one choice per op and, with `memory-budget`, the bytes live on a rank at each
point of the function (liveness over the top-level ops; arguments live throughout) at
most the budget. It is solved exactly by HiGHS (`highspy`: HiGHS's own bindings, one
small wheel, rather than all of scipy for `scipy.optimize.milp` over the same solver).

Memory counts each value at its chosen sharding while it is live, plus, at the op that
reads it, the copy a resharding makes. Splits use groups of grid axes: every order of
the axes larger than one, plus the groups the function's annotations write.

Reductions before solving, all exact: strategies implying the same shardings are one
(the cheapest); an edge costs one variable per pair of *distinct* shardings its two
ends can have, not per pair of strategies (a linear cost where one end has a single
sharding); without a budget, leaves (a node whose edges all reach one other node: a
weight read once, an empty feeding a fill, then that fill) fold into their neighbour per
strategy, repeatedly, so chains hanging off the graph vanish before the solver sees it.
Repeated layers share one solution: the top-level ops' signatures (name, types,
attributes, region ops) are searched for runs of four or more equal blocks (a layer's
forward, its backward), and every interior copy takes the second copy's choices (its
columns, its edges' pair columns; the first and last copies, which meet the embedding and
the loss, stay free: on a 5-layer GPT step this gives the unshared optimum choice by
choice). Strategies and leaf folds are computed once per distinct op. A GPT-2-small
training step (12 layers, n_embd 768, on 2x2; `bench/auto_plan.py --solve both`) took
37 s before; now 9.6 s with its layers shared (891 of 1236 nodes tied, 221k columns) and
25.7 s without (824k columns), the same predicted step, on the 2-core development
machine at load average 2 (38 s and 114 s at load average 8).

User annotations are constraints: a `shard.shard` for the producer fixes the sharding of
the value it annotates; one for users fixes what its users read. The output is the
input annotated as `sharding-propagation` annotates (each op's results for the producer,
its operands for users), which propagation and `shard-partition` take as is.
`explain=true` adds a remark per op and argument: its choice, the predicted cost, and the
runner-up (the best other strategy with every other choice kept). A budget nothing fits
is one error at the grid naming the smallest budget that does.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue
from xdsl.ir.affine import AffineDimExpr
from xdsl.passes import ModulePass
from xdsl.traits import IsTerminator

from shardc.dialects.shard import GridOp, Sharding, ShardingOp, ShardOp
from shardc.interfaces.sharding import (
    IteratorType,
    ShardingInfo,
    ShardingOption,
    get_sharding_interface,
    indexing_maps,
    insert_operand_annotation,
    insert_result_annotation,
    loop_iterator_types,
    pass_cache,
    reduction_grid_axes,
    remove_trailing_empty_sub_arrays,
    verify_sharding_interface_impl,
)
from shardc.ir import diagnostics
from shardc.passes.cost_model import DEFAULT_RATES, CostModel, Rates, live_ranges, load_rates
from shardc.passes.resharding import ReshardingError, describe_sharding

# =========================================================================================
# Sizes
# =========================================================================================

_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def parse_size(text: str) -> int:
    """`4096`, `512KB`, `1.5GiB` -> bytes (KB/MB/GB decimal, KiB/MiB/GiB binary)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise ValueError(f"memory-budget: expected a size such as 512MB or 2GiB, got '{text}'")
    return int(float(m.group(1)) * _UNITS[unit])


def format_size(nbytes: float) -> str:
    """Bytes as the largest binary unit that keeps a number >= 1 (`format_size(3072)` is
    `3KiB`), exact to the byte when small."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f}{unit}" if value == int(value) else f"{math.ceil(value * 100) / 100:.2f}{unit}"
    return f"{math.ceil(nbytes)}B"


def _element_bytes(t: TensorType) -> int:
    return max(int(getattr(t.element_type, "bitwidth", 32)), 8) // 8


def local_bytes(t: TensorType, sharding: Sharding, grid_shape: Sequence[int]) -> float:
    """The bytes one rank holds of a tensor of type `t` under `sharding` (even splits)."""
    shape = [max(d, 1) for d in t.get_shape()]
    for dim, axes in enumerate(sharding.split_axes):
        if dim < len(shape):
            shape[dim] = math.ceil(shape[dim] / math.prod(grid_shape[a] for a in axes))
    return float(math.prod(shape) * _element_bytes(t))


# =========================================================================================
# The problem: nodes (ops and arguments) with strategies, edges between them
# =========================================================================================


@contextlib.contextmanager
def _stdout_silenced() -> Iterator[None]:
    """File descriptor 1 points at /dev/null meanwhile (C++ writes past Python's
    sys.stdout): what a pass prints on stdout would corrupt the IR shardc-opt writes there."""
    sys.stdout.flush()
    import ctypes

    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        ctypes.CDLL(None).fflush(None)
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


@dataclass
class Strategy:
    """One way to run a node: operand and result shardings (None: not a tensor) and its
    own cost in seconds."""

    operands: list[Sharding | None]
    results: list[Sharding | None]
    cost: float
    option: ShardingOption | None = None
    label: str = ""
    folded: float = 0.0
    """The best cost of the leaves folded into this node for this strategy (`fold_leaves`)."""

    @property
    def total(self) -> float:
        return self.cost + self.folded


@dataclass
class Node:
    """An op (or a function argument, `op` None) and the strategies it may take."""

    op: Operation | None
    arg: BlockArgument | None
    strategies: list[Strategy]
    fixed: bool = False  # a user annotation: nothing to write
    columns: list[int] = field(default_factory=list)

    def where(self) -> Operation:
        if self.op is not None:
            return self.op
        assert self.arg is not None
        owner = self.arg.block.parent_op()
        assert owner is not None
        return owner

    def name(self) -> str:
        return self.op.name if self.op is not None else f"argument #{self.arg.index}"  # type: ignore[union-attr]


@dataclass
class Edge:
    """A value from `producer`'s result `result` read by `consumer`'s operand `operand`
    (`operand` -1: read by a nested region, which needs it whole); `exact`: the reader
    must see the producer's sharding (a user's annotation for users)."""

    producer: Node
    result: int
    consumer: Node
    operand: int
    value: SSAValue
    exact: bool = False


class AutoShardingError(Exception):
    """A problem the pass reports as a diagnostic at `op`."""

    def __init__(self, op: Operation, message: str):
        super().__init__(message)
        self.op = op
        self.message = message


def _replicated(grid: str) -> Sharding:
    return Sharding(grid, ())


def _is_tensor(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType)


def _loop_sizes(op: Operation, maps: Sequence, loops: int) -> list[int | None]:
    sizes: list[int | None] = [None] * loops
    values = [*op.operands, *op.results]
    for value, map_ in zip(values, maps):
        t = value.type
        if not isinstance(t, TensorType):
            continue
        shape = t.get_shape()
        for i, expr in enumerate(map_.results):
            if isinstance(expr, AffineDimExpr) and i < len(shape) and shape[i] >= 0 and expr.position < loops:
                sizes[expr.position] = shape[i]
    return sizes


def axis_assignments(slots: int, groups: Sequence[tuple[int, ...]]) -> list[list[list[int]]]:
    """Every way to give each of `slots` (dims or loops) one of `groups` of grid axes or
    none, no axis twice (`[[1, 0]]` splits majorly by axis 1)."""
    out: list[list[list[int]]] = []

    def visit(slot: int, used: frozenset[int], chosen: list[list[int]]) -> None:
        if slot == slots:
            out.append([list(c) for c in chosen])
            return
        visit(slot + 1, used, [*chosen, []])
        for group in groups:
            if used.isdisjoint(group):
                visit(slot + 1, used | set(group), [*chosen, list(group)])

    visit(0, frozenset(), [])
    return out


class Builder:
    """Builds the nodes and edges of one function and prices them."""

    def __init__(self, function: func.FuncOp, grid: GridOp, model: CostModel, reshard_memo: dict | None = None):
        self.function = function
        self.grid = grid.sym_name.data
        shape = grid.shape_tuple
        if any(d is None for d in shape):
            raise AutoShardingError(grid, "auto-sharding needs a grid of static shape")
        self.grid_shape: tuple[int, ...] = tuple(d for d in shape if d is not None)
        # The groups of grid axes a dim or loop may be split by: every order of the axes
        # larger than one, plus the groups the function's annotations write (`[1, 0]` on
        # a 2x1 grid, as the trainer does); other groups with axes of size one split
        # nothing a smaller group does not, and would only multiply the strategies.
        live = [a for a, n in enumerate(self.grid_shape) if n > 1]
        groups = {
            perm
            for k in range(1, len(live) + 1)
            for subset in itertools.combinations(live, k)
            for perm in itertools.permutations(subset)
        }
        for op in function.body.walk():
            if isinstance(op, ShardingOp) and op.grid.string_value() == self.grid:
                groups.update(tuple(g) for g in op.split_axes.as_tuple() if g)
        self.axis_groups = sorted(groups)
        self.model = model
        self.nodes: list[Node] = []
        self.all_nodes: list[Node] = []  # nodes before `fold_leaves` took some out
        # (leaf, node it was folded into, leaf's best strategy per strategy of that node)
        self.folded: list[tuple[Node, Node, list[int]]] = []
        self.producer: dict[SSAValue, tuple[Node, int]] = {}
        self.edges: list[Edge] = []
        self.all_edges: list[Edge] = []  # edges before `fold_leaves`
        self.pinned: dict[SSAValue, Sharding] = {}  # value -> sharding a user fixed
        self._reshard: dict[tuple, float | None] = reshard_memo if reshard_memo is not None else {}
        self._strategies: dict[tuple, list[Strategy]] = {}  # op_signature -> strategies
        self._signatures: dict[int, tuple] = {}  # id(node) -> what its strategies depend on

    # --- shardings a tensor may have -----------------------------------------------------

    def candidate_shardings(self, t: TensorType) -> list[Sharding]:
        """Replicated and every split of dims by distinct grid axes that divides evenly
        (axes of one dim in increasing order)."""
        shape = t.get_shape()
        out: list[Sharding] = []
        for split in axis_assignments(len(shape), self.axis_groups):
            ok = all(
                not axes or (shape[d] >= 0 and shape[d] % math.prod(self.grid_shape[a] for a in axes) == 0)
                for d, axes in enumerate(split)
            )
            if ok:
                out.append(Sharding(self.grid, tuple(map(tuple, split))))
        return list(dict.fromkeys(out))

    # --- nodes ----------------------------------------------------------------------------

    def build(self) -> None:
        block = self.function.body.block
        for arg in block.args:
            if isinstance(arg.type, TensorType):
                node = Node(None, arg, [Strategy([], [s], 0.0, label=describe_sharding(s)) for s in self.candidate_shardings(arg.type)])
                self._add(node)
        for op in block.ops:
            if isinstance(op, ShardingOp) or op.has_trait(IsTerminator):
                continue
            if isinstance(op, ShardOp):
                self._shard_op(op)
                continue
            if not any(_is_tensor(v) for v in (*op.operands, *op.results)):
                continue
            self._add(self._op_node(op))
        for value, sharding in self.pinned.items():
            found = self.producer.get(value)
            if found is None:
                continue
            node, index = found
            keep = [s for s in node.strategies if s.results[index] == sharding]
            if not keep:
                raise AutoShardingError(
                    value.owner if isinstance(value, OpResult) else node.where(),
                    f"auto-sharding: no strategy of {node.name()} gives its result the annotated sharding {describe_sharding(sharding)}",
                )
            node.strategies = keep
        self._edges()

    def _add(self, node: Node) -> None:
        self.nodes.append(node)
        self.all_nodes.append(node)
        if node.op is not None:
            for i, result in enumerate(node.op.results):
                self.producer[result] = (node, i)
        else:
            assert node.arg is not None
            self.producer[node.arg] = (node, 0)

    def _shard_op(self, op: ShardOp) -> None:
        sharding = Sharding.of(op.sharding)
        if sharding.grid != self.grid:
            raise AutoShardingError(op, f"auto-sharding: annotation on grid @{sharding.grid}, the function is sharded on @{self.grid}")
        if not op.for_users:
            self.pinned[op.src] = sharding
        node = Node(op, None, [Strategy([sharding, None], [sharding], 0.0, label=describe_sharding(sharding))], fixed=True)
        self._add(node)

    def _op_node(self, op: Operation) -> Node:
        """The op's strategies, enumerated once per distinct op (`op_signature`): a
        repeated layer's ops reuse the first copy's (fresh Strategy objects: folding adds
        to them per node)."""
        key = op_signature(op)
        if key not in self._strategies:
            self._strategies[key] = self._enumerate(op).strategies
        return Node(op, None, [replace(st) for st in self._strategies[key]])

    def _enumerate(self, op: Operation) -> Node:
        impl = get_sharding_interface(op)
        if impl is None or not verify_sharding_interface_impl(impl, op):
            return self._replicated_node(op)
        loops = loop_iterator_types(impl, op)
        maps = indexing_maps(impl, op)
        sizes = _loop_sizes(op, maps, len(loops))
        strategies: dict[tuple, Strategy] = {}
        for array in axis_assignments(len(loops), self.axis_groups):
            if any(
                axes and (sizes[i] is None or sizes[i] % math.prod(self.grid_shape[a] for a in axes) != 0)
                for i, axes in enumerate(array)
            ):
                continue
            remove_trailing_empty_sub_arrays(array)
            option = ShardingOption([list(a) for a in array], self.grid)
            if not impl.allows_option(op, option):
                continue
            annotations = impl.get_sharding_annotations(op, option)
            if annotations is None:
                continue
            n = len(op.operands)
            operands = [a.sharding if isinstance(a, ShardingInfo) and _is_tensor(op.operands[i]) else None for i, a in enumerate(annotations[:n])]
            results = [a.sharding if isinstance(a, ShardingInfo) and _is_tensor(op.results[i]) else None for i, a in enumerate(annotations[n:])]
            cost = self._op_cost(op, loops, sizes, array, operands, results)
            key = (tuple(operands), tuple(results))
            if key not in strategies or cost < strategies[key].cost:
                strategies[key] = Strategy(operands, results, cost, option, label=f"loops {array}")
        if not strategies:
            return self._replicated_node(op)
        return Node(op, None, list(strategies.values()))

    def _replicated_node(self, op: Operation) -> Node:
        rep = _replicated(self.grid)
        operands: list[Sharding | None] = [rep if _is_tensor(v) else None for v in op.operands]
        results: list[Sharding | None] = [rep if _is_tensor(v) else None for v in op.results]
        nbytes = sum(local_bytes(v.type, rep, self.grid_shape) for v in (*op.operands, *op.results) if isinstance(v.type, TensorType))
        return Node(op, None, [Strategy(operands, results, self.model.op_time(0, nbytes, False), label="replicated")])

    def _op_cost(
        self,
        op: Operation,
        loops: Sequence[IteratorType],
        sizes: Sequence[int | None],
        array: Sequence[Sequence[int]],
        operands: Sequence[Sharding | None],
        results: Sequence[Sharding | None],
    ) -> float:
        shards = math.prod(math.prod(self.grid_shape[a] for a in axes) for axes in array)
        iterations = math.prod(s if s is not None else 1 for s in sizes) / max(shards, 1)
        tensors = [(v, s) for v, s in zip((*op.operands, *op.results), (*operands, *results)) if s is not None]
        nbytes = sum(local_bytes(v.type, s, self.grid_shape) for v, s in tensors)  # type: ignore[arg-type]
        inputs = sum(1 for v in op.operands if _is_tensor(v))
        contraction = IteratorType.REDUCTION in loops and inputs >= 2
        cost = self.model.op_time(2 * iterations, nbytes, contraction)
        reduce_axes = reduction_grid_axes(loops, array)
        if reduce_axes:
            group = math.prod(self.grid_shape[a] for a in reduce_axes)
            for value, sharding in zip(op.results, results):
                if sharding is not None:
                    cost += self.model.collective_time("all_reduce", local_bytes(value.type, sharding, self.grid_shape), group)  # type: ignore[arg-type]
        return cost

    # --- edges -----------------------------------------------------------------------------

    def _edges(self) -> None:
        for node in self.nodes:
            op = node.op
            if op is None:
                continue
            for i, value in enumerate(op.operands):
                found = self.producer.get(value)
                if found is None or not _is_tensor(value):
                    continue
                producer, index = found
                exact = isinstance(producer.op, ShardOp) and producer.op.for_users
                self.edges.append(Edge(producer, index, node, i, value, exact))
            # values read inside nested regions: the reader needs them whole
            for region in op.regions:
                for inner in region.walk():
                    for value in inner.operands:
                        found = self.producer.get(value)
                        if found is not None and _is_tensor(value):
                            self.edges.append(Edge(found[0], found[1], node, -1, value))
        self.all_edges = list(self.edges)

    def edge_cost(self, edge: Edge, source: Sharding | None, target: Sharding | None) -> float | None:
        """What `edge` costs between a producer sharding and a consumer's (None: not
        allowed); nothing for a side that is not a tensor."""
        if source is None or target is None:
            return 0.0
        if edge.exact and source != target:
            return None
        return self.reshard_cost(edge.value, source, target)

    def edge_ends(self, edge: Edge, producer: Strategy, consumer: Strategy) -> tuple[Sharding | None, Sharding | None]:
        target = _replicated(self.grid) if edge.operand < 0 else consumer.operands[edge.operand]
        return producer.results[edge.result], target

    def peak(self, full: dict[int, int]) -> float:
        """Per-rank peak bytes of a choice over all nodes (`expand`): live values at
        their chosen shardings plus the resharded copies each op reads."""
        block = self.function.body.block
        position = {op: i for i, op in enumerate(block.ops)}
        sizes: dict[SSAValue, float] = {}
        for value, (node, index) in self.producer.items():
            sharding = node.strategies[full[id(node)]].results[index]
            if not node.fixed and sharding is not None and isinstance(value.type, TensorType):
                sizes[value] = local_bytes(value.type, sharding, self.grid_shape)
        ranges, n = live_ranges(block)
        live = [0.0] * n
        for value, start, end in ranges:
            for p in range(start, end + 1):
                live[p] += sizes.get(value, 0.0)
        for edge in self.all_edges:
            source, target = self.edge_ends(
                edge, edge.producer.strategies[full[id(edge.producer)]], edge.consumer.strategies[full[id(edge.consumer)]]
            )
            if source is not None and target is not None and source != target and edge.consumer.op in position:
                assert isinstance(edge.value.type, TensorType)
                live[position[edge.consumer.op]] += local_bytes(edge.value.type, target, self.grid_shape)
        return max(live, default=0.0)

    def fold_leaves(self) -> None:
        """Exact without a memory budget: a node whose every edge goes to one other node
        (a weight read once, a tensor.empty feeding a fill, then that fill) takes, for
        each strategy of that node, its cheapest strategy; its cost joins the other's
        (`Strategy.folded`) and it leaves the problem. Repeated until none is left, so
        chains hanging off the graph fold away."""
        import heapq

        order = {id(n): i for i, n in enumerate(self.nodes)}
        incident: dict[int, list[Edge]] = {id(n): [] for n in self.nodes}
        for edge in self.edges:
            incident[id(edge.producer)].append(edge)
            if edge.consumer is not edge.producer:
                incident[id(edge.consumer)].append(edge)

        def leaf_of(node: Node) -> Node | None:
            """The one node `node` has edges to, when it is a leaf."""
            edges = incident[id(node)]
            others = {id(e.consumer if e.producer is node else e.producer) for e in edges}
            if len(others) != 1 or any(e.producer is e.consumer for e in edges):
                return None
            return edges[0].consumer if edges[0].producer is node else edges[0].producer

        # always the first leaf in node order, as a rescan after every fold would find it
        heap = [order[id(n)] for n in self.nodes if leaf_of(n) is not None]
        heapq.heapify(heap)
        gone: set[int] = set()
        folds: dict[tuple, tuple[list[int], list[float]]] = {}
        while heap:
            leaf = self.nodes[heapq.heappop(heap)]
            if id(leaf) in gone:
                continue
            other = leaf_of(leaf)
            if other is None:
                continue
            edges = incident[id(leaf)]
            key = (
                self._node_key(leaf), self._node_key(other),
                tuple((e.producer is leaf, e.result, e.operand, e.exact, str(e.value.type)) for e in edges),
                tuple(st.total for st in leaf.strategies),
            )
            if key in folds:  # a repeated layer's copy of a fold already made
                table, costs = folds[key]
                for strategy, cost in zip(other.strategies, costs):
                    strategy.folded += cost
                self.folded.append((leaf, other, table))
                gone.add(id(leaf))
                incident[id(other)] = [e for e in incident[id(other)] if e.producer is not leaf and e.consumer is not leaf]
                if leaf_of(other) is not None:
                    heapq.heappush(heap, order[id(other)])
                continue
            table: list[int] = []
            costs: list[float] = []
            for strategy in other.strategies:
                best, best_cost = -1, math.inf
                for k, mine in enumerate(leaf.strategies):
                    cost = mine.total
                    for e in edges:
                        ends = self.edge_ends(e, mine, strategy) if e.producer is leaf else self.edge_ends(e, strategy, mine)
                        c = self.edge_cost(e, *ends)
                        cost = math.inf if c is None else cost + c
                    if cost < best_cost:
                        best, best_cost = k, cost
                table.append(best)
                costs.append(best_cost)
                strategy.folded += best_cost
            folds[key] = (table, costs)
            self.folded.append((leaf, other, table))
            gone.add(id(leaf))
            incident[id(other)] = [e for e in incident[id(other)] if e.producer is not leaf and e.consumer is not leaf]
            if leaf_of(other) is not None:
                heapq.heappush(heap, order[id(other)])
        self.nodes = [n for n in self.nodes if id(n) not in gone]
        self.edges = [e for e in self.edges if id(e.producer) not in gone and id(e.consumer) not in gone]

    def _node_key(self, node: Node) -> tuple:
        """What a node's strategies are: its op's signature (an argument's type) and the
        shardings of each strategy."""
        if id(node) not in self._signatures:
            what = op_signature(node.op) if node.op is not None else ("argument", str(node.arg.type))  # type: ignore[union-attr]
            self._signatures[id(node)] = (what, node.fixed, tuple((tuple(st.operands), tuple(st.results)) for st in node.strategies))
        return self._signatures[id(node)]

    def expand(self, choice: dict[int, int]) -> dict[int, int]:
        """A choice over `nodes` (by position) as a choice over `all_nodes` (by id)."""
        full = {id(node): choice[i] for i, node in enumerate(self.nodes)}
        for leaf, other, table in reversed(self.folded):
            full[id(leaf)] = table[full[id(other)]]
        return full

    def reshard_cost(self, value: SSAValue, source: Sharding, target: Sharding) -> float | None:
        """Seconds to move `value` from `source` to `target`; None where impossible."""
        if source == target:
            return 0.0
        t = value.type
        assert isinstance(t, TensorType)
        key = (tuple(t.get_shape()), _element_bytes(t), source, target)
        if key not in self._reshard:
            try:
                cost = self.model.reshard_time(source, target, t.get_shape(), self.grid_shape, _element_bytes(t))
            except (ReshardingError, ValueError, KeyError):
                cost = None
            self._reshard[key] = cost
        return self._reshard[key]


# =========================================================================================
# Repeated layers
# =========================================================================================

MIN_LAYER_OPS = 8
"""The fewest top-level ops a repeated block (a layer) may have: shorter repeats (three
adds in a row) are not layers."""


def op_signature(op: Operation) -> tuple:
    """What an op's strategies and costs depend on: its name, operand and result types,
    attributes and properties, and the ops of its regions."""
    return (
        op.name,
        tuple(str(v.type) for v in op.operands),
        tuple(str(r.type) for r in op.results),
        tuple(sorted((k, str(v)) for k, v in op.properties.items())),
        tuple(sorted((k, str(v)) for k, v in op.attributes.items())),
        tuple(inner.name for region in op.regions for inner in region.walk()),
    )


def tandem_repeats(codes: Sequence[int], min_period: int = MIN_LAYER_OPS) -> list[tuple[int, int, int]]:
    """Non-overlapping runs `codes[start : start + period * copies]` made of `copies` >= 2
    equal blocks of `period` items, the most items covered first (the shortest period
    among equals): a flat program's repeated layers, forward and backward."""
    import numpy as np

    a = np.asarray(codes)
    n = len(a)
    found: list[tuple[int, int, int, int]] = []
    for period in range(min_period, n // 2 + 1):
        eq = np.concatenate(([False], a[:-period] == a[period:], [False]))
        edges = np.flatnonzero(np.diff(eq.astype(np.int8)))
        for start, end in zip(edges[::2], edges[1::2]):
            copies = (end - start + period) // period
            if copies >= 2:
                found.append((copies * period, period, int(start), int(copies)))
    found.sort(key=lambda f: (-f[0], f[1], f[2]))
    taken = np.zeros(n, bool)
    out: list[tuple[int, int, int]] = []
    for _, period, start, copies in found:
        # the longest free stretch of whole blocks in this run
        free = [c for c in range(copies) if not taken[start + c * period : start + (c + 1) * period].any()]
        best: list[int] = []
        run: list[int] = []
        for c in free:
            run = run + [c] if run and run[-1] == c - 1 else [c]
            if len(run) > len(best):
                best = run
        if len(best) >= 2:
            first = start + best[0] * period
            taken[first : first + len(best) * period] = True
            out.append((first, period, len(best)))
    return sorted(out)


def repeated_layer_ties(b: Builder) -> dict[int, int]:
    """Nodes of `b.nodes` (by position) that take the choice of an earlier one: each
    interior copy of a repeated layer (`tandem_repeats` of the ops' signatures, four
    copies or more, whose internal data flow is the second copy's) follows the second
    copy op by op, and the arguments it reads in place of the second copy's follow
    those; the first and last copies, which meet the rest of the program, are free.
    Tied nodes have the same strategies in the same order (the same op on the same
    types builds the same list), so a tie only restricts the integer program: the
    layers share one solution."""
    ops = [op for op in b.function.body.block.ops if not op.has_trait(IsTerminator)]
    index = {op: i for i, op in enumerate(ops)}
    codes: dict[tuple, int] = {}
    seq = [codes.setdefault(op_signature(op), len(codes)) for op in ops]
    position = {id(node): i for i, node in enumerate(b.nodes)}
    node_of: dict[object, Node] = {}
    for node in b.nodes:
        node_of[node.op if node.op is not None else node.arg] = node
    ties: dict[int, int] = {}

    def same(x: Node, y: Node) -> bool:
        return len(x.strategies) == len(y.strategies) and all(
            s.operands == t.operands and s.results == t.results for s, t in zip(x.strategies, y.strategies)
        )

    def tie(copy: object, first: object) -> None:
        a, f = node_of.get(copy), node_of.get(first)
        if a is None or f is None or a is f:
            return
        i, j = position[id(a)], position[id(f)]
        j = ties.get(j, j)
        if i != j and i not in ties and same(a, f):
            ties[i] = j

    for start, period, copies in tandem_repeats(seq):
        # the first and last copies meet the rest of the program (the embedding, the
        # loss): they keep their own choices; the interior copies follow the second
        if copies < 4:
            continue
        start += period
        for c in range(1, copies - 2):
            base = start + c * period
            pairs: list[tuple[Operation, Operation]] = []
            args: dict[BlockArgument, BlockArgument] = {}
            ok = True
            for k in range(period):
                op, first = ops[base + k], ops[start + k]
                for v, w in zip(op.operands, first.operands):
                    if isinstance(v, OpResult) and v.op in index and base <= index[v.op] < base + period:
                        inside = isinstance(w, OpResult) and w.op in index and index[w.op] == index[v.op] - c * period and w.index == v.index
                        ok = ok and inside
                    elif isinstance(v, BlockArgument) and isinstance(w, BlockArgument) and v is not w:
                        if args.setdefault(v, w) is not w:
                            ok = False
                pairs.append((op, first))
            if not ok:
                continue  # the copy's data flow differs from the second's: solved on its own
            for op, first in pairs:
                tie(op, first)
            for v, w in args.items():
                tie(v, w)
    return ties


# =========================================================================================
# The integer program
# =========================================================================================


@dataclass
class Solution:
    choice: dict[int, int]  # position in the program's nodes -> strategy index
    time: float
    peak: float
    full: dict[int, int] = field(default_factory=dict)  # id of any node -> strategy index


class Program:
    """The ILP of one function: x (one binary per strategy), e (one continuous per pair of
    distinct shardings on an edge whose ends both vary), memory rows per program point."""

    def __init__(self, b: Builder, ties: dict[int, int] | None = None):
        """`ties`: node positions that take another node's columns (`repeated_layer_ties`):
        its costs add to that node's, and an edge between the same columns as an earlier
        edge adds its costs to that edge's pair columns."""
        self.b = b
        self.costs: list[float] = []
        self.upper: list[float] = []
        self.integer: list[int] = []
        self.rows: list[tuple[dict[int, float], float, float]] = []  # coefs, lower, upper
        self.position = {op: i for i, op in enumerate(b.function.body.block.ops)}
        # point -> column -> bytes of a resharded copy its consumer reads there
        self.copies: dict[int, dict[int, float]] = {}
        self.pair_columns: list[tuple[Edge, dict[tuple[Sharding, Sharding], int]]] = []
        self.shared_pairs: dict[tuple, tuple[dict[tuple[Sharding, Sharding], int], list[tuple[int, float | None, float]]]] = {}
        ties = ties or {}

        def representative(i: int) -> int:
            while i in ties:
                i = ties[i]
            return i

        for i, node in enumerate(b.nodes):
            if i in ties:
                continue
            node.columns = [
                self._col(s.total if math.isfinite(s.total) else 0.0, True, 1.0 if math.isfinite(s.total) else 0.0)
                for s in node.strategies
            ]
            self.rows.append(({c: 1.0 for c in node.columns}, 1.0, 1.0))
        for i in ties:
            node = b.nodes[i]
            node.columns = list(b.nodes[representative(i)].columns)
            for col, s in zip(node.columns, node.strategies):
                if math.isfinite(s.total):
                    self.costs[col] += s.total
                else:
                    self.upper[col] = 0.0
        self.tied = len(ties)
        for edge in b.edges:
            self._edge(edge)
        self._memory_rows: list[dict[int, float]] | None = None

    @property
    def memory_rows(self) -> list[dict[int, float]]:
        """The memory rows (`_memory`), built when a budget or a peak asks for them."""
        if self._memory_rows is None:
            self._memory_rows = self._memory()
        return self._memory_rows

    def _col(self, cost: float, integer: bool, upper: float = 1.0) -> int:
        self.costs.append(cost)
        self.upper.append(upper)
        if integer:
            self.integer.append(len(self.costs) - 1)
        return len(self.costs) - 1

    def _sides(self, edge: Edge) -> tuple[dict[Sharding, list[int]], dict[Sharding, list[int]]]:
        src: dict[Sharding, list[int]] = {}
        for col, s in zip(edge.producer.columns, edge.producer.strategies):
            sh = s.results[edge.result]
            if sh is not None:
                src.setdefault(sh, []).append(col)
        dst: dict[Sharding, list[int]] = {}
        whole = _replicated(self.b.grid)
        for col, s in zip(edge.consumer.columns, edge.consumer.strategies):
            sh = whole if edge.operand < 0 else s.operands[edge.operand]
            if sh is not None:
                dst.setdefault(sh, []).append(col)
        return src, dst

    def pair_cost(self, edge: Edge, source: Sharding, target: Sharding) -> float | None:
        return self.b.edge_cost(edge, source, target)

    def _copy(self, edge: Edge, col: int, source: Sharding, target: Sharding) -> float:
        """The consumer reads a new tensor when the shardings differ: its bytes count at
        the consumer's point (returned: what a tied copy of the edge adds at its own)."""
        if source == target or edge.consumer.op not in self.position:
            return 0.0
        t = edge.value.type
        assert isinstance(t, TensorType)
        nbytes = local_bytes(t, target, self.b.grid_shape)
        point = self.copies.setdefault(self.position[edge.consumer.op], {})
        point[col] = point.get(col, 0.0) + nbytes
        return nbytes

    def _edge(self, edge: Edge) -> None:
        key = (tuple(edge.producer.columns), edge.result, tuple(edge.consumer.columns), edge.operand, edge.exact, str(edge.value.type))
        if self.tied and key in self.shared_pairs:
            # a tied layer's copy of an edge: the first copy's columns, costs and copies
            pairs, entries = self.shared_pairs[key]
            for col, cost, nbytes in entries:
                if cost is None:
                    self.upper[col] = 0.0
                    continue
                self.costs[col] += cost
                if nbytes and edge.consumer.op in self.position:
                    point = self.copies.setdefault(self.position[edge.consumer.op], {})
                    point[col] = point.get(col, 0.0) + nbytes
            if pairs:
                self.pair_columns.append((edge, pairs))
            return
        entries: list[tuple[int, float | None, float]] = []
        pairs = self._edge_columns(edge, entries)
        self.shared_pairs[key] = (pairs, entries)

    def _edge_columns(self, edge: Edge, entries: list[tuple[int, float | None, float]]) -> dict[tuple[Sharding, Sharding], int]:
        """The edge's costs on the node columns (one side fixed) or on pair columns with
        their rows; `entries` gets (column, cost or None: forbidden, copy bytes)."""
        src, dst = self._sides(edge)
        if not src or not dst:
            return {}
        if len(src) == 1 or len(dst) == 1:
            # linear: the cost of each pair falls on the side that varies
            (one, cols_one), many, one_is_src = (
                (next(iter(src.items())), dst, True) if len(src) == 1 else (next(iter(dst.items())), src, False)
            )
            for sh, cols in many.items():
                cost = self.pair_cost(edge, one, sh) if one_is_src else self.pair_cost(edge, sh, one)
                source, target = (one, sh) if one_is_src else (sh, one)
                for col in cols:
                    if cost is None:
                        self.upper[col] = 0.0
                        entries.append((col, None, 0.0))
                    else:
                        self.costs[col] += cost
                        entries.append((col, cost, self._copy(edge, col, source, target)))
            return {}
        pairs: dict[tuple[Sharding, Sharding], int] = {}
        for s, t in itertools.product(src, dst):
            cost = self.pair_cost(edge, s, t)
            pairs[(s, t)] = self._col(cost or 0.0, False, 0.0 if cost is None else 1.0)
            nbytes = self._copy(edge, pairs[(s, t)], s, t)
            if cost is not None:
                entries.append((pairs[(s, t)], cost, nbytes))
        self.pair_columns.append((edge, pairs))
        for s, cols in src.items():
            row = {c: 1.0 for c in cols}
            for t in dst:
                row[pairs[(s, t)]] = -1.0
            self.rows.append((row, 0.0, 0.0))
        for t, cols in dst.items():
            row = {c: 1.0 for c in cols}
            for s in src:
                row[pairs[(s, t)]] = -1.0
            self.rows.append((row, 0.0, 0.0))
        return pairs

    def _memory(self) -> list[dict[int, float]]:
        """One row per distinct program point: the local bytes of each live value and of
        the resharded copies the op there reads (identical rows once)."""
        ranges, n = live_ranges(self.b.function.body.block)
        per_value: dict[SSAValue, dict[int, float]] = {}
        for value, (node, index) in self.b.producer.items():
            if node.fixed or not isinstance(value.type, TensorType):
                continue  # a shard.shard's result is its input's data
            coefs: dict[int, float] = {}
            for col, s in zip(node.columns, node.strategies):
                sh = s.results[index]
                if sh is not None:
                    coefs[col] = local_bytes(value.type, sh, self.b.grid_shape)
            per_value[value] = coefs
        live: list[list[SSAValue]] = [[] for _ in range(n)]
        for value, start, end in ranges:
            if value in per_value:
                for p in range(start, end + 1):
                    live[p].append(value)
        rows: dict[tuple, dict[int, float]] = {}
        for point, values in enumerate(live):
            row: dict[int, float] = dict(self.copies.get(point, {}))
            for value in values:
                for col, coef in per_value[value].items():
                    row[col] = row.get(col, 0.0) + coef
            if row:
                rows.setdefault(tuple(sorted(row.items())), row)
        return list(rows.values())

    def solve(self, budget: float | None, minimize_memory: bool = False) -> list[float] | None:
        """The optimal column values; None when infeasible."""
        import highspy
        import numpy as np

        with _stdout_silenced():  # HiGHS >= 1.16 prints its banner on stdout when built
            h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", 0.0)
        ncol = len(self.costs)
        # in nanoseconds: HiGHS's tolerances are absolute (1e-7), seconds would hide
        # differences below them
        costs = [0.0] * ncol if minimize_memory else [c * 1e9 for c in self.costs]
        upper = list(self.upper)
        rows = list(self.rows)
        if minimize_memory:
            peak = ncol
            costs.append(1.0)
            upper.append(highspy.kHighsInf)
            for row in self.memory_rows:
                rows.append(({**row, peak: -1.0}, -highspy.kHighsInf, 0.0))
        elif budget is not None:
            for row in self.memory_rows:
                rows.append((row, -highspy.kHighsInf, float(budget)))
        n = len(costs)
        h.addCols(n, np.array(costs), np.zeros(n), np.array(upper), 0, np.array([], np.int32), np.array([], np.int32), np.array([]))
        starts, index, values = [], [], []
        for coefs, _, _ in rows:
            starts.append(len(index))
            index.extend(coefs.keys())
            values.extend(coefs.values())
        h.addRows(
            len(rows),
            np.array([lo for _, lo, _ in rows], dtype=float),
            np.array([hi for _, _, hi in rows], dtype=float),
            len(index),
            np.array(starts, np.int32),
            np.array(index, np.int32),
            np.array(values, dtype=float),
        )
        if self.integer:
            h.changeColsIntegrality(
                len(self.integer),
                np.array(self.integer, np.int32),
                np.array([highspy.HighsVarType.kInteger] * len(self.integer)),
            )
        h.run()
        status = h.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            return None
        return list(h.getSolution().col_value)

    def decode(self, x: Sequence[float], peak: bool = True) -> Solution:
        """The choice the column values make (`peak`: with its peak from the memory rows;
        else 0, for a caller that measures it another way)."""
        choice = {}
        for i, node in enumerate(self.b.nodes):
            choice[i] = max(range(len(node.columns)), key=lambda k: x[node.columns[k]])
        return Solution(choice, self.time_of(choice), self.peak_of(choice) if peak else 0.0)

    def time_of(self, choice: dict[int, int]) -> float:
        """The objective of a choice, recomputed from the nodes and edges."""
        pos = {id(node): i for i, node in enumerate(self.b.nodes)}
        total = sum(node.strategies[choice[i]].total for i, node in enumerate(self.b.nodes))
        whole = _replicated(self.b.grid)
        for edge in self.b.edges:
            s = edge.producer.strategies[choice[pos[id(edge.producer)]]].results[edge.result]
            c = edge.consumer.strategies[choice[pos[id(edge.consumer)]]]
            t = whole if edge.operand < 0 else c.operands[edge.operand]
            if s is None or t is None:
                continue
            cost = self.pair_cost(edge, s, t)
            total += math.inf if cost is None else cost
        return total

    def peak_of(self, choice: dict[int, int]) -> float:
        x = [0.0] * len(self.costs)
        for i, node in enumerate(self.b.nodes):
            x[node.columns[choice[i]]] = 1.0
        pos = {id(node): i for i, node in enumerate(self.b.nodes)}
        whole = _replicated(self.b.grid)
        for edge, pairs in self.pair_columns:
            s = edge.producer.strategies[choice[pos[id(edge.producer)]]].results[edge.result]
            c = edge.consumer.strategies[choice[pos[id(edge.consumer)]]]
            t = whole if edge.operand < 0 else c.operands[edge.operand]
            if (s, t) in pairs:
                x[pairs[(s, t)]] = 1.0
        return max((sum(c * x[k] for k, c in row.items()) for row in self.memory_rows), default=0.0)


# =========================================================================================
# The pass
# =========================================================================================


def plan_function(
    function: func.FuncOp,
    grid: GridOp,
    model: CostModel,
    budget: float | None,
    reduce: bool = True,
    reshard_memo: dict | None = None,
    share_layers: bool = True,
) -> tuple[Builder, Program, Solution]:
    """Build and solve the ILP of `function` (leaves folded first when there is no
    budget and `reduce`; with `share_layers`, the copies of a repeated layer take the
    first copy's choices: `repeated_layer_ties`); raises AutoShardingError on an
    infeasible budget (naming the smallest that fits) or user annotations no plan meets."""
    b = Builder(function, grid, model, reshard_memo)
    b.build()
    if reduce and budget is None:
        b.fold_leaves()
    program = Program(b, repeated_layer_ties(b) if share_layers else None)
    x = program.solve(budget)
    if x is None:
        least = program.solve(None, minimize_memory=True)
        if least is None:
            raise AutoShardingError(function, "auto-sharding: the user annotations admit no plan")
        need = program.peak_of(program.decode(least).choice)
        if budget is None:
            raise AutoShardingError(function, "auto-sharding: the user annotations admit no plan")
        raise AutoShardingError(
            grid,
            f"auto-sharding: memory budget {format_size(budget)} per rank is infeasible; "
            f"the smallest budget that fits is {format_size(need)}",
        )
    solution = program.decode(x, peak=False)
    solution.full = b.expand(solution.choice)
    solution.peak = b.peak(solution.full)
    return b, program, solution


def runner_up(
    program: Program, solution: Solution, i: int, incident: dict[int, list[Edge]] | None = None
) -> tuple[int, float] | None:
    """The best other strategy of node `i` with every other choice kept, and its extra
    time (only the node's own cost and its edges change: `incident` lists them)."""
    b = program.b
    node = b.nodes[i]
    edges = incident[id(node)] if incident is not None else [e for e in b.edges if node in (e.producer, e.consumer)]
    position = {id(n): j for j, n in enumerate(b.nodes)}

    def local(k: int) -> float:
        total = node.strategies[k].total
        for e in edges:
            mine = node.strategies[k]
            p = mine if e.producer is node else e.producer.strategies[solution.choice[position[id(e.producer)]]]
            c = mine if e.consumer is node else e.consumer.strategies[solution.choice[position[id(e.consumer)]]]
            cost = b.edge_cost(e, *b.edge_ends(e, p, c))
            total += math.inf if cost is None else cost
        return total

    current = local(solution.choice[i])
    best: tuple[int, float] | None = None
    for k in range(len(node.strategies)):
        if k == solution.choice[i] or program.upper[node.columns[k]] == 0.0:
            continue
        t = local(k)
        if math.isfinite(t) and (best is None or t < best[1]):
            best = (k, t)
    return None if best is None else (best[0], best[1] - current)


def annotate(b: Builder, solution: Solution) -> None:
    """Write the choice as propagation writes its own: results for the producer, then
    operands for users, op by op; arguments first (the last first: each goes to the
    top of the block, so they end in argument order)."""
    order = [n for n in b.all_nodes if n.arg is not None][::-1]
    order += [n for n in b.all_nodes if n.arg is None]
    for node in order:
        if node.fixed:
            continue
        strategy = node.strategies[solution.full[id(node)]]
        if node.arg is not None:
            sh = strategy.results[0]
            assert sh is not None
            insert_result_annotation(ShardingInfo.get(sh.grid, sh.split_axes), node.arg)
            continue
        op = node.op
        assert op is not None
        impl = get_sharding_interface(op)
        if strategy.option is not None and impl is not None:
            impl.add_sharding_annotations(op, strategy.option)
            continue
        for result, sh in zip(op.results, strategy.results):
            if sh is not None:
                insert_result_annotation(ShardingInfo.get(sh.grid, sh.split_axes), result)
        for k, sh in enumerate(strategy.operands):
            if sh is not None:
                insert_operand_annotation(ShardingInfo.get(sh.grid, sh.split_axes), op, k)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} us"


def explain(program: Program, solution: Solution, rates: Rates) -> None:
    diagnostics.emit_remark(
        program.b.function,
        f"auto-sharding: predicted {_us(solution.time)} per call, peak {format_size(solution.peak)} per rank "
        f"(rates: {rates.source})",
    )
    position = {id(node): i for i, node in enumerate(program.b.nodes)}
    incident: dict[int, list[Edge]] = {id(node): [] for node in program.b.nodes}
    for edge in program.b.edges:
        incident[id(edge.producer)].append(edge)
        if edge.consumer is not edge.producer:
            incident[id(edge.consumer)].append(edge)
    folded_into = {id(leaf): other for leaf, other, _ in program.b.folded}
    for node in program.b.all_nodes:
        if node.fixed:
            continue
        chosen = node.strategies[solution.full[id(node)]]
        what = ", ".join(describe_sharding(s) for s in chosen.results if s is not None)
        text = f"auto-sharding: {node.name()}: {chosen.label} -> {what} (own cost {_us(chosen.cost)})"
        i = position.get(id(node))
        alt = None if i is None else runner_up(program, solution, i, incident)
        if i is None:
            text += f"; the best for the choice of {folded_into[id(node)].name()}, which it alone feeds or reads"
        elif alt is None:
            text += "; no runner-up"
        else:
            other = node.strategies[alt[0]]
            alt_what = ", ".join(describe_sharding(s) for s in other.results if s is not None)
            text += f"; runner-up {other.label} -> {alt_what} (+{_us(alt[1])})"
        if node.op is not None:
            diagnostics.emit_remark(node.op, text)
        else:
            diagnostics.emit_remark(node.where(), text)


@dataclass(frozen=True)
class AutoShardingPass(ModulePass):
    """Choose a sharding for every tensor value by an integer program over the cost model."""

    name = "auto-sharding"

    memory_budget: str = ""
    """Bytes per rank (`512MB`, `2GiB`); empty: no limit."""

    explain: bool = False
    """A remark per choice: the strategy, its predicted cost, the runner-up."""

    rates: str = "cached"
    """`cached`: this machine's calibrated rates if cached, else the defaults; `default`:
    the defaults (reproducible plans, as the lit tests want); `measure`: calibrate now
    (seconds; BLAS and an MPI job) and cache the result."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            budget = float(parse_size(self.memory_budget)) if self.memory_budget else None
        except ValueError as e:
            raise diagnostics.error(op, str(e)) from None
        grids = [g for g in op.walk() if isinstance(g, GridOp)]
        if len(grids) != 1:
            raise diagnostics.error(op, f"auto-sharding: expected one shard.grid in the module, found {len(grids)}")
        if self.rates not in ("cached", "default", "measure"):
            raise diagnostics.error(op, f"auto-sharding: rates must be cached, default or measure, got '{self.rates}'")
        rates = DEFAULT_RATES if self.rates == "default" else load_rates(recalibrate=self.rates == "measure")
        model = CostModel(rates)
        memo: dict = {}  # resharding costs, shared by the functions of the module
        with pass_cache():
            for function in [f for f in op.ops if isinstance(f, func.FuncOp) and f.body.blocks]:
                try:
                    b, program, solution = plan_function(function, grids[0], model, budget, reshard_memo=memo)
                except AutoShardingError as e:
                    raise diagnostics.error(e.op, e.message) from None
                if self.explain:
                    explain(program, solution, rates)
                annotate(b, solution)
