"""Shardings at run time: grids resolved against the world, the local piece of a global
array on each device, and the reverse (assembling a global array from the pieces).

The layout rules are MLIR's: a tensor dimension split along grid axes `A` is cut into
`prod(grid[a] for a in A)` pieces, piece `k` going to the device whose coordinates on
`A` linearise (row-major, in the order listed) to `k`. Without `sharded_dims_offsets`
the pieces are even, the remainder going one element each to the trailing pieces (as
MLIR's lowering of `shard.shard_shape`); with them, piece `k` is `[off[k], off[k+1])`.
Halo sizes widen each local piece by `lo` before and `hi` after its core; halo cells
that fall outside the global array are zero.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from shardc.runtime.execute.comm import CommError, delinearize, group_size, in_group_index

Grid = tuple[int, ...]


@functools.lru_cache(maxsize=256)
def resolve_grid(shape: tuple[int | None, ...], world: int) -> Grid:
    """A grid shape with dynamic (None) dims resolved from the world size: one dynamic
    dim takes what the static ones leave; several are an error unless the static part
    already uses the whole world (then they are 1)."""
    static = 1
    for d in shape:
        if d is not None:
            static *= d
    dynamic = [i for i, d in enumerate(shape) if d is None]
    if not dynamic:
        if static != world:
            raise CommError(f"grid of shape {_fmt(shape)} has {static} devices but the world has {world} ranks")
        return tuple(int(d) for d in shape)  # type: ignore[arg-type]
    if static == 0 or world % static:
        raise CommError(f"grid of shape {_fmt(shape)} cannot be laid out on {world} ranks")
    rest = world // static
    if len(dynamic) > 1 and rest != 1:
        raise CommError(f"grid of shape {_fmt(shape)} has {len(dynamic)} dynamic dimensions: cannot resolve them from {world} ranks")
    return tuple(rest if d is None else d for d in shape)


def _fmt(shape: Sequence[int | None]) -> str:
    return "x".join("?" if d is None else str(d) for d in shape)


@dataclass(frozen=True)
class RuntimeSharding:
    """The value of a `!shard.sharding` at run time (dynamic entries resolved)."""

    grid: str
    grid_shape: tuple[int | None, ...]
    split_axes: tuple[tuple[int, ...], ...]
    halo_sizes: tuple[int, ...] = ()
    sharded_dims_offsets: tuple[int, ...] = ()

    def split_dims(self) -> list[int]:
        return [d for d, axes in enumerate(self.split_axes) if axes]

    def halos(self, dim: int) -> tuple[int, int]:
        """(lo, hi) halo of tensor dimension `dim` (0, 0 when it has none)."""
        if not self.halo_sizes or dim >= len(self.split_axes) or not self.split_axes[dim]:
            return 0, 0
        k = self.split_dims().index(dim)
        return self.halo_sizes[2 * k], self.halo_sizes[2 * k + 1]

    def _offsets(self, dim: int, grid: Grid) -> list[int] | None:
        if not self.sharded_dims_offsets:
            return None
        pos = 0
        for d, axes in enumerate(self.split_axes):
            if not axes:
                continue
            n = group_size(grid, axes)
            if d == dim:
                offs = list(self.sharded_dims_offsets[pos : pos + n + 1])
                if len(offs) != n + 1:
                    raise CommError("sharded_dims_offsets has the wrong size for the grid")
                return offs
            pos += n + 1
        return None

    def piece(self, dim: int, size: int, grid: Grid, coords: Sequence[int]) -> tuple[int, int]:
        """[start, end) of the core of this device's piece of dimension `dim` (size `size`)."""
        if dim >= len(self.split_axes) or not self.split_axes[dim]:
            return 0, size
        axes = self.split_axes[dim]
        n = group_size(grid, axes)
        k = in_group_index(grid, axes, coords)
        offs = self._offsets(dim, grid)
        if offs is not None:
            if offs[-1] != size:
                raise CommError(f"sharded_dims_offsets end at {offs[-1]} but dimension {dim} has size {size}")
            return offs[k], offs[k + 1]
        return even_piece(size, n, k)

    def local_shape(self, shape: Sequence[int], grid: Grid, coords: Sequence[int]) -> tuple[int, ...]:
        out = []
        for d, s in enumerate(shape):
            a, b = self.piece(d, s, grid, coords)
            lo, hi = self.halos(d)
            out.append(b - a + lo + hi)
        return tuple(out)

    def local_part(self, x: np.ndarray, grid: Grid, coords: Sequence[int]) -> np.ndarray:
        """This device's piece of the global array `x`, halos included (zero outside)."""
        if any(self.split_axes[x.ndim :]):  # trailing empty axes split nothing
            raise CommError(f"sharding splits {len(self.split_axes)} dimensions but the array has rank {x.ndim}")
        src: list[slice] = []
        dst: list[slice] = []
        shape: list[int] = []
        for d, s in enumerate(x.shape):
            a, b = self.piece(d, s, grid, coords)
            lo, hi = self.halos(d)
            start, end = a - lo, b + hi
            shape.append(end - start)
            cs, ce = max(start, 0), min(end, s)
            src.append(slice(cs, ce))
            dst.append(slice(cs - start, ce - start))
        if all(sl.start == 0 and sl.stop == s for sl, s in zip(src, x.shape)) and tuple(shape) == x.shape:
            return x
        out = np.zeros(shape, dtype=x.dtype)
        out[tuple(dst)] = x[tuple(src)]
        return out

    def core(self, local: np.ndarray) -> np.ndarray:
        """The local array without its halos."""
        idx = []
        for d, s in enumerate(local.shape):
            lo, hi = self.halos(d)
            idx.append(slice(lo, s - hi))
        return local[tuple(idx)]

    def assemble(self, parts: Sequence[np.ndarray], grid: Grid) -> np.ndarray:
        """The global array from every device's local array (`parts[rank]`)."""
        cores = [self.core(p) for p in parts]
        shape: list[int] = []
        for d in range(cores[0].ndim):
            if d < len(self.split_axes) and self.split_axes[d]:
                axes = self.split_axes[d]
                seen: dict[int, int] = {}
                for r, c in enumerate(cores):
                    seen.setdefault(in_group_index(grid, axes, delinearize(r, grid)), c.shape[d])
                shape.append(sum(seen.values()))
            else:
                shape.append(cores[0].shape[d])
        out = np.empty(shape, dtype=cores[0].dtype)
        for r, c in enumerate(cores):
            coords = delinearize(r, grid)
            idx = tuple(slice(*self.piece(d, s, grid, coords)) for d, s in enumerate(shape))
            out[idx] = c
        return out


def even_piece(size: int, n: int, k: int) -> tuple[int, int]:
    """Piece `k` of `n` of a dimension of `size`: the remainder goes to trailing pieces."""
    base, rem = divmod(size, n)
    first_big = n - rem
    start = k * base + max(0, k - first_big)
    return start, start + base + (1 if k >= first_big else 0)
