"""Lowerings of shard ops to other dialects. The patterns here are reusable pieces:
`convert-shard-to-mpi` applies them, and mlir-opt's `test-grid-*-op-lowering` helper
passes (`shardc.passes.test_shard_passes`) run them alone."""

from xdsl.pattern_rewriter import RewritePattern

from shardc.lowering.all_slice import (
    AllSliceOpLowering,
    collective_process_group_size,
    linearize_index,
    process_linear_index,
)
from shardc.lowering.process_multi_index import ProcessMultiIndexOpLowering


def process_multi_index_lowering_patterns() -> list[RewritePattern]:
    """Upstream's `populateProcessMultiIndexOpLoweringPatterns`."""
    return [ProcessMultiIndexOpLowering()]


def all_slice_lowering_patterns() -> list[RewritePattern]:
    """Upstream's `populateAllSliceOpLoweringPatterns`."""
    return [AllSliceOpLowering()]


def all_op_lowering_patterns() -> list[RewritePattern]:
    """Upstream's `populateAllOpLoweringPatterns`: both of the above."""
    return [*process_multi_index_lowering_patterns(), *all_slice_lowering_patterns()]


__all__ = [
    "AllSliceOpLowering",
    "ProcessMultiIndexOpLowering",
    "all_op_lowering_patterns",
    "all_slice_lowering_patterns",
    "collective_process_group_size",
    "linearize_index",
    "process_linear_index",
    "process_multi_index_lowering_patterns",
]
