"""Matrix products of bf16 operands with float32 accumulation.

A product of two bf16 numbers is exact in float32 (8-bit significands), so a bf16 GEMM
that accumulates in float32 computes what `linalg.matmul` with bf16 inputs and a float32
output means (each input extended to f32, multiply-added in f32), up to summation order.
Where the CPU has bf16 units (AMX or AVX512-BF16) MKL's `cblas_gemm_bf16bf16f32` runs
it (the `mkl` wheel of the `[fast]` extra; loaded as `blas.py` loads it): measured on an
Intel Xeon with AMX, one thread, a 2048x768x3072 product ran at about 4x numpy's float32
matmul (`bench/bf16_gemm.py`). Elsewhere the operands are widened to float32 and
multiplied by numpy's matmul: the same numbers, at float32 speed plus the casts (MKL's
own emulation on such CPUs was not measured and is not used).

Faster on such CPUs for some shapes is oneDNN's matmul (`onednn_matmul.py`), used
where its library is installed (the `onednn-cpu-gomp` wheel) for the products
`onednn_suits` picks: batched products (attention's per-head ones: 1.2-2.5x MKL at
n_embd 256 and 768) and 2-D ones up to `ONEDNN_MAX_FLOPS` multiply-adds with a
contraction of at most `ONEDNN_MAX_K` (1.1-1.6x MKL at n_embd 256); MKL with packed B
ran the larger 2-D products of n_embd 768 1.1-1.9x faster than oneDNN 3.2 and the
1024x1024x256 products 1.2-1.4x (CPU time, one thread, Intel Xeon with AMX), results
and operands 16-byte aligned as numpy allocates them. Aligned to 64 bytes and with
blocked weights, oneDNN beat MKL on every 2-D product whose `a` is not a transposed
view up to a contraction of 1024 (`ONEDNN_ROWS_MAX_K`): those go to oneDNN at any size.
MKL runs whatever oneDNN declines (a layout it refuses). Those rules come from the Intel
Xeon; where MKL's bf16 kernels are slow (AMD processors: 2-3x oneDNN's time on a Zen 4)
`auto` gives oneDNN every product, by a measurement kept per machine (`routing`,
`bf16_gemm_choice.py`).

`SHARDC_BF16_GEMM` picks: `auto` (the default: oneDNN, else MKL, where the CPU has bf16
units and the library loads), `onednn` (every product to oneDNN wherever it loads, MKL
behind it for the layouts it declines), `mkl` (MKL wherever it loads), `numpy` (the
widened float32 matmul). Read at every call.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import threading
from typing import Any

import numpy as np

from shardc.runtime.execute.kernels.bf16_cast import widen_bfloat16
from shardc.runtime.execute.kernels.aligned import aligned_empty
from shardc.runtime.execute.kernels.bf16_run import bf16_units, bfloat16
from shardc.runtime.execute.kernels import bf16_gemm_choice, blas, onednn_matmul

CHOICES = ("auto", "onednn", "mkl", "numpy")

_ROW, _NOTRANS, _TRANS = 101, 111, 112  # CBLAS_LAYOUT / CBLAS_TRANSPOSE
_I = ctypes.c_int64
_P = ctypes.c_void_p
_E = ctypes.c_int
_F32 = np.dtype(np.float32)


@functools.cache
def _mkl_gemm() -> Any:
    lib = blas.mkl_library()
    fn = getattr(lib, "cblas_gemm_bf16bf16f32_64", None) if lib is not None else None
    if fn is not None:
        fn.argtypes = [_E, _E, _E, _I, _I, _I, ctypes.c_float, _P, _I, _P, _I, ctypes.c_float, _P, _I]
        fn.restype = None
    return fn


ONEDNN_MAX_FLOPS = 1 << 28
ONEDNN_MAX_K = 768
"""The 2-D products `onednn_suits` gives oneDNN: at most this many multiply-adds and
this long a contraction (measured: see the module's docstring)."""


ONEDNN_ROWS_MAX_K = 1024
"""The 2-D products whose `a` has unit-stride rows (not a transposed view) go to oneDNN
at any size up to this long a contraction: with operands and result 64-byte aligned
(`aligned_empty`, `onednn_matmul.ALIGN_SOURCE_MIN_BYTES`) and `b`'s rows reordered into
oneDNN's blocked layout where they have unit stride (`onednn_matmul.BLOCKED_MIN_ROWS`),
oneDNN ran them faster than MKL (CPU time, one thread, Intel Xeon with AMX, GFLOP/s):
2048x768x2304 1,551 against 1,323; 1024x1024x256 1,436 against 1,153; with `b`
transposed 2048x768x3072 1,340 against 1,229, 1024x1024x256 1,276 against 1,145. Longer
contractions with `b` transposed ran faster on MKL (2048x3072x768: 1,546 against
1,177), as did every product with `a` transposed (the weight gradients: 768x2048x3072
1,289 against 846): those keep the `ONEDNN_MAX_FLOPS`/`ONEDNN_MAX_K` rule."""


def onednn_suits(shape: tuple[int, ...], k: int, a_rows: bool = False) -> bool:
    """Whether oneDNN runs a product of result `shape` contracting `k` (where it loads);
    `a_rows`: the left operand's rows have unit stride (`ONEDNN_ROWS_MAX_K`)."""
    if len(shape) > 2:
        return True
    if a_rows and k <= ONEDNN_ROWS_MAX_K:
        return True
    return k <= ONEDNN_MAX_K and shape[0] * shape[1] * k <= ONEDNN_MAX_FLOPS


PACK_MIN_FLOPS = 1 << 24
"""Products of at least this many multiply-adds pack B first (`_mkl_2d`)."""

_PACKED, _B_MATRIX = 151, 162  # CBLAS_STORAGE's CblasPacked, CBLAS_IDENTIFIER's CblasBMatrix


@functools.cache
def _mkl_pack() -> tuple[Any, Any, Any] | None:
    """MKL's pack-size, pack and compute entry points of the bf16 GEMM (None without them)."""
    lib = blas.mkl_library()
    names = ("cblas_gemm_bf16bf16f32_pack_get_size_64", "cblas_gemm_bf16bf16f32_pack_64", "cblas_gemm_bf16bf16f32_compute_64")
    fns = [getattr(lib, n, None) for n in names] if lib is not None else [None]
    if any(f is None for f in fns):
        return None
    size, pack, compute = fns
    size.argtypes, size.restype = [_E, _I, _I, _I], ctypes.c_size_t
    pack.argtypes, pack.restype = [_E, _E, _E, _I, _I, _I, _P, _I, _P], None
    compute.argtypes = [_E, _I, _I, _I, _I, _I, ctypes.c_float, _P, _I, _P, _I, ctypes.c_float, _P, _I]
    compute.restype = None
    return size, pack, compute


_SCRATCH = threading.local()  # per thread (simulated ranks are threads): the packed-B buffer


def _scratch(nbytes: int) -> np.ndarray:
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.size < nbytes:
        buf = _SCRATCH.buf = np.empty(nbytes, np.uint8)
    return buf


def choice() -> str:
    """`SHARDC_BF16_GEMM` (`auto` where unset; another value than `CHOICES` is `auto`
    too, after one warning line, as `SHARDC_BLAS` does)."""
    text = os.environ.get("SHARDC_BF16_GEMM", "auto")
    if text in CHOICES:
        return text
    blas.warn_once(f"SHARDC_BF16_GEMM={text!r} is not one of {', '.join(CHOICES)}; using auto")
    return "auto"


def backend() -> str:
    """What runs bf16 products in this process now: `onednn` (MKL behind it where it
    loads), `mkl` or `numpy`."""
    c = choice()
    if c == "numpy" or (c == "auto" and not bf16_units()):
        return "numpy"
    if c in ("auto", "onednn") and onednn_matmul.available():
        return "onednn"
    return "mkl" if _mkl_gemm() is not None else "numpy"


_ROUTING: dict[str, str] = {}  # "measured": this process's answer; "agreed": rank 0's (`agree`)
_ROUTING_LOCK = threading.Lock()


def routing() -> str:
    """Which products oneDNN runs under the `onednn` backend: `onednn` (every product
    it accepts: `SHARDC_BF16_GEMM=onednn`, or where MKL's bf16 GEMM is absent) or
    `shaped` (`onednn_suits`'s rule, MKL the rest). Under `auto`, the answer measured
    for this machine (`bf16_gemm_choice.py`), or rank 0's after `agree`."""
    if choice() == "onednn" or _mkl_gemm() is None:
        return "onednn"
    try:
        return _ROUTING["agreed"]
    except KeyError:
        pass
    with _ROUTING_LOCK:  # simulated ranks are threads: one of them measures
        if "measured" not in _ROUTING:
            runners = {
                "mkl": lambda a, b, out: _mkl_2d(_mkl_gemm(), a, b, out, 1.0, 0.0),
                "onednn": lambda a, b, out: onednn_matmul.matmul(a, b, out) or _mkl_2d(_mkl_gemm(), a, b, out, 1.0, 0.0),
            }
            _ROUTING["measured"] = bf16_gemm_choice.choose((blas.library_path(), onednn_matmul.library_path()), runners, bfloat16())
    return _ROUTING["measured"]


def agree(world: Any) -> None:
    """Collective over the mpi4py communicator `world`: under `SHARDC_BF16_GEMM=auto`
    every rank routes products as rank 0 measured (`routing`), so a replicated product
    rounds alike on every rank even where hosts differ. Rank 0 measures only where the
    choice exists (bf16 units, oneDNN and MKL loaded); the answer is kept per machine."""
    if world.Get_size() == 1:
        return
    mine = routing() if world.Get_rank() == 0 and choice() == "auto" and backend() == "onednn" else None
    agreed = world.bcast(mine, root=0)
    if agreed in bf16_gemm_choice.ROUTINGS:
        _ROUTING["agreed"] = agreed


def describe() -> str:
    """A line for benchmark headers: the backend and why."""
    units = "bf16 units (AMX/AVX512-BF16)" if bf16_units() else "no bf16 units"
    mkl_runs = "where oneDNN declines" if routing() == "onednn" else "for the products onednn_suits leaves it, and where oneDNN declines"
    how = {
        "onednn": "oneDNN matmul" if _mkl_gemm() is None else f"oneDNN matmul (MKL cblas_gemm_bf16bf16f32 {mkl_runs})",
        "mkl": "MKL cblas_gemm_bf16bf16f32",
        "numpy": "float32 matmul of widened operands",
    }[backend()]
    return f"{how} (CPU: {units}; SHARDC_BF16_GEMM={choice()})"


def _operand(x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """A 2-D bf16 matrix as (array, trans flag, leading dimension), copied only where
    neither axis has unit stride (or the other stride is not a whole row)."""
    item = x.itemsize
    s0, s1 = x.strides
    r0, r1 = x.shape
    if s1 == item and s0 % item == 0 and s0 >= max(r1, 1) * item:
        return x, _NOTRANS, max(s0 // item, r1, 1)
    if s0 == item and s1 % item == 0 and s1 >= max(r0, 1) * item:
        return x, _TRANS, max(s1 // item, r0, 1)
    x = np.ascontiguousarray(x)
    return x, _NOTRANS, max(r1, 1)


def _mkl_2d(fn: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float, beta: float) -> None:
    """c = alpha * a @ b + beta * c for 2-D operands, `c` float32 with unit column stride."""
    m, k = a.shape
    n = b.shape[1]
    A, ta, lda = _operand(a)
    B, tb, ldb = _operand(b)
    ldc = max(c.strides[0] // 4, n, 1)
    packing = _mkl_pack() if m * n * k >= PACK_MIN_FLOPS else None
    if packing is not None:
        # B packed into MKL's internal layout first, then multiplied: 1.5x the plain call's
        # speed on a 2048x768x3072 product, packing included (Xeon with AMX, one thread)
        size, pack, compute = packing
        packed = _scratch(size(_B_MATRIX, m, n, k))
        pack(_ROW, _B_MATRIX, tb, m, n, k, B.ctypes.data, ldb, packed.ctypes.data)
        compute(_ROW, ta, _PACKED, m, n, k, alpha, A.ctypes.data, lda, packed.ctypes.data, ldb, beta, c.ctypes.data, ldc)
        return
    fn(_ROW, ta, tb, m, n, k, alpha, A.ctypes.data, lda, B.ctypes.data, ldb, beta, c.ctypes.data, ldc)


def _batched(fn: Any, A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float, beta: float) -> bool:
    """A batch of small products (attention's per-head `q k^T` and `p v`: hundreds of
    128x64x128 matrices a step) as one walk over precomputed addresses: every matrix
    of a batch has the same layout, so the transpose flags and leading dimensions are
    worked out once and each product is one call (the per-matrix path spent about 10 us
    a matrix in Python: views, `ctypes.data`, layout checks, as much as MKL's work on a
    128x64x128 product). False (nothing done) for products that pack B
    (`PACK_MIN_FLOPS`) or operands whose matrices would need a copy."""
    nb = A.ndim - 2
    m, k = A.shape[-2:]
    n = B.shape[-1]
    if m * n * k >= PACK_MIN_FLOPS:
        return False
    first = (0,) * nb
    a0, b0 = A[first], B[first]
    X, ta, lda = _operand(a0)
    Y, tb, ldb = _operand(b0)
    if X is not a0 or Y is not b0:
        return False
    ldc = max(C.strides[-2] // 4, n, 1)
    grid = np.indices(A.shape[:nb]).reshape(nb, -1).T
    offsets = [(grid @ np.array(x.strides[:nb], np.int64)).tolist() for x in (A, B, C)]
    pa, pb, pc = (x.__array_interface__["data"][0] for x in (A, B, C))
    for oa, ob, oc in zip(*offsets):
        fn(_ROW, ta, tb, m, n, k, alpha, pa + oa, lda, pb + ob, ldb, beta, pc + oc, ldc)
    return True


def _writable_rows(c: np.ndarray) -> bool:
    return c.dtype == _F32 and c.ndim >= 2 and c.strides[-1] == 4 and c.strides[-2] % 4 == 0 and c.strides[-2] >= c.shape[-1] * 4 and c.flags.writeable


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
    """`alpha * (a @ b) + beta * out` with bf16 operands (2-D, or batched and broadcast as
    `np.matmul` does), accumulated in float32. `out` (float32 or bf16) receives the result
    and is returned; without it a fresh float32 array is. A bf16 `out` is computed in
    float32 and rounded once at the end (nearest even)."""
    bf = bfloat16()
    if a.dtype != bf or b.dtype != bf:
        raise TypeError(f"bf16_gemm.matmul: operands must be bf16, got {a.dtype} and {b.dtype}")
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"bf16_gemm.matmul: shapes {a.shape} and {b.shape} do not multiply")
    shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
    if out is not None and out.shape != shape:
        raise ValueError(f"bf16_gemm.matmul: out has shape {out.shape}, expected {shape}")
    name = backend()
    if name == "onednn" and a.shape[-1] and math.prod(shape) and (onednn_suits(shape, a.shape[-1], a.strides[-1] == a.itemsize) or routing() == "onednn"):
        if out is not None and (out.dtype == _F32 or (out.dtype == bf and beta == 0.0)):
            if onednn_matmul.matmul(a, b, out, alpha, beta):
                return out
        elif out is None:
            fresh = aligned_empty(shape)
            if onednn_matmul.matmul(a, b, fresh, alpha):
                return fresh
    fn = _mkl_gemm() if name != "numpy" else None
    if fn is None:
        r = np.matmul(widen_bfloat16(a), widen_bfloat16(b))
        if alpha != 1.0:
            r *= np.float32(alpha)
        if out is None:
            return r
        if beta != 0.0:
            r += np.float32(beta) * out.astype(_F32)
        np.copyto(out, r, casting="unsafe")
        return out
    target = out if out is not None and _writable_rows(out) else None
    if target is None:
        target = aligned_empty(shape) if beta == 0.0 or out is None else out.astype(_F32)
    if a.shape[-1] == 0:
        target[...] = 0 if beta == 0.0 else target * np.float32(beta)
    elif target.size:
        A = np.broadcast_to(a, (*shape[:-2], *a.shape[-2:]))
        B = np.broadcast_to(b, (*shape[:-2], *b.shape[-2:]))
        if len(shape) == 2 or not _batched(fn, A, B, target, alpha, beta):
            for idx in np.ndindex(*shape[:-2]):
                _mkl_2d(fn, A[idx], B[idx], target[idx], alpha, beta)
    if out is None:
        return target
    if target is not out:
        np.copyto(out, target, casting="unsafe")
    return out


def emulation_cost(n: int = 384, repeats: int = 3) -> float:
    """Time of an n x n x n product of bf16 operands as this process runs it without bf16
    units (widened to float32, multiplied, `backend() == "numpy"`) over the float32
    product's: what `--precision bf16` costs per product on such a CPU, measured here."""
    import time

    rng = np.random.default_rng(0)
    a32, b32 = rng.standard_normal((n, n), _F32), rng.standard_normal((n, n), _F32)
    a, b = a32.astype(bfloat16()), b32.astype(bfloat16())

    def best(f: Any) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
        return min(times)

    widened = best(lambda: np.matmul(widen_bfloat16(a), widen_bfloat16(b)))
    plain = best(lambda: np.matmul(a32, b32))
    return widened / plain if plain > 0 else 1.0
