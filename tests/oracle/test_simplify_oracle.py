"""shard-simplify, the shard lowering patterns and their test passes against mlir-opt
22.1.8, which has neither `shard-simplify` nor the `test-grid-*` passes. What it has, we
compare with:

* grid_shape folding: mlir-opt's `convert-shard-to-mpi` ends with upstream's folding
  patterns under the greedy driver; on programs whose only shard op is `grid_shape` it
  does nothing else, so its output must be ours (constant order and uniquing included);
* the greedy driver: our test passes must print what mlir-opt's greedy driver (as
  `canonicalize` with no pattern enabled, bottom-up) makes of the lowering patterns'
  raw output (each pattern applied once, nothing folded);
* every output of our passes on our lit inputs must be read by mlir-opt and printed back
  unchanged.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from shardc.context import make_context
from shardc.ir.printer import print_module
from shardc.lowering import all_slice_lowering_patterns, process_multi_index_lowering_patterns
from shardc.lowering import test_lowering_passes as lowering_helpers
from shardc.passes import test_shard_passes as helpers
from shardc.passes.greedy import apply_patterns_greedily
from shardc.passes.simplify import ShardSimplifyPass
from shardc.testing.normalize import normalize_ssa_names
from shardc.testing.oracle import find_mlir_opt, run_mlir_opt

from .conftest import to_22_1_8_spelling, to_trunk_spelling

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(find_mlir_opt() is None, reason="mlir-opt not found"),
]

PASSES_DIR = Path(__file__).resolve().parents[1] / "filecheck" / "passes"
FOLD_ONLY = ("--canonicalize=enable-patterns=__no_pattern__ top-down=false",)


def mlir(text: str, *flags: str) -> str:
    result = run_mlir_opt("-", *flags, stdin=text)
    assert result.returncode == 0, f"mlir-opt {flags} failed:\n{result.stderr}\n{text}"
    return result.stdout


def ours(text: str, *passes: ModulePass) -> str:
    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    for p in passes:
        p.apply(ctx, module)
    module.verify()
    out = StringIO()
    print_module(module, out)
    return out.getvalue()


def raw_lowering(text: str, patterns: list[RewritePattern]) -> str:
    """Each pattern applied once to each op, no folding, no DCE."""
    module = Parser(make_context(), text).parse_module()
    for op in list(module.walk()):
        for pattern in patterns:
            if op.parent is not None:
                pattern.match_and_rewrite(op, PatternRewriter(op))
    out = StringIO()
    print_module(module, out)
    return out.getvalue()


def same(a: str, b: str) -> None:
    assert normalize_ssa_names(a) == normalize_ssa_names(b)


GRID_SHAPES = [
    """
shard.grid @g(shape = 2x?x4)
func.func @f(%i: index) -> (index, index, index, index, index) {
  %c4 = arith.constant 4 : index
  %0:3 = shard.grid_shape @g : index, index, index
  %x = arith.addi %i, %0#1 : index
  %1:2 = shard.grid_shape @g axes = [2, 0] : index, index
  %c2 = arith.constant 2 : index
  return %0#0, %x, %1#0, %c4, %c2 : index, index, index, index, index
}
""",
    """
shard.grid @d(shape = ?x?)
shard.grid @s(shape = 3x5)
func.func @f() -> (index, index, index) {
  %0:2 = shard.grid_shape @d : index, index
  %1 = shard.grid_shape @s axes = [1] : index
  return %0#1, %1, %0#0 : index, index, index
}
func.func @g(%t: tensor<?xf32>) -> index {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %t, %c0 : tensor<?xf32>
  %s:2 = shard.grid_shape @s : index, index
  %m = arith.muli %d, %s#1 : index
  return %m : index
}
""",
]


@pytest.mark.parametrize("text", GRID_SHAPES)
def test_grid_shape_folding_matches_convert_shard_to_mpi(text: str):
    expected = mlir(text, "--convert-shard-to-mpi")
    same(ours(text, ShardSimplifyPass()), expected)
    same(ours(text, helpers.TestGridSimplificationsPass()), expected)


LOWERINGS = [
    (
        "test-grid-all-slice-op-lowering.mlir",
        all_slice_lowering_patterns,
        lowering_helpers.TestGridAllSliceOpLoweringPass,
    ),
    (
        "test-grid-process-multi-index-op-lowering.mlir",
        process_multi_index_lowering_patterns,
        lowering_helpers.TestGridProcessMultiIndexOpLoweringPass,
    ),
]


def chunks(name: str) -> list[str]:
    return [c for c in (PASSES_DIR / name).read_text().split("// -----\n") if "func.func" in c]


@pytest.mark.parametrize(
    ("text", "patterns", "test_pass"),
    [
        pytest.param(text, patterns, test_pass, id=f"{name}#{i}")
        for name, patterns, test_pass in LOWERINGS
        for i, text in enumerate(chunks(name))
    ],
)
def test_lowering_under_greedy_driver_matches_mlir(text: str, patterns, test_pass):  # type: ignore[no-untyped-def]
    expected = mlir(raw_lowering(text, patterns()), *FOLD_ONLY)
    same(ours(text, test_pass()), expected)


OUR_RUNS = [
    ("shard-simplify.mlir", (ShardSimplifyPass,)),
    ("test-grid-simplifications.mlir", (helpers.TestGridSimplificationsPass,)),
    ("test-grid-all-slice-op-lowering.mlir", (lowering_helpers.TestGridAllSliceOpLoweringPass,)),
    (
        "test-grid-all-slice-op-lowering.mlir",
        (lowering_helpers.TestGridAllSliceOpLoweringPass, helpers.TestGridSimplificationsPass),
    ),
    ("test-grid-process-multi-index-op-lowering.mlir", (lowering_helpers.TestGridProcessMultiIndexOpLoweringPass,)),
    ("test-single-fold.mlir", (helpers.TestSingleFoldPass,)),
]


@pytest.mark.parametrize(
    ("text", "passes"),
    [
        pytest.param(text, passes, id=f"{name}#{i}-{len(passes)}")
        for name, passes in OUR_RUNS
        for i, text in enumerate(chunks(name))
    ],
)
def test_mlir_reads_our_output_back_unchanged(text: str, passes: tuple[type[ModulePass], ...]):
    output = ours(text, *(p() for p in passes))
    # Trunk's spellings (`scatter_dim`) go to 22.1.8 in its own and come back in trunk's.
    same(to_trunk_spelling(mlir(to_22_1_8_spelling(output))), output)


def test_folding_of_the_test_passes_matches_mlir_on_arith():
    text = """
func.func @f(%i: index, %t: tensor<6x?xf32>) -> (index, index, index, i1, index) {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %c6 = arith.constant 6 : index
  %d = tensor.dim %t, %c0 : tensor<6x?xf32>
  %q = arith.divui %d, %c6 : index
  %r = arith.remui %i, %c1 : index
  %m = arith.muli %c1, %i : index
  %b = arith.cmpi ult, %q, %c1 : index
  %s = arith.subi %m, %m : index
  return %q, %r, %m, %b, %s : index, index, index, i1, index
}
"""

    expected = mlir(text, *FOLD_ONLY)
    same(ours(text, FoldOnly()), expected)


class FoldOnly(ModulePass):
    """The greedy driver with no pattern: folding, constant CSE and hoisting, DCE."""

    name = "fold-only"

    def apply(self, ctx, op):  # type: ignore[no-untyped-def]
        apply_patterns_greedily(op, [], ctx=ctx)
