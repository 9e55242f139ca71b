"""`shardc-view`: how every annotated value of a program is laid out over its grid.

    shardc-view prog.mlir                        # after sharding-propagation
    shardc-view prog.mlir --pipeline none        # the annotations as written
    shardc-view prog.mlir --pipeline "sharding-propagation{traversal=forward}" --func f
    shardc-view prog.mlir --color always | less -R

For each `shard.shard` of the program (after the pipeline, propagation by default) it
prints the op as `shardc-opt` prints it (so the SSA names match `shardc-opt`'s output),
its grid, the split of each dimension, the local shape and a block diagram of which
rank holds which block (`shardc.training.layout_view`). The grids come first, with
their rank placement. Colours on a terminal, plain text otherwise. Bad IR or a failing
pass: the MLIR diagnostic, exit 1; command-line problems: one line, exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.text import Text

from shardc.tools.cli import ArgParser, UserError, run_tool

TOOL = "shardc-view"


def _arg_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog=TOOL, description="Show how each annotated value of a program is laid out over its grid.")
    p.add_argument("program", help="an .mlir file with shard annotations")
    p.add_argument("--pipeline", default="sharding-propagation", help="passes to run first, mlir-opt pipeline syntax, or 'none' (default: %(default)s)")
    p.add_argument("--func", help="only this function")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour the blocks (default: on a terminal)")
    return p


def _value_texts(text: str, name: str, only: str | None) -> list[Text | str]:
    """The report for a program already transformed and printed as `text`."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import TensorType

    from shardc.dialects.shard import GridOp, ShardingOp, ShardOp, lookup_grid
    from shardc.ir.escape import display
    from shardc.ir.locations import find_file_loc
    from shardc.runtime.execute.sharding import RuntimeSharding
    from shardc.tools.cli import parse_module
    from shardc.training.layout_view import grid_text, render_layout, spec_text

    module = parse_module(text, name)
    lines = text.splitlines()
    out: list[Text | str] = []
    for g in module.walk():
        if isinstance(g, GridOp):
            shape = g.shape_tuple
            desc = "x".join("?" if d is None else str(d) for d in shape)
            out.append(f"grid @{display(g.sym_name.data)} {desc}")
            if None not in shape:
                out.append("  " + grid_text(shape).replace("\n", "\n  "))  # type: ignore[arg-type]
    funcs = [f for f in module.walk() if isinstance(f, func.FuncOp) and f.body.blocks]
    if only is not None and only.lstrip("@") not in {f.sym_name.data for f in funcs}:
        raise UserError(f"no function @{only.lstrip('@')} in the program")
    count = 0
    for f in funcs:
        if only is not None and f.sym_name.data != only.lstrip("@"):
            continue
        shards = [op for op in f.walk() if isinstance(op, ShardOp)]
        out.append(f"\n@{display(f.sym_name.data)}: {len(shards)} annotated value{'s' if len(shards) != 1 else ''}")
        for op in shards:
            count += 1
            loc = find_file_loc(op.location)
            where = display(lines[loc.line.data - 1].strip() if loc is not None else op.name)
            t = Text()
            t.append(where + "\n", "bold")
            ty = op.result.type
            sh = op.sharding.owner
            if not isinstance(sh, ShardingOp):
                t.append("  sharding not defined by a shard.sharding op: not drawn")
                out.append(t)
                continue
            grid = lookup_grid(sh, sh.grid)
            if grid is None:
                t.append(f"  no shard.grid named {display(sh.grid.string_value())}: not drawn")
                out.append(t)
                continue
            gshape = grid.shape_tuple
            rank = len(ty.get_shape()) if isinstance(ty, TensorType) else 0
            t.append(f"  grid @{display(grid.sym_name.data)}, split {spec_text(sh.split_axes_tuple, rank)}")
            halos = tuple(sh.static_halo_sizes.get_values())
            if halos:
                t.append(f", halo sizes {list(halos)}")
            if not isinstance(ty, TensorType) or any(d < 0 for d in ty.get_shape()) or None in gshape or sh.dynamic_halo_sizes or sh.dynamic_sharded_dims_offsets:
                t.append("\n  dynamic shape, grid, halos or offsets: not drawn")
                out.append(t)
                continue
            shape = tuple(ty.get_shape())
            rs = RuntimeSharding(grid.sym_name.data, gshape, sh.split_axes_tuple, halos, tuple(sh.static_sharded_dims_offsets.get_values()))
            try:
                local = rs.local_shape(shape, gshape, (0,) * len(gshape))  # type: ignore[arg-type]
                diagram = render_layout(shape, rs, gshape)  # type: ignore[arg-type]
            except Exception as e:  # noqa: BLE001 - an impossible layout is reported, not raised
                t.append(f"\n  cannot lay out {list(shape)} on grid {list(gshape)}: {display(str(e))}")
                out.append(t)
                continue
            t.append(f", rank 0 holds {list(local)} of {list(shape)}\n")
            for i, line in enumerate(diagram.split("\n")):
                if i:
                    t.append("\n")
                t.append("  ")
                t.append_text(line)
            out.append(t)
    if count == 0:
        out.append("no shard.shard annotations in the program")
    return out


def view(path: str, pipeline: str = "sharding-propagation", only: str | None = None) -> list[Text | str]:
    """The report of `shardc-view` as rich Texts (`.plain` for plain text)."""
    from shardc.ir.printer import module_to_string
    from shardc.tools.cli import apply_passes, parse_module, pipeline_passes
    from shardc.tools.run import read_program

    text = read_program(path)
    passes = [] if pipeline.strip() in ("", "none") else pipeline_passes(pipeline)
    module = parse_module(text, path)
    apply_passes(module, passes)
    printed = module_to_string(module)
    return _value_texts(printed, path, only)


def main(argv: Sequence[str] | None = None) -> int:
    return run_tool(TOOL, lambda: _main(list(sys.argv[1:] if argv is None else argv)))


def _main(argv: list[str]) -> int:
    from shardc.training.layout_view import print_texts

    a = _arg_parser().parse_args(argv)
    texts = view(a.program, a.pipeline, a.func)
    print_texts(texts, color={"auto": None, "always": True, "never": False}[a.color])
    return 0


if __name__ == "__main__":
    sys.exit(main())
