"""What generated code may do, checked before any of it runs: the namespace it starts
from (`generated_namespace`: numpy's functions bound by name, builtins without the ones
that import, run or open) and the rules on its AST (`check_generated`, applied when it
is generated: by the compiler, by the fused and row kernels for their loop-nest sources)
and on its compiled code (`check_code`, what a compile-cache hit applies to the stored
source). It refuses code that imports, reaches for dunder attributes or calls the
builtins that run or load code, none of which an emitter ever writes
(`shardc.runtime.codegen.codegen_safe` keeps IR text out of generated code; this is the
second line of defence)."""

from __future__ import annotations

import ast
import builtins
import dis
import functools
import re
import types

import numpy as np
from xdsl.utils.exceptions import DiagnosticException


_FORBIDDEN_NAMES = frozenset(
    {
        "__import__", "__builtins__", "__loader__", "__spec__", "breakpoint", "compile", "delattr",
        "eval", "exec", "getattr", "globals", "input", "locals", "open", "setattr", "vars", "help",
        # what reaches C or pickles from objects generated code holds: an array's
        # `ctypes` (its `_ctypes` is the ctypes module), numpy's loaders and dumpers
        "ctypes", "ctypeslib", "dump", "dumps", "load", "loads", "fromfile", "tofile", "memmap", "lib",
    }
)

_GLOBAL_NAME = re.compile(r"_[A-Za-z0-9_]*_[0-9]+\Z")
"""The names `ModuleCodegen.const` gives bound objects (`_` + scope + `hint_<n>`): with
`_np`, the only single-underscore names generated code holds (no attribute of a runtime
object is private to generated code)."""

NUMPY_FUNCTIONS = frozenset(
    {
        "array", "asarray", "empty", "full", "zeros", "ones", "concatenate", "pad", "ndim", "shape", "reshape",
        "transpose", "where", "indices", "ndindex", "broadcast_to", "broadcast_shapes", "dtype",
        "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool_",
        "complex64", "complex128",
    }
)
"""What generated code reads from `_np` besides numpy's ufuncs (each bound by name in
`numpy_subset`): the emitters' `_np.<name>` calls."""


@functools.cache
def numpy_subset() -> types.SimpleNamespace:
    """The `_np` of generated code: numpy's ufuncs and `NUMPY_FUNCTIONS`, bound by name,
    and nothing else: no loader (`load`, `fromfile`: pickles), no `ctypeslib`, no
    submodule, so no object in generated code's namespace is a module."""
    names = {n: getattr(np, n) for n in dir(np) if isinstance(getattr(np, n, None), np.ufunc)}
    names.update((n, getattr(np, n)) for n in NUMPY_FUNCTIONS)
    return _NumpySubset(**names)


class _NumpySubset(types.SimpleNamespace):
    """`numpy_subset`'s namespace; `bfloat16` (bf16's scalar type, from ml_dtypes: numpy
    has none) is looked up on first use, so programs without bf16 never import ml_dtypes."""

    def __getattr__(self, name: str) -> object:
        if name != "bfloat16":
            raise AttributeError(name)
        from shardc.runtime.execute.kernels.bf16_run import bfloat16

        value = bfloat16().type
        setattr(self, name, value)
        return value


@functools.cache
def _safe_builtins() -> dict[str, object]:
    return {k: v for k, v in vars(builtins).items() if k not in _FORBIDDEN_NAMES and k not in ("exit", "quit", "copyright", "credits", "license")}


def generated_namespace() -> dict[str, object]:
    """The globals generated code starts from: `_np` (`numpy_subset`) and builtins
    without the ones that import, run or open (`__import__`, `eval`, `open`, ...), so
    that code which got past `check_code` still finds no way to load other code."""
    return {"_np": numpy_subset(), "__builtins__": _safe_builtins()}


_FORBIDDEN_NODES = frozenset({ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ClassDef})


class UnsafeCodeError(DiagnosticException):
    """Generated code contains a construct no emitter writes: an emitter let IR text in."""


def check_generated(tree: ast.AST) -> None:
    """Refuse generated code that could load or run other code (see module docstring)."""
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Name:
            if node.id in _FORBIDDEN_NAMES:  # type: ignore[attr-defined]
                raise UnsafeCodeError(f"generated code uses {node.id!r} at line {node.lineno}")  # type: ignore[attr-defined]
        elif kind is ast.Attribute:
            if node.attr in _FORBIDDEN_NAMES:  # type: ignore[attr-defined]
                raise UnsafeCodeError(f"generated code reads attribute {node.attr!r} at line {node.lineno}")  # type: ignore[attr-defined]
            if node.attr.startswith("__"):  # type: ignore[attr-defined]
                raise UnsafeCodeError(f"generated code reads attribute {node.attr!r} at line {node.lineno}")  # type: ignore[attr-defined]
        elif kind in _FORBIDDEN_NODES:
            raise UnsafeCodeError(f"generated code contains {kind.__name__.lower()} at line {node.lineno}")  # type: ignore[attr-defined]


_FORBIDDEN_OPS = frozenset(
    dis.opmap[name] for name in ("IMPORT_NAME", "IMPORT_FROM", "IMPORT_STAR", "LOAD_BUILD_CLASS", "STORE_GLOBAL", "DELETE_GLOBAL") if name in dis.opmap
)
_DEREF_WRITES = frozenset(dis.opmap[name] for name in ("STORE_DEREF", "DELETE_DEREF") if name in dis.opmap)


def check_code(code: types.CodeType) -> None:
    """`check_generated`'s rules on compiled code and every code object nested in it: no
    import, class or `global` statement (their opcodes), no forbidden name, no dunder
    attribute or global, no private name but a bound object's (`_GLOBAL_NAME`) or `_np`,
    no `nonlocal` write (a closure storing into a free variable).
    Names are not told apart by use (a code object lists globals and attributes
    together), so an attribute called like a forbidden builtin is refused too: stricter
    than the AST check, and as cheap as reading the code objects' tables."""
    stack = [code]
    while stack:
        co = stack.pop()
        where = f"in {co.co_name!r} at line {co.co_firstlineno}"
        bad = _FORBIDDEN_NAMES.intersection((*co.co_names, *co.co_varnames, *co.co_cellvars, *co.co_freevars))
        if bad:
            raise UnsafeCodeError(f"generated code uses {min(bad)!r} {where}")
        dunder = [n for n in co.co_names if n.startswith("__")]
        if dunder:
            raise UnsafeCodeError(f"generated code reads attribute {dunder[0]!r} {where}")
        private = [n for n in co.co_names if n.startswith("_") and n != "_np" and not _GLOBAL_NAME.match(n)]
        if private:
            raise UnsafeCodeError(f"generated code reads private name {private[0]!r} {where}")
        ops = frozenset(co.co_code[::2])  # one opcode per two-byte code unit
        if ops & _FORBIDDEN_OPS:
            (op, *_) = sorted(dis.opname[o] for o in ops & _FORBIDDEN_OPS)
            raise UnsafeCodeError(f"generated code contains {op.lower()} {where}")
        if co.co_freevars and ops & _DEREF_WRITES:
            for ins in dis.get_instructions(co):
                if ins.opcode in _DEREF_WRITES and ins.argval in co.co_freevars:
                    raise UnsafeCodeError(f"generated code writes the enclosing function's {ins.argval!r} (nonlocal) {where}")
        stack.extend(c for c in co.co_consts if isinstance(c, types.CodeType))
