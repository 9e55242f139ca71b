"""Fused elementwise kernels: a whole elementwise body in a few passes over memory.

The numpy path evaluates a fused generic's body (`shardc.runtime.fusion`) one ufunc
call per op, each reading and writing the whole array. Here the body becomes loop nests
compiled by numba: each element is loaded once per nest, the chain runs in registers,
each result is stored once. exp and tanh of float32 arrays stay in the nest as
`kernels.vecmath`'s arithmetic-only versions, which LLVM vectorizes (a GELU's tanh chain
in one nest 1.4x faster than split around numpy's tanh, measured); elsewhere (log,
float64) nests are split where the body applies one to an array: numba would call libm
per element (5-40 ns, measured) where numpy's SIMD loops take 1.5 ns, so those run as a
numpy ufunc in place between two nests (in place over a temporary read for the last
time). A nest never writes over an array it reads: aliased, LLVM's
runtime alias check fails and the loop runs unvectorized. Broadcast arguments are
passed unbroadcast and read at index 0 along their extent-1 loops (a stride-0 view
defeats vectorization too); those broadcast along the innermost loop are read once per
row, with what depends only on them.
Chosen by measurement on the GPT step's chains (GELU and its derivative, layernorm,
softmax with the causal bias, residual adds, AdamW): a GELU-derivative chain ran 4.6x
faster than numpy with numba, 1.2x with numexpr (blocked evaluation), so numexpr is
not used; the step's elementwise time fell from about 100 ms to 38 ms.

The kernel's source follows the IR-is-data rule of `shardc.runtime.codegen_safe` at its
strictest: it is built from the fixed templates below, keyed by op class, over names
that are only numbering (`q3` arguments, `x7` values, `r1`/`w0` temporaries); constants
and scalar operands are kernel arguments, never text. A body with any op outside the
whitelist (a gather, an assert, `linalg.index`, a value from outside the body other
than a scalar constant) keeps the numpy path, as does a body
where no pass would be saved.

Kernels compile lazily, on the first call with at least `MIN_ELEMENTS` elements (small
arrays, and so most tests, never pay numba's compile time), and numba caches the
machine code on disk beside the kernel's source in a directory only the user can read
or write (`cache_dir`); the helpers kernels call (exp32, tanh32, erf32) are cached there
the same way. `SHARDC_KERNELS=numpy`, checked at every call, or numba not
installed (the `[fast]` extra) keeps today's numpy path everywhere.

What a process pays, measured on the GPT step (n_layer 12, n_embd 768) under
`mpiexec -n 2`: importing numba 0.14-0.22 s, then on the first kernel loaded or compiled
numba's CPU target, 0.32-0.45 s (its registries; importing scipy.linalg, for numba's BLAS
check, is 0.17 s of it); after that a cached kernel loads in 2-9 ms (15 signatures of 14
kernels: 0.05 s in all), so fewer or larger kernels would not pay. Cold, a kernel
compiles in 0.12-0.3 s; the AdamW group's took 6.4 s until it took tuples of
`horizontal.CHUNK` members.
"""

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
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from shardc.runtime.codegen_safe import check_generated
from shardc.runtime.dtypes import UnsupportedTypeError, np_dtype
from shardc.runtime.kernels.math import _ERF_P as _P  # pyright: ignore[reportPrivateUsage]
from shardc.runtime.kernels.math import _ERF_Q as _Q  # pyright: ignore[reportPrivateUsage]
from shardc.runtime.kernels import vecmath

MIN_ELEMENTS = 1 << 15
"""Iteration spaces smaller than this run on the numpy path (numba's per-call cost and
compile time do not pay there)."""

_BINARY: dict[type[Operation], str] = {
    arith.AddfOp: "({0} + {1})",
    arith.SubfOp: "({0} - {1})",
    arith.MulfOp: "({0} * {1})",
    arith.DivfOp: "({0} / {1})",
}
_UNARY: dict[type[Operation], str] = {
    arith.NegfOp: "(-{0})",
    mathd.SqrtOp: "math.sqrt({0})",
    mathd.RsqrtOp: "(1.0 / math.sqrt({0}))",
    mathd.AbsFOp: "abs({0})",
}
# Per element, numba calls libm's scalar exp/tanh (5-40 ns each, measured) where numpy
# runs SIMD loops (1.5 ns): over arrays these are a stage of their own, a numpy ufunc
# between two loop nests; on loop-invariant scalars they are computed once, in place.
_UFUNC: dict[type[Operation], Callable[..., np.ndarray]] = {mathd.ExpOp: np.exp, mathd.LogOp: np.log, mathd.TanhOp: np.tanh}
# ... except over float32, where these vectorizable versions keep them in the nest.
_VEC32: dict[type[Operation], str] = {mathd.ExpOp: "exp32({0})", mathd.TanhOp: "tanh32({0})"}
_SCALAR: dict[type[Operation], str] = {
    mathd.ExpOp: "math.exp({0})", mathd.LogOp: "math.log({0})", mathd.TanhOp: "math.tanh({0})",
    mathd.PowFOp: "({0} ** {1})",
}
# erf over f32 arrays: the numpy path's rational fit (kernels/math.py), the same float64
# operations in the same order, so results are the same; it is arithmetic only, no libm.
_ERF: dict[str, str] = {"float32": "erf32({0})", "float64": "math.erf({0})"}
_CAST: tuple[type[Operation], ...] = (arith.SIToFPOp, arith.ExtFOp, arith.TruncFOp)
# arith.cmpf predicates: ordered ones are false on NaN as Python's comparisons are;
# unordered ones are the negation of the opposite ordered one.
_CMPF: dict[int, str] = {
    1: "({0} == {1})", 2: "({0} > {1})", 3: "({0} >= {1})", 4: "({0} < {1})", 5: "({0} <= {1})",
    6: "(({0} < {1}) or ({0} > {1}))", 8: "(not (({0} < {1}) or ({0} > {1})))",
    9: "(not ({0} <= {1}))", 10: "(not ({0} < {1}))", 11: "(not ({0} >= {1}))", 12: "(not ({0} > {1}))", 13: "({0} != {1})",
}
_CMPI: dict[int, str] = {0: "({0} == {1})", 1: "({0} != {1})", 2: "({0} < {1})", 3: "({0} <= {1})", 4: "({0} > {1})", 5: "({0} >= {1})"}
# The element types a kernel handles, as the numba/numpy constructor named in its source.
_DTYPES: dict[str, str] = {"float32": "np.float32", "float64": "np.float64", "int32": "np.int32", "int64": "np.int64", "bool": "np.bool_"}


def _dtype(t: Attribute) -> np.dtype | None:
    """The runtime's dtype of `t` (`np_dtype`), None where it has none; callers keep only
    the `_DTYPES` a kernel handles."""
    try:
        return np_dtype(t)
    except UnsupportedTypeError:
        return None


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
        if flat_ok:  # every array in memory order: one long inner loop
            flat = (1,) * (self.n_loops - 1) + (math.prod(shape),)
            call = [c.reshape(flat) if kind == "array" else c for c, (kind, _) in zip(call, self.params)]  # type: ignore[union-attr]
            shape = flat
        fns = [st.kernel_for(pattern) if pattern and st.nest is not None else st.fn for st in self.stages]
        if any(fn is None and st.source is not None for fn, st in zip(fns, self.stages)):
            return None  # numba refused a variant
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
    numba = _numba()
    assert numba is not None
    # what the kernel calls is part of its identity: numba's cache only sees `source`
    helpers, fns = _helpers()
    namespace, cache = _module("kernel", f"{vecmath.VERSION}\n{helpers}\n{source}", {"np": np, "math": math, **fns}, source)
    py = namespace["kernel"]
    fn = numba.njit(nogil=True, cache=cache, error_model="numpy")(py)  # type: ignore[attr-defined]
    _COMPILED[source] = fn
    return fn


def build_kernel(
    block: Block, n_ins: int, yields: Sequence[SSAValue], arg_shaped: Sequence[bool], n_loops: int, inplace: Mapping[int, int] | None = None
) -> FusedKernel | None:
    """The passes for an all-parallel body yielding `yields`, or None when some op is
    off the whitelist or the passes would not be fewer than numpy's one per op.
    `arg_shaped[k]`: block argument k is an array. `inplace` maps a yield to the input
    block argument whose array it overwrites (a donated buffer, `shardc.runtime.donation`):
    the nest computing it stores into that same kernel argument (`q[i] = f(q[i], ...)`,
    one argument read and written, which LLVM vectorises; an output aliasing a distinct
    argument would not), and None is returned unless no later pass reads the argument."""
    inplace = dict(inplace or {})
    if n_loops == 0 or not yields:
        return None
    names: dict[SSAValue, str] = {}
    varying: set[SSAValue] = set()
    params: list[tuple[str, object]] = []
    param_of: dict[SSAValue, int] = {}  # array block argument -> its kernel argument
    counter = iter(range(1 << 30))
    pre: list[str] = []  # loop-invariant statements, in every kernel before its loops

    def constant(op: Operation) -> bool:
        val, dt = getattr(op, "value", None), _dtype(op.results[0].type)
        if not isinstance(val, FloatAttr | IntegerAttr) or dt is None or dt.name not in _DTYPES:
            return False
        q, x = len(params), f"x{next(counter)}"
        params.append(("const", np.asarray(val.value.data, dtype=dt)[()]))
        pre.append(f"{x} = q{q}")
        names[op.results[0]] = x
        return True

    for k, arg in enumerate(block.args):
        if arg.first_use is None:
            continue
        dt = _dtype(arg.type)
        if dt is None or dt.name not in _DTYPES:
            return None
        q, x = len(params), f"x{next(counter)}"
        names[arg] = x
        if arg_shaped[k]:
            params.append(("array", k))
            param_of[arg] = q
            varying.add(arg)
        else:
            params.append(("scalar", k))
            pre.append(f"{x} = {_DTYPES[dt.name]}(q{q})")
    # Stages in order: ("k", [(result, statement, operands)]) or ("u", op).
    stages: list[tuple[str, object]] = []
    n_varying = 0
    for op in list(block.ops)[:-1]:
        if len(op.results) != 1:
            return None
        res = op.results[0]
        dt = _dtype(res.type)
        if dt is None or dt.name not in _DTYPES:
            return None
        operands = list(op.operands)
        for o in operands:
            if o not in names and not (isinstance(o.owner, arith.ConstantOp) and constant(o.owner)):
                return None  # a value from outside the body that is not a scalar constant
        if isinstance(op, arith.ConstantOp):
            if not constant(op):
                return None
            continue
        vary = any(o in varying for o in operands)
        a = [names[o] for o in operands]
        if vary and type(op) in _UFUNC and not (dt.name == "float32" and type(op) in _VEC32):
            names[res] = f"x{next(counter)}"
            varying.add(res)
            stages.append(("u", op))
            n_varying += 1
            continue
        if type(op) in _BINARY:
            expr = _BINARY[type(op)].format(*a)
        elif type(op) in _UNARY:
            expr = _UNARY[type(op)].format(*a)
        elif vary and type(op) in _VEC32:  # float32: the cases above took the rest
            expr = _VEC32[type(op)].format(*a)
        elif isinstance(op, mathd.ErfOp) and dt.name in _ERF:
            expr = _ERF[dt.name].format(*a)
        elif not vary and type(op) in _SCALAR:
            expr = _SCALAR[type(op)].format(*a)
        elif isinstance(op, _CAST):
            expr = a[0]
        elif isinstance(op, arith.CmpfOp) and op.predicate.value.data in _CMPF:
            expr = _CMPF[op.predicate.value.data].format(*a)
        elif isinstance(op, arith.CmpiOp) and op.predicate.value.data in _CMPI:
            expr = _CMPI[op.predicate.value.data].format(*a)
        elif isinstance(op, arith.SelectOp):
            expr = f"({a[1]} if {a[0]} else {a[2]})"
        else:
            return None
        x = names[res] = f"x{next(counter)}"
        stmt = f"{x} = {_DTYPES[dt.name]}({expr})"
        if not vary:
            pre.append(stmt)
            continue
        varying.add(res)
        n_varying += 1
        if not stages or stages[-1][0] != "k":
            stages.append(("k", []))
        stages[-1][1].append((res, stmt, operands))  # type: ignore[union-attr]
    if any(y not in varying for y in yields):
        return None  # a yielded scalar or outside value: rare, numpy broadcasts it
    if len(stages) >= n_varying:
        return None  # no pass saved (a copy, a lone op, exp of a difference)
    # Which values cross stages (or are yielded) and so live in temporary arrays.
    defined: dict[SSAValue, int] = {}
    for t, (kind, what) in enumerate(stages):
        for res in [what.results[0]] if kind == "u" else [r for r, _, _ in what]:  # type: ignore[union-attr,misc]
            defined[res] = t
    last_use: dict[SSAValue, int] = {}
    for t, (kind, what) in enumerate(stages):
        for o in what.operands if kind == "u" else [o for _, _, ops in what for o in ops]:  # type: ignore[union-attr,misc]
            last_use[o] = t
    for y in yields:
        last_use[y] = len(stages)
    slot: dict[SSAValue, int] = {}
    for v, t in defined.items():
        if last_use.get(v, t) > t:
            slot[v] = len(slot)
    into: dict[SSAValue, int] = {}  # in-place yield -> the block argument it overwrites
    for j, k in inplace.items():
        y, arg = yields[j], block.args[k]
        t = defined.get(y)
        if t is None or stages[t][0] != "k" or arg not in param_of or y in into or yields.count(y) != 1:
            return None
        later = [o for kind, what in stages[t + 1 :] for o in (what.operands if kind == "u" else [o for _, _, ops in what for o in ops])]  # type: ignore[union-attr,misc]
        if arg in later:
            return None  # a later pass would read the overwritten value
        into[y] = k
    out_stages: list[_Stage] = []
    for t, (kind, what) in enumerate(stages):
        if kind == "u":
            op = what  # type: ignore[assignment]
            src, res = op.operands[0], op.results[0]  # type: ignore[union-attr]
            if res not in slot:
                slot[res] = len(slot)  # a ufunc always writes an array (maybe dead: rare)
            st = _Stage(ufunc=_UFUNC[type(op)], writes=[slot[res]], dtypes=[_dtype(res.type)])  # type: ignore[list-item]
            if src in slot:
                st.reads = [slot[src]]
                st.inplace = last_use.get(src) == t and src not in yields
            else:
                st.arg = param_of[src]
            out_stages.append(st)
            continue
        ops = what  # type: ignore[assignment]
        mine = {r for r, _, _ in ops}  # type: ignore[union-attr]
        reads: list[SSAValue] = []
        for _, _, operands in ops:  # type: ignore[union-attr]
            for o in operands:
                if o in varying and o not in mine and o not in reads:
                    reads.append(o)
        over = {r: param_of[block.args[into[r]]] for r, _, _ in ops if r in into}  # type: ignore[union-attr]
        writes = [r for r, _, _ in ops if r in slot and r not in over]  # type: ignore[union-attr]
        sig = [*(f"q{j}" for j in range(len(params))), *(f"r{slot[o]}" for o in reads if o not in param_of), *(f"w{slot[r]}" for r in writes)]
        header = [f"def kernel({', '.join(sig)}):", *(f"    {p}" for p in pre)]
        header.append(f"    n = w{slot[writes[0]]}.shape" if writes else f"    n = q{next(iter(over.values()))}.shape" if over else "    return")
        nest = _Nest(
            header,
            n_loops,
            [(names[o], f"q{param_of[o]}", param_of[o]) if o in param_of else (names[o], f"r{slot[o]}", None) for o in reads],
            [(names[r], stmt, [names[o] for o in operands]) for r, stmt, operands in ops],  # type: ignore[union-attr]
            [(f"w{slot[r]}", names[r]) for r in writes] + [(f"q{q}", names[r]) for r, q in over.items()],
        )
        source = nest.render(frozenset())
        _check(source)
        every = frozenset((q, d) for q in nest.loaded for d in range(n_loops))
        for q in nest.loaded:  # the unbroadcast variants are checked as the plain one is
            _check(nest.render(frozenset(p for p in every if p[0] == q)))
        _check(nest.render(every))
        st = _Stage(source=source, reads=[slot[o] for o in reads if o not in param_of], writes=[slot[r] for r in writes], dtypes=[_dtype(r.type) for r in writes], nest=nest)  # type: ignore[misc]
        st.donated = [(slot[r], q) for r, q in over.items()]
        out_stages.append(st)
    results = [("slot", slot[y]) if y in slot else ("arg", block.args.index(y)) for y in yields]  # type: ignore[arg-type]
    for j, k in inplace.items():
        results[j] = ("arg", k)  # the donated array itself, written by its nest
    donated = frozenset(param_of[block.args[k]] for k in inplace.values())
    return FusedKernel(out_stages, n_loops, params, results, len(slot), donated=donated)  # type: ignore[arg-type]


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


__all__ = ["MIN_ELEMENTS", "FusedKernel", "active_path", "build_kernel", "cache_dir", "enabled", "kernel_stats"]
