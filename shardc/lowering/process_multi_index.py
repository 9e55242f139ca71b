"""Lowering of `shard.process_multi_index` to the linear process index, delinearized
over the grid shape (upstream's `ProcessMultiIndexOpLowering`, `Transforms.cpp`):

    %lin = shard.process_linear_index on @g : index
    %shape:2 = shard.grid_shape @g : index, index
    %idx:2 = affine.delinearize_index %lin into (%shape#0, %shape#1) : index, index

and the op's results become the entries of `%idx` for its axes (all axes when none).
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from shardc.dialects import shard
from shardc.dialects.affine import DelinearizeIndexOp


class ProcessMultiIndexOpLowering(RewritePattern):
    """Rewrites `shard.process_multi_index` whose grid is known; others are left alone."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, shard.ProcessMultiIndexOp):
            return
        grid = shard.lookup_grid(op, op.grid)
        if grid is None:
            return
        name = grid.sym_name.data
        rewriter.insertion_point = InsertPoint.after(op)
        linear = rewriter.insert(shard.ProcessLinearIndexOp(name))
        shape = rewriter.insert(shard.GridShapeOp(grid))
        complete = rewriter.insert(DelinearizeIndexOp(linear.result, list(shape.results)))
        axes = op.axes.get_values() or tuple(range(grid.rank))
        rewriter.replace(op, [], [complete.multi_index[a] for a in axes])
