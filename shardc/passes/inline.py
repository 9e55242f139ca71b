"""`inline`: inline `func.call`s to functions of the module, as mlir-opt's `-inline` does
for the simple case: a callee with a single-block body, called from anywhere in the
module, not part of a call cycle. Inlined ops get `callsite(<op loc> at <call loc>)`
locations, like MLIR's inliner. Private functions left without uses are erased, and the
`default-pipeline` (canonicalize, as upstream) then runs over the module.

Multi-block callees (those with control flow) are left as calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    CallSiteLoc,
    DictionaryAttr,
    ModuleOp,
    SymbolRefAttr,
    UnknownLoc,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass


def _symbol_refs(attr: Attribute, into: set[str]) -> None:
    if isinstance(attr, SymbolRefAttr):
        into.add(attr.root_reference.data)
    elif isinstance(attr, ArrayAttr):
        for inner in attr.data:  # pyright: ignore[reportUnknownVariableType]
            _symbol_refs(inner, into)  # pyright: ignore[reportUnknownArgumentType]
    elif isinstance(attr, DictionaryAttr):
        for inner in attr.data.values():
            _symbol_refs(inner, into)


def used_symbols(module: ModuleOp) -> set[str]:
    """Every top-level symbol name referenced from an attribute or property."""
    used: set[str] = set()
    for op in module.walk():
        for attr in (*op.attributes.values(), *op.properties.values()):
            _symbol_refs(attr, used)
    return used


def _calls(op: Operation) -> list[func.CallOp]:
    return [inner for inner in op.walk() if isinstance(inner, func.CallOp)]


def _recursive_functions(functions: dict[str, func.FuncOp]) -> set[str]:
    """Functions on a call cycle (they are never inlined, nor inlined into themselves)."""
    edges = {
        name: {c.callee.root_reference.data for c in _calls(f)} & functions.keys()
        for name, f in functions.items()
    }
    on_cycle: set[str] = set()
    for start in functions:
        stack = list(edges[start])
        seen: set[str] = set()
        while stack:
            node = stack.pop()
            if node == start:
                on_cycle.add(start)
                break
            if node in seen:
                continue
            seen.add(node)
            stack.extend(edges[node])
    return on_cycle


def _inlinable_body(callee: func.FuncOp) -> Block | None:
    blocks = callee.body.blocks
    if len(blocks) != 1:
        return None
    block = blocks.first
    assert block is not None
    if not isinstance(block.last_op, func.ReturnOp):
        return None
    return block


def _call_site(loc: Attribute, call_loc: Attribute) -> Attribute:
    if isinstance(call_loc, UnknownLoc):
        return loc
    return CallSiteLoc(loc, call_loc)  # pyright: ignore[reportArgumentType]


def inline_call(call: func.CallOp, body: Block) -> None:
    """Replace `call` by a copy of `body` (minus its return)."""
    mapping: dict[SSAValue, SSAValue] = dict(zip(body.args, call.arguments, strict=True))
    parent = call.parent_block()
    assert parent is not None
    terminator = body.last_op
    assert isinstance(terminator, func.ReturnOp)
    for op in body.ops:
        if op is terminator:
            break
        clone = op.clone(mapping)
        for original, copied in zip(op.walk(), clone.walk()):
            copied.location = _call_site(original.location, call.location)  # pyright: ignore
        parent.insert_op_before(clone, call)
    results = [mapping.get(v, v) for v in terminator.arguments]
    for old, new in zip(call.results, results, strict=True):
        old.replace_all_uses_with(new)
    call.detach()
    call.erase()


@dataclass(frozen=True)
class InlinePass(ModulePass):
    """Inline calls to single-block functions of the module."""

    name = "inline"

    default_pipeline: str = "canonicalize"
    """Passes (pipeline syntax without anchor) to run after inlining; empty for none."""

    max_iterations: int = 4
    """Rounds of inlining (each round inlines the calls that previous ones exposed)."""

    def __post_init__(self) -> None:
        # Reject a bad pipeline when the pass is built (on the command line), not later.
        self._default_passes()

    def _default_passes(self) -> list[ModulePass]:
        from shardc.passes import all_passes
        from shardc.passes.pipeline_text import instantiate, parse_pipeline

        if not self.default_pipeline.strip():
            return []
        table = all_passes()
        specs = parse_pipeline(f"any({self.default_pipeline})")
        return [instantiate(spec, table) for spec in specs if spec.name != self.name]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        functions = {
            f.sym_name.data: f for f in op.ops if isinstance(f, func.FuncOp)
        }
        recursive = _recursive_functions(functions)
        inlined: set[str] = set()
        for _ in range(max(self.max_iterations, 1)):
            changed = False
            for call in _calls(op):
                name = call.callee.root_reference.data
                callee = functions.get(name)
                if callee is None or name in recursive or callee.is_declaration:
                    continue
                if callee.is_ancestor(call):
                    continue
                body = _inlinable_body(callee)
                if body is None or len(body.args) != len(call.arguments):
                    continue
                inline_call(call, body)
                inlined.add(name)
                changed = True
            if not changed:
                break
        self._erase_dead_private(op, functions)
        for pass_ in self._default_passes():
            pass_.apply(ctx, op)

    @staticmethod
    def _erase_dead_private(module: ModuleOp, functions: dict[str, func.FuncOp]) -> None:
        alive = dict(functions)
        changed = True
        while changed:  # erasing one function may leave another one unused
            changed = False
            used = used_symbols(module)
            for name, f in list(alive.items()):
                visibility = f.sym_visibility
                if visibility is None or visibility.data != "private" or f.is_declaration:
                    continue
                if name not in used:
                    f.detach()
                    f.erase(safe_erase=False)
                    del alive[name]
                    changed = True
