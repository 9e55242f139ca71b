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

from shardc.cache_dir import read_regular
from shardc.runtime.execute.code_check import check_generated
from shardc.runtime.execute.kernels import numba_cache
from shardc.runtime.execute.kernels.aligned import result_array
from shardc.runtime.execute.kernels.math_run import ERF_P as _P
from shardc.runtime.execute.kernels.math_run import ERF_Q as _Q
from shardc.runtime.execute.kernels import vecmath

MIN_ELEMENTS = 1 << 15
"""Iteration spaces smaller than this run on the numpy path (numba's per-call cost and
compile time do not pay there)."""

def enabled() -> bool:
    """Whether fused kernels may run: numba importable and not switched off. Asked on
    every kernel call (tests and users switch `SHARDC_KERNELS` between calls), so the
    answer is kept for as long as the variable's raw value is the same object in
    `os.environ`'s own table: a dictionary lookup instead of `os.environ.get`'s encode,
    lookup and decode (0.8 of a fused call's 7 us, measured)."""
    raw = _ENV_DATA.get(_ENV_KEY) if _ENV_DATA is not None else os.environ.get("SHARDC_KERNELS")
    last = _ENABLED
    if last and raw is last[0]:
        return last[1]  # type: ignore[return-value]
    on = (os.environ.get("SHARDC_KERNELS") or "auto").lower() != "numpy" and _numba() is not None
    _ENABLED[:] = [raw, on]
    return on


_ENV_DATA: dict[object, object] | None = getattr(os.environ, "_data", None)
"""`os.environ`'s table (CPython's `os._Environ`, updated by every `os.environ` write),
or None where it has none: then `enabled` reads `os.environ.get`."""
_ENV_KEY: object = os.environ.encodekey("SHARDC_KERNELS") if _ENV_DATA is not None and hasattr(os.environ, "encodekey") else None  # type: ignore[attr-defined]
if _ENV_KEY is None:
    _ENV_DATA = None
_ENABLED: list[object] = []
"""[the raw value `enabled` last saw, its answer]."""


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
class Stage:
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
    nest: Nest | None = None  # what `source` is rendered from, for the hoisted variants
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
        with LOCK:
            if mine not in self.variants:
                source = self.nest.render(mine)
                check_kernel_source(source)
                try:
                    fn = compile_kernel(source)
                except KernelRefused:
                    fn = None
                self.variants[mine] = fn
            return self.variants[mine]


@dataclass
class Nest:
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
class InplaceUfunc:
    """A one-op elementwise body whose result overwrites a donated input: a gradient
    accumulator's `acc + reduce_scatter(dW)` (about 50 a dp=2 GPT step). Without it the
    numpy path computes a fresh result and `_write_donated` copies it into the input:
    an allocation and two passes where `ufunc(.., out=acc)` makes one, with the same
    ufunc loop, so the same bits. No loop nest: it needs no numba (it runs on the
    numpy path too) and never becomes a horizontal group's kernel (`stages` empty).
    `operands` are the body's block arguments, in the op's order; `target` the one
    written over."""

    ufunc: np.ufunc
    operands: tuple[int, ...]
    target: int
    stages: tuple[()] = ()
    donated: frozenset[int] = frozenset()

    def __call__(self, args: Sequence[object], sizes: Sequence[int]) -> list[object] | None:
        """[the target, updated], or None (the numpy path) unless every operand is an
        array of the target's dtype and the target spans the whole iteration space."""
        dst = args[self.target]
        if type(dst) is not np.ndarray or not dst.flags.writeable or dst.shape != tuple(sizes):
            return None
        ops = [args[k] for k in self.operands]
        for a in ops:
            if type(a) is not np.ndarray or a.dtype != dst.dtype:
                return None
        self.ufunc(*ops, out=dst)  # numpy buffers an operand that partly overlaps dst
        return [dst]


_ARG_CODES = {"array": 1, "scalar": 2, "const": 3, "bits": 4}
"""`FusedKernel._sig`'s code of each kind of parameter (0: donated)."""
_BITS = np.dtype(np.uint16)
"""How a bf16 array reaches a kernel: a view of its bits (`kernels/fused.py`'s BF16_BITS)."""


@dataclass
class FusedKernel:
    """An elementwise body as a few passes over memory. `params` say what each kernel
    argument is: ("array", k) the body's block argument k (broadcast to the iteration
    space), ("bits", k) the same for a bf16 array, passed as a uint16 view of its bits
    (numba has no bf16), ("scalar", k) a scalar block argument, ("const", value) a constant;
    `results` name each yielded value: ("slot", n) a temporary, ("arg", k) a block
    argument yielded as it is (or, built with `inplace`, written over: a donated buffer)."""

    stages: list[Stage]
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

    _sig: tuple[tuple[int, object], ...] | None = field(default=None, repr=False, compare=False)
    """Per kernel argument, decided once this call site's kernels are compiled: (0, k)
    a donated block argument, (1, k) an array, (2, k) a scalar, (3, value) a constant,
    (4, k) a bf16 array passed as its bits."""
    _plan0: tuple | None = field(default=None, repr=False, compare=False)
    """`_plans[frozenset()]`, the plan of a call with nothing passed unbroadcast, without
    the set made and looked up."""

    def __getstate__(self) -> dict[str, object]:
        # what a call decided is not data: decided again (and compiled again) on load
        return {**self.__dict__, "_plans": {}, "_sig": None, "_plan0": None}

    def __call__(self, args: Sequence[object], sizes: Sequence[int]) -> list[object] | None:
        """The body's results over the iteration space `sizes`, from the block arguments
        (inputs then inits, aligned to loop order), or None to take the numpy path.
        What does not change between calls of one call site (the compiled nests, what
        each kernel argument is, the plan of an unbroadcast call) is decided on the
        first and kept; per call only the arguments' layouts are looked at."""
        if self._failed or math.prod(sizes) < MIN_ELEMENTS or not enabled():
            return None
        sig = self._sig
        if sig is None:
            if not self._load():
                return None
            sig = self._sig = tuple((0 if q in self.donated else _ARG_CODES[kind], what) for q, (kind, what) in enumerate(self.params))
        shape = sizes if type(sizes) is tuple else tuple(sizes)
        call: list[object] = []
        flat_ok = True
        bcast: list[tuple[int, int]] | None = None  # (argument, loop) passed with extent 1 there
        for q, (code, what) in enumerate(sig):
            if code == 1 or code == 4:
                a = args[what]  # type: ignore[index]
                if type(a) is not np.ndarray or a.shape != shape:
                    if isinstance(a, np.ndarray) and a.ndim == len(shape) and all(e in (1, t) for e, t in zip(a.shape, shape)):
                        # unbroadcast, read at index 0 where its extent is 1: a stride-0
                        # view defeats LLVM's vectorization (a GELU nest 15x slower)
                        got = [(q, d) for d, (e, t) in enumerate(zip(a.shape, shape)) if e != t]
                        bcast = got if bcast is None else bcast + got
                    else:
                        a = np.broadcast_to(a, shape)  # type: ignore[arg-type]
                if flat_ok and (bcast or not a.flags.c_contiguous):  # type: ignore[union-attr]
                    flat_ok = False
                call.append(a.view(_BITS) if code == 4 else a)  # type: ignore[union-attr]
            elif code == 2:
                call.append(args[what])  # type: ignore[index]
            elif code == 3:
                call.append(what)
            else:  # read and written by one nest: the caller's own array
                a = args[what]  # type: ignore[index]
                if not (isinstance(a, np.ndarray) and a.shape == shape and a.flags.writeable):
                    return None
                if flat_ok and not a.flags.c_contiguous:
                    flat_ok = False
                call.append(a)
        if bcast:
            plan = self._plans.get(key := frozenset(bcast))
            if plan is None:
                plan = self._plans[key] = self._plan(bcast)
        else:
            plan = self._plan0
            if plan is None:
                plan = self._plan0 = self._plans[frozenset()] = self._plan([])
        small, fns = plan
        if fns is None:
            return None  # numba refused a variant
        size = shape
        if flat_ok and self.n_loops != 1:  # every array in memory order: one long inner loop
            flat = (1,) * (self.n_loops - 1) + (math.prod(shape),)
            for q, (code, _) in enumerate(sig):
                if code < 2 or code == 4:
                    call[q] = call[q].reshape(flat)  # type: ignore[union-attr]
            shape = flat
        slots: list[np.ndarray | None] = [None] * self.n_slots
        for st, fn in zip(self.stages, fns):
            if fn is not None:
                # a buffer of its own per result, never one the nest reads: with the two
                # arrays aliased, LLVM's runtime alias check fails and the nest runs
                # unvectorized (an erf chain 4x slower, measured); numpy's allocator hands
                # back a warm freed block anyway
                outs = [result_array(shape, dt) for dt in st.dtypes]
                fn(*call, *(slots[r] for r in st.reads), *outs)  # type: ignore[misc]
                for w, o in zip(st.writes, outs):
                    slots[w] = o
                for w, q in st.donated:
                    slots[w] = call[q]  # type: ignore[assignment]
            else:
                assert st.ufunc is not None
                src = slots[st.reads[0]] if st.reads else call[st.arg]  # type: ignore[index]
                if st.writes[0] in small:
                    out = src if st.inplace else result_array(src.shape, st.dtypes[0])  # type: ignore[union-attr]
                else:
                    out = src if st.inplace and src.shape == shape else result_array(shape, st.dtypes[0])  # type: ignore[union-attr]
                slots[st.writes[0]] = st.ufunc(src, out=out)
        if shape is size:
            return [slots[n] if kind == "slot" else args[n] for kind, n in self.results]  # type: ignore[index]
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
        with LOCK:
            if not self._failed and any(st.source is not None and st.fn is None for st in self.stages):
                try:  # a forged source raises UnsafeCodeError: nothing of it runs
                    for st in self.stages:
                        if st.source is not None:
                            st.fn = compile_kernel(st.source)
                except KernelRefused:  # this body stays on numpy
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


_HELPERS: dict[tuple[str, str | None], tuple[str, dict[str, object]]] = {}
"""(kind, cache_dir()) -> `jit_helpers`' answer: a hash of the helpers' source (part of
the identity of every kernel calling them) and the helpers, compiled from their module
file there."""


def jit_helpers(
    kind: str, source: Callable[[], str], fns: Sequence[tuple[str, Callable[..., object], set[str]]], names: Mapping[str, object], fallback: str
) -> tuple[str, dict[str, object]]:
    """Helper functions kernels call, jit-compiled once per process and cache directory:
    `fns` gives each one's name in `source()`'s text, the function itself and its
    fastmath flags. Cached on disk as kernels are, from a module file (`_module`, kind
    `kind`) holding `source()`: a process compiling a new kernel loads them instead of
    compiling each again (0.11 s apiece, measured; a cached kernel holds their code
    already). Each compiled helper replaces its name in that module, so a later helper
    calls the compiled one. Without source to write (a frozen install) they compile in
    memory, identified by `fallback`. One place for the fused and the row kernels'."""
    where = cache_dir()
    got = _HELPERS.get((kind, where))
    if got is None:
        numba = _numba()
        assert numba is not None
        try:
            text = source()
        except (OSError, TypeError):
            namespace, cache, identity = {name: fn for name, fn, _ in fns}, False, fallback
        else:
            namespace, cache = _module(kind, text, names)
            identity = hashlib.sha256(text.encode()).hexdigest()
        out: dict[str, object] = {}
        for name, _, fastmath in fns:
            out[name] = namespace[name] = numba_cache.njit(numba, namespace[name], cache, nogil=True, error_model="numpy", fastmath=fastmath)  # type: ignore[arg-type]
        got = _HELPERS[(kind, where)] = (identity, out)
    return got


def kernel_helpers() -> tuple[str, dict[str, object]]:
    """The functions kernels call (`exp32`, `tanh32` from `kernels.vecmath`, `erf32`),
    jit-compiled (`jit_helpers`). FMA contraction is allowed inside vecmath's (their
    error bound holds either way), never in erf32's or the kernels' own statements."""
    identity, fns = jit_helpers(
        "helpers",
        lambda: f"{inspect.getsource(vecmath)}\n_P = {_P!r}\n_Q = {_Q!r}\n\n\n{inspect.getsource(_erf32_py)}",
        [("exp32", vecmath.exp32, {"contract"}), ("tanh32", vecmath.tanh32, {"contract"}), ("_erf32_py", _erf32_py, set())],
        {},
        vecmath.VERSION,
    )
    return identity, {"exp32": fns["exp32"], "tanh32": fns["tanh32"], "erf32": fns["_erf32_py"]}


def _vecmath() -> dict[str, object]:
    """`kernels.vecmath`'s functions, jit-compiled (`kernel_helpers`)."""
    fns = kernel_helpers()[1]
    return {"exp32": fns["exp32"], "tanh32": fns["tanh32"]}


LOCK = threading.RLock()
_COMPILED: dict[str, Callable[..., None]] = {}
_CHECKED: set[str] = set()


def check_kernel_source(source: str) -> None:
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
        try:  # a regular file only (a FIFO there would block the read forever)
            same = read_regular(path, len(source.encode()) + 1) == source.encode()
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


class KernelRefused(Exception):
    """numba (or writing its module file) failed on a kernel's source: the caller takes
    its numpy path. Never raised for a source that is not what shardc generates: that
    is `UnsafeCodeError`, which callers let through (a forged cache entry: nothing of it
    runs, and the user hears of it)."""


def njit_kernel(kind: str, source: str, kits: Sequence[Callable[[], tuple[str, dict[str, object]]]]) -> Callable[..., None]:
    """`source`'s `kernel`, checked (`check_kernel_source`) and jit-compiled from a file in
    `cache_dir()` (`_module`, kind `kind`) so that numba caches its machine code between
    processes (in sealed files: `numba_cache`), with the helpers of `kits` (`kernel_helpers`, `rows_run._row_helpers`) defined.
    What the kernel calls is part of its identity, since numba's cache sees only
    `source`: vecmath's version and each kit's hash name the file."""
    check_kernel_source(source)  # a cache hit's kernels come from the entry: data until checked
    numba = _numba()
    assert numba is not None
    try:
        ids: list[str] = []
        names: dict[str, object] = {"np": np, "math": math}
        for kit in kits:
            identity, fns = kit()
            ids.append(identity)
            names.update(fns)
        namespace, cache = _module(kind, "\n".join([vecmath.VERSION, *ids, source]), names, source)
        return numba_cache.njit(numba, namespace["kernel"], cache, nogil=True, error_model="numpy")  # type: ignore[arg-type,no-any-return]
    except Exception as e:
        raise KernelRefused(f"{kind}: {type(e).__name__}: {e}") from e


_ONCE: dict[str, Callable[..., None] | None] = {}


def jit_once(kind: str, source: str) -> Callable[..., None] | None:
    """A fixed loop's `kernel` (one with no helpers: the bf16 casts and sums), jit-compiled
    once per process (`njit_kernel`, kind `kind`), or None where fused kernels are off
    (`enabled`, asked at every call) or numba refused it (asked once)."""
    if not enabled():
        return None
    if kind not in _ONCE:
        try:
            _ONCE[kind] = njit_kernel(kind, source, [])
        except KernelRefused:
            _ONCE[kind] = None
    return _ONCE[kind]


def compile_kernel(source: str) -> Callable[..., None]:
    """The fused kernel of `source`, jit-compiled once per process (`njit_kernel`)."""
    fn = _COMPILED.get(source)
    if fn is None:
        fn = _COMPILED[source] = njit_kernel("kernel", source, (kernel_helpers,))
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
    for (kind, _), (_, fns) in list(_HELPERS.items()):
        if kind != "helpers":
            continue  # the row kernels' helpers are not counted here
        out["helpers_compiled"] += sum(sum(f.stats.cache_misses.values()) for f in fns.values())  # type: ignore[attr-defined]
    return out


def active_path() -> str:
    """Which path runs fused elementwise bodies in this process, for benchmark headers."""
    return "numba (shardc.runtime.codegen.kernels.fused)" if enabled() else "numpy"
