"""Per-dialect emitters. Importing a module registers its emitters with the compiler.

`load_all()` imports the modules of the dialects the runtime covers; shard and mpi
kernels plug in the same way (a module calling `register(...)`), listed in `_MODULES`
once they exist: missing ones are skipped.
"""

import importlib

_MODULES = (
    "func",
    "arith",
    "math",
    "scf",
    "tensor",
    "linalg",
    "tosa",
    "memref",
    "bufferization",
    "affine",
    "shard",
    "mpi",
    "cf",
    "tm_tensor",
)
_loaded = False


def load_all() -> None:
    global _loaded
    if _loaded:
        return
    for name in _MODULES:
        try:
            importlib.import_module(f"shardc.runtime.codegen.kernels.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"shardc.runtime.codegen.kernels.{name}":
                raise
    _loaded = True
