"""Matrix products through MKL's BLAS, operands passed as laid out (no copies).

numpy's matmul calls OpenBLAS; on the GPT step's operand views MKL's sgemm (what
PyTorch's CPU build runs) was 1.03-1.16x faster on the big projections and 1.13-1.42x on
attention's batched 128x128x64 products (1 thread, CPU time per shape). `libmkl_rt`
comes from PyPI's `mkl` wheel (the `[fast]` extra) and is loaded with ctypes,
RTLD_LOCAL, so it coexists with numpy's OpenBLAS in one process.

`matmul(a, b, out)` takes 2-D or batched float32/float64 operands as numpy views: each
matrix whose last two axes have one unit stride and the other at least its width goes in
as is, a transpose as BLAS's trans flag and the other stride as its leading dimension.
A batch is one call: `cblas_?gemm_batch_strided` where the batch axes fold into one
stride, `cblas_?gemm_batch` over pointer arrays otherwise (a per-head view of a fused
qkv array, a weight broadcast with stride 0). A column-major `out` is written as the
transposed product. Anything else (other dtypes, a row stride below the width, negative
strides, `out` overlapping an input) runs `np.matmul`, as do products too small for
MKL's per-call cost (measured: below `MIN_FLOPS`, numpy's C loop is as fast).

Per call only what depends on where the arrays live is looked at (alignment, overlap,
the data pointers): every other decision (which entry point, trans flags, leading
dimensions, batch strides, pointer offsets) is made once per operand layout (shapes,
strides, dtypes) and kept (`_Recipe`); a GPT step's call sites see the same layouts
every step. That took a tiny step's contractions from 40 to 28 us a call.

Threads: the runtime's ranks are processes, so MKL runs on its sequential layer (no
OpenMP runtime loaded, no threads to fight other ranks or numba's) unless
`SHARDC_BLAS_THREADS=n` asks for n threads. `SHARDC_MKL` names the library file;
`SHARDC_BLAS=numpy` (checked at every call) or MKL absent keeps numpy everywhere. The
64-bit-integer entry points (`*_64`) are used, so MKL's interface layer does not matter.
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


class _Mkl:
    """The loaded library and its typed entry points, per float dtype."""

    def __init__(self, lib: ctypes.CDLL, path: str, threads: int) -> None:
        self.path = path
        self.threads = threads
        self.gemm: dict[np.dtype, ctypes._CFuncPtr] = {}
        self.strided: dict[np.dtype, ctypes._CFuncPtr] = {}
        self.batch: dict[np.dtype, ctypes._CFuncPtr] = {}
        for dt, c, s in ((np.dtype(np.float32), ctypes.c_float, "s"), (np.dtype(np.float64), ctypes.c_double, "d")):
            g = getattr(lib, f"cblas_{s}gemm_64")
            g.argtypes = [_E, _E, _E, _I, _I, _I, c, _P, _I, _P, _I, c, _P, _I]
            g.restype = None
            st = getattr(lib, f"cblas_{s}gemm_batch_strided_64")
            st.argtypes = [_E, _E, _E, _I, _I, _I, c, _P, _I, _I, _P, _I, _I, c, _P, _I, _I, _I]
            st.restype = None
            b = getattr(lib, f"cblas_{s}gemm_batch_64")
            b.argtypes = [_E, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _I, _P]
            b.restype = None
            self.gemm[dt], self.strided[dt], self.batch[dt] = g, st, b
        buf = ctypes.create_string_buffer(256)
        try:
            lib.MKL_Get_Version_String(buf, ctypes.c_int(len(buf)))
            text = buf.value.decode(errors="replace")
            found = re.search(r"Version ([0-9.]+)", text)
            self.version = f"MKL {found.group(1)}" if found else text.strip()
        except AttributeError:
            self.version = "MKL"


_STATE: list[_Mkl | None] = []
_LOCK = threading.Lock()
_CALLS = [0]  # MKL calls made in this process (tests and benches read it)


def calls() -> int:
    """How many products this process has run through MKL so far."""
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


def _warn(msg: str) -> None:
    print(f"shardc: warning: {msg}", file=sys.stderr)


def _threads() -> int:
    text = os.environ.get("SHARDC_BLAS_THREADS", "1")
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        _warn(f"SHARDC_BLAS_THREADS={text!r} is not a positive integer; MKL runs on 1 thread")
        return 1
    return n


def _mkl() -> _Mkl | None:
    """The library, loaded once per process (None when absent or unusable)."""
    if _STATE:
        return _STATE[0]
    with _LOCK:
        if not _STATE:
            _STATE.append(_load())
    return _STATE[0]


def _load() -> _Mkl | None:
    path = library_path()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        threads = _threads()
        # Before any other MKL call: the sequential layer loads no OpenMP runtime at all.
        lib.MKL_Set_Threading_Layer(ctypes.c_int(_SEQUENTIAL if threads == 1 else _INTEL))
        lib.MKL_Set_Num_Threads(ctypes.c_int(threads))
        return _Mkl(lib, path, threads)
    except (OSError, AttributeError) as e:  # not MKL, or a build without these entry points
        if os.environ.get("SHARDC_MKL"):
            _warn(f"SHARDC_MKL={path}: not a usable MKL ({e}); contractions run numpy's matmul")
        return None


def enabled() -> bool:
    """Whether products go through MKL in this process now."""
    if os.environ.get("SHARDC_BLAS", "auto").lower() == "numpy":
        return False
    return _mkl() is not None


def active_path() -> str:
    """Which BLAS runs contractions in this process, for benchmark headers."""
    if enabled():
        m = _mkl()
        assert m is not None
        return f"{m.version} ({m.threads} thread{'s' if m.threads > 1 else ''}; shardc.runtime.kernels.blas)"
    return "numpy (its own BLAS)"


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
    if r.matrix_flops < MIN_MATRIX_FLOPS or r.flops < MIN_FLOPS or os.environ.get("SHARDC_BLAS", "auto").lower() == "numpy":
        return _fallback(a, b, out, beta, alpha)
    lib = _STATE[0] if _STATE else _mkl()
    if (
        lib is None or not (a.flags.aligned and b.flags.aligned and out.flags.aligned)
        or np.may_share_memory(out, a) or np.may_share_memory(out, b)
    ):
        return _fallback(a, b, out, beta, alpha)
    dt = out.dtype
    pa, pb, pc = _address(a), _address(b), _address(out)
    if r.swap:  # the operands exchanged (views of the same memory: the same pointers)
        pa, pb = pb, pa
    _CALLS[0] += 1
    if kind == "gemm":
        ta, tb, m, n, k, lda, ldb, ldc = r.args
        lib.gemm[dt](_ROW, ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)
        return out
    if kind == "strided":
        ta, tb, m, n, k, lda, sa, ldb, sb, ldc, sc, count = r.args
        lib.strided[dt](_ROW, ta, tb, m, n, k, alpha, pa, lda, sa, pb, ldb, sb, beta, pc, ldc, sc, count)
        return out
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
    return out


__all__ = ["MIN_FLOPS", "MIN_MATRIX_FLOPS", "active_path", "calls", "enabled", "library_path", "matmul"]
