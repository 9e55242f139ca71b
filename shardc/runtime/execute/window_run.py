"""The run time of windowed operands (`window.py` plans them): an input read through
affine sums of loop dims, `x[n, c, oh * s + kh * d, ...]` (convolutions, pooling), is
given to the structured engine as a strided view whose axes are those loop dims. The
engine then sees an ordinary projected-permutation operand: a convolution becomes a
contraction over (c, kh, kw) on BLAS (the view copied once into im2col order by the
matmul's reshape), a pooling a reduction over the window axes. No xDSL here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from shardc.runtime.execute.compiled import RuntimeExecutionError
from shardc.runtime.execute.structured_run import StructuredSpec, contract2, run_structured


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
"""Loop positions up to which `ShiftPlan` runs one matmul per position (7x7)."""
MIN_SHIFT_COLUMNS = 64
"""Flattened positions per image from which the shifted matmuls pay (fewer: im2col)."""
DUAL_CHUNK_BYTES = 1 << 20
"""The dual shift's matmuls take their columns in chunks of both factors up to this
size (half an L2 cache), so that the KH x KW matmuls on one chunk read it from cache."""


def phase_split(x: np.ndarray, sh: int, sw: int, used: set[tuple[int, int]] | None = None) -> np.ndarray:
    """`x` (..., H, W) as its sh x sw polyphase components, (..., sh, sw, ceil(H / sh),
    ceil(W / sw)) with `out[..., r, t, i, j] = x[..., r + i * sh, t + j * sw]` (zeros past
    the edge): a stride-s window becomes a unit-stride one on one phase. One copy of the
    image (of the `used` phases only: a 1x1 stride-2 convolution reads one); none when
    both strides are 1 (the image read in place)."""
    hp, wp = x.shape[-2:]
    if sh == sw == 1:
        return x.reshape(*x.shape[:-2], 1, 1, hp, wp)
    h2, w2 = -(-hp // sh), -(-wp // sw)
    out = np.empty((*x.shape[:-2], sh, sw, h2, w2), x.dtype)
    for r in range(sh):
        for t in range(sw):
            if used is not None and (r, t) not in used:
                continue
            src = x[..., r::sh, t::sw]
            dst = out[..., r, t, :, :]
            dst[..., : src.shape[-2], : src.shape[-1]] = src
            dst[..., src.shape[-2] :, :] = 0
            dst[..., : src.shape[-2], src.shape[-1] :] = 0
    return out


@dataclass(frozen=True)
class ShiftPlan:
    """A contraction whose windowed input `x` reads its last two axes as `oh * sh + kh *
    dh` and `ow * sw + kw * dw` (a ResNet convolution, its input gradient, and its weight
    gradient, where the output gradient is the "kernel" and the kernel positions the
    "output"), run without an im2col copy. One pair of window dims is looped over (few
    positions), the other flattened into the matmul: per looped position, the image (or
    its polyphase component, `phase_split`, where the flattened dims' coefficient is a
    stride) shifted by that position and read as rows flattened over the image's full
    width W is a plain strided matrix (the W - n surplus columns of each row are
    computed and dropped, or, when the flattened dims are the other factor's, that
    factor is zero-padded to W columns). Loop over the kernel positions (a forward
    convolution: KH x KW matmuls accumulated into an output laid out W wide) or over the
    output positions (a weight gradient: OH x OW matmuls each summing over the whole
    image, the "dual shift"), whichever has fewer positions."""

    x: int  # the windowed input
    w: int  # the other factor
    lead: tuple[int, ...]  # loop dims of x's axes but the two windows, in order
    oh: int
    ow: int
    kh: int
    kw: int
    dh: int
    dw: int
    w_map: tuple[int | None, ...]
    out_lead: tuple[int, ...]  # the output's loop dims but (oh, ow), in order
    n_loops: int
    sh: int = 1
    sw: int = 1
    x_window: int = -2  # the axis of x read as `oh * sh + kh * dh` (the next: ow's)
    out_window: int = -2  # the output's axis of oh (the next: ow's)

    @staticmethod
    def loops_over_kernel(n_out: int, n_kernel: int) -> bool | None:
        """True: loop over the kernel positions (a forward convolution); False: over the
        output positions (a weight gradient); None: neither pays (im2col)."""
        forward = n_kernel <= MAX_SHIFTS and n_out >= MIN_SHIFT_COLUMNS
        dual = n_out <= MAX_SHIFTS and n_kernel >= MIN_SHIFT_COLUMNS
        if forward and dual:
            return n_kernel <= n_out
        return True if forward else False if dual else None

    def run(self, spec: StructuredSpec, windows: WindowPlan, ins: Sequence[object], outs: Sequence[np.ndarray]) -> np.ndarray | None:
        """The result, or None where the operands do not allow it (the caller runs the
        general windowed path)."""
        x, w, init = ins[self.x], ins[self.w], outs[0]
        dt = spec.out_dtypes[0]
        if not (isinstance(x, np.ndarray) and isinstance(w, np.ndarray) and x.dtype == w.dtype == dt and dt.kind == "f"):
            return None
        item = x.itemsize
        operands = [*ins, *outs]
        # channels last (nhwc): the windows moved last, a view (the image's rows still
        # flatten over its full width, at the width axis's stride)
        xw = self.x_window % x.ndim
        x = np.moveaxis(x, (xw, xw + 1), (-2, -1))
        ow_axis = self.out_window % init.ndim
        init = np.moveaxis(init, (ow_axis, ow_axis + 1), (-2, -1))
        hp, wp = x.shape[-2:]
        sizes = [np.shape(operands[i])[k] for i, k in windows.size_src]
        oh, ow, kh, kw = (sizes[d] for d in (self.oh, self.ow, self.kh, self.kw))
        if 0 in sizes or (oh - 1) * self.sh + (kh - 1) * self.dh >= hp or (ow - 1) * self.sw + (kw - 1) * self.dw >= wp:
            return None
        forward = self.loops_over_kernel(oh * ow, kh * kw)
        if forward is None:
            return None
        if forward:  # flatten (oh, ow), loop over (kh, kw)
            flat_c, loop_c, n_flat, n_loop = (self.sh, self.sw), (self.dh, self.dw), (oh, ow), (kh, kw)
        else:  # flatten (kh, kw), loop over (oh, ow)
            flat_c, loop_c, n_flat, n_loop = (self.dh, self.dw), (self.sh, self.sw), (kh, kw), (oh, ow)
        if flat_c == (1, 1) and x.strides[-2] != wp * x.strides[-1]:
            x = np.ascontiguousarray(x)
        used = {((a * loop_c[0]) % flat_c[0], (b * loop_c[1]) % flat_c[1]) for a in range(n_loop[0]) for b in range(n_loop[1])}
        phases = phase_split(x, *flat_c, used)
        h2, w2 = phases.shape[-2:]
        flat = phases.reshape(*phases.shape[:-2], h2 * w2)
        cols = (n_flat[0] - 1) * w2 + n_flat[1]  # the flattened columns any row reaches
        j = self.n_loops  # the flattened loop
        sizes.append(cols)
        x_map = (*self.lead, j)
        loop_dims, flat_dims = ((self.kh, self.kw), (self.oh, self.ow)) if forward else ((self.oh, self.ow), (self.kh, self.kw))

        def slab(a: int, b: int) -> np.ndarray:
            (ph, oa), (pw, ob) = divmod(a * loop_c[0], flat_c[0])[::-1], divmod(b * loop_c[1], flat_c[1])[::-1]
            start = oa * w2 + ob
            return flat[..., ph, pw, start : start + cols]

        if forward:
            big = np.empty([*(sizes[d] for d in self.out_lead), oh * w2], dt)
            rows = big.reshape(*big.shape[:-1], oh, w2)
            if spec.zero_init:
                big.fill(0)
            else:
                np.copyto(rows[..., :ow], init)
            target = big[..., :cols]
            w_map = tuple(d for d in self.w_map if d not in loop_dims)
            so = (*self.out_lead, j)
            # the factor per kernel position as a unit-stride matrix (BLAS reads it in place)
            per_position = np.ascontiguousarray(np.moveaxis(w, (self.w_map.index(self.kh), self.w_map.index(self.kw)), (0, 1)))
            # one input and one output channel (an average pool's gradient, a transposed
            # convolution per channel): the factor is a scalar per position, the
            # matmul a scaled add (BLAS would run batches of 1 x 1 products)
            scalar = all(sizes[d] == 1 for d in w_map) and [d for d in self.lead if sizes[d] != 1] == [d for d in self.out_lead if sizes[d] != 1]
            for a in range(kh):
                for b in range(kw):
                    if scalar:
                        np.add(target, slab(a, b).reshape(target.shape) * per_position[a, b].item(), out=target)
                        continue
                    r, _ = contract2(slab(a, b), x_map, per_position[a, b], w_map, so, sizes, dt, None, target, 1.0, True)
                    if r is not target:
                        np.add(target, r, out=target)
            return np.moveaxis(rows[..., :ow], (-2, -1), (ow_axis, ow_axis + 1))
        # the other factor with its (kh, kw) axes last, zero-padded to w2 columns, flattened
        wk = np.moveaxis(w, (self.w_map.index(self.kh), self.w_map.index(self.kw)), (-2, -1))
        padded = np.zeros((*wk.shape[:-2], kh, w2), dt)
        padded[..., :kw] = wk
        w_flat = padded.reshape(*wk.shape[:-2], kh * w2)[..., :cols]
        w_map = (*(d for d in self.w_map if d not in flat_dims), j)
        # summed dims the image shares with the other factor (a batch summed into the
        # weight gradient) cannot join the flattened columns without an im2col copy:
        # one matmul per index, accumulated in place
        # (dot products, no matmul: contract2 reads them in place, no split needed)
        outer: list[int] = []
        if any(d not in w_map for d in self.out_lead) or any(d not in x_map for d in self.out_lead):
            outer = [d for d in self.lead if d in w_map and d in spec.red_dims and sizes[d] > 1]
        xm, wm = tuple(d for d in x_map if d not in outer), tuple(d for d in w_map if d not in outer)
        # per summed index, the columns in chunks whose two factors stay in cache
        # across the output positions' matmuls (each position re-reads them shifted)
        chunk = cols
        if outer:
            rows = math.prod(sizes[d] for d in xm if d != j) + math.prod(sizes[d] for d in wm if d != j)
            chunk = max(1, MIN_SHIFT_COLUMNS, min(cols, DUAL_CHUNK_BYTES // (rows * item)))
        result = np.zeros((oh, ow, *(sizes[d] for d in self.out_lead)), dt)
        slabs = [[slab(a, b) for b in range(ow)] for a in range(oh)]
        for idx in np.ndindex(*(sizes[d] for d in outer)):
            pick = dict(zip(outer, idx))
            x_pick = tuple(pick.get(d, slice(None)) for d in x_map)
            w_pick = w_flat[tuple(pick.get(d, slice(None)) for d in w_map)]
            for k0 in range(0, cols, chunk):
                k1 = min(cols, k0 + chunk)
                sizes[j] = k1 - k0
                wi = w_pick[..., k0:k1]
                for a in range(oh):
                    for b in range(ow):
                        acc = result[a, b, ...]  # a view, even 0-d
                        r, _ = contract2(slabs[a][b][x_pick][..., k0:k1], xm, wi, wm, self.out_lead, sizes, dt, None, acc, 1.0, True)
                        if r is not acc:
                            np.add(acc, r, out=acc)
        out = np.moveaxis(result, (0, 1), (ow_axis, ow_axis + 1))
        return np.ascontiguousarray(out) if spec.zero_init else np.add(outs[0], out)


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
        from shardc.runtime.execute.kernels import fused_run

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
        # C order: numba compiles a non-contiguous array (a broadcast init copied in
        # its own order) into a loop it does not vectorize (4x slower, measured)
        out = np.zeros(init.shape, dt) if spec.zero_init else np.array(init, dtype=dt, order="C")
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
                # per output row, kernel positions in order, output columns innermost
                # (each output sums its positions in order, after its init). The inner
                # index is unsigned: a signed one gets numba's negative-index wraparound,
                # which keeps LLVM from vectorizing the loop (4-5x slower, measured).
                n, c, oh, ow = out.shape
                kh, kw = w.shape[1], w.shape[2]
                uow, usw = np.uint64(ow), np.uint64(sw)
                for b in range(n):
                    for ch in range(c):
                        for i in range(oh):
                            o = out[b, ch, i]
                            for p in range(kh):
                                xr = x[b, ch, i * sh + p * dh]
                                for q in range(kw):
                                    wv = w[ch, p, q]
                                    off = np.uint64(q * dw)
                                    if sw == 1:
                                        for j in range(uow):
                                            o[j] += xr[off + j] * wv
                                    else:
                                        for j in range(uow):
                                            o[j] += xr[off + j * usw] * wv

            try:
                kernel = numba.njit(cache=False, fastmath=False)(depthwise)  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - numba refused: the windowed path
                kernel = None
        _DEPTHWISE.append(kernel)
    return _DEPTHWISE[0]  # type: ignore[return-value]
