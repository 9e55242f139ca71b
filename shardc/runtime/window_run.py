"""The run time of windowed operands (`window.py` plans them): an input read through
affine sums of loop dims, `x[n, c, oh * s + kh * d, ...]` (convolutions, pooling), is
given to the structured engine as a strided view whose axes are those loop dims. The
engine then sees an ordinary projected-permutation operand: a convolution becomes a
contraction over (c, kh, kw) on BLAS (the view copied once into im2col order by the
matmul's reshape), a pooling a reduction over the window axes. No xDSL here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from shardc.runtime.compiled import RuntimeExecutionError
from shardc.runtime.structured_run import StructuredSpec, contract2, run_structured


class WindowBoundsError(RuntimeExecutionError):
    """A windowed operand is smaller than its loops reach (MLIR leaves this undefined)."""


@dataclass(frozen=True)
class WindowView:
    """How one input is read: per operand axis, `offset + sum(coef * loop dim)`."""

    input: int  # which input
    dims: tuple[int, ...]  # the loop dim of each view axis, in view order
    terms: tuple[tuple[tuple[int, int], ...], ...]  # per operand axis: (view axis, coef) pairs
    offsets: tuple[int, ...]  # per operand axis

    def view(self, x: np.ndarray, sizes: Sequence[int], name: str) -> np.ndarray:
        x = np.asarray(x)
        shape = tuple(sizes[d] for d in self.dims)
        strides = [0] * len(self.dims)
        empty = 0 in shape
        for axis, terms in enumerate(self.terms):
            reach = self.offsets[axis] + sum(c * (shape[j] - 1) for j, c in terms)
            if not empty and reach >= x.shape[axis]:
                raise WindowBoundsError(
                    f"{name}: input #{self.input} has {x.shape[axis]} elements along axis {axis}, "
                    f"but its indexing map reaches index {reach}"
                )
            for j, c in terms:
                strides[j] += c * x.strides[axis]
        if any(self.offsets):
            x = x[tuple(slice(o, None) for o in self.offsets)]
        if empty:
            return np.empty(shape, x.dtype)
        return as_strided(x, shape, tuple(strides), writeable=False)


@dataclass(frozen=True)
class WindowPlan:
    """The windowed inputs of one op and where each loop size is read (an operand
    axis indexed by that loop dim alone, as MLIR infers loop ranges)."""

    size_src: tuple[tuple[int, int], ...]  # per loop dim: (operand, axis), operands = ins + outs
    views: tuple[WindowView, ...]
    name: str
    shift: ShiftPlan | None = None  # a convolution run by shifted matmuls (`run_windowed`)
    depthwise: DepthwisePlan | None = None  # a depthwise convolution's loop nest (`run_windowed`)

    def __call__(self, ins: Sequence[object], outs: Sequence[np.ndarray]) -> list[object]:
        operands = [*ins, *outs]
        sizes = [np.shape(operands[i])[k] for i, k in self.size_src]
        new = list(ins)
        for v in self.views:
            new[v.input] = v.view(ins[v.input], sizes, self.name)  # type: ignore[arg-type]
        return new


MAX_SHIFTS = 49
"""Kernel positions up to which `ShiftPlan` runs one matmul per position (7x7); a
weight gradient, whose "kernel" is the image, takes the im2col path."""
MIN_SHIFT_COLUMNS = 64
"""Output positions per image from which the shifted matmuls pay (fewer: im2col)."""


@dataclass(frozen=True)
class ShiftPlan:
    """A contraction whose windowed input `x` reads its last two axes as `oh + kh * dh`
    and `ow + kw * dw` (unit strides; a 3x3 convolution of ResNet), run without an
    im2col copy: for each kernel position (kh, kw), the input shifted by
    `kh * dh * W + kw * dw` elements and read as rows of `(oh, ow')` flattened over the
    image's full width W is a plain strided matrix, contracted into an output laid out
    with W columns per row (the last W - OW of each row are computed and dropped).
    KH x KW matmuls reading the image in place instead of one matmul on a copy nine
    times its size."""

    x: int  # the windowed input
    w: int  # the other factor
    lead: tuple[int, ...]  # loop dims of x's axes before the two windows
    oh: int
    ow: int
    kh: int
    kw: int
    dh: int
    dw: int
    w_map: tuple[int | None, ...]
    out_lead: tuple[int, ...]  # the output's loop dims before (oh, ow)
    n_loops: int

    def run(self, spec: StructuredSpec, windows: WindowPlan, ins: Sequence[object], outs: Sequence[np.ndarray]) -> np.ndarray | None:
        """The result, or None where the operands do not allow it (the caller runs the
        general windowed path)."""
        x, w, init = ins[self.x], ins[self.w], outs[0]
        dt = spec.out_dtypes[0]
        if not (isinstance(x, np.ndarray) and isinstance(w, np.ndarray) and x.dtype == w.dtype == dt and dt.kind == "f"):
            return None
        item = x.itemsize
        hp, wp = x.shape[-2:]
        if x.strides[-1] != item or x.strides[-2] != wp * item:
            return None
        operands = [*ins, *outs]
        sizes = [np.shape(operands[i])[k] for i, k in windows.size_src]
        oh, ow, kh, kw = (sizes[d] for d in (self.oh, self.ow, self.kh, self.kw))
        if 0 in sizes or oh - 1 + (kh - 1) * self.dh >= hp or ow - 1 + (kw - 1) * self.dw >= wp:
            return None
        if kh * kw > MAX_SHIFTS or oh * ow < MIN_SHIFT_COLUMNS:
            return None  # a weight gradient (the image is the kernel): one matmul on the im2col copy
        cols = (oh - 1) * wp + ow  # the flattened columns any output row reaches
        j = self.n_loops  # the flattened (oh, ow') loop
        sizes.append(cols)
        big = np.empty([*(sizes[d] for d in self.out_lead), oh * wp], dt)
        rows = big.reshape(*big.shape[:-1], oh, wp)
        if spec.zero_init:
            big.fill(0)
        else:
            np.copyto(rows[..., :ow], init)
        target = big[..., :cols]
        flat = as_strided(x, (*x.shape[:-2], hp * wp), (*x.strides[:-2], item), writeable=False)
        x_map = (*self.lead, j)
        w_map = tuple(d for d in self.w_map if d not in (self.kh, self.kw))
        so = (*self.out_lead, j)
        # the factor per kernel position as a unit-stride matrix (BLAS reads it in place)
        per_position = np.ascontiguousarray(np.moveaxis(w, (self.w_map.index(self.kh), self.w_map.index(self.kw)), (0, 1)))
        for a in range(kh):
            for b in range(kw):
                start = a * self.dh * wp + b * self.dw
                wk = per_position[a, b]
                r, _ = contract2(flat[..., start : start + cols], x_map, wk, w_map, so, sizes, dt, None, target, 1.0, True)
                if r is not target:
                    np.add(target, r, out=target)
        return rows[..., :ow]


def run_windowed(spec: StructuredSpec, body: Callable[..., tuple[object, ...]], windows: WindowPlan, ins: Sequence[object], outs: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """A structured op with windowed inputs: the shifted matmuls where `windows.shift`
    applies, a depthwise convolution's loop nest where `windows.depthwise` does, else
    the structured engine on the window views."""
    if windows.depthwise is not None and (r := windows.depthwise.run(spec, ins, outs)) is not None:
        return (r,)
    if windows.shift is not None and (r := windows.shift.run(spec, windows, ins, outs)) is not None:
        return (r,)
    return run_structured(spec, body, windows(ins, outs), outs)


@dataclass(frozen=True)
class DepthwisePlan:
    """A depthwise convolution, `out[n, c, i, j] += sum(x[n, c, i * sh + a * dh, j * sw +
    b * dw] * w[c, a, b])` (`depthwise_conv_2d_nchw_chw` or a generic of its maps): no
    channel sum, so neither BLAS nor the shifted matmuls fit (an im2col copy 49x the
    image for a 7x7 kernel, then matrix-vector products). A compiled loop nest (numba),
    where numba runs (`fused_run.enabled`); else the windowed path."""

    x: int
    w: int
    strides: tuple[int, int]
    dilations: tuple[int, int]

    def run(self, spec: StructuredSpec, ins: Sequence[object], outs: Sequence[np.ndarray]) -> np.ndarray | None:
        from shardc.runtime.kernels import fused_run

        x, w, init = ins[self.x], ins[self.w], outs[0]
        dt = spec.out_dtypes[0]
        if not (isinstance(x, np.ndarray) and isinstance(w, np.ndarray) and x.dtype == w.dtype == dt and dt.kind == "f"):
            return None
        if init.size < fused_run.MIN_ELEMENTS or not fused_run.enabled():
            return None
        kernel = _depthwise_kernel()
        if kernel is None:
            return None
        (sh, sw), (dh, dw) = self.strides, self.dilations
        n, c, oh, ow = init.shape
        kh, kw = w.shape[1:]
        if x.shape[:2] != (n, c) or w.shape[0] != c or (oh - 1) * sh + (kh - 1) * dh >= x.shape[2] or (ow - 1) * sw + (kw - 1) * dw >= x.shape[3]:
            return None
        out = np.zeros(init.shape, dt) if spec.zero_init else np.array(init, dtype=dt)
        kernel(np.ascontiguousarray(x), np.ascontiguousarray(w), out, sh, sw, dh, dw)
        return out


_DEPTHWISE: list[object] = []


def _depthwise_kernel() -> Callable[..., None] | None:
    """The compiled loop nest, or None where numba refuses it."""
    if not _DEPTHWISE:
        try:
            import numba  # type: ignore[import-not-found]
        except Exception:  # noqa: BLE001 - not installed, or an incompatible build
            numba = None
        kernel = None
        if numba is not None:
            def depthwise(x, w, out, sh, sw, dh, dw):  # noqa: ANN001, ANN202
                # kernel positions outside, output columns innermost (unit stride: SIMD);
                # each output still sums its positions in order, after its init
                n, c, oh, ow = out.shape
                kh, kw = w.shape[1], w.shape[2]
                for b in range(n):
                    for ch in range(c):
                        for p in range(kh):
                            for q in range(kw):
                                wv = w[ch, p, q]
                                for i in range(oh):
                                    row = x[b, ch, i * sh + p * dh]
                                    dst = out[b, ch, i]
                                    src = row[q * dw :: sw]  # a unit stride when sw is 1: SIMD
                                    for j in range(ow):
                                        dst[j] += src[j] * wv

            try:
                kernel = numba.njit(cache=False, fastmath=False)(depthwise)  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - numba refused: the windowed path
                kernel = None
        _DEPTHWISE.append(kernel)
    return _DEPTHWISE[0]  # type: ignore[return-value]
