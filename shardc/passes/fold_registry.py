"""Folders, canonicalization patterns and constant materializers that MLIR attaches to
foreign ops and xDSL's dialects lack, kept in a registry instead of on xDSL's classes.

MLIR gives every op its `fold` and `getCanonicalizationPatterns`; xDSL's dialects have
some of them. Mutating xDSL's classes (`OpTraits.add_trait`) would change them for every
user of the process, so, like the ShardingInterface registry, these are looked up by op
class through the MRO:

- `registered_folder(cls)`: the folder of the nearest class in the MRO that has one. It
  replaces xDSL's `HasFolder` for that op: it is MLIR's folder, and xDSL's may fold what
  MLIR's does not;
- `registered_patterns(cls)`: the patterns registered on every class of the MRO, most
  derived first, tried after the op's own trait patterns;
- `registered_materializer(dialect)`: a dialect's `materializeConstant` where xDSL's
  dialect has no ConstantMaterializationInterface.

The registrations themselves live in `shardc.passes.canonicalization` (one module per
dialect) and are imported on the first lookup, a dialect's once its xDSL module is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import RewritePattern

FoldResult = Sequence[SSAValue | Attribute] | None
"""None: no fold; an empty sequence: updated in place; else one value per result
(Attributes are constants still to be materialised)."""

Folder = Callable[[Operation], FoldResult]
Materializer = Callable[[Attribute, Attribute], Operation | None]
"""(value, type) -> an op producing it, or None."""

_FOLDERS: dict[type[Operation], Folder] = {}
_PATTERNS: dict[type[Operation], list[RewritePattern]] = {}
_MATERIALIZERS: dict[str, Materializer] = {}
_CONSTANTS: dict[type[Operation], Callable[[Operation], Attribute | None]] = {}
_EFFECT_FREE: dict[type[Operation], Callable[[Operation], bool] | None] = {}
_REPLACED: set[type[Operation]] = set()
_LOOKUPS: dict[tuple[str, type[Operation]], object] = {}
"""Memo of the MRO lookups below, per table and class (cleared by every registration)."""

F = TypeVar("F", bound=Callable[..., FoldResult])
T = TypeVar("T")


def register_folder(*classes: type[Operation]) -> Callable[[F], F]:
    """Decorator: `fn(op)` is the folder of `classes` (and of their subclasses)."""

    def add(fn: F) -> F:
        _LOOKUPS.clear()
        for cls in classes:
            _FOLDERS[cls] = fn
        return fn

    return add


def register_patterns(
    cls: type[Operation], *patterns: RewritePattern, replace_native: bool = False
) -> None:
    """Append canonicalization patterns to `cls` (and its subclasses). With
    `replace_native`, the patterns xDSL's traits give `cls` are not used: they are not
    MLIR's and would run first."""
    _LOOKUPS.clear()
    _PATTERNS.setdefault(cls, []).extend(patterns)
    if replace_native:
        _REPLACED.add(cls)


def register_constant(cls: type[Operation], value: Callable[[Operation], Attribute | None]) -> None:
    """`cls` is ConstantLike (MLIR's `m_Constant` matches it); `value(op)` is its value."""
    _LOOKUPS.clear()
    _CONSTANTS[cls] = value


def register_effect_free(
    *classes: type[Operation], when: Callable[[Operation], bool] | None = None
) -> None:
    """`classes` have no memory effect (MLIR declares them Pure; xDSL's do not); with
    `when`, only the ops it accepts (MLIR's effects that depend on operand types, as
    linalg's: none on tensors, reads and writes on memrefs)."""
    _LOOKUPS.clear()
    for cls in classes:
        _EFFECT_FREE[cls] = when


def register_materializer(dialect: str, fn: Materializer) -> None:
    _MATERIALIZERS[dialect] = fn


FOLDER_PACKAGE = "shardc.passes.canonicalization"
"""The package of shardc's folders, imported by name: its modules register into this one."""


def _load() -> None:
    """Register shardc's folders (importing the package, the first time) and those of the
    dialects imported since."""
    import importlib

    importlib.import_module(FOLDER_PACKAGE).register_imported_dialects()


def registered_folder(cls: type[Operation]) -> Folder | None:
    return _first(_FOLDERS, cls, "folder")


def registered_patterns(cls: type[Operation]) -> tuple[RewritePattern, ...]:
    key = ("patterns", cls)
    if key in _LOOKUPS:
        return _LOOKUPS[key]  # type: ignore[return-value]
    _load()
    found: list[RewritePattern] = []
    for klass in cls.__mro__:
        found.extend(_PATTERNS.get(klass, ()))  # pyright: ignore[reportArgumentType]
    _LOOKUPS[key] = result = tuple(found)
    return result


_MISSING = object()


def _first(table: dict[type[Operation], T], cls: type[Operation], name: str) -> T | None:
    # A remembered answer was found after loading (registering clears them all).
    key = (name, cls)
    found = _LOOKUPS.get(key, _MISSING)
    if found is _MISSING:
        _load()
        found = next((table[k] for k in cls.__mro__ if k in table), None)
        _LOOKUPS[key] = found
    return found  # type: ignore[return-value]


def registered_constant(cls: type[Operation]) -> Callable[[Operation], Attribute | None] | None:
    return _first(_CONSTANTS, cls, "constant")


NOT_REGISTERED = object()
"""`effect_free_entry` of a class with no effect-free registration."""


def registered_effect_free(op: Operation) -> bool:
    found = effect_free_entry(type(op))
    if found is NOT_REGISTERED:
        return False
    return found is None or found(op)  # type: ignore[operator]


def effect_free_entry(cls: type[Operation]) -> object:
    """The `when` of the nearest registered class (None: always), or NOT_REGISTERED."""
    key = ("effect_free_entry", cls)
    found = _LOOKUPS.get(key, _MISSING)
    if found is _MISSING:
        _load()
        found = next((_EFFECT_FREE[k] for k in cls.__mro__ if k in _EFFECT_FREE), NOT_REGISTERED)
        _LOOKUPS[key] = found
    return found


def replaces_native_patterns(cls: type[Operation]) -> bool:
    _load()
    key = ("replaced", cls)
    found = _LOOKUPS.get(key)
    if found is None:
        found = _LOOKUPS[key] = any(klass in _REPLACED for klass in cls.__mro__)
    return found  # type: ignore[return-value]


def per_class(name: str, cls: type[Operation], compute: Callable[[], T]) -> T:
    """`compute()`, remembered per `name` and class until the next registration: for
    what other modules derive from an op's class and the registrations (the folding
    driver's per-class answers)."""
    key = (name, cls)
    found = _LOOKUPS.get(key, _MISSING)
    if found is _MISSING:
        found = _LOOKUPS[key] = compute()
    return found  # type: ignore[return-value]


def registered_materializer(dialect: str) -> Materializer | None:
    _load()
    return _MATERIALIZERS.get(dialect)
