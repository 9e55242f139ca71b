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


def _tosa() -> Dialect:
    from shardc.dialects.tosa import TOSA

    return TOSA


def _affine() -> Dialect:
    from shardc.dialects.affine import Affine

    return Affine


def _memref() -> Dialect:
    from shardc.dialects.memref import MemRef

    return MemRef


def _dlti() -> Dialect:
    from shardc.dialects.dlti import DLTI

    return DLTI


def _linalg() -> Dialect:
    from shardc.dialects.linalg import Linalg

    return Linalg


def _func() -> Dialect:
    from shardc.dialects.func import Func

    return Func


def _tensor() -> Dialect:
    from shardc.dialects.tensor import Tensor

    return Tensor


def _scf() -> Dialect:
    from shardc.dialects.scf import SCF

    return SCF


def _arith() -> Dialect:
    from shardc.dialects.arith import Arith

    return Arith


def overlay_dialects() -> dict[str, Callable[[], Dialect]]:
    """Overlay factories by dialect name; each imports its module only when loaded."""
    return {
        "tosa": _tosa,
        "affine": _affine,
        "memref": _memref,
        "dlti": _dlti,
        "func": _func,
        "tensor": _tensor,
        "scf": _scf,
        "linalg": _linalg,
        "arith": _arith,
    }
