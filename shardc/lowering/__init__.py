"""Lowerings of shard ops to other dialects. The patterns here are reusable pieces:
`convert-shard-to-mpi` applies them, and mlir-opt's `test-grid-*-op-lowering` helper
passes (`shardc.lowering.test_lowering_passes`) run them alone. Each pattern's module is
imported when asked for: `convert-shard-to-mpi` (in this package) imports only those of
the ops its input holds."""

from xdsl.pattern_rewriter import RewritePattern


def process_multi_index_lowering_patterns() -> list[RewritePattern]:
    """Upstream's `populateProcessMultiIndexOpLoweringPatterns`."""
    from shardc.lowering.process_multi_index import ProcessMultiIndexOpLowering

    return [ProcessMultiIndexOpLowering()]


def all_slice_lowering_patterns() -> list[RewritePattern]:
    """Upstream's `populateAllSliceOpLoweringPatterns`."""
    from shardc.lowering.all_slice import AllSliceOpLowering

    return [AllSliceOpLowering()]


def all_op_lowering_patterns() -> list[RewritePattern]:
    """Upstream's `populateAllOpLoweringPatterns`: both of the above."""
    return [*process_multi_index_lowering_patterns(), *all_slice_lowering_patterns()]


__all__ = [
    "all_op_lowering_patterns",
    "all_slice_lowering_patterns",
    "process_multi_index_lowering_patterns",
]
