"""iota-operands-as-indices (shardc/passes/iota_operands_as_indices.py): a generic input
holding its loop's positions (an arange, reshaped) is read as `linalg.index` and dropped,
computing the same tensor (both run with the runtime); inputs that are not provably the
positions stay. Then propagation keeps a mask indexed by those positions split like the
batch (T5's `mask[arange(B)[:, None, None, None], ...]`): no all_gather."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import module_to_string
from shardc.launch import run_program
from shardc.passes.iota_operands_as_indices import iota_operands_as_indices
from shardc.training.pipeline import count_collectives, run_pipeline

# torch-mlir's `mask[arange(4)[:, None], arange(8)[None, :]]` for a [4, 8] mask, with its
# wrap of negative positions; ARANGE_BODY yields each row's position.
MASK = """
func.func @mask(%m: tensor<4x8xi1>) -> tensor<4x8xi1> {
  %z = arith.constant 0 : i64
  %c4 = arith.constant 4 : i64
  %c8 = arith.constant 8 : i64
  %e0 = tensor.empty() : tensor<4xi64>
  %rows = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e0 : tensor<4xi64>) {
  ^bb0(%o: i64):
    ARANGE_BODY
  } -> tensor<4xi64>
  %e1 = tensor.empty() : tensor<8xi64>
  %cols = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e1 : tensor<8xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %p = arith.index_cast %i : index to i64
    linalg.yield %p : i64
  } -> tensor<8xi64>
  %r2 = tensor.expand_shape %rows [[0, 1]] output_shape [4, 1] : tensor<4xi64> into tensor<4x1xi64>
  %c2 = tensor.expand_shape %cols [[0, 1]] output_shape [1, 8] : tensor<8xi64> into tensor<1x8xi64>
  %e2 = tensor.empty() : tensor<4x8xi1>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%r2, %c2 : tensor<4x1xi64>, tensor<1x8xi64>) outs(%e2 : tensor<4x8xi1>) {
  ^bb0(%a: i64, %b: i64, %o: i1):
    %an = arith.cmpi slt, %a, %z : i64
    %aw = arith.addi %a, %c4 : i64
    %as = arith.select %an, %aw, %a : i64
    %ai = arith.index_cast %as : i64 to index
    %bn = arith.cmpi slt, %b, %z : i64
    %bw = arith.addi %b, %c8 : i64
    %bs = arith.select %bn, %bw, %b : i64
    %bi = arith.index_cast %bs : i64 to index
    %x = tensor.extract %m[%ai, %bi] : tensor<4x8xi1>
    linalg.yield %x : i1
  } -> tensor<4x8xi1>
  return %g : tensor<4x8xi1>
}
"""
POSITIONS = "%i = linalg.index 0 : index\n    %p = arith.index_cast %i : index to i64\n    linalg.yield %p : i64"
REVERSED = ("%i = linalg.index 0 : index\n    %p = arith.index_cast %i : index to i64\n    %c3 = arith.constant 3 : i64\n"
            "    %q = arith.subi %c3, %p : i64\n    linalg.yield %q : i64")


def _rewritten(text: str) -> tuple[str, int]:
    module = LocatingParser(make_context(), text, "<test>").parse_module()
    count = iota_operands_as_indices(module)
    module.verify()
    return module_to_string(module), count


def test_positions_become_linalg_index_with_the_same_result():
    text = MASK.replace("ARANGE_BODY", POSITIONS)
    out, count = _rewritten(text)
    assert count == 2
    assert "ins(" not in out and "tensor.expand_shape" not in out  # both inputs and their aranges gone
    assert out.count("linalg.index") == 2
    mask = np.random.default_rng(0).integers(0, 2, (4, 8)).astype(bool)
    (want,) = run_program(text, [mask])
    (got,) = run_program(out, [mask])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, mask)


def test_values_that_are_not_the_positions_stay_an_input():
    out, count = _rewritten(MASK.replace("ARANGE_BODY", REVERSED))
    assert count == 1  # the columns only
    assert "ins(%" in out and out.count("tensor.expand_shape") == 1


@pytest.mark.parametrize("rewrite", [False, True])
def test_the_mask_stays_split_like_the_batch(rewrite):
    # Annotated as a data-parallel program: the mask split over its rows.
    text = MASK.replace("ARANGE_BODY", POSITIONS).replace(
        "func.func @mask(%m: tensor<4x8xi1>) -> tensor<4x8xi1> {",
        "shard.grid @g(shape = 2)\nfunc.func @mask(%m0: tensor<4x8xi1>) -> tensor<4x8xi1> {\n"
        "  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding\n"
        "  %m = shard.shard %m0 to %s : tensor<4x8xi1>")
    if rewrite:
        text, _ = _rewritten(text)
    module = LocatingParser(make_context(), text, "<test>").parse_module()
    run_pipeline(module, ["sharding-propagation", "shard-partition"])
    counts = sum(count_collectives(module, by_axes=True).values(), Counter())
    if rewrite:
        assert counts == Counter(), counts
    else:  # the positions are data: the mask is read whole
        assert counts["shard.all_gather[0]"] == 1, counts
    mask = np.random.default_rng(1).integers(0, 2, (4, 8)).astype(bool)
    (got,) = run_program(text, [mask], ranks=2, pipeline="shard-to-mpi-pipeline")
    np.testing.assert_array_equal(got, mask)


def test_the_pass_by_name_is_the_function():
    from shardc.passes import all_passes

    text = MASK.replace("ARANGE_BODY", POSITIONS)
    module = LocatingParser(make_context(), text, "<test>").parse_module()
    all_passes()["iota-operands-as-indices"]()().apply(make_context(), module)
    assert module_to_string(module) == _rewritten(text)[0]
