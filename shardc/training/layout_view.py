"""How a tensor is laid out over a grid, drawn as a block diagram (in the spirit of JAX's
`jax.debug.visualize_array_sharding` and DTensor's `visualize_sharding`).

The tensor is cut along its split dimensions; each cell of the diagram is one block,
with its index ranges and the ranks that hold it (replicas share a cell). The first
split dimension runs down the rows, the second across the columns (a single split of the
last dimension runs across); more than two split dimensions are listed block by block. Pieces follow the
runtime's rule (`RuntimeSharding.piece`: row-major over the split axes, uneven
remainders to the trailing pieces, explicit offsets where given); halos are named in
the caption, not drawn.

`render_layout` returns a `rich.text.Text`: printed by a rich Console on a terminal each
block gets its own background colour, anywhere else (`.plain`) it is plain text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from shardc.runtime.execute.comm import delinearize
from shardc.runtime.execute.sharding import RuntimeSharding

# Background colours of the blocks (cycled; the 16 ANSI colours every terminal has).
PALETTE = (
    "black on cyan", "black on yellow", "black on green", "white on magenta", "white on blue",
    "white on red", "black on bright_cyan", "black on bright_yellow", "black on bright_green",
    "black on bright_magenta", "black on white", "white on bright_black",
)


@dataclass(frozen=True)
class Block:
    """One block of a tensor: [start, end) per dimension, and the ranks holding it."""

    ranges: tuple[tuple[int, int], ...]
    ranks: tuple[int, ...]

    def index_text(self, shape: Sequence[int]) -> str:
        parts = [":" if (a, b) == (0, n) else f"{a}:{b}" for (a, b), n in zip(self.ranges, shape)]
        return "[" + ", ".join(parts) + "]"


def blocks(shape: Sequence[int], sharding: RuntimeSharding, grid: Sequence[int]) -> list[Block]:
    """The blocks of a tensor of `shape`, in the order of their first rank."""
    grid = tuple(int(g) for g in grid)
    owners: dict[tuple[tuple[int, int], ...], list[int]] = {}
    size = 1
    for g in grid:
        size *= g
    for r in range(size):
        coords = delinearize(r, grid)
        key = tuple(sharding.piece(d, n, grid, coords) for d, n in enumerate(shape))
        owners.setdefault(key, []).append(r)
    return [Block(k, tuple(v)) for k, v in owners.items()]


def ranks_text(ranks: Sequence[int], world: int) -> str:
    """'rank 3', 'ranks 0,2', 'ranks 0-3' (runs of three or more), 'all 4 ranks'."""
    if len(ranks) == world and world > 1:
        return f"all {world} ranks"
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [f"{run[0]}-{run[-1]}" if len(run) >= 3 else ",".join(map(str, run)) for run in runs]
    return "ranks " + ",".join(parts)


def render_layout(shape: Sequence[int], sharding: RuntimeSharding, grid: Sequence[int]) -> Text:
    """The block diagram of a tensor of `shape` under `sharding` on `grid` (see above)."""
    shape = tuple(int(n) for n in shape)
    grid = tuple(int(g) for g in grid)
    world = 1
    for g in grid:
        world *= g
    bl = blocks(shape, sharding, grid)
    split = [d for d in sharding.split_dims() if d < len(shape)]
    style = {b: PALETTE[i % len(PALETTE)] for i, b in enumerate(bl)}
    if len(split) > 2:
        out = Text()
        for b in bl:
            out.append(f" {b.index_text(shape)}  {ranks_text(b.ranks, world)} ", style[b])
            out.append("\n")
        out.rstrip()
        return out
    if len(split) == 2:
        rdim, cdim = split
    elif len(split) == 1 and split[0] < len(shape) - 1:
        rdim, cdim = split[0], None
    else:
        rdim, cdim = None, (split[0] if split else None)

    def pieces(dim: int | None) -> list[tuple[int, int]]:
        return sorted({b.ranges[dim] for b in bl}) if dim is not None else [(0, 0)]

    rows, cols = pieces(rdim), pieces(cdim)
    cell: dict[tuple[int, int], Block] = {}
    for b in bl:
        i = rows.index(b.ranges[rdim]) if rdim is not None else 0
        j = cols.index(b.ranges[cdim]) if cdim is not None else 0
        cell[(i, j)] = b
    lines = {k: (b.index_text(shape), ranks_text(b.ranks, world)) for k, b in cell.items()}
    width = max(len(t) for pair in lines.values() for t in pair) + 2

    out = Text()

    def rule(left: str, mid: str, right: str) -> None:
        out.append(left + mid.join("─" * width for _ in cols) + right + "\n")

    rule("┌", "┬", "┐")
    for i in range(len(rows)):
        for k in range(2):
            out.append("│")
            for j in range(len(cols)):
                b = cell.get((i, j))
                text = lines[(i, j)][k] if b is not None else ""
                out.append(text.center(width), style[b] if b is not None else "")
                out.append("│")
            out.append("\n")
        if i + 1 < len(rows):
            rule("├", "┼", "┤")
    rule("└", "┴", "┘")
    out.rstrip()
    return out


def grid_text(grid: Sequence[int], names: Sequence[str] | None = None) -> str:
    """Which rank sits where on a 1-D or 2-D grid (ranks row-major, last axis fastest);
    other grids as one line per rank."""
    grid = tuple(int(g) for g in grid)
    names = list(names) if names is not None else [f"axis{i}" for i in range(len(grid))]
    if len(grid) == 1:
        return f"{names[0]}: " + "  ".join(str(r) for r in range(grid[0]))
    if len(grid) == 2:
        heads = [f"{names[1]}={j}" for j in range(grid[1])]
        left = max(len(f"{names[0]}={i}") for i in range(grid[0]))
        w = max(len(h) for h in heads)
        out = [" " * left + "  " + "  ".join(h.rjust(w) for h in heads)]
        for i in range(grid[0]):
            out.append(f"{names[0]}={i}".ljust(left) + "  " + "  ".join(str(i * grid[1] + j).rjust(w) for j in range(grid[1])))
        return "\n".join(out)
    world = 1
    for g in grid:
        world *= g
    return "\n".join(f"rank {r}: {delinearize(r, grid)}" for r in range(world))


def spec_text(split_axes: Sequence[Sequence[int]], rank: int, names: Sequence[str] | None = None) -> str:
    """Per tensor dimension, the grid axes it is split over: `(batch, shard+batch, -)`."""
    dims = []
    for d in range(rank):
        axes = split_axes[d] if d < len(split_axes) else ()
        dims.append("+".join(names[a] if names else str(a) for a in axes) if axes else "-")
    return "(" + ", ".join(dims) + ")"


# ---------------------------------------------------------------------------------------
# The training state: each parameter's storage, compute and update layouts
# ---------------------------------------------------------------------------------------


def parameter_layouts(specs: Sequence[object], plan: object, policy: object, grid: object) -> list[Text]:
    """For each parameter (gpt.ParamSpec), its layouts on the training grid (mesh.Grid):
    equal layouts share one diagram (`storage = compute`), a replicated one is a line."""
    from shardc.training.axis import resolve
    from shardc.training.mesh import MESH_AXES, Grid

    assert isinstance(grid, Grid)
    out: list[Text] = []
    for s in specs:
        lay = resolve(s.axes, plan, policy, s.path)  # type: ignore[attr-defined,arg-type]
        shape = tuple(s.shape)  # type: ignore[attr-defined]
        groups: list[tuple[list[str], object]] = []
        for name, spec in (("storage", lay.storage), ("compute", lay.compute), ("update", lay.update)):
            for names, other in groups:
                if other == spec:
                    names.append(name)
                    break
            else:
                groups.append(([name], spec))
        t = Text()
        t.append(f"{s.path}", "bold")  # type: ignore[attr-defined]
        t.append(f"  {list(shape)}  axes ({', '.join(s.axes)})\n")  # type: ignore[attr-defined]
        for names, spec in groups:
            axes = tuple(tuple(Grid.axis_index(a) for a in (d or ())) for d in spec)  # type: ignore[attr-defined]
            rs = RuntimeSharding(grid.name, grid.shape, axes)
            local = rs.local_shape(shape, grid.shape, (0,) * len(grid.shape))
            label = " = ".join(names)
            if not any(axes):  # one block on every rank: a line says it
                t.append(f"  {label}: replicated, every rank holds {list(shape)}\n")
                continue
            t.append(f"  {label}: split {spec_text(axes, len(shape), MESH_AXES)}, per rank {list(local)}\n")
            t.append_text(_indent(render_layout(shape, rs, grid.shape), "    "))
            t.append("\n")
        t.rstrip()
        out.append(t)
    return out


def _indent(text: Text, prefix: str) -> Text:
    out = Text()
    for i, line in enumerate(text.split("\n")):
        if i:
            out.append("\n")
        out.append(prefix)
        out.append_text(line)
    return out


def print_texts(texts: Sequence[Text | str], file: object = None, color: bool | None = None) -> None:
    """Print through a rich Console: colours on a terminal (or when `color`), plain text
    otherwise."""
    import sys

    from rich.console import Console

    stream = file if file is not None else sys.stdout
    if color is None:
        try:
            color = bool(stream.isatty())  # type: ignore[attr-defined]
        except (AttributeError, ValueError):
            color = False
    if not color:
        for t in texts:
            stream.write((t.plain if isinstance(t, Text) else t) + "\n")  # type: ignore[attr-defined]
        stream.flush()  # type: ignore[attr-defined]
        return
    console = Console(file=stream, force_terminal=True, highlight=False, soft_wrap=True)  # type: ignore[arg-type]
    for t in texts:
        console.print(t)


__all__ = ["Block", "blocks", "grid_text", "parameter_layouts", "print_texts", "ranks_text", "render_layout", "spec_text"]
