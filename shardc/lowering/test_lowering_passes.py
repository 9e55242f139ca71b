"""mlir-opt's test passes for the shard op lowerings (upstream's
`mlir/test/lib/Dialect/Shard/TestOpLowering.cpp`), under mlir-opt's names: each runs
one lowering's patterns alone under the greedy driver, so that MLIR-style lit tests run
unchanged against shardc-opt.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from shardc.lowering import all_slice_lowering_patterns, process_multi_index_lowering_patterns
from shardc.passes.greedy import apply_patterns_greedily


@dataclass(frozen=True)
class TestGridAllSliceOpLoweringPass(ModulePass):
    """Lowers `shard.all_slice` (and folds what the lowering leaves foldable)."""

    name = "test-grid-all-slice-op-lowering"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        apply_patterns_greedily(op, all_slice_lowering_patterns(), ctx=ctx)


@dataclass(frozen=True)
class TestGridProcessMultiIndexOpLoweringPass(ModulePass):
    """Lowers `shard.process_multi_index` to linear index, grid shape, delinearize."""

    name = "test-grid-process-multi-index-op-lowering"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        apply_patterns_greedily(op, process_multi_index_lowering_patterns(), ctx=ctx)
