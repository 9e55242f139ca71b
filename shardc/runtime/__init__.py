"""shardc's runtime: MLIR functions compiled to Python over numpy, and a Comm layer
(MPI or simulated ranks) for collectives, in two halves: `codegen` (what happens once:
IR -> generated Python, fusion, scheduling, donation, the emitters, the compile cache)
and `execute` (what runs every step: Comm, BLAS, the helpers and kernels generated code
calls). Generated code binds only `execute`; `execute` never imports `codegen`.
(`shardc.launch` runs a whole program: passes, compile, then ranks.)

The names below are loaded on first use (PEP 562): importing a module that runs
compiled code (a compile-cache hit: `codegen.cache`, `execute.*`) must not load the
compiler and xDSL with it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shardc.runtime.codegen.builder import CompileError, register, register_name
    from shardc.runtime.codegen.compile import compile_module, compile_text
    from shardc.runtime.execute.compiled import CompiledModule, RuntimeExecutionError

_FROM = {
    "CompileError": "codegen.builder", "register": "codegen.builder", "register_name": "codegen.builder",
    "compile_module": "codegen.compile", "compile_text": "codegen.compile",
    "CompiledModule": "execute.compiled", "RuntimeExecutionError": "execute.compiled",
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
