"""`cse`: common subexpression elimination as mlir-opt does it (mlir/lib/Transforms/CSE.cpp).

xDSL's driver matches MLIR's on single-block regions (scoped known-op tables, regions
before their op, read-only ops merged when no write lies between them in one block) but
skips regions with several blocks. MLIR walks those along the dominator tree: an op is
replaced by an equivalent one in a dominating block. This pass adds that walk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.passes import ModulePass
from xdsl.traits import IsolatedFromAbove, IsTerminator
from xdsl.transforms.common_subexpression_elimination import (
    CSEDriver,
    KnownOps,
    OperationInfo,
)

from shardc.ir.op_init import type_of
from shardc.ir.traits import has_trait, is_unregistered
from shardc.ir.walk import block_ops, region_blocks
from shardc.passes.folding import is_commutative, is_memory_effect_free, is_trivially_dead
from shardc.passes.gc_pause import paused_gc


def _successors(block: Block) -> Sequence[Block]:
    last = block.last_op
    return tuple(last.successors) if last is not None else ()


def dominator_tree(region: Region) -> dict[Block, list[Block]]:
    """Children of each reachable block in the dominator tree of `region` (iterative
    algorithm of Cooper, Harvey and Kennedy over reverse post-order)."""
    entry = region.blocks.first
    assert entry is not None
    order: list[Block] = []
    seen = {entry}
    stack: list[tuple[Block, int]] = [(entry, 0)]
    while stack:
        block, index = stack.pop()
        succs = _successors(block)
        if index < len(succs):
            stack.append((block, index + 1))
            succ = succs[index]
            if succ not in seen:
                seen.add(succ)
                stack.append((succ, 0))
        else:
            order.append(block)
    order.reverse()
    number = {b: i for i, b in enumerate(order)}
    preds: dict[Block, list[Block]] = {b: [] for b in order}
    for b in order:
        for s in _successors(b):
            preds[s].append(b)
    idom: dict[Block, Block] = {entry: entry}

    def intersect(a: Block, b: Block) -> Block:
        while a is not b:
            while number[a] > number[b]:
                a = idom[a]
            while number[b] > number[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for b in order[1:]:
            new: Block | None = None
            for p in preds[b]:
                if p in idom:
                    new = p if new is None else intersect(p, new)
            if new is not None and idom.get(b) is not new:
                idom[b] = new
                changed = True
    children: dict[Block, list[Block]] = {b: [] for b in order}
    for b in order[1:]:
        children[idom[b]].append(b)
    return children


def _attr_hash(attr: Attribute) -> int:
    """`hash(attr)`, computed once per attribute object: attributes are immutable and
    their (dataclass) hash walks all their parameters. Kept in the instance, outside its
    fields."""
    fields = getattr(attr, "__dict__", None)
    if fields is None:  # an attribute class with slots: nowhere to keep it
        return hash(attr)
    found = fields.get("_shardc_hash")
    if found is None:
        found = fields["_shardc_hash"] = hash(attr)
    return found


class _Info(OperationInfo):
    """Op equivalence as MLIR's OperationEquivalence: the operands of commutative ops
    compare as a multiset."""

    @property
    def name(self) -> str:
        """`OperationInfo.name`, its unregistered test once per op class."""
        op = self.op
        return op.op_name.data if is_unregistered(op) else op.name  # pyright: ignore[reportAttributeAccessIssue]

    def _operands(self) -> object:
        operands = self.op._operands  # pyright: ignore[reportPrivateUsage] - the tuple `operands` views
        if is_commutative(self.op):
            return frozenset((id(v), sum(1 for w in operands if w is v)) for v in operands)
        return tuple(operands)

    def __hash__(self) -> int:
        found = self.__dict__.get("_hash")
        if found is not None:  # one lookup and one insertion per op share one hash
            return found
        op = self.op
        attributes, properties = op.attributes, op.properties
        found = self.__dict__["_hash"] = hash(
            (
                self.name,
                sum(hash((k, _attr_hash(v))) for k, v in attributes.items()) if attributes else 0,
                sum(hash((k, _attr_hash(v))) for k, v in properties.items()) if properties else 0,
                hash(tuple(map(_attr_hash, map(type_of, op.results)))),
                hash(self._operands()),
            )
        )
        return found

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Info)
            and self.name == other.name
            and self.op.attributes == other.op.attributes
            and self.op.properties == other.op.properties
            and self._operands() == other._operands()
            and self.op.result_types == other.op.result_types
            and all(
                regions_equivalent(s, o)
                for s, o in zip(self.op.regions, other.op.regions, strict=True)
            )
        )


def regions_equivalent(region: Region, other: Region) -> bool:
    """`region.is_structurally_equivalent(other)`, the same checks in the same order,
    without xDSL's generator and linked-list length walks (CSE compares the bodies
    of every pair of equal linalg ops)."""
    return _region_equivalent(region, other, {})


def _region_equivalent(region: Region, other: Region, context: dict[Any, Any]) -> bool:
    blocks, other_blocks = region_blocks(region), region_blocks(other)
    if len(blocks) != len(other_blocks):
        return False
    for block, other_block in zip(blocks, other_blocks):
        context[block] = other_block
    for block, other_block in zip(blocks, other_blocks):
        args, other_args = block.args, other_block.args
        ops, other_ops = block_ops(block), block_ops(other_block)
        if len(args) != len(other_args) or len(ops) != len(other_ops):
            return False
        for arg, other_arg in zip(args, other_args):
            if arg.type != other_arg.type:
                return False
            context[arg] = other_arg
        context[block] = other_block
        for op, other_op in zip(ops, other_ops):
            if not _op_equivalent(op, other_op, context):
                return False
    return True


def _op_equivalent(op: Operation, other: Operation, context: dict[Any, Any]) -> bool:
    if op.name != other.name:
        return False
    operands, other_operands = op.operands, other.operands
    if (
        len(operands) != len(other_operands)
        or len(op.results) != len(other.results)
        or len(op.regions) != len(other.regions)
        or len(op.successors) != len(other.successors)
        or op.attributes != other.attributes
        or op.properties != other.properties
    ):
        return False
    parent, other_parent = op.parent, other.parent
    if parent is not None and other_parent is not None and context.get(parent) != other_parent:
        return False
    get = context.get
    for value, other_value in zip(operands, other_operands):
        if not get(value, value) == other_value:
            return False
    for successor, other_successor in zip(op.successors, other.successors):
        if not get(successor, successor) == other_successor:
            return False
    for inner, other_inner in zip(op.regions, other.regions):
        if not _region_equivalent(inner, other_inner, context):
            return False
    for result, other_result in zip(op.results, other.results):
        context[result] = other_result
    return True


class _KnownOps(KnownOps):
    """xDSL's KnownOps keyed by `_Info`, as a chain of scopes: a nested scope holds only
    what was added in it and looks outward on a miss (xDSL copies the outer table into
    every scope, which is quadratic with one scope per linalg body)."""

    def __init__(self, known_ops: KnownOps | None = None):
        self._known_ops = {}
        self._outer: _KnownOps | None = None
        if isinstance(known_ops, _KnownOps):
            self._outer = known_ops
        elif known_ops is not None:
            self._known_ops = {_Info(v): v for v in known_ops._known_ops.values()}  # pyright: ignore[reportPrivateUsage]

    def find(self, info: _Info) -> Operation | None:
        scope: _KnownOps | None = self
        while scope is not None:
            found = scope._known_ops.get(info)
            if found is not None:
                return found
            scope = scope._outer
        return None

    def add(self, info: _Info, op: Operation) -> None:
        self._known_ops[info] = op

    def __getitem__(self, k: Operation) -> Operation:
        found = self.find(_Info(k))
        if found is None:
            raise KeyError(k)
        return found

    def __setitem__(self, k: Operation, v: Operation) -> None:
        self._known_ops[_Info(k)] = v

    def __contains__(self, k: Operation) -> bool:
        return self.find(_Info(k)) is not None

    def get(self, k: Operation, default: object = None):  # type: ignore[override]
        found = self.find(_Info(k))
        return default if found is None else found

    def pop(self, k: Operation) -> Operation:
        # xDSL's driver never removes a known op; removing one from a chain of scopes
        # would have to hide it in this scope only, which no caller needs.
        raise TypeError("CSE's scoped known ops are only added to")


class _DominanceCSEDriver(CSEDriver):
    def __post_init__(self) -> None:
        self._known_ops = _KnownOps()

    def _simplify_operation(self, op: Operation) -> None:
        # MLIR's trivially-dead test (allocations of unused results are dead)
        if not has_trait(op, IsTerminator) and is_trivially_dead(op):
            self._mark_erasure(op)
            return
        if (
            not has_trait(op, IsTerminator)
            and is_memory_effect_free(op)
            and not any(len(region.blocks) > 1 for region in op.regions)
        ):
            # Effect-free by MLIR's rules (the fold registry knows ops xDSL does not).
            known = self._known_ops
            assert isinstance(known, _KnownOps)
            info = _Info(op)  # one hash for the lookup and the insertion
            if existing := known.find(info):
                self._replace_and_delete(op, existing)
            else:
                known.add(info, op)
            return
        super()._simplify_operation(op)

    def _simplify_region(self, region: Region) -> None:
        if region.blocks.first is not None and region.blocks.first.next_block is None:
            outer = self._known_ops
            self._known_ops = _KnownOps(outer)
            self._simplify_block(region.blocks.first)
            self._known_ops = outer
            return
        self._simplify_cfg_region(region)

    def _simplify_block(self, block: Block) -> None:
        # xDSL's block walk opens blank scopes as plain KnownOps; keep ours
        for op in block.ops:
            if op.regions:
                if has_trait(op, IsolatedFromAbove, True):
                    outer = self._known_ops
                    self._known_ops = _KnownOps()
                    for region in op.regions:
                        self._simplify_region(region)
                    self._known_ops = outer
                else:
                    for region in op.regions:
                        self._simplify_region(region)
            self._simplify_operation(op)

    def _simplify_cfg_region(self, region: Region) -> None:
        first = region.blocks.first
        if first is None:
            return
        children = dominator_tree(region)
        # Depth-first over the dominator tree, one scope of known ops per block.
        outer = self._known_ops
        stack: list[tuple[Block, KnownOps, bool]] = [(first, outer, False)]
        while stack:
            block, scope, done = stack.pop()
            if done:
                continue
            self._known_ops = _KnownOps(scope)
            self._simplify_block(block)
            inner = self._known_ops
            for child in reversed(children[block]):
                stack.append((child, inner, False))
        self._known_ops = outer


@dataclass(frozen=True)
class CSEPass(ModulePass):
    """Eliminate common sub-expressions, along the dominator tree in CFG regions."""

    name = "cse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        with paused_gc():
            _DominanceCSEDriver().simplify(op)
