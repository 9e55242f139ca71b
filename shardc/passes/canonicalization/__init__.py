"""MLIR's folders and canonicalization patterns for foreign ops that xDSL's dialects lack,
one module per dialect; importing this package registers them in
`shardc.passes.fold_registry`: at once those of the dialects every pipeline meets, the
others by `register_imported_dialects` once their xDSL module is imported (no op of a
dialect exists before that), so a run without tosa, affine or scf ops does not import
those dialects for their folders (tosa's alone is about 5 ms of a run)."""

import sys
from importlib import import_module

from shardc.passes.canonicalization import arith, linalg, shard, tensor

AWAITING_DIALECT = {
    "xdsl.dialects.affine": "affine",
    "xdsl.dialects.scf": "scf",
    "xdsl.dialects.tosa": "tosa",
}
"""xDSL dialect module -> this package's module of its folders, not registered yet."""


def register_imported_dialects() -> None:
    """Register the folders of every dialect in `AWAITING_DIALECT` imported by now."""
    for dialect in [d for d in AWAITING_DIALECT if d in sys.modules]:
        import_module(f"{__name__}.{AWAITING_DIALECT.pop(dialect)}")


__all__ = ["arith", "linalg", "register_imported_dialects", "shard", "tensor"]
