"""The pass table of shardc-opt: pass name -> factory of the pass class.

A table, not a tree of nested factories: each entry imports its module lazily, so
startup stays cheap. xDSL passes that mlir-opt also has (canonicalize, cse, ...) are
listed here under mlir-opt's names.
"""

import importlib
from collections.abc import Callable

from xdsl.passes import ModulePass

# pass name -> "module:ClassName"
PASSES: dict[str, str] = {
    "canonicalize": "xdsl.transforms.canonicalize:CanonicalizePass",
    "cse": "xdsl.transforms.common_subexpression_elimination:CommonSubexpressionElimination",
    "dce": "xdsl.transforms.dead_code_elimination:DeadCodeElimination",
}


def _loader(spec: str) -> Callable[[], type[ModulePass]]:
    module, _, cls = spec.partition(":")

    def load() -> type[ModulePass]:
        return getattr(importlib.import_module(module), cls)

    return load


def all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {name: _loader(spec) for name, spec in PASSES.items()}
