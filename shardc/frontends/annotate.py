"""Annotate the arguments of a program written elsewhere (torch-mlir's output, say) with
shardings, so that `sharding-propagation` can do the rest.

    text = annotate_arguments(exported.text, grid=(2, 2),
                              shardings={"idx": [[0]], "blocks.0.fc.weight": [[1]]},
                              names=exported.arg_names)

A sharding is written as MLIR's `split_axes`: one list of grid axes per tensor dimension
(`[[0]]` splits dimension 0 over grid axis 0; `[[], [1]]` splits dimension 1 over axis 1).
Arguments are named by index, by `argN`, or by the names given in `names` (the FQNs of
an exported module). The grid is added as `shard.grid @grid` unless the module already
has one of that name. Arguments not named stay unannotated: propagation decides them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block
from xdsl.rewriter import InsertPoint, Rewriter

from shardc.dialects.shard import GridOp, ShardingOp, ShardOp

SplitAxes = Sequence[Sequence[int]]


class AnnotationError(ValueError):
    """An argument that does not exist, a sharding that does not fit its argument."""


def _find_function(module: ModuleOp, name: str | None) -> func.FuncOp:
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    if name is not None:
        for f in funcs:
            if f.sym_name.data == name:
                return f
        raise AnnotationError(f"no function @{name} (functions: {', '.join('@' + f.sym_name.data for f in funcs) or 'none'})")
    if len(funcs) != 1:
        raise AnnotationError("the module has several functions: name the one to annotate")
    return funcs[0]


def _index_of(key: str | int, block: Block, names: Sequence[str] | None) -> int:
    n = len(block.args)
    if isinstance(key, int):
        index = key
    elif names is not None and key in names:
        index = list(names).index(key)
    elif key.startswith("arg") and key[3:].isdigit():
        index = int(key[3:])
    elif key.isdigit():
        index = int(key)
    else:
        known = ", ".join(names) if names is not None else f"arg0..arg{n - 1}"
        raise AnnotationError(f"no argument named {key!r} (arguments: {known})")
    if not 0 <= index < n:
        raise AnnotationError(f"argument #{index} does not exist: the function takes {n}")
    return index


def _check_fits(key: str | int, ty: object, split_axes: SplitAxes, grid: Sequence[int]) -> None:
    if not isinstance(ty, TensorType):
        raise AnnotationError(f"argument {key!r} is not a tensor ({ty}): only tensors are sharded")
    shape = ty.get_shape()
    if len(split_axes) > len(shape):
        raise AnnotationError(f"argument {key!r}: {len(split_axes)} split dimensions for a tensor of rank {len(shape)}")
    seen: set[int] = set()
    for dim, axes in enumerate(split_axes):
        size = 1
        for axis in axes:
            if not 0 <= axis < len(grid):
                raise AnnotationError(f"argument {key!r}: grid axis {axis} does not exist (the grid is {'x'.join(map(str, grid))})")
            if axis in seen:
                raise AnnotationError(f"argument {key!r}: grid axis {axis} splits two dimensions")
            seen.add(axis)
            size *= grid[axis]
        if shape[dim] >= 0 and shape[dim] % size:
            raise AnnotationError(f"argument {key!r}: dimension {dim} of size {shape[dim]} does not divide by {size}")


def annotate_module(
    module: ModuleOp,
    grid: Sequence[int],
    shardings: Mapping[str | int, SplitAxes],
    *,
    names: Sequence[str] | None = None,
    function: str | None = None,
    grid_name: str = "grid",
) -> None:
    """Add the grid and a producer `shard.shard` for each named argument, in place."""
    f = _find_function(module, function)
    block = f.body.blocks[0]
    if not any(isinstance(op, GridOp) and op.sym_name.data == grid_name for op in module.ops):
        first = module.body.block.first_op
        grid_op = GridOp(grid_name, list(grid))
        if first is None:
            module.body.block.add_op(grid_op)
        else:
            module.body.block.insert_op_before(grid_op, first)
    point = InsertPoint.at_start(block)
    for key, split_axes in shardings.items():
        index = _index_of(key, block, names)
        arg = block.args[index]
        _check_fits(key, arg.type, split_axes, grid)
        if any(isinstance(u.operation, ShardOp) and not u.operation.for_users for u in arg.uses):
            raise AnnotationError(f"argument {key!r} is annotated already")
        uses = list(arg.uses)
        sharding = ShardingOp(grid_name, [list(a) for a in split_axes])
        shard = ShardOp(arg, sharding.result)
        Rewriter.insert_op([sharding, shard], point)
        point = InsertPoint.after(shard)
        for use in uses:
            use.operation.operands[use.index] = shard.result


def annotate_arguments(
    text: str,
    grid: Sequence[int],
    shardings: Mapping[str | int, SplitAxes],
    *,
    names: Sequence[str] | None = None,
    function: str | None = None,
    grid_name: str = "grid",
) -> str:
    """`annotate_module` on MLIR text; returns the annotated program as text."""
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.ir.printer import module_to_string

    module = LocatingParser(make_context(), text, "<annotate>").parse_module()
    annotate_module(module, grid, shardings, names=names, function=function, grid_name=grid_name)
    return module_to_string(module)
