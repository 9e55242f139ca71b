"""Overlays: xDSL dialects extended with the ops shard programs need and xDSL lacks.

Each overlay is a new `Dialect` object with xDSL's ops plus ours, registered under the
same name in the shardc context, so plain `xdsl-opt` in the same environment is unchanged.
Where one of ours has the name of one of xDSL's (a subclass with MLIR's custom syntax),
ours takes its place: xDSL's `Context.load_op` refuses two classes under one name.
"""

from collections.abc import Callable, Iterable

from xdsl.dialect_interfaces import DialectInterface
from xdsl.ir import Attribute, Dialect, Operation, TypeAttribute
from xdsl.utils.exceptions import VerifyException


def op_error(op: Operation, message: str) -> VerifyException:
    """A verifier error worded like MLIR's `emitOpError`: `'name' op message`."""
    return VerifyException(f"'{op.name}' op {message}")


def _attr_key(attr: type[Attribute]) -> tuple[str, bool]:
    # A type and an attribute may share a name; the context keeps them apart.
    return attr.name, issubclass(attr, TypeAttribute)


def extend_dialect(
    base: Dialect,
    ops: Iterable[type[Operation]] = (),
    attrs: Iterable[type[Attribute]] = (),
    interfaces: Iterable[DialectInterface] = (),
) -> Dialect:
    """A new dialect named like `base`: its ops, attributes and interfaces, ours added
    (ops and attributes replacing the same-named ones). `base` itself is left untouched."""
    ops = list(ops)
    attrs = list(attrs)
    op_names = {op.name for op in ops}
    attr_keys = {_attr_key(attr) for attr in attrs}
    return Dialect(
        base.name,
        [*(op for op in base.operations if op.name not in op_names), *ops],
        [*(a for a in base.attributes if _attr_key(a) not in attr_keys), *attrs],
        [*base._interfaces, *interfaces],  # pyright: ignore[reportPrivateUsage]
    )


# dialect name -> "module:Dialect object": the table names the overlay modules instead of
# importing them, since every overlay module imports this one (`op_error`,
# `extend_dialect`); each is imported only when its dialect is loaded.
OVERLAYS: dict[str, str] = {
    "tosa": "shardc.dialects.tosa:TOSA",
    "affine": "shardc.dialects.affine:Affine",
    "memref": "shardc.dialects.memref:MemRef",
    "dlti": "shardc.dialects.dlti:DLTI",
    "func": "shardc.dialects.func:Func",
    "tensor": "shardc.dialects.tensor:Tensor",
    "scf": "shardc.dialects.scf:SCF",
    "linalg": "shardc.dialects.linalg:Linalg",
    "arith": "shardc.dialects.arith:Arith",
}


def _loader(spec: str) -> Callable[[], Dialect]:
    module, _, name = spec.partition(":")

    def load() -> Dialect:
        import importlib

        return getattr(importlib.import_module(module), name)

    return load


def overlay_dialects() -> dict[str, Callable[[], Dialect]]:
    """Overlay factories by dialect name; each imports its module only when loaded."""
    return {name: _loader(spec) for name, spec in OVERLAYS.items()}
