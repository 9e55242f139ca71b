"""Op verification with the IRDL constraint checks memoized.

xDSL's generated `verify_` runs `OpDef.verify` (operand/result/region/property/attribute
constraints, then the traits) and the op's own `verify_`. The constraint part depends
only on the op's types, attributes, properties and region shapes, which a program repeats
thousands of times (every `linalg.matmul` on `tensor<16x64xf32>` is checked alike), and it
is most of the cost of verifying. `verify_op(op)` is `op.verify_()` with that part
remembered per op definition once it has passed; the traits and the op's own verifier
still run on every op (they look at parents, symbols and regions). A check that fails is
never remembered, so every error is the one xDSL raises. xDSL's classes stay untouched:
the generated verifier is read, not replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from xdsl.ir import Operation, Region
from xdsl.irdl.operations import OpDef
from xdsl.traits import IsolatedFromAbove, OpTrait

from shardc.ir.traits import has_trait
from shardc.ir.isolation import verify_isolated_from_above
from shardc.ir.op_init import type_of

_Step = tuple[OpDef, dict[Any, bool], list[Any]]
_Check = Callable[[Operation], None]
_Plan = tuple[_Check | None, tuple[_Step, ...], _Check | None, dict[Any, bool] | None]

_PLANS: dict[type[Operation], _Plan | None] = {}
"""op class -> (a check to run first; its op definitions, outermost first, each with its
memo; the op's own verifier; that verifier's memo where it reads only what the memo key
holds), or None where the class's `verify_` is neither xDSL's generated one nor a
wrapper naming its parts (`shardc_verify_parts = (check, generated)`, as the shard
dialect's ops have). A step's list holds its definition's traits (the frozenset
`add_trait` replaces) and the checks they make (`_trait_checks`)."""

_MEMO_LIMIT = 50_000
"""Entries kept per op definition before its memo is cleared (bounds memory in long
processes that compile many programs)."""

_NO_VERIFY = Operation.verify_

_PURE_VERIFIERS = {("xdsl.dialects.linalg.abstract_ops", "LinalgStructuredOperation.verify_")}
"""Own verifiers that read only the op's operand/result types, attributes, properties and
region entry arguments (with its class): linalg's indexing-map and shape checks."""


def _generated_parts(fn: Any) -> tuple[OpDef, Any] | None:
    """(op_def, custom_verify) of a `verify_` that xDSL's `irdl_op_definition` made."""
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None)
    if code is None or cells is None or code.co_name != "verify_":
        return None
    if not code.co_filename.replace("\\", "/").endswith("xdsl/irdl/operations.py"):
        return None
    named = dict(zip(code.co_freevars, cells, strict=True))
    if set(named) != {"op_def", "custom_verify"}:
        return None
    op_def = named["op_def"].cell_contents
    if not isinstance(op_def, OpDef):
        return None
    return op_def, named["custom_verify"].cell_contents


def _plan(cls: type[Operation]) -> _Plan | None:
    steps: list[_Step] = []
    fn: Any = cls.verify_
    pre = None
    if (parts := getattr(fn, "shardc_verify_parts", None)) is not None:
        pre, fn = parts
    while (parts := _generated_parts(fn)) is not None:
        op_def, fn = parts
        steps.append((op_def, {}, [None, ()]))
    if not steps:
        return None
    custom = None if fn is _NO_VERIFY else fn
    pure = custom is not None and (
        getattr(custom, "__module__", None), getattr(custom, "__qualname__", None)
    ) in _PURE_VERIFIERS
    return pre, tuple(steps), custom, ({} if pure else None)


def _key(op: Operation) -> tuple[Any, ...]:
    """What `OpDef.verify`'s constraint checks read from `op`."""
    regions = tuple(
        (len(r.blocks), None if (b := r.first_block) is None else tuple(b.arg_types))
        for r in op.regions
    )
    return (
        tuple(v.type for v in op.operands),
        tuple(v.type for v in op.results),
        tuple(op.properties.items()),
        tuple(op.attributes.items()),
        regions,
        len(op.successors),
    )


def _id_key(op: Operation) -> tuple[Any, ...]:
    """`_key(op)` with every attribute replaced by its `id`, as one flat tuple (each
    group preceded by its length): programs share their type and attribute objects (the
    parser and the passes cache them), and a tuple of ints hashes in C where the
    attributes' dataclass hashes are Python calls, walked anew each time; the ids are
    read in C (`map`, `attrgetter`), not through the values' `type` property. A memo
    holds the `_key` it stands for as its value, which keeps those objects alive, so an
    `_id_key` found in a memo names the very same attributes."""
    operands = op._operands  # pyright: ignore[reportPrivateUsage]
    results = op.results
    properties = op.properties
    attributes = op.attributes
    return (
        len(operands), *map(id, map(type_of, operands)),
        len(results), *map(id, map(type_of, results)),
        len(properties), *properties, *map(id, properties.values()),
        len(attributes), *attributes, *map(id, attributes.values()),
        len(op._successors),  # pyright: ignore[reportPrivateUsage]
        *map(_region_id_key, op.regions),
    )


def _region_id_key(region: Region) -> tuple[Any, ...]:
    block = region.first_block
    return (len(region.blocks), None if block is None else tuple(map(id, map(type_of, block.args))))


class _Hashed:
    """A memo key whose hash is computed once: a tuple hashes its attributes anew (a chain
    of dataclass hashes) on every lookup and insertion."""

    __slots__ = ("key", "_hash")

    def __init__(self, key: tuple[Any, ...]):
        self.key = key
        self._hash = hash(key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return type(other) is _Hashed and self._hash == other._hash and self.key == other.key


def _value_key(op: Operation) -> _Hashed | None:
    """`_key(op)`, hashed; None when an attribute is unhashable (checked every time)."""
    try:
        return _Hashed(_key(op))
    except TypeError:
        return None


def _trait_checks(traits: frozenset[OpTrait]) -> tuple[Callable[[Operation], None], ...]:
    """The `verify` of each of `traits`, in their order, but those that check nothing
    (`OpTrait.verify` itself), IsolatedFromAbove's through `verify_isolated_from_above`."""
    checks: list[Callable[[Operation], None]] = []
    for trait in traits:
        cls = type(trait)
        if cls.verify is OpTrait.verify:
            continue
        if cls is IsolatedFromAbove:
            checks.append(partial(verify_isolated_from_above, trait))
        else:
            checks.append(trait.verify)
    return tuple(checks)


_UNSET: Any = object()


def _remember(memo: dict[Any, Any], ids: tuple[Any, ...], key: _Hashed) -> None:
    if len(memo) >= _MEMO_LIMIT:
        memo.clear()
    memo[key] = True
    memo[ids] = key


def verify_op(op: Operation) -> None:
    """`op.verify_()`, raising the same exceptions, with passed constraint checks
    remembered."""
    cls = type(op)
    try:
        plan = _PLANS[cls]
    except KeyError:
        plan = _PLANS[cls] = _plan(cls)
    if plan is None:
        op.verify_()
        return
    pre, steps, custom, custom_memo = plan
    if pre is not None:
        pre(op)
    ids = _id_key(op)
    key: _Hashed | None = _UNSET
    for op_def, memo, traits in steps:
        known = ids in memo
        if not known:
            if key is _UNSET:
                key = _value_key(op)
            known = key is not None and key in memo
            if known:
                _remember(memo, ids, key)  # type: ignore[arg-type]
        if known:
            current = op_def.traits.traits
            if current is not traits[0]:
                traits[0], traits[1] = current, _trait_checks(current)
            for check in traits[1]:
                check(op)
            continue
        op_def.verify(op)
        if key is _UNSET:
            key = _value_key(op)
        if key is not None:
            _remember(memo, ids, key)
    if custom is None:
        return
    if custom_memo is not None:
        if ids in custom_memo:
            return
        if key is _UNSET:
            key = _value_key(op)
        if key is not None and key in custom_memo:
            _remember(custom_memo, ids, key)
            return
    custom(op)
    if custom_memo is not None and key is not _UNSET and key is not None:
        _remember(custom_memo, ids, key)


def verify_operation(op: Operation, verify_nested_ops: bool = True) -> None:
    """`op.verify(verify_nested_ops)` for an op tree without successors, using
    `verify_op` on each op (xDSL's nested walk re-checks every constraint of every op);
    on any failure xDSL's own `verify` runs again so the exception is exactly its."""
    if op.successors:
        op.verify(verify_nested_ops=verify_nested_ops)
        return
    try:
        _verify_fast(op, verify_nested_ops)
    except Exception:  # noqa: BLE001 - replayed by xDSL for its exact exception
        op.verify(verify_nested_ops=verify_nested_ops)


class _Replay(Exception):
    """A structure only xDSL's own `verify` checks (successors in a nested op)."""


def _verify_fast(op: Operation, nested: bool) -> None:
    """The checks of xDSL's `Operation.verify` (and, when `nested`, of its regions'
    and blocks' `verify`) on an op without successors; raises on any failure."""
    from xdsl.traits import IsTerminator, NoTerminator

    for v in op.operands:
        if type(v).__name__ == "ErasedSSAValue":
            raise ValueError("erased operand")
    block = op.parent
    region = None if block is None else block.parent
    if block is not None and region is not None and block.last_op is op:
        parent = region.parent
        single = region.first_block is region.last_block
        needs = (parent is not None and not has_trait(parent, NoTerminator)) if single else True
        if needs and not has_trait(op, IsTerminator):
            raise ValueError("not a terminator")
    if nested:
        for inner in op.regions:
            for b in inner.blocks:
                if b.parent is not inner:
                    raise ValueError("block parent")
                if b.first_op is None and inner.first_block is inner.last_block and not has_trait(op, NoTerminator):
                    raise ValueError("empty block")
                for child in b.ops:
                    if child.parent is not b:
                        raise ValueError("op parent")
                    if child.successors:
                        raise _Replay
                    _verify_fast(child, True)
    verify_op(op)
