"""bf16 matrix products through oneDNN's matmul primitive, called with ctypes.

Where the CPU has AMX, oneDNN's bf16 matmul ran the shapes of a GPT step faster than
MKL's `cblas_gemm_bf16bf16f32` (Intel Xeon with AMX, one thread, CPU time): about 2x on
attention's batched per-head products (a (8,4,128,64) x (8,4,64,128) batch: 350 against
165 GFLOP/s, one primitive call for the whole batch where MKL takes one call a matrix),
1.2-1.3x on 1024x256x1024 and 1024x256x768, level on 1024x1024x256. The library is
the `onednn-cpu-gomp` wheel's `libdnnl.so.3` (oneDNN 3.2, CPU only, GNU OpenMP; found in
`sys.prefix/lib` as the `mkl` wheel's library is) or the file `SHARDC_ONEDNN` names;
without it `bf16_gemm` runs MKL's GEMM as before.

A product is one primitive per operand layout (shapes, strides, result dtype, whether
it accumulates), created on first use and kept per thread (simulated ranks are threads;
a primitive's memory objects hold the data pointers of the call), so a step's call
sites pay the creation once. Batched operands broadcast as `np.matmul` does (a batch
axis of 1 against n); any layout the library refuses (status not success) is recorded
and answered False, and the caller runs MKL. The result is float32 (`beta` adds the
old contents: a sum post-op) or bf16 (oneDNN rounds to nearest even as `bf16_cast`
does, no float32 temporary).

What made oneDNN 3.2 run at half of PyTorch's bf16 rate (its bundled oneDNN 3.12, plain
layouts too) on the step's 2-D products was mostly alignment: numpy starts arrays on
16-byte boundaries and the AMX kernels lose 25-35% on a misaligned `a` or result (see
`ALIGN_SOURCE_MIN_BYTES`, `aligned.ALIGNMENT`); the rest of the gap closed here is the
weights' layout (`BLOCKED_MIN_ROWS`). Every layout of the step runs the AMX kernel
(`brg:avx512_core_amx`, ONEDNN_VERBOSE=1); only head-strided views of a fused q/k/v
projection (not what the step passes) fall back to `gemm:jit:bf16`.

Threads: one OpenMP thread per calling thread (the runtime's ranks are processes; MKL
runs sequential), or `SHARDC_BLAS_THREADS`.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from shardc.runtime.execute.kernels.aligned import ALIGNMENT, aligned_empty

_P = ctypes.c_void_p
_DIMS = ctypes.c_int64 * 12
_CPU_ENGINE, _IN_ORDER = 1, 1  # dnnl_cpu, dnnl_stream_in_order
_BF16, _F32 = 2, 3  # dnnl_data_type_t
_ARG_SRC, _ARG_DST, _ARG_WEIGHTS = 1, 17, 33
_ARG_SRC_SCALES = 4096 | _ARG_SRC  # DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC
_FORMAT_ANY = 1  # dnnl_format_tag_any
_QUERY_WEIGHTS_MD = 131  # dnnl_query_weights_md
_MAX_PRIMITIVES = 256
"""Primitives kept per thread; past it the cache starts over (a step needs a few dozen)."""


class _ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", _P)]


def library_path() -> str | None:
    """`SHARDC_ONEDNN`, else `libdnnl.so.3` in `sys.prefix/lib` (the `onednn-cpu-gomp` wheel)."""
    return os.environ.get("SHARDC_ONEDNN") or _installed_library()


@functools.cache
def _installed_library() -> str | None:
    """`libdnnl.so.3` in `sys.prefix/lib` or `sys.base_prefix/lib`, looked up once (every
    product asks: the look-up took about 6 us, a fifth of a small product's call)."""
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        p = Path(prefix) / "lib" / "libdnnl.so.3"
        if p.exists():
            return str(p)
    return None


@functools.cache
def _library(path: str | None) -> tuple[Any, Any] | None:
    """(the library, its CPU engine), or None where it is absent or does not load."""
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    except OSError:
        return None
    lib.dnnl_engine_create.argtypes = [ctypes.POINTER(_P), ctypes.c_int, ctypes.c_size_t]
    lib.dnnl_stream_create.argtypes = [ctypes.POINTER(_P), _P, ctypes.c_uint]
    lib.dnnl_memory_desc_create_with_strides.argtypes = [ctypes.POINTER(_P), ctypes.c_int, _DIMS, ctypes.c_int, _DIMS]
    lib.dnnl_memory_desc_create_with_tag.argtypes = [ctypes.POINTER(_P), ctypes.c_int, _DIMS, ctypes.c_int, ctypes.c_int]
    lib.dnnl_memory_desc_destroy.argtypes = [_P]
    lib.dnnl_memory_desc_clone.argtypes = [ctypes.POINTER(_P), _P]
    lib.dnnl_memory_desc_get_size.argtypes = [_P]
    lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
    lib.dnnl_primitive_desc_query_md.argtypes = [_P, ctypes.c_int, ctypes.c_int]
    lib.dnnl_primitive_desc_query_md.restype = _P
    lib.dnnl_reorder_primitive_desc_create.argtypes = [ctypes.POINTER(_P), _P, _P, _P, _P, _P]
    lib.dnnl_primitive_attr_create.argtypes = [ctypes.POINTER(_P)]
    lib.dnnl_primitive_attr_destroy.argtypes = [_P]
    lib.dnnl_post_ops_create.argtypes = [ctypes.POINTER(_P)]
    lib.dnnl_post_ops_destroy.argtypes = [_P]
    lib.dnnl_post_ops_append_sum.argtypes = [_P, ctypes.c_float, ctypes.c_int32, ctypes.c_int]
    lib.dnnl_primitive_attr_set_post_ops.argtypes = [_P, _P]
    lib.dnnl_primitive_attr_set_scales_mask.argtypes = [_P, ctypes.c_int, ctypes.c_int]
    lib.dnnl_matmul_primitive_desc_create.argtypes = [ctypes.POINTER(_P), _P, _P, _P, _P, _P, _P]
    lib.dnnl_primitive_desc_destroy.argtypes = [_P]
    lib.dnnl_primitive_create.argtypes = [ctypes.POINTER(_P), _P]
    lib.dnnl_primitive_destroy.argtypes = [_P]
    lib.dnnl_memory_create.argtypes = [ctypes.POINTER(_P), _P, _P, _P]
    lib.dnnl_memory_destroy.argtypes = [_P]
    lib.dnnl_memory_set_data_handle.argtypes = [_P, _P]
    lib.dnnl_primitive_execute.argtypes = [_P, _P, ctypes.c_int, ctypes.POINTER(_ExecArg)]
    lib.dnnl_stream_wait.argtypes = [_P]
    engine = _P()
    if lib.dnnl_engine_create(ctypes.byref(engine), _CPU_ENGINE, 0) != 0:
        return None
    return lib, engine


def available() -> bool:
    """Whether oneDNN loads in this process."""
    return _library(library_path()) is not None


def _threads() -> int:
    try:
        return max(int(os.environ.get("SHARDC_BLAS_THREADS", "1")), 1)
    except ValueError:
        return 1


class _Thread(threading.local):
    """This thread's stream, primitives (a primitive's memory objects are rebound to
    each call's arrays, so no two threads share one) and the buffer its products
    reorder their weights into (`BLOCKED_MIN_ROWS`)."""

    def __init__(self) -> None:
        self.stream: Any = None
        self.primitives: dict[tuple, Any] = {}
        self.weights = np.empty(0, np.uint8)
        self.source = np.empty(0, np.uint8)

    def weights_buffer(self, nbytes: int) -> np.ndarray:
        """At least `nbytes` bytes starting on a 64-byte boundary, kept for the next call."""
        if self.weights.size < nbytes:
            self.weights = aligned_empty((nbytes,), np.uint8)
        return self.weights

    def aligned_source(self, a: np.ndarray) -> np.ndarray:
        """A copy of the C-contiguous `a` starting on a 64-byte boundary (the buffer kept)."""
        if self.source.size < a.nbytes:
            self.source = aligned_empty((a.nbytes,), np.uint8)
        copy = self.source[: a.nbytes].view(a.dtype).reshape(a.shape)
        np.copyto(copy, a)
        return copy


_STATE = _Thread()


def _set_omp_threads(n: int) -> None:
    """OpenMP's thread count for the calling thread (oneDNN's parallel regions read it)."""
    try:
        gomp = ctypes.CDLL("libgomp.so.1")
        gomp.omp_set_num_threads(ctypes.c_int(n))
    except (OSError, AttributeError):
        pass


def _elements(shape: tuple[int, ...], strides: tuple[int, ...], item: int) -> list[int] | None:
    """Strides in elements as oneDNN takes them (an axis of length 1 gets the stride a
    dense layout would give it: numpy's may be anything); None for zero (a broadcast
    view: the caller passes the unbroadcast operand), negative or misaligned strides."""
    out = []
    for n, s in zip(shape, strides):
        if n != 1 and (s <= 0 or s % item):
            return None
        out.append(s // item if n != 1 else 0)
    for i in range(len(shape) - 1, -1, -1):
        if shape[i] == 1:
            out[i] = max([out[j] * shape[j] for j in range(i + 1, len(shape))] or [1])
    return out


class _Primitive:
    """A matmul primitive and its memory objects (the operands', and `alpha`'s as the
    source's scale where it is not 1), for one operand layout. With `blocked` the
    weights are oneDNN's own layout (format `any`, what the primitive asks for), into
    which a reorder primitive copies `b` at every call (`weights_bytes` of buffer)."""

    def __init__(self, lib: Any, engine: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float, beta: float, blocked: bool = False) -> None:
        self.lib = lib
        self.handles: list[Any] = []
        self.prim: Any = None
        self.reorder: Any = None
        self.reorder_mems: list[Any] = []
        self.reorder_args: Any = None
        self.weights_bytes = 0
        self.scale = np.array([alpha], np.float32)
        descs = []
        plain_b = None
        try:
            for x, dt in ((a, _BF16), (b, _BF16), (c, _BF16 if c.dtype.kind == "V" else _F32)):
                strides = _elements(x.shape, x.strides, x.itemsize)
                if strides is None:
                    return
                md = _P()
                if lib.dnnl_memory_desc_create_with_strides(ctypes.byref(md), x.ndim, _DIMS(*x.shape), dt, _DIMS(*strides)) != 0:
                    return
                descs.append(md)
            if blocked:
                plain_b, descs[1] = descs[1], _P()
                if lib.dnnl_memory_desc_create_with_tag(ctypes.byref(descs[1]), b.ndim, _DIMS(*b.shape), _BF16, _FORMAT_ANY) != 0:
                    descs[1] = None
                    return
            if alpha != 1.0:
                md = _P()
                if lib.dnnl_memory_desc_create_with_strides(ctypes.byref(md), 1, _DIMS(1), _F32, _DIMS(1)) != 0:
                    return
                descs.append(md)
            attr, post = _P(), _P()
            if lib.dnnl_primitive_attr_create(ctypes.byref(attr)) != 0:
                return
            try:
                if alpha != 1.0 and lib.dnnl_primitive_attr_set_scales_mask(attr, _ARG_SRC, 0) != 0:
                    return
                if beta != 0.0:
                    lib.dnnl_post_ops_create(ctypes.byref(post))
                    ok = lib.dnnl_post_ops_append_sum(post, beta, 0, 0) == 0 and lib.dnnl_primitive_attr_set_post_ops(attr, post) == 0
                    lib.dnnl_post_ops_destroy(post)
                    if not ok:
                        return
                pd = _P()
                if lib.dnnl_matmul_primitive_desc_create(ctypes.byref(pd), engine, descs[0], descs[1], None, descs[2], attr) != 0:
                    return
            finally:
                lib.dnnl_primitive_attr_destroy(attr)
            if blocked:  # the layout the primitive chose for `any`, as a descriptor of our own
                chosen, any_md = lib.dnnl_primitive_desc_query_md(pd, _QUERY_WEIGHTS_MD, 0), descs[1]
                descs[1] = _P()
                if not chosen or lib.dnnl_memory_desc_clone(ctypes.byref(descs[1]), chosen) != 0:
                    descs[1] = None
                lib.dnnl_memory_desc_destroy(any_md)
                if descs[1] is None:
                    lib.dnnl_primitive_desc_destroy(pd)
                    return
            prim = _P()
            status = lib.dnnl_primitive_create(ctypes.byref(prim), pd)
            lib.dnnl_primitive_desc_destroy(pd)
            if status == 0 and blocked:
                self.weights_bytes = lib.dnnl_memory_desc_get_size(descs[1])
                status = self._make_reorder(engine, plain_b, descs[1])
            if status != 0:
                if prim:
                    lib.dnnl_primitive_destroy(prim)
                self.destroy()
                return
            for md, x in zip(descs, (a, b, c, self.scale)):
                mem = _P()
                if lib.dnnl_memory_create(ctypes.byref(mem), md, engine, _P(x.ctypes.data)) != 0:
                    lib.dnnl_primitive_destroy(prim)
                    self.destroy()
                    return
                self.handles.append(mem)
            self.prim = prim
            kinds = (_ARG_SRC, _ARG_WEIGHTS, _ARG_DST, _ARG_SRC_SCALES)
            self.args = (_ExecArg * len(self.handles))(*(_ExecArg(k, m) for k, m in zip(kinds, self.handles)))
        finally:
            for md in (*descs, plain_b):
                if md:
                    lib.dnnl_memory_desc_destroy(md)

    def _make_reorder(self, engine: Any, plain: Any, blocked: Any) -> int:
        """The reorder from `b`'s layout to the primitive's, with its two memory objects
        (their data bound at each call); oneDNN's status."""
        lib = self.lib
        pd = _P()
        status = lib.dnnl_reorder_primitive_desc_create(ctypes.byref(pd), plain, engine, blocked, engine, None)
        if status != 0:
            return status
        prim = _P()
        status = lib.dnnl_primitive_create(ctypes.byref(prim), pd)
        if status == 0:
            mems = []
            for md in (plain, blocked):
                mem = _P()
                status = status or lib.dnnl_memory_create(ctypes.byref(mem), md, engine, None)
                if status == 0:
                    mems.append(mem)
            self.reorder, self.reorder_mems = prim, mems
            if status == 0:
                self.reorder_args = (_ExecArg * 2)(_ExecArg(_ARG_SRC, mems[0]), _ExecArg(_ARG_DST, mems[1]))
        lib.dnnl_primitive_desc_destroy(pd)
        return status

    def run(self, stream: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray, weights: np.ndarray | None = None) -> bool:
        """The product into `c` (`weights`: the buffer `b` is reordered into, where blocked)."""
        lib, h = self.lib, self.handles
        lib.dnnl_memory_set_data_handle(h[0], a.ctypes.data)
        if self.reorder is not None:
            assert weights is not None and weights.nbytes >= self.weights_bytes
            src, dst = self.reorder_mems
            lib.dnnl_memory_set_data_handle(src, b.ctypes.data)
            lib.dnnl_memory_set_data_handle(dst, weights.ctypes.data)
            if lib.dnnl_primitive_execute(self.reorder, stream, 2, self.reorder_args) != 0:
                return False
            lib.dnnl_memory_set_data_handle(h[1], weights.ctypes.data)
        else:
            lib.dnnl_memory_set_data_handle(h[1], b.ctypes.data)
        lib.dnnl_memory_set_data_handle(h[2], c.ctypes.data)
        return lib.dnnl_primitive_execute(self.prim, stream, len(self.args), self.args) == 0 and lib.dnnl_stream_wait(stream) == 0

    def __del__(self) -> None:  # a finished thread's primitives (simulated ranks) go with it
        try:
            self.destroy()
        except Exception:  # interpreter teardown: the library may be gone already
            pass

    def destroy(self) -> None:
        for mem in self.handles:
            self.lib.dnnl_memory_destroy(mem)
        self.handles = []
        if self.reorder is not None:
            for mem in self.reorder_mems:
                self.lib.dnnl_memory_destroy(mem)
            self.lib.dnnl_primitive_destroy(self.reorder)
            self.reorder, self.reorder_mems = None, []
        if self.prim is not None:
            self.lib.dnnl_primitive_destroy(self.prim)
            self.prim = None


ALIGN_SOURCE_MIN_BYTES = 1 << 16
"""A C-contiguous `a` of at least this many bytes not on a 64-byte boundary (numpy's
arrays start on 16) is copied to one first: measured (Intel Xeon with AMX, one thread,
CPU time) 2048x768x3072 ran at 940 GFLOP/s from numpy's `a` and 1,225 from an aligned
one (1,154 -> 1,518 with blocked weights), 1024x256x1024 923 -> 1,194; the copy is one
pass over `a`, an n-th of the product's work: 2-D products only, of at least
`ALIGN_SOURCE_MIN_COLUMNS` columns (attention's batched 8x12x256x256 by 8x12x256x64 ran
833 GFLOP/s misaligned, 510 with the copy, 1,022 from an aligned `p`)."""

ALIGN_SOURCE_MIN_COLUMNS = 256

BLOCKED_MIN_ROWS = 256
"""2-D products of at least this many rows whose `b` has rows of unit stride (a weight
as the forward reads it) give the primitive `b` in oneDNN's own blocked layout,
reordered at every call: measured (Intel Xeon with AMX, one thread, CPU time, results
64-byte aligned) 2048x768x3072 1,300 -> 1,640 GFLOP/s for the product, whose 0.34 ms
reorder leaves 1.19x; 2048x768x2304 1.26x, 2048x768x768 1.18x, 1024x1024x256 1.21x,
1024x256x1024 1.1x. A transposed `b` reorders 3-4x slower (1.2 ms for 3072x768) and
gains nothing: it stays plain. Nothing is cached across calls: a weight changes every
step and each layout of it is read once per microbatch. A transposed `a` (the weight
gradient's activations) keeps `b` plain too: 768x2048x3072 ran 1.3x slower blocked,
its 2048x3072 `b` reordered at every call."""


def blocks_weights(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the product `a @ b` reorders `b` into oneDNN's blocked layout (`BLOCKED_MIN_ROWS`)."""
    return a.ndim == 2 and b.ndim == 2 and a.shape[0] >= BLOCKED_MIN_ROWS and b.shape[1] > 1 and a.strides[1] == a.itemsize and b.strides[1] == b.itemsize


def matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float = 1.0, beta: float = 0.0) -> bool:
    """`c = alpha * (a @ b) + beta * c` for bf16 `a`, `b` (2-D or batched, broadcast as `np.matmul`
    does) into `c` (float32, or bf16 where `beta` is 0), float32 accumulation. False
    (nothing written) where oneDNN is absent or refuses the layout."""
    loaded = _library(library_path())
    if loaded is None or (beta != 0.0 and c.dtype.kind == "V") or not c.flags.writeable:
        return False
    lib, engine = loaded
    nd = c.ndim
    if a.ndim < nd:
        a = a.reshape((1,) * (nd - a.ndim) + a.shape)
    if b.ndim < nd:
        b = b.reshape((1,) * (nd - b.ndim) + b.shape)
    if a.ndim != nd or b.ndim != nd or nd > 12:
        return False
    st = _STATE
    if st.stream is None:
        _set_omp_threads(_threads())
        stream = _P()
        if lib.dnnl_stream_create(ctypes.byref(stream), engine, _IN_ORDER) != 0:
            return False
        st.stream = stream
    if nd == 2 and a.ctypes.data % ALIGNMENT and a.nbytes >= ALIGN_SOURCE_MIN_BYTES and b.shape[1] >= ALIGN_SOURCE_MIN_COLUMNS and a.flags.c_contiguous:
        a = st.aligned_source(a)
    blocked = blocks_weights(a, b)
    key = (a.shape, a.strides, b.shape, b.strides, c.shape, c.strides, c.dtype.kind, alpha, beta, blocked)
    prim = st.primitives.get(key)
    if prim is None:
        if len(st.primitives) >= _MAX_PRIMITIVES:
            for p in st.primitives.values():
                if p is not False:
                    p.destroy()
            st.primitives.clear()
        made = _Primitive(lib, engine, a, b, c, alpha, beta, blocked)
        prim = st.primitives[key] = made if made.prim is not None else False
    if prim is False:
        return False
    return prim.run(st.stream, a, b, c, st.weights_buffer(prim.weights_bytes) if prim.reorder is not None else None)
