"""The pass table of shardc-opt: pass name -> factory of the pass class.

A table, not a tree of nested factories: each entry imports its module lazily, so
startup stays cheap. xDSL passes that mlir-opt also has (canonicalize, cse, ...) are
listed here under mlir-opt's names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from xdsl.passes import ModulePass

# pass name -> "module:ClassName"; reading it imports nothing, so shardc-opt checks a
# command line (and prints --help, from shardc.tools.help_table) without loading a pass.
PASSES: dict[str, str] = {
    # MLIR's generic passes, with MLIR's greedy driver and CSE semantics.
    "canonicalize": "shardc.passes.canonicalize:CanonicalizePass",
    "cse": "shardc.passes.cse:CSEPass",
    "dce": "xdsl.transforms.dead_code_elimination:DeadCodeElimination",
    "inline": "shardc.passes.inline:InlinePass",
    # The shard pipeline.
    "uncollapse-batch-matmuls": "shardc.passes.uncollapse_batch_matmuls:UncollapseBatchMatmulsPass",
    "split-shared-inits": "shardc.passes.split_shared_inits:SplitSharedInitsPass",
    "mixed-precision": "shardc.passes.mixed_precision:MixedPrecisionPass",
    "sharding-propagation": "shardc.passes.sharding_propagation:ShardingPropagationPass",
    "auto-sharding": "shardc.passes.auto_sharding:AutoShardingPass",
    "shard-partition": "shardc.passes.partition:ShardPartitionPass",
    "shard-simplify": "shardc.passes.simplify:ShardSimplifyPass",
    "scatter-by-position": "shardc.passes.scatter_by_position:ScatterByPositionPass",
    "iota-operands-as-indices": "shardc.passes.iota_operands_as_indices:IotaOperandsAsIndicesPass",
    "scatter-windows": "shardc.passes.scatter_windows:ScatterWindowsPass",
    "expand-shapes-before-pads": "shardc.passes.expand_before_pad:ExpandShapesBeforePadsPass",
    "convert-shard-to-mpi": "shardc.lowering.shard_to_mpi:ConvertShardToMPIPass",
    "reduction-precision": "shardc.passes.reduction_precision:ReductionPrecisionPass",
    "forward-send-copies": "shardc.passes.forward_send_copies:ForwardSendCopiesPass",
    # mlir-opt's test passes, so MLIR-style lit tests run unchanged.
    "test-grid-simplifications": "shardc.passes.test_shard_passes:TestGridSimplificationsPass",
    "test-grid-all-slice-op-lowering": (
        "shardc.lowering.test_lowering_passes:TestGridAllSliceOpLoweringPass"
    ),
    "test-grid-process-multi-index-op-lowering": (
        "shardc.lowering.test_lowering_passes:TestGridProcessMultiIndexOpLoweringPass"
    ),
    "test-single-fold": "shardc.passes.test_shard_passes:TestSingleFoldPass",
    "test-grid-resharding-partition": "shardc.passes.test_resharding:TestReshardingPass",
}

# Named pipelines, used like passes (as flags and in textual pipelines).
PIPELINES: dict[str, str] = {
    "shard-to-mpi-pipeline": "shardc.passes.pipelines:ShardToMPIPipelinePass",
    "torch-cleanup-pipeline": "shardc.passes.pipelines:TorchCleanupPipelinePass",
}


def _loader(spec: str) -> Callable[[], type[ModulePass]]:
    module, _, cls = spec.partition(":")

    def load() -> type[ModulePass]:
        return getattr(importlib.import_module(module), cls)

    return load


def all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {name: _loader(spec) for name, spec in PASSES.items()}


def all_pipelines() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pipeline name -> factory of its pass class (`shardc.passes.pipelines`)."""
    return {name: _loader(spec) for name, spec in PIPELINES.items()}
