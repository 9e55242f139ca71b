"""shardc's runtime: MLIR functions compiled to Python over numpy, and a Comm layer
(MPI or simulated ranks) for collectives. See compile.py, structured.py and comm.py."""

from shardc.runtime.compile import CompiledModule, CompileError, RuntimeExecutionError, compile_module, compile_text, register, register_name

__all__ = [
    "CompileError",
    "CompiledModule",
    "RuntimeExecutionError",
    "compile_module",
    "compile_text",
    "register",
    "register_name",
]
