"""Matrix products through a BLAS called with ctypes, operands passed as laid out (no copies).

Two libraries: numpy's own OpenBLAS (already in the process; its 64-bit-integer CBLAS
entry points) and MKL (`libmkl_rt` from PyPI's `mkl` wheel, the `[fast]` extra, what
PyTorch's CPU build runs; loaded RTLD_LOCAL beside OpenBLAS). `SHARDC_BLAS` picks:
`auto` (the default) runs the one measured faster on this machine (`blas_choice.py`:
on an AMD EPYC OpenBLAS's AVX-512 kernels were 2.2-2.4x MKL's, on Intel MKL may lead),
`mkl` or `openblas` name one, `numpy` runs `np.matmul` everywhere. Read at every call.

`matmul(a, b, out)` takes 2-D or batched float32/float64 operands as numpy views: each
matrix whose last two axes have one unit stride and the other at least its width goes in
as is, a transpose as BLAS's trans flag and the other stride as its leading dimension.
A batch is one call: `cblas_?gemm_batch_strided` where the batch axes fold into one
stride, `cblas_?gemm_batch` over pointer arrays otherwise (a per-head view of a fused
qkv array, a weight broadcast with stride 0). A column-major `out` is written as the
transposed product. Anything else (other dtypes, a row stride below the width, negative
strides, `out` overlapping an input) runs `np.matmul`, as do products too small for a
ctypes call's cost (measured: below `MIN_FLOPS`, numpy's C loop is as fast).
Against `np.matmul` on the same OpenBLAS this saves the copies numpy makes of views it
cannot pass, the extra pass for a scale or an accumulation (BLAS's alpha and beta) and
the Python-visible loop over a batch.

Per call only what depends on where the arrays live is looked at (alignment, overlap,
the data pointers): every other decision (which entry point, trans flags, leading
dimensions, batch strides, pointer offsets) is made once per operand layout (shapes,
strides, dtypes) and kept (`_Recipe`); a GPT step's call sites see the same layouts
every step. That took a tiny step's contractions from 40 to 28 us a call.

Threads: the runtime's ranks are processes, so each library runs on one thread (MKL's
sequential layer: no OpenMP runtime loaded; OpenBLAS's count set for the process, which
numpy's matmul shares) unless `SHARDC_BLAS_THREADS=n` asks for n. `SHARDC_MKL` names
MKL's library file. MKL's 64-bit-integer entry points (`*_64`) are used, so its
interface layer does not matter.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import sys
import threading
from dataclasses import dataclass
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

MIN_FLOPS = 1 << 22
"""Calls with fewer multiply-adds (the whole batch) run `np.matmul`: measured on 1 thread,
MKL's lead does not pay ctypes' per-call cost (about 6 us) below 4M (a 128x256x128
product: even; 128^3: numpy 9% faster)."""
MIN_MATRIX_FLOPS = 1 << 20
"""Batches of smaller matrices run `np.matmul` too: MKL's batched call was 8-20% slower
than numpy's loop on 64x64x64 and 128x64x64 matrices, 15-30% faster from 128x64x128 up."""

_ROW, _NOTRANS, _TRANS = 101, 111, 112  # CBLAS_LAYOUT / CBLAS_TRANSPOSE
_SEQUENTIAL, _INTEL = 1, 0  # MKL_THREADING_*

_I = ctypes.c_int64
_P = ctypes.c_void_p
_E = ctypes.c_int

LIBRARIES = ("mkl", "openblas")
"""The libraries `SHARDC_BLAS` may name (besides `auto` and `numpy`)."""


class _Lib:
    """One loaded BLAS and its typed entry points per float dtype: `gemm`, and where the
    library has them, the strided and pointer-array batch calls (MKL's signatures, which
    OpenBLAS 0.3.30+ shares). Every integer is 64-bit: MKL's `*_64` entry points, numpy's
    OpenBLAS built with 64-bit integers."""

    def __init__(self, name: str, path: str, threads: int, version: str, lib: ctypes.CDLL, names: dict[str, list[str]], batch_min: int = 0) -> None:
        self.name = name
        self.batch_min = batch_min  # batch calls only for matrices of more multiply-adds
        self.path = path
        self.threads = threads
        self.version = version
        self.lib = lib
        self.gemm: dict[np.dtype, Any] = {}
        self.strided: dict[np.dtype, Any] = {}
        self.batch: dict[np.dtype, Any] = {}
        for dt, c, s in ((np.dtype(np.float32), ctypes.c_float, "s"), (np.dtype(np.float64), ctypes.c_double, "d")):
            g = _symbol(lib, [n.format(s) for n in names["gemm"]])
            if g is None:
                raise AttributeError(f"no {s}gemm entry point")
            g.argtypes = [_E, _E, _E, _I, _I, _I, c, _P, _I, _P, _I, c, _P, _I]
            g.restype = None
            self.gemm[dt] = g
            st = _symbol(lib, [n.format(s) for n in names["strided"]])
            if st is not None:
                st.argtypes = [_E, _E, _E, _I, _I, _I, c, _P, _I, _I, _P, _I, _I, c, _P, _I, _I, _I]
                st.restype = None
                self.strided[dt] = st
            b = _symbol(lib, [n.format(s) for n in names["batch"]])
            if b is not None:
                b.argtypes = [_E, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _I, _P]
                b.restype = None
                self.batch[dt] = b

    def describe(self) -> str:
        return f"{self.version} ({self.threads} thread{'s' if self.threads > 1 else ''}; shardc.runtime.execute.kernels.blas)"


def _symbol(lib: ctypes.CDLL, names: list[str]) -> Any:
    for n in names:
        try:
            return getattr(lib, n)
        except AttributeError:
            continue
    return None


_LOADED: dict[str, _Lib | None] = {}  # per library name, loaded at most once a process
_ACTIVE: dict[str, _Lib | None] = {}  # per `SHARDC_BLAS` value: the library it runs
_AGREED: list[str] = []  # the `auto` choice this process was told by `agree`
_LOCK = threading.RLock()
_CALLS = [0]  # products run through a loaded BLAS in this process (tests and benches read it)


def calls() -> int:
    """How many products this process has run through `matmul`'s BLAS calls so far."""
    return _CALLS[0]


def library_path() -> str | None:
    """`SHARDC_MKL`, else libmkl_rt from the installed `mkl` wheel (`sys.prefix/lib`)."""
    env = os.environ.get("SHARDC_MKL")
    if env:
        return env
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        for name in ("libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so"):
            p = Path(prefix) / "lib" / name
            if p.exists():
                return str(p)
    return None


def openblas_path() -> str | None:
    """numpy's own OpenBLAS: the one its wheel ships in `numpy.libs` (scipy's, mapped in
    the same process, is another build with 32-bit integers), else an OpenBLAS this
    process has mapped."""
    found = sorted(Path(np.__file__).parent.parent.glob("numpy.libs/lib*openblas*.so*"))
    if found:
        return str(found[0])
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(" ", 1)[-1].strip()
                if "openblas" in os.path.basename(path).lower() and ".so" in path:
                    return path
    except OSError:
        pass
    return None


_warned: set[str] = set()


def warn_once(msg: str) -> None:
    """`shardc: warning: msg` on stderr, once per process and message."""
    if msg not in _warned:
        _warned.add(msg)
        print(f"shardc: warning: {msg}", file=sys.stderr)


def _threads() -> int:
    text = os.environ.get("SHARDC_BLAS_THREADS", "1")
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        warn_once(f"SHARDC_BLAS_THREADS={text!r} is not a positive integer; BLAS runs on 1 thread")
        return 1
    return n


def _loaded(name: str) -> _Lib | None:
    """Library `name`, loaded once per process (None when absent or unusable)."""
    if name not in _LOADED:
        with _LOCK:
            if name not in _LOADED:
                _LOADED[name] = _load_mkl() if name == "mkl" else _load_openblas()
    return _LOADED[name]


_MKL_NAMES = {"gemm": ["cblas_{}gemm_64"], "strided": ["cblas_{}gemm_batch_strided_64"], "batch": ["cblas_{}gemm_batch_64"]}
# numpy's wheels rename OpenBLAS's symbols (`scipy_` prefix, `64_` suffix); the strided
# batch call kept its plain name in 0.3.31's.
_OPENBLAS_NAMES = {
    "gemm": ["scipy_cblas_{}gemm64_", "cblas_{}gemm64_"],
    "strided": ["scipy_cblas_{}gemm_batch_strided64_", "cblas_{}gemm_batch_strided64_", "cblas_{}gemm_batch_strided"],
    "batch": ["scipy_cblas_{}gemm_batch64_", "cblas_{}gemm_batch64_"],
}


def _load_mkl() -> _Lib | None:
    path = library_path()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        threads = _threads()
        # Before any other MKL call: the sequential layer loads no OpenMP runtime at all.
        lib.MKL_Set_Threading_Layer(ctypes.c_int(_SEQUENTIAL if threads == 1 else _INTEL))
        lib.MKL_Set_Num_Threads(ctypes.c_int(threads))
        buf = ctypes.create_string_buffer(256)
        version = "MKL"
        if hasattr(lib, "MKL_Get_Version_String"):
            lib.MKL_Get_Version_String(buf, ctypes.c_int(len(buf)))
            text = buf.value.decode(errors="replace")
            found = re.search(r"Version ([0-9.]+)", text)
            version = f"MKL {found.group(1)}" if found else text.strip() or "MKL"
        return _Lib("mkl", path, threads, version, lib, _MKL_NAMES)
    except (OSError, AttributeError) as e:  # not MKL, or a build without these entry points
        if os.environ.get("SHARDC_MKL"):
            warn_once(f"SHARDC_MKL={path}: not a usable MKL ({e}); contractions run numpy's matmul")
        return None


OPENBLAS_SMALL = 100 * 100 * 100
"""OpenBLAS's batch calls (0.3.31, numpy's DYNAMIC_ARCH build) crash on matrices of at
most this many multiply-adds: their small-matrix path jumps to a kernel's table offset
instead of its address (measured: 3 x 100^3 crashes, 3 x 101x100x100 is exact). Smaller
batches run `np.matmul`; the speed thresholds (`MIN_MATRIX_FLOPS`) already send them
there, this bound holds when tests lower those."""


def _load_openblas() -> _Lib | None:
    """numpy's OpenBLAS (already in the process: no second copy is loaded), when it is a
    64-bit-integer build with the CBLAS entry points. Its thread count is the process's
    (numpy's matmul shares it): set here to `SHARDC_BLAS_THREADS`, 1 unless asked, since
    the runtime's ranks are processes sharing the cores."""
    path = openblas_path()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        config = _symbol(lib, ["scipy_openblas_get_config64_", "openblas_get_config64_", "openblas_get_config"])
        core = _symbol(lib, ["scipy_openblas_get_corename64_", "openblas_get_corename64_", "openblas_get_corename"])
        setter = _symbol(lib, ["scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads"])
        if config is None or setter is None:
            return None
        config.restype = ctypes.c_char_p
        text = (config() or b"").decode(errors="replace")
        if "USE64BITINT" not in text.split():
            return None  # 32-bit integers: not the signatures declared here
        threads = _threads()
        setter.argtypes = [ctypes.c_int]
        setter.restype = None
        setter(threads)
        found = re.search(r"OpenBLAS ([0-9]+\.[0-9]+\.[0-9]+)", text)
        version = f"OpenBLAS {found.group(1)}" if found else "OpenBLAS"
        if core is not None:
            core.restype = ctypes.c_char_p
            version += f" {(core() or b'').decode(errors='replace')}".rstrip()
        return _Lib("openblas", path, threads, version, lib, _OPENBLAS_NAMES, batch_min=OPENBLAS_SMALL)
    except (OSError, AttributeError):
        return None


def _choice() -> str:
    return os.environ.get("SHARDC_BLAS", "auto")


def _active() -> _Lib | None:
    """The library products run on under the current `SHARDC_BLAS` (read at every call:
    a dict lookup), None for numpy's matmul."""
    choice = _choice()
    try:
        return _ACTIVE[choice]
    except KeyError:
        pass
    with _LOCK:
        if choice not in _ACTIVE:
            _ACTIVE[choice] = _resolve(choice)
    return _ACTIVE[choice]


def _resolve(choice: str) -> _Lib | None:
    c = choice.strip().lower()
    if c == "numpy":
        return None
    if c in LIBRARIES:
        warned = len(_warned)
        lib = _loaded(c)
        if lib is None and len(_warned) == warned:  # the loader said nothing of why
            warn_once(f"SHARDC_BLAS={choice}: {c} is not available here; contractions run numpy's matmul")
        return lib
    if c != "auto":
        warn_once(f"SHARDC_BLAS={choice!r} is not one of auto, {', '.join(LIBRARIES)}, numpy; using auto")
    if _AGREED:
        return _loaded(_AGREED[0]) if _AGREED[0] != "numpy" else None
    from shardc.runtime.execute.kernels import blas_choice

    name = blas_choice.choose(_loaded, LIBRARIES, library_files())
    return _loaded(name) if name != "numpy" else None


def hold_threads() -> None:
    """numpy's OpenBLAS at the runtime's thread count (`SHARDC_BLAS_THREADS`, 1 unless
    asked) from the moment a module is compiled or loaded, not from its first float32
    product through this module: a program whose products all run elsewhere (bf16 on
    oneDNN) left numpy's own matmuls and dots at OpenBLAS's default, a spinning thread
    per core, and ranks sharing the cores fought over them. The tp=2 `--precision bf16`
    GPT step (n_layer 4) under `mpiexec -n 2` on 2 cores took 224-230 ms, 107-111 ms
    with the count held (AMD EPYC Zen 4, measured). Loading sets it (`_load_openblas`)."""
    _loaded("openblas")


def mkl_library() -> ctypes.CDLL | None:
    """MKL as `matmul` loads it (its threading layer set before any other call), for
    kernels calling its other entry points (`bf16_gemm.py`); None where it is absent."""
    lib = _loaded("mkl")
    return lib.lib if lib is not None else None


def library_files() -> tuple[str | None, ...]:
    """The files of the libraries `auto` chooses between (MKL's, OpenBLAS's; None where
    absent): what `blas_choice` keys its record by."""
    return library_path(), openblas_path()


def enabled() -> bool:
    """Whether products go through a loaded BLAS in this process now."""
    return _active() is not None


def active_name() -> str:
    """`mkl`, `openblas` or `numpy`: what runs products in this process now."""
    lib = _active()
    return lib.name if lib is not None else "numpy"


def active_path() -> str:
    """Which BLAS runs contractions in this process, for benchmark headers."""
    lib = _active()
    return lib.describe() if lib is not None else "numpy (its own BLAS)"


def agree(world: Any) -> None:
    """Collective over the mpi4py communicator `world`: under `SHARDC_BLAS=auto` every
    rank runs the library rank 0 chose, so a replicated product rounds the same on every
    rank even where hosts measured differently. An explicit choice is left as it is.
    Entry points call `agreement.agree`, which agrees the bf16 products' routing too."""
    if world.Get_size() == 1:
        return
    mine = active_name() if _choice().strip().lower() == "auto" and world.Get_rank() == 0 else None
    name = world.bcast(mine, root=0)
    if name is None or _choice().strip().lower() != "auto":
        return
    with _LOCK:
        _AGREED[:] = [name]
        _ACTIVE.pop(_choice(), None)


def _layout(strides: tuple[int, ...], rows: int, cols: int, item: int) -> tuple[int, int] | None:
    """(trans flag, leading dimension) of a row-major matrix view, or None."""
    s0, s1 = strides
    if cols == 1:
        s1 = item
    if rows == 1:
        s0 = cols * item
    if s1 == item and s0 >= cols * item and s0 % item == 0:
        return _NOTRANS, s0 // item
    if s0 == item and s1 >= rows * item and s1 % item == 0:
        return _TRANS, s1 // item
    return None


def _fold(shape: tuple[int, ...], *strides: tuple[int, ...]) -> tuple[list[int], list[list[int]]]:
    """Batch axes with size-1 axes dropped and neighbours merged where every operand's
    strides allow: the fewest axes that address the same matrices."""
    n: list[int] = []
    ss: list[list[int]] = [[] for _ in strides]
    for i, size in enumerate(shape):
        if size == 1:
            continue
        if n and all(s[-1] == st[i] * size for s, st in zip(ss, strides)):
            n[-1] *= size
            for s, st in zip(ss, strides):
                s[-1] = st[i]
            continue
        n.append(size)
        for s, st in zip(ss, strides):
            s.append(st[i])
    return n, ss


@functools.lru_cache(maxsize=1024)
def _offsets(n: tuple[int, ...], strides: tuple[tuple[int, ...], ...]) -> tuple[np.ndarray, ...]:
    """Byte offsets of every batch entry, per operand (C order over the batch axes)."""
    out = []
    for st in strides:
        off = np.zeros((), np.int64)
        for size, s in zip(n, st):
            off = np.add.outer(off, np.arange(size, dtype=np.int64) * s)
        out.append(off.reshape(-1))
    return tuple(out)


def _probe_address() -> Callable[[np.ndarray], int]:
    """A function giving an array's data pointer. `a.ctypes.data` builds a ctypes object
    (~1 us, three per product); reading the pointer from the array object's C struct
    (`PyArrayObject.data`, right after the object header) costs a tenth of that. Used
    only where it agrees with `.ctypes.data` on probe arrays (a view at an offset, a
    transposed one), so an interpreter with another header layout keeps `.ctypes`."""
    offset = object.__basicsize__
    read = ctypes.c_void_p.from_address

    def fast(x: np.ndarray) -> int:
        return read(id(x) + offset).value or 0

    try:
        base = np.arange(24, dtype=np.float32).reshape(4, 6)
        probes = (base, base[1:, 2:], base.T[3:], np.empty(0, np.float64))
        if all(fast(x) == x.ctypes.data for x in probes if x.size):
            return fast
    except (ValueError, OSError, OverflowError):
        pass
    return lambda x: x.ctypes.data


_address = _probe_address()


def _fallback(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float, alpha: float = 1.0) -> np.ndarray:
    if beta == 0:
        np.matmul(a, b, out=out)
        if alpha != 1:
            out *= alpha
        return out
    if beta != 1:
        out *= beta
    prod = np.matmul(a, b)
    if alpha != 1:
        prod *= alpha
    out += prod
    return out


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float = 0.0, alpha: float = 1.0) -> np.ndarray:
    """`out = alpha * (a @ b) + beta * out` (numpy's matmul broadcasting over the batch
    axes, both operands at least 2-D), through MKL where the views allow; returns `out`.
    `alpha` is BLAS's own scale of the product: a contraction with a constant factor
    (attention's 1/sqrt(d)) costs no pass over its result."""
    _product(a, b, out, beta, alpha)
    return out


@dataclass(frozen=True)
class _Recipe:
    """How `_product` runs one layout of operands (shapes, strides, dtypes): every
    decision that does not depend on where the arrays live, made once per layout (a
    step's call sites see the same layouts every step) instead of at every call."""

    kind: str  # fallback | empty | k0 | gemm | strided | batch
    matrix_flops: int = 0  # m * n * k (against MIN_MATRIX_FLOPS, read at every call)
    flops: int = 0  # the whole batch's (against MIN_FLOPS)
    swap: bool = False  # column-major result: run out^T = b^T a^T (operands exchanged)
    args: tuple[int, ...] = ()  # gemm/strided: the integer arguments after the layout
    nbatch: int = 0
    offsets: np.ndarray | None = None  # batch: byte offsets of every matrix, (3, nbatch)
    arrays: tuple[np.ndarray, ...] = ()  # batch: trans flags and sizes (kept alive)
    addresses: tuple[int, ...] = ()  # ... and their addresses


_FALLBACK = _Recipe("fallback")
_RECIPES: dict[tuple[object, ...], _Recipe] = {}
MAX_RECIPES = 4096
"""Layouts whose recipe is kept; past this many the table is emptied. 0: every call
decides afresh (tests compare the two)."""


def _recipe(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> _Recipe:
    key = (a.shape, a.strides, b.shape, b.strides, out.shape, out.strides, a.dtype, b.dtype, out.dtype)
    r = _RECIPES.get(key)
    if r is None:
        if len(_RECIPES) >= MAX_RECIPES:
            _RECIPES.clear()
        r = _RECIPES[key] = _plan(a, b, out)
    return r


def _plan(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> _Recipe:
    dt = out.dtype
    if a.ndim < 2 or b.ndim < 2 or a.dtype != dt or b.dtype != dt or dt.char not in "fd":
        return _FALLBACK
    m, k = a.shape[-2:]
    n = b.shape[-1]
    bshape = out.shape[:-2]
    if b.shape[-2] != k or out.shape[-2:] != (m, n):
        return _FALLBACK
    if a.shape[:-2] != bshape or b.shape[:-2] != bshape:
        try:
            if np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) != bshape:
                return _FALLBACK
        except ValueError:
            return _FALLBACK
    if out.size == 0:
        return _Recipe("empty")
    if k == 0:
        return _Recipe("k0")
    nbatch = out.size // (m * n)
    flops = (m * n * k, nbatch * m * n * k)
    item = dt.itemsize
    co = _layout(out.strides[-2:], m, n, item)
    if co is None:
        return _FALLBACK
    swap = co[0] == _TRANS
    if swap:  # column-major result: out^T = b^T a^T, row-major
        a, b, out = b.swapaxes(-1, -2), a.swapaxes(-1, -2), out.swapaxes(-1, -2)
        m, n = n, m
        co = _layout(out.strides[-2:], m, n, item)
        assert co is not None and co[0] == _NOTRANS
    la = _layout(a.strides[-2:], m, k, item)
    lb = _layout(b.strides[-2:], k, n, item)
    if la is None or lb is None:
        return _FALLBACK
    ldc = co[1]
    if nbatch == 1:
        return _Recipe("gemm", *flops, swap, (la[0], lb[0], m, n, k, la[1], lb[1], ldc))
    nb = len(bshape)
    sa = (0,) * (nb - a.ndim + 2) + tuple(s if d != 1 else 0 for s, d in zip(a.strides[:-2], a.shape[:-2]))
    sb = (0,) * (nb - b.ndim + 2) + tuple(s if d != 1 else 0 for s, d in zip(b.strides[:-2], b.shape[:-2]))
    sizes, (fa, fb, fc) = _fold(bshape, sa, sb, out.strides[:-2])
    if any(s <= 0 for s in fc) or any(s < 0 for s in fa + fb):
        return _FALLBACK  # an output written twice, or negative strides
    # MKL's strided batch refuses (and leaves `out` unwritten) an output stride below one
    # matrix (`ldc * m`): heads interleaved in a row, as attention's `b t h d` result with
    # a batch of one; the pointer arrays take those.
    if len(sizes) == 1 and fa[0] and fb[0] and fa[0] % item == 0 and fb[0] % item == 0 and fc[0] % item == 0 and fc[0] >= ldc * m * item:
        args = (la[0], lb[0], m, n, k, la[1], fa[0] // item, lb[1], fb[0] // item, ldc, fc[0] // item, sizes[0])
        return _Recipe("strided", *flops, swap, args)
    # Batch axes that fold into no single stride, or a broadcast operand: pointer arrays.
    offsets = np.stack(_offsets(tuple(sizes), (tuple(fa), tuple(fb), tuple(fc))))
    ta = np.array([la[0]], np.int32)
    tb = np.array([lb[0]], np.int32)
    ints = np.array([m, n, k, la[1], lb[1], ldc, nbatch], np.int64)
    for x in (offsets, ta, tb, ints):
        x.flags.writeable = False
    arrays = (ta, tb, ints)
    return _Recipe("batch", *flops, swap, (), nbatch, offsets, arrays, tuple(x.ctypes.data for x in arrays))


@functools.lru_cache(maxsize=64)
def _scalars(alpha: float, beta: float, dt: np.dtype) -> tuple[np.ndarray, int]:
    """[alpha, beta] as `dt`, read-only, and its address (the pointer-array batch call)."""
    scal = np.array([alpha, beta], dt)
    scal.flags.writeable = False
    return scal, scal.ctypes.data


def _product(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float, alpha: float = 1.0) -> np.ndarray:
    r = _recipe(a, b, out)
    kind = r.kind
    if kind == "fallback":
        return _fallback(a, b, out, beta, alpha)
    if kind == "empty":
        return out
    if kind == "k0":
        if beta == 0:
            out[...] = 0
        else:
            out *= beta
        return out
    if r.matrix_flops < MIN_MATRIX_FLOPS or r.flops < MIN_FLOPS:
        return _fallback(a, b, out, beta, alpha)
    try:
        lib = _ACTIVE[os.environ.get("SHARDC_BLAS", "auto")]
    except KeyError:
        lib = _active()
    if (
        lib is None or not (a.flags.aligned and b.flags.aligned and out.flags.aligned)
        or np.may_share_memory(out, a) or np.may_share_memory(out, b)
    ):
        return _fallback(a, b, out, beta, alpha)
    dt = out.dtype
    pa, pb, pc = _address(a), _address(b), _address(out)
    if r.swap:  # the operands exchanged (views of the same memory: the same pointers)
        pa, pb = pb, pa
    if kind == "gemm":
        ta, tb, m, n, k, lda, ldb, ldc = r.args
        lib.gemm[dt](_ROW, ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)
    elif r.matrix_flops <= lib.batch_min:
        return _fallback(a, b, out, beta, alpha)
    elif kind == "strided" and dt in lib.strided:
        ta, tb, m, n, k, lda, sa, ldb, sb, ldc, sc, count = r.args
        lib.strided[dt](_ROW, ta, tb, m, n, k, alpha, pa, lda, sa, pb, ldb, sb, beta, pc, ldc, sc, count)
    elif kind == "batch" and dt in lib.batch:
        nbatch = r.nbatch
        assert r.offsets is not None
        ptrs = r.offsets + np.array([[pa], [pb], [pc]], np.int64)
        _, sp = _scalars(float(alpha), float(beta), dt)
        tap, tbp, ip = r.addresses
        pp = _address(ptrs)
        lib.batch[dt](
            _ROW, tap, tbp, ip, ip + 8, ip + 16, sp, pp, ip + 24, pp + 8 * nbatch, ip + 32,
            sp + dt.itemsize, pp + 16 * nbatch, ip + 40, 1, ip + 48,
        )
    else:  # a library without that batch call
        return _fallback(a, b, out, beta, alpha)
    _CALLS[0] += 1
    return out

__all__ = ["LIBRARIES", "MIN_FLOPS", "MIN_MATRIX_FLOPS", "active_name", "active_path", "agree", "calls", "enabled", "library_path", "matmul", "openblas_path"]
