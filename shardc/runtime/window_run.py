"""The run time of windowed operands (`window.py` plans them): an input read through
affine sums of loop dims, `x[n, c, oh * s + kh * d, ...]` (convolutions, pooling), is
given to the structured engine as a strided view whose axes are those loop dims. The
engine then sees an ordinary projected-permutation operand: a convolution becomes a
contraction over (c, kh, kw) on BLAS (the view copied once into im2col order by the
matmul's reshape), a pooling a reduction over the window axes. No xDSL here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from shardc.runtime.compiled import RuntimeExecutionError


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

    def __call__(self, ins: Sequence[object], outs: Sequence[np.ndarray]) -> list[object]:
        operands = [*ins, *outs]
        sizes = [np.shape(operands[i])[k] for i, k in self.size_src]
        new = list(ins)
        for v in self.views:
            new[v.input] = v.view(ins[v.input], sizes, self.name)  # type: ignore[arg-type]
        return new
