"""shardc's runtime: MLIR functions compiled to Python over numpy, and a Comm layer
(MPI or simulated ranks) for collectives. See compile.py, structured.py and comm.py.

The names below are loaded on first use (PEP 562): importing a submodule that runs
compiled code (a compile-cache hit: `cache`, `compiled`, the `*_run` modules) must not
load the compiler and xDSL with it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shardc.runtime.compile import CompileError, compile_module, compile_text, register, register_name
    from shardc.runtime.compiled import CompiledModule, RuntimeExecutionError

_FROM = {
    "CompileError": "compile", "compile_module": "compile", "compile_text": "compile", "register": "compile", "register_name": "compile",
    "CompiledModule": "compiled", "RuntimeExecutionError": "compiled",
}

__all__ = [
    "CompileError",
    "CompiledModule",
    "RuntimeExecutionError",
    "compile_module",
    "compile_text",
    "register",
    "register_name",
]


def __getattr__(name: str) -> Any:
    mod = _FROM.get(name)
    if mod is None:
        raise AttributeError(f"module 'shardc.runtime' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"shardc.runtime.{mod}"), name)
    globals()[name] = value
    return value
