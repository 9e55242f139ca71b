"""What an emitter writes with: the registry of emitters by op class or name
(`register`, `register_name`), the per-module and per-function builders that name SSA
values and bind constants (`ModuleCodegen`, `FunctionBuilder`), the errors it raises
(`compile_error`), and the helpers that shape statements (`targets`, `tuple_expr`,
`docstring`, `free_dead_values`). `compile.py` drives a whole module through them;
emitters import this module, never the driver."""

from __future__ import annotations

import ast
import contextlib
import itertools
import re
from collections.abc import Callable, Iterator, Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, UnknownLoc
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from shardc.ir.escape import display
from shardc.runtime.codegen.codegen_safe import py_hint, py_identifier, py_literal
from shardc.runtime.execute.code_check import numpy_subset
from shardc.runtime.execute.dtypes import is_shaped


Emitter = Callable[[Operation, "FunctionBuilder"], None]


_BY_CLASS: dict[type[Operation], Emitter] = {}


_BY_NAME: dict[str, Emitter] = {}


class CompileError(DiagnosticException):
    """The runtime cannot compile an op (unsupported op, attribute or type)."""


def register(*op_classes: type[Operation]) -> Callable[[Emitter], Emitter]:
    """Register an emitter for op classes (and, through the MRO, their subclasses)."""

    def deco(fn: Emitter) -> Emitter:
        for cls in op_classes:
            _BY_CLASS[cls] = fn
        return fn

    return deco


def register_name(*names: str) -> Callable[[Emitter], Emitter]:
    """Register an emitter by op name, for ops whose class the runtime does not import."""

    def deco(fn: Emitter) -> Emitter:
        for name in names:
            _BY_NAME[name] = fn
        return fn

    return deco


def lookup_emitter(op: Operation) -> Emitter | None:
    for cls in type(op).__mro__:
        fn = _BY_CLASS.get(cls)  # type: ignore[arg-type]
        if fn is not None:
            return fn
    return _BY_NAME.get(op.name)


def describe(op: Operation) -> str:
    """`'op.name' at <loc>` for error messages; the names from the IR are `display`ed
    (escaped), so they cannot forge lines of a message."""
    loc = op.location
    where = "" if isinstance(loc, UnknownLoc) else f" at {display(str(loc))}"  # printing one takes a Printer
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    if isinstance(parent, func.FuncOp):
        where += f" in function @{display(parent.sym_name.data)}"
    name = op.name
    op_name = getattr(op, "op_name", None)  # builtin.unregistered keeps the real name
    if op_name is not None and hasattr(op_name, "data"):
        name = op_name.data
    return f"'{display(name)}'{where}"


def compile_error(op: Operation, msg: str) -> CompileError:
    """The error for `op`; IR text that emitters put in `msg` is escaped too."""
    return CompileError(display(f"runtime: {describe(op)}: {msg}"))


class ModuleCodegen:
    """State shared by all functions of one module: the global pool and fresh names.

    Names in the generated source never carry IR text raw (`shardc.runtime.codegen.codegen_safe`):
    fresh names are `py_hint(hint)_<n>` and globals `_<fresh>`; functions are
    `func_pyname(sym)`, whose `__` no fresh name contains. A `scope` (`p1__`: letters
    and digits, then `__`) prefixes the globals, so that the functions of a module
    compiled in parts (`shardc.runtime.codegen.parts`, one part per rank) bind globals that
    cannot collide: no unscoped global or function name starts `_<letter>...__`."""

    def __init__(self, module: ModuleOp, scope: str = ""):
        if scope and not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*__", scope):
            raise ValueError(f"ModuleCodegen: bad scope {scope!r}")
        self.module = module
        self.scope = scope
        self.globals: dict[str, object] = {"_np": numpy_subset()}
        self._by_id: dict[int, str] = {}
        self._by_key: dict[object, str] = {}
        self._counter = itertools.count()
        self.prelude: list[str] = []
        self.hgroups: dict[Operation, list[Operation]] = {}
        """Generics run as one kernel call, member -> its group (`shardc.runtime.codegen.horizontal`)."""

    def fresh(self, hint: str | None = "v") -> str:
        return f"{py_hint(hint)}_{next(self._counter)}"

    def const(self, obj: object, hint: str = "k") -> str:
        """A global name bound to `obj` (deduplicated by identity)."""
        key = id(obj)
        name = self._by_id.get(key)
        if name is None:
            name = "_" + self.scope + self.fresh(hint)
            self._by_id[key] = name
            self.globals[name] = obj
        return name

    def keyed_const(self, key: object, make: Callable[[], object], hint: str = "k") -> str:
        """A global name bound to `make()`, made once per `key` (e.g. a memref.global's
        symbol): the name is fresh, the key never appears in the source."""
        name = self._by_key.get(key)
        if name is None:
            name = self._by_key[key] = "_" + self.scope + self.fresh(hint)
            self.globals[name] = make()
        return name

    @staticmethod
    def func_pyname(sym: str) -> str:
        """The Python name of function `@sym` (collision-free: see `py_identifier`)."""
        return py_identifier(sym, "fn")

    def symbol(self, name: str) -> Operation | None:
        from xdsl.traits import SymbolTable

        return SymbolTable.lookup_symbol(self.module, name)


class FunctionBuilder:
    """Emits the Python statements of one function (or of a vectorized linalg body).

    In *vector* mode (linalg bodies evaluated on whole arrays) values produced from block
    arguments are numpy arrays even though their IR type is a scalar type; `is_arr` tells
    emitters which representation an SSA value has.
    """

    def __init__(self, cg: ModuleCodegen, vector: bool = False, parent: FunctionBuilder | None = None):
        self.cg = cg
        self.vector = vector
        self.names: dict[SSAValue, str] = parent.names if parent is not None else {}
        self.vec_values: set[SSAValue] = parent.vec_values if parent is not None else set()
        self.lines: list[str] = []
        self.depth = 0
        self.index_grid: str | None = parent.index_grid if parent is not None else None

    # --- names -------------------------------------------------------------------
    def v(self, value: SSAValue) -> str:
        """The Python expression holding an SSA value."""
        try:
            return self.names[value]
        except KeyError:
            raise CompileError(f"runtime: internal error: value {value} used before definition") from None

    def vs(self, values: Sequence[SSAValue]) -> list[str]:
        return [self.v(x) for x in values]

    def define(self, value: SSAValue, vec: bool = False) -> str:
        name = self.cg.fresh(value.name_hint or "v")
        self.names[value] = name
        if vec:
            self.vec_values.add(value)
        return name

    def res(self, op: Operation, i: int = 0, vec: bool | None = None) -> str:
        """Define a name for result `i` of `op`. By default the result is a vectorized
        scalar (an array) when an operand is one (inside linalg bodies)."""
        if vec is None:
            vec = any(o in self.vec_values for o in op.operands)
        return self.define(op.results[i], vec=vec)

    def bind(self, value: SSAValue, expr: str, like: SSAValue | None = None) -> None:
        """Alias `value` to an existing variable name or literal (no statement emitted);
        `like` passes on its vectorized-ness."""
        self.names[value] = expr
        if like is not None and like in self.vec_values:
            self.vec_values.add(value)

    def fresh(self, hint: str | None = "t") -> str:
        return self.cg.fresh(hint)

    def const(self, obj: object, hint: str = "k") -> str:
        return self.cg.const(obj, hint)

    # --- representation queries --------------------------------------------------
    def is_arr(self, value: SSAValue) -> bool:
        """Whether the runtime value is a numpy array (shaped type or vectorized scalar)."""
        return is_shaped(value.type) or value in self.vec_values

    def arr_op(self, op: Operation) -> bool:
        return any(self.is_arr(o) for o in op.operands) or any(is_shaped(r.type) for r in op.results)

    # --- statements --------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def assign(self, op: Operation, expr: str, i: int = 0) -> str:
        name = self.res(op, i)
        self.emit(f"{name} = {expr}")
        return name

    @contextlib.contextmanager
    def indented(self) -> Iterator[None]:
        self.depth += 1
        start = len(self.lines)
        yield
        if len(self.lines) == start:
            self.emit("pass")
        self.depth -= 1

    def emit_op(self, op: Operation) -> None:
        emitter = lookup_emitter(op)
        if emitter is None:
            raise compile_error(op, "operation is not supported by the numpy runtime")
        emitter(op, self)

    def emit_ops(self, ops: Sequence[Operation] | Iterator[Operation]) -> None:
        for op in ops:
            self.emit_op(op)

    def emit_block_body(self, block: Block) -> Operation:
        """Emit every op of `block` but its terminator, which is returned (not emitted)."""
        ops = list(block.ops)
        if not ops:
            raise CompileError("runtime: internal error: empty block")
        self.emit_ops(ops[:-1])
        return ops[-1]

    def bind_block_args(self, block: Block, names: Sequence[str] | None = None, vec: bool = False) -> list[str]:
        """Give block arguments names (fresh ones unless `names` is given)."""
        out: list[str] = []
        for k, arg in enumerate(block.args):
            if names is None:
                out.append(self.define(arg, vec=vec))
            else:
                self.names[arg] = names[k]
                if vec:
                    self.vec_values.add(arg)
                out.append(names[k])
        return out


def single_block(region: Region) -> Block:
    assert region.blocks.first is not None
    return region.blocks.first


def tuple_expr(names: Sequence[str]) -> str:
    if len(names) == 1:
        return f"({names[0]},)"
    return "(" + ", ".join(names) + ")"


def targets(names: Sequence[str]) -> str:
    """Left-hand side for unpacking a tuple into `names` (works for 1 element too)."""
    if len(names) == 1:
        return names[0] + ","
    return ", ".join(names)


def docstring(f: func.FuncOp) -> str:
    """The generated function's docstring: the symbol name as a Python literal."""
    return "    " + py_literal("@" + f.sym_name.data)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def free_dead_values(source: str) -> str:
    """Insert `del` after the last top-level statement that mentions a local array, so
    large intermediates are freed as soon as they are dead (as numpy code written by hand
    would), not when the function returns. (The code is checked once compiled:
    `_check_code`.)"""
    try:
        tree = ast.parse(source)
    except (SyntaxError, RecursionError) as e:
        raise too_deep(e) from None
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    lines = source.split("\n")

    def mentioned(stmt: ast.stmt) -> set[str]:
        # The identifiers in the statement's lines (generated statements never share a
        # line): a superset of its names (attributes, keywords, text in literals), which
        # can only move a `del` later. Walking the tree instead took 0.3 s of the GPT
        # step's cold compile.
        return set(_IDENT.findall("\n".join(lines[stmt.lineno - 1 : stmt.end_lineno or stmt.lineno])))

    assigned: set[str] = set()
    last: dict[str, int] = {}
    closures: dict[str, set[str]] = {}  # nested def -> names its body reads
    for k, stmt in enumerate(fn.body):
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                assigned.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        names = mentioned(stmt)
        if isinstance(stmt, ast.FunctionDef):
            closures[stmt.name] = names
            continue  # its names are used where the function is called
        for name in list(names):
            names |= closures.get(name, set())
        for name in names:
            last[name] = k
    inserts: dict[int, tuple[str, list[str]]] = {}
    for name, k in last.items():
        stmt = fn.body[k]
        if name in assigned and not isinstance(stmt, ast.Return) and name.split("_")[0] not in ("body",):
            inserts.setdefault(stmt.end_lineno or stmt.lineno, ("    ", []))[1].append(name)
    # Inside the body functions of structured ops (straight-line code): a fused
    # elementwise chain would otherwise keep every temporary alive until it returns.
    for stmt in fn.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name.startswith("body_"):
            local_last: dict[str, ast.stmt] = {}
            local_assigned: set[str] = set()
            for inner in stmt.body:
                if isinstance(inner, ast.Assign):
                    for t in inner.targets:
                        local_assigned.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
                for name in mentioned(inner):
                    local_last[name] = inner
            indent = " " * (stmt.body[0].col_offset if stmt.body else 8)
            for name, inner in local_last.items():
                if name in local_assigned and not isinstance(inner, ast.Return):
                    inserts.setdefault(inner.end_lineno or inner.lineno, (indent, []))[1].append(name)
    out: list[str] = []
    for i, line in enumerate(lines, start=1):
        out.append(line)
        if i in inserts:
            indent, names = inserts[i]
            out.append(f"{indent}del {', '.join(sorted(names))}")
    return "\n".join(out)


def too_deep(e: SyntaxError | RecursionError) -> Exception:
    """Python's own limits on generated code (100 levels of indentation, one per nested
    region; 20 nested loops; its parser's recursion) as the input's problem; any other
    SyntaxError stays what it is, a bug of an emitter."""
    if isinstance(e, SyntaxError) and "nested" not in str(e) and "indentation" not in str(e):
        return e
    detail = e.msg if isinstance(e, SyntaxError) else type(e).__name__
    return CompileError(
        f"runtime: the program is nested too deeply to compile ({detail}): the generated Python allows about 100 nested regions"
    )
