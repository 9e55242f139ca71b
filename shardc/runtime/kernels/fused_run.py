"""The run time of fused elementwise kernels (`kernels/fused.py` builds them): the
`FusedKernel` a generated function calls, its stages and loop nests, and numba's
compilation and caches. No xDSL here, so a compile-cache hit loads none; fused.py
re-exports every name (tests that patch run-time state patch it here)."""

from __future__ import annotations

import ast
import hashlib
import inspect
import math
import os
import stat
import sys
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from shardc.runtime.codegen_safe import UnsafeCodeError, check_generated
from shardc.runtime.kernels.math_run import _ERF_P as _P  # pyright: ignore[reportPrivateUsage]
from shardc.runtime.kernels.math_run import _ERF_Q as _Q  # pyright: ignore[reportPrivateUsage]
from shardc.runtime.kernels import vecmath

MIN_ELEMENTS = 1 << 15
"""Iteration spaces smaller than this run on the numpy path (numba's per-call cost and
compile time do not pay there)."""

def enabled() -> bool:
    """Whether fused kernels may run: numba importable and not switched off."""
    if os.environ.get("SHARDC_KERNELS", "auto").lower() == "numpy":
        return False
    return _numba() is not None


_NUMBA: list[object] = []


def _numba() -> object | None:
    if not _NUMBA:
        try:
            import numba  # type: ignore[import-not-found]
        except Exception:  # not installed, or an incompatible build: the numpy path
            numba = None
        _NUMBA.append(numba)
    return _NUMBA[0]


def cache_dir() -> str | None:
    """The directory for kernel sources and numba's cache: `kernels/` in the compile
    cache's directory (`$SHARDC_CACHE_DIR`, else `$XDG_CACHE_HOME/shardc`, else
    `~/.cache/shardc`), created 0700. None (kernels compile in memory, nothing is
    written) when it is not a directory owned by this user that only this user can
    write, or a symlink."""
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    base = os.environ.get("SHARDC_CACHE_DIR") or os.path.join(xdg, "shardc")
    path = os.path.join(base, "kernels")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return path


@dataclass
class _Stage:
    """One pass over the iteration space: a compiled loop nest (`source`) or a numpy
    ufunc (`ufunc`, SIMD where numba would call libm per element: exp, log, tanh).
    `reads`/`writes` are temporary arrays by slot; a ufunc reads `reads[0]`, or the
    block argument `arg` when that is None, and may write into its input (`inplace`)."""

    source: str | None = None
    ufunc: Callable[..., np.ndarray] | None = None
    reads: list[int] = field(default_factory=list)
    writes: list[int] = field(default_factory=list)
    arg: int | None = None
    inplace: bool = False
    dtypes: list[np.dtype] = field(default_factory=list)  # of `writes` (kernel) or of the result (ufunc)
    donated: list[tuple[int, int]] = field(default_factory=list)  # (slot, kernel argument) stored in place
    nest: _Nest | None = None  # what `source` is rendered from, for the hoisted variants
    fn: Callable[..., None] | None = field(default=None, repr=False)
    variants: dict[frozenset[tuple[int, int]], Callable[..., None] | None] = field(default_factory=dict, repr=False)

    def __getstate__(self) -> dict[str, object]:
        # compiled code is not data: recompiled (from numba's cache) on load
        return {**self.__dict__, "fn": None, "variants": {}}

    def kernel_for(self, bcast: frozenset[tuple[int, int]]) -> Callable[..., None] | None:
        """The compiled nest for arguments passed unbroadcast: (q, d) in `bcast` says
        argument q has extent 1 along loop d and is read at index 0 there. Arguments
        broadcast along the innermost loop (a layernorm's per-row mean and variance) are
        loaded once per row, with what depends only on them. None where numba refuses
        the variant (the caller then takes the numpy path: the plain nest would index
        past the unbroadcast array)."""
        assert self.nest is not None
        mine = frozenset(p for p in bcast if p[0] in self.nest.loaded)
        if not mine:
            return self.fn
        with _LOCK:
            if mine not in self.variants:
                source = self.nest.render(mine)
                _check(source)
                try:
                    fn = _compile(source)
                except Exception:
                    fn = None
                self.variants[mine] = fn
            return self.variants[mine]


@dataclass
class _Nest:
    """A loop nest before rendering: its header lines, loads (name, array, kernel
    argument or None for a temporary), statements (name, statement, operand names) and
    stores (array, name); names come from `build_kernel`'s numbering only."""

    header: list[str]
    n_loops: int
    loads: list[tuple[str, str, int | None]]
    body: list[tuple[str, str, list[str]]]
    stores: list[tuple[str, str]]

    @property
    def loaded(self) -> frozenset[int]:
        """The keys (`_load_key`) of what the nest reads."""
        return frozenset(_load_key(array, q) for _, array, q in self.loads)

    def render(self, bcast: frozenset[tuple[int, int]]) -> str:
        """The kernel's source; an argument or temporary with (key, d) in `bcast` (keys:
        `_load_key`) is read at index 0 along loop d; loads constant along the innermost
        loop, and statements reading only them and loop-invariant values, move out of it."""
        n = self.n_loops
        idx = ", ".join(f"i{d}" for d in range(n))
        varying: set[str] = set()
        outer: list[str] = []
        inner: list[str] = []
        for name, array, q in self.loads:
            key = _load_key(array, q)
            at = ", ".join("0" if (key, d) in bcast else f"i{d}" for d in range(n))
            if (key, n - 1) in bcast:
                outer.append(f"{name} = {array}[{at}]")
            else:
                varying.add(name)
                inner.append(f"{name} = {array}[{at}]")
        for name, stmt, operands in self.body:
            if any(o in varying for o in operands):
                varying.add(name)
                inner.append(stmt)
            else:
                outer.append(stmt)
        inner += [f"{array}[{idx}] = {name}" for array, name in self.stores]
        lines = list(self.header)
        for d in range(n):
            if d == n - 1:
                lines += ["    " * (d + 1) + s for s in outer]
            lines.append("    " * (d + 1) + f"for i{d} in range(n[{d}]):")
        lines += ["    " * (n + 1) + s for s in inner]
        return "\n".join(lines) + "\n"


def _load_key(array: str, q: int | None) -> int:
    """A load's key in broadcast patterns: its kernel argument q, or -1 - slot for a
    temporary `r{slot}` (a ufunc's result over an unbroadcast argument, which keeps
    that argument's extent-1 loops)."""
    return q if q is not None else -1 - int(array[1:])


@dataclass
class FusedKernel:
    """An elementwise body as a few passes over memory. `params` say what each kernel
    argument is: ("array", k) the body's block argument k (broadcast to the iteration
    space), ("scalar", k) a scalar block argument, ("const", value) a constant;
    `results` name each yielded value: ("slot", n) a temporary, ("arg", k) a block
    argument yielded as it is (or, built with `inplace`, written over: a donated buffer)."""

    stages: list[_Stage]
    n_loops: int
    params: list[tuple[str, object]]
    results: list[tuple[str, int]]
    n_slots: int
    _failed: bool = False
    donated: frozenset[int] = frozenset()
    """Kernel arguments written in place (`build_kernel`'s `inplace`): passed unbroadcast."""
    _plans: dict = field(default_factory=dict, repr=False, compare=False)
    """`_plan`'s answer per broadcast pattern."""

    @property
    def source(self) -> str:
        return "\n".join(st.source for st in self.stages if st.source is not None)

    def __call__(self, args: Sequence[object], sizes: Sequence[int]) -> list[object] | None:
        """The body's results over the iteration space `sizes`, from the block arguments
        (inputs then inits, aligned to loop order), or None to take the numpy path."""
        if self._failed or math.prod(sizes) < MIN_ELEMENTS or not enabled() or not self._load():
            return None
        shape = tuple(sizes)
        call: list[object] = []
        flat_ok = True
        bcast: list[tuple[int, int]] = []  # (argument, loop) passed with extent 1 there
        for q, (kind, what) in enumerate(self.params):
            if q in self.donated:  # read and written by one nest: the caller's own array
                a = args[what]  # type: ignore[index]
                if not (isinstance(a, np.ndarray) and a.shape == shape and a.flags.writeable):
                    return None
                flat_ok = flat_ok and a.flags.c_contiguous
                call.append(a)
            elif kind == "array":
                a = args[what]  # type: ignore[index]
                if type(a) is not np.ndarray or a.shape != shape:
                    if isinstance(a, np.ndarray) and a.ndim == len(shape) and all(e in (1, t) for e, t in zip(a.shape, shape)):
                        # unbroadcast, read at index 0 where its extent is 1: a stride-0
                        # view defeats LLVM's vectorization (a GELU nest 15x slower)
                        bcast += [(q, d) for d, (e, t) in enumerate(zip(a.shape, shape)) if e != t]
                    else:
                        a = np.broadcast_to(a, shape)  # type: ignore[arg-type]
                flat_ok = flat_ok and not bcast and a.flags.c_contiguous
                call.append(a)
            else:
                call.append(args[what] if kind == "scalar" else what)  # type: ignore[index]
        plan = self._plans.get(key := frozenset(bcast))
        if plan is None:
            plan = self._plans[key] = self._plan(bcast)
        small, fns = plan
        if fns is None:
            return None  # numba refused a variant
        if flat_ok:  # every array in memory order: one long inner loop
            flat = (1,) * (self.n_loops - 1) + (math.prod(shape),)
            call = [c.reshape(flat) if kind == "array" else c for c, (kind, _) in zip(call, self.params)]  # type: ignore[union-attr]
            shape = flat
        slots: list[np.ndarray | None] = [None] * self.n_slots
        for st, fn in zip(self.stages, fns):
            if fn is not None:
                # a buffer of its own per result, never one the nest reads: with the two
                # arrays aliased, LLVM's runtime alias check fails and the nest runs
                # unvectorized (an erf chain 4x slower, measured); numpy's allocator hands
                # back a warm freed block anyway
                outs = [np.empty(shape, dt) for dt in st.dtypes]
                fn(*call, *(slots[r] for r in st.reads), *outs)  # type: ignore[misc]
                for w, o in zip(st.writes, outs):
                    slots[w] = o
                for w, q in st.donated:
                    slots[w] = call[q]  # type: ignore[assignment]
            else:
                assert st.ufunc is not None
                src = slots[st.reads[0]] if st.reads else call[st.arg]  # type: ignore[index]
                if st.writes[0] in small:
                    out = src if st.inplace else np.empty(src.shape, st.dtypes[0])  # type: ignore[union-attr]
                else:
                    out = src if st.inplace and src.shape == shape else np.empty(shape, st.dtypes[0])  # type: ignore[union-attr]
                slots[st.writes[0]] = st.ufunc(src, out=out)
        size = tuple(sizes)
        return [
            slots[n].reshape(size) if kind == "slot" else args[n]  # type: ignore[union-attr,index]
            for kind, n in self.results
        ]

    def _plan(self, bcast: list[tuple[int, int]]) -> tuple[dict[int, tuple[int, ...]], list | None]:
        """What a call with these arguments passed unbroadcast runs, decided once per
        pattern (the shapes repeat every step): the temporaries kept small, and each
        stage's compiled variant (None where numba refused one)."""
        # A ufunc of an argument passed unbroadcast (log of a per-row sum) runs over that
        # argument alone, once per row, not over the whole space: its temporary keeps the
        # extent-1 loops and the nests read it at index 0 there (no full-size temporary
        # written and read, a log per row instead of per element: the GPT step's
        # recomputed attention probabilities 0.74 -> 0.45 ms a call, measured warm).
        small: dict[int, tuple[int, ...]] = {}
        if bcast:
            kept = {n for kind, n in self.results if kind == "slot"}
            dims_of: dict[int, list[int]] = {}
            for q, d in bcast:
                dims_of.setdefault(q, []).append(d)
            for st in self.stages:
                if st.ufunc is not None and st.writes[0] not in kept:
                    dims = small.get(st.reads[0]) if st.reads else dims_of.get(st.arg)  # type: ignore[arg-type]
                    if dims:
                        small[st.writes[0]] = tuple(dims)
        pattern = frozenset(bcast) | frozenset((-1 - w, d) for w, dims in small.items() for d in dims)
        fns = [st.kernel_for(pattern) if pattern and st.nest is not None else st.fn for st in self.stages]
        if any(fn is None and st.source is not None for fn, st in zip(fns, self.stages)):
            return small, None
        return small, fns

    def _load(self) -> bool:
        if self._failed:
            return False
        if all(st.fn is not None for st in self.stages if st.source is not None):
            return True  # compiled already: no lock on the hot path
        with _LOCK:
            if not self._failed and any(st.source is not None and st.fn is None for st in self.stages):
                try:
                    for st in self.stages:
                        if st.source is not None:
                            st.fn = _compile(st.source)
                except UnsafeCodeError:
                    raise  # a forged cache entry: nothing of it runs, and the user hears of it
                except Exception:  # numba refused a kernel: this body stays on numpy
                    self._failed = True
        return not self._failed


def _erf32_py(x: float) -> float:
    """erf as `kernels.math._erf_block` computes it for float32 (in float64)."""
    v = x
    if v > 4.0:
        v = 4.0
    elif v < -4.0:
        v = -4.0
    t = v * v
    num = t * _P[6] + _P[5]
    for c in (_P[4], _P[3], _P[2], _P[1], _P[0]):
        num = num * t + c
    den = t * _Q[5] + _Q[4]
    for c in (_Q[3], _Q[2], _Q[1], _Q[0]):
        den = den * t + c
    return num / den * v


_HELPERS: dict[str | None, tuple[str, dict[str, object]]] = {}
"""cache_dir() -> (a hash of the helpers' source, part of every kernel's identity; the
helpers compiled from their module file there)."""


def _helpers() -> tuple[str, dict[str, object]]:
    """The functions kernels call (`exp32`, `tanh32` from `kernels.vecmath`, `erf32`),
    jit-compiled. Cached on disk as the kernels are, from a module file in `cache_dir()`
    holding their source: a process compiling a new kernel loads them instead of
    compiling each again (0.11 s apiece, measured; a cached kernel holds their code
    already). FMA contraction is allowed inside vecmath's (their error bound holds either
    way), never in erf32's or the kernels' own statements."""
    where = cache_dir()
    got = _HELPERS.get(where)
    if got is None:
        numba = _numba()
        assert numba is not None
        try:
            source = f"{inspect.getsource(vecmath)}\n_P = {_P!r}\n_Q = {_Q!r}\n\n\n{inspect.getsource(_erf32_py)}"
        except (OSError, TypeError):  # no source to write (a frozen install): compiled in memory
            namespace, cache, identity = {"exp32": vecmath.exp32, "tanh32": vecmath.tanh32, "_erf32_py": _erf32_py}, False, vecmath.VERSION
        else:
            namespace, cache = _module("helpers", source, {})
            identity = hashlib.sha256(source.encode()).hexdigest()
        fns: dict[str, object] = {}
        for key, name, fastmath in (("exp32", "exp32", {"contract"}), ("tanh32", "tanh32", {"contract"}), ("erf32", "_erf32_py", set())):
            fns[key] = numba.njit(nogil=True, cache=cache, error_model="numpy", fastmath=fastmath)(namespace[name])  # type: ignore[attr-defined]
        got = _HELPERS[where] = (identity, fns)
    return got


def _vecmath() -> dict[str, object]:
    """`kernels.vecmath`'s functions, jit-compiled (`_helpers`)."""
    fns = _helpers()[1]
    return {"exp32": fns["exp32"], "tanh32": fns["tanh32"]}


_LOCK = threading.RLock()
_COMPILED: dict[str, Callable[..., None]] = {}
_CHECKED: set[str] = set()


def _check(source: str) -> None:
    """`check_generated` on a kernel's source, once per process per text: nests of one
    body recur (the GPT step's first step checked 147 broadcast variants, 8 distinct
    texts, in 0.07 s)."""
    if source not in _CHECKED:
        check_generated(ast.parse(source))
        _CHECKED.add(source)


def _module(kind: str, identity: str, names: Mapping[str, object], source: str | None = None) -> tuple[dict[str, object], bool]:
    """The namespace of `source` (default `identity`) run as a module of its own with
    `names` defined, and whether numba may cache what is compiled from it: then its file
    is `cache_dir()/{kind[0]}_{digest}.py`, digest a hash of `identity`."""
    source = identity if source is None else source
    digest = hashlib.sha256(identity.encode()).hexdigest()[:24]
    where = cache_dir()
    # A module of its own, importable by name: numba's cache rebuilds a kernel's
    # environment by importing the module its globals come from.
    module = types.ModuleType(f"shardc_{kind}_{digest}")
    namespace = module.__dict__
    namespace.update(names)
    filename, cache = f"<shardc-{kind}:{digest}>", False
    if where is not None:
        # The file only anchors numba's cache (its index is stamped with the file's mtime
        # and size); the code run is always `source` itself. A file that does not hold
        # exactly `source` (another writer's partial file, an edit) is replaced, which
        # also invalidates what numba cached for it.
        path = os.path.join(where, f"{kind[0]}_{digest}.py")
        try:
            with open(path, encoding="utf-8") as f:
                same = f.read() == source
        except OSError:
            same = False
        if not same:
            tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(source)
            os.replace(tmp, path)  # atomic: ranks compiling at once see one whole file
        filename, cache = path, True
        namespace["__file__"] = path
    exec(compile(source, filename, "exec"), namespace)
    sys.modules.setdefault(module.__name__, module)
    return namespace, cache


def _compile(source: str) -> Callable[..., None]:
    """The kernel of `source`, jit-compiled (once per process per source); from a file in
    `cache_dir()` so that numba caches its machine code between processes."""
    fn = _COMPILED.get(source)
    if fn is not None:
        return fn
    _check(source)  # a cache hit's kernels come from the entry: data until checked
    numba = _numba()
    assert numba is not None
    # what the kernel calls is part of its identity: numba's cache only sees `source`
    helpers, fns = _helpers()
    namespace, cache = _module("kernel", f"{vecmath.VERSION}\n{helpers}\n{source}", {"np": np, "math": math, **fns}, source)
    py = namespace["kernel"]
    fn = numba.njit(nogil=True, cache=cache, error_model="numpy")(py)  # type: ignore[attr-defined]
    _COMPILED[source] = fn
    return fn


def kernel_stats() -> dict[str, int]:
    """What numba did in this process, for benchmarks: kernels made (`sources`), those
    called (`called`), their compiled signatures, how many of those were loaded from
    numba's disk cache (`loaded`) or compiled (`compiled`), and the helpers compiled."""
    out = {"sources": len(_COMPILED), "called": 0, "signatures": 0, "loaded": 0, "compiled": 0, "helpers_compiled": 0}
    for fn in list(_COMPILED.values()):
        st = fn.stats  # type: ignore[attr-defined]
        n = len(fn.signatures)  # type: ignore[attr-defined]
        out["called"] += n > 0
        out["signatures"] += n
        out["loaded"] += sum(st.cache_hits.values())
        out["compiled"] += sum(st.cache_misses.values())
    for _, fns in list(_HELPERS.values()):
        out["helpers_compiled"] += sum(sum(f.stats.cache_misses.values()) for f in fns.values())  # type: ignore[attr-defined]
    return out


def active_path() -> str:
    """Which path runs fused elementwise bodies in this process, for benchmark headers."""
    return "numba (shardc.runtime.kernels.fused)" if enabled() else "numpy"
