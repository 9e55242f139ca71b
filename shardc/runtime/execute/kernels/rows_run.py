"""The run time of row-chain kernels (`kernels/rows.py` builds them): the `RowKernel` a
generated function calls, the row reductions it uses, and their compilation. No xDSL
here, so a compile-cache hit loads none.

A row kernel runs a chain of elementwise stages and last-axis reductions over one row
at a time: every activation row is read from memory once and its intermediates stay in
cache (a per-row buffer of the row's length) between the stages that a reduction
separates. The reductions run over those buffers in the helpers below: sums with
reassociation allowed, so LLVM vectorizes them (several partial sums, as numpy's
pairwise sum has: equal within float32 rounding, not bitwise); max and min in order,
NaN-propagating as `arith.maximumf` / `arith.minimumf` are (exact whatever the order),
over several running maxima (a row of 128: 8 of them 4x faster than one, measured; LLVM
vectorizes no float max without fast-math), a NaN found by a vectorized count.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from shardc.runtime.execute.kernels import fused_run
from shardc.runtime.execute.kernels.aligned import result_array

MIN_ELEMENTS = 1 << 15
"""Iteration spaces smaller than this run the chain's own ops (the numpy path or the
fused elementwise kernels): numba's call cost and compile time do not pay there."""


def rsum32(b, n, init):  # type: ignore[no-untyped-def]
    s = np.float32(0.0)
    for j in range(n):
        s += b[j]
    return init + s


def rsum64(b, n, init):  # type: ignore[no-untyped-def]
    s = np.float64(0.0)
    for j in range(n):
        s += b[j]
    return init + s


def rnan(b, n):  # type: ignore[no-untyped-def]
    c = 0
    for j in range(n):
        c += b[j] != b[j]
    return c


def rmax(b, n, m):  # type: ignore[no-untyped-def]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = m
    j = 0
    while j + 8 <= n:
        x0, x1, x2, x3, x4, x5, x6, x7 = b[j], b[j + 1], b[j + 2], b[j + 3], b[j + 4], b[j + 5], b[j + 6], b[j + 7]
        m0 = x0 if x0 > m0 else m0
        m1 = x1 if x1 > m1 else m1
        m2 = x2 if x2 > m2 else m2
        m3 = x3 if x3 > m3 else m3
        m4 = x4 if x4 > m4 else m4
        m5 = x5 if x5 > m5 else m5
        m6 = x6 if x6 > m6 else m6
        m7 = x7 if x7 > m7 else m7
        j += 8
    while j < n:
        x0 = b[j]
        m0 = x0 if x0 > m0 else m0
        j += 1
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    m4 = m5 if m5 > m4 else m4
    m6 = m7 if m7 > m6 else m6
    m0 = m2 if m2 > m0 else m0
    m4 = m6 if m6 > m4 else m4
    m0 = m4 if m4 > m0 else m0
    if rnan(b, n):  # a NaN input wins, as arith.maximumf's does (a NaN init never lost)
        for j in range(n):
            if b[j] != b[j]:
                return b[j]
    return m0


def rmin(b, n, m):  # type: ignore[no-untyped-def]
    m0 = m1 = m2 = m3 = m
    j = 0
    while j + 4 <= n:
        x0, x1, x2, x3 = b[j], b[j + 1], b[j + 2], b[j + 3]
        m0 = x0 if x0 < m0 else m0
        m1 = x1 if x1 < m1 else m1
        m2 = x2 if x2 < m2 else m2
        m3 = x3 if x3 < m3 else m3
        j += 4
    while j < n:
        x0 = b[j]
        m0 = x0 if x0 < m0 else m0
        j += 1
    m0 = m1 if m1 < m0 else m0
    m2 = m3 if m3 < m2 else m2
    m0 = m2 if m2 < m0 else m0
    if rnan(b, n):
        for j in range(n):
            if b[j] != b[j]:
                return b[j]
    return m0


def _row_helpers() -> tuple[str, dict[str, object]]:
    """rsum32/64, rmax, rmin jit-compiled (`fused_run.jit_helpers`; the sums with
    `reassoc`: vectorized; rmax and rmin call the compiled rnan)."""
    fns = (rsum32, rsum64, rnan, rmax, rmin)
    return fused_run.jit_helpers(
        "rowhelpers",
        lambda: "\n\n".join(inspect.getsource(f) for f in fns),
        [(f.__name__, f, {"reassoc"} if f in (rsum32, rsum64) else set()) for f in fns],
        {"np": np},
        "rows-1",
    )


_COMPILED: dict[str, Callable[..., None]] = {}


def _compile(source: str) -> Callable[..., None]:
    """The kernel of `source`, jit-compiled once per process (`fused_run.njit_kernel`),
    cached by numba on disk."""
    fn = _COMPILED.get(source)
    if fn is None:
        fn = _COMPILED[source] = fused_run.njit_kernel("rowkernel", source, (fused_run.kernel_helpers, _row_helpers))
    return fn


CALLS = [0]
"""Row kernels run in this process (tests count them)."""


@dataclass
class RowKernel:
    """A row chain as one compiled kernel over the space `sizes` (rows..., row length).
    `params` say what each kernel argument is: ("array", k) the chain's external input
    k (an array of the shape `shapes[k]`: the kernel does not check its indices),
    ("scalar", k) a scalar input, ("const", value); `outputs` the (shape, dtype) of each
    value the chain yields, in order."""

    source: str
    sizes: tuple[int, ...]
    params: list[tuple[str, object]]
    outputs: list[tuple[tuple[int, ...], str]]
    shapes: dict[int, tuple[int, ...]] = field(default_factory=dict)
    _failed: bool = False
    fn: Callable[..., None] | None = field(default=None, repr=False)

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "fn": None}  # compiled code is not data

    def __call__(self, args: Sequence[object]) -> tuple[object, ...] | None:
        """The chain's yielded values from its external inputs, or None: then the
        caller runs the chain's own ops."""
        if self._failed or math.prod(self.sizes) < MIN_ELEMENTS or not fused_run.enabled():
            return None
        call: list[object] = []
        for kind, what in self.params:
            if kind == "array":
                a = args[what]  # type: ignore[index]
                if type(a) is not np.ndarray or a.shape != self.shapes[what]:  # type: ignore[index]
                    return None
                call.append(a)
            elif kind == "scalar":
                call.append(args[what])  # type: ignore[index]
            else:
                call.append(what)
        fn = self.fn
        if fn is None:
            with fused_run.LOCK:
                try:  # a forged source raises UnsafeCodeError: nothing of it runs
                    fn = self.fn = _compile(self.source)
                except fused_run.KernelRefused:  # the chain's own ops run
                    self._failed = True
                    return None
        outs = [result_array(shape, dtype) for shape, dtype in self.outputs]
        fn(self.sizes, *call, *outs)
        CALLS[0] += 1
        return tuple(outs)


__all__ = ["CALLS", "MIN_ELEMENTS", "RowKernel"]
