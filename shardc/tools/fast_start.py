"""Start-up of a `shardc-opt` process: work that defining xDSL's classes repeats or
never needs, avoided without changing any xDSL class.

- **dataclass methods compiled once per text.** `dataclasses` writes `__init__`,
  `__repr__`, `__eq__`, `__hash__` and the frozen `__setattr__`/`__delattr__` of every
  dataclass as source text and `exec`s it; xDSL's attribute and constraint classes
  repeat the same texts (on examples/mlp.mlir, 1,335 functions from 726 distinct
  texts). Here the name `exec` in the `dataclasses` module (only there) is bound to
  `CodeCache.exec`, which compiles a text the first time this process meets it and
  executes the kept code object after that. That is safe because `exec(text, g, l)`
  is `compile(text, "<string>", "exec")` (with the calling module's future flags:
  `dataclasses` has none, so `dont_inherit=True` gives the same code), then executing
  that code in `g`/`l`; the same text compiles to an equal, immutable code object, and
  each execution still makes a new function from it with this call's globals,
  defaults and closure. Nothing is kept across processes: the code is never read back
  from disk, so no code object escapes the checks cached content gets.
- **xDSL's math dialect loads on first use** (`LAZY`, `importlib.util.LazyLoader`):
  xDSL's linalg imports it (39 op classes) for a few named ops' bodies, which a run
  meets only where its input or a pass has them. The module object is xDSL's own,
  executed on its first attribute access.

Both are installed only by `shardc-opt` run as a command (`install`, before xDSL is
imported), in a process that ends with the command: shardc imported as a library
leaves xDSL and the standard library as they are.
"""

from __future__ import annotations

import sys
from typing import Any

LAZY = frozenset({"xdsl.dialects.math"})
"""Modules a run imports without reading them: of every xDSL and shardc module that
examples/mlp.mlir's run imports, math is the only one whose attributes nothing reads."""


class CodeCache:
    """Code objects of the texts `dataclasses` executes, by text, for this process."""

    def __init__(self) -> None:
        self.codes: dict[str, Any] = {}
        self.compiled = 0
        """Texts compiled (a test reads it: a repeated text must not add one)."""
        self.builtin_exec = exec

    def exec(self, source: Any, globals: Any = None, locals: Any = None, /) -> Any:  # noqa: A002 - exec's names
        """`exec(source, globals, locals)`, a text compiled once."""
        if type(source) is not str:
            return self.builtin_exec(source, globals, locals)
        code = self.codes.get(source)
        if code is None:
            code = self.codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
            self.compiled += 1
        return self.builtin_exec(code, globals, locals)


class _ImportHook:
    """A meta-path finder for what `install` changes that is not imported yet: the
    `dataclasses` module given the code cache as soon as it has run (before the first
    dataclass is made), and the `lazy` modules loaded by `LazyLoader`."""

    def __init__(self, cache: CodeCache | None, lazy: frozenset[str]) -> None:
        self.cache = cache
        self.lazy = lazy
        self.pending = set(lazy) | ({"dataclasses"} if cache is not None else set())

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.pending:
            return None
        self.pending.discard(name)
        if not self.pending and self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None or isinstance(loader, type):
            return spec  # a frozen or builtin module's importer is shared: left alone
        if name in self.lazy:
            from importlib.util import LazyLoader

            spec.loader = LazyLoader(loader)
            return spec
        cache = self.cache
        assert cache is not None

        def run_then_install(module: Any) -> None:
            exec_module(module)
            module.exec = cache.exec  # shadows the builtin in this one module

        loader.exec_module = run_then_install  # this spec's own loader object
        return spec


_installed: CodeCache | None = None
_done = False


def install(*, reuse_code: bool = True, lazy: frozenset[str] = LAZY) -> CodeCache | None:
    """Both parts (or those asked for: `bench/startup.py` times each alone) for the rest
    of this process; the first call decides. Returns the code cache, if installed."""
    global _installed, _done
    if _done:
        return _installed
    _done = True
    cache = CodeCache() if reuse_code else None
    if cache is not None and "dataclasses" in sys.modules:  # imported before: patched now
        sys.modules["dataclasses"].exec = cache.exec
        cache_pending = None
    else:
        cache_pending = cache
    hook = _ImportHook(cache_pending, frozenset(lazy - sys.modules.keys()))
    if hook.pending:
        sys.meta_path.insert(0, hook)
    _installed = cache
    return cache
