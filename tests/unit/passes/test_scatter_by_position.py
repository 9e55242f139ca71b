"""scatter-by-position (shardc/passes/scatter_by_position.py): a scatter whose first index
column is each update's own position becomes an elementwise generic that computes the
same tensor (run both with the runtime and compare); scatters whose positions come from
data, or whose position column is not provably the position, are left alone. Also the
pipeline the torch import runs it in (`torch-cleanup-pipeline`)."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import module_to_string
from shardc.passes.scatter_by_position import scatters_by_position
from shardc.launch import run_program

# torch-mlir's form of cross-entropy's backward: row n's update lands at (n, target[n]).
ONE_HOT = """
func.func @one_hot(%t: tensor<8x1xi64>, %u: tensor<8xf32>, %orig: tensor<8x5xf32>) -> tensor<8x5xf32> {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %z = arith.constant 0 : i64
  %e0 = tensor.empty() : tensor<8x1xi64>
  %e1 = tensor.empty() : tensor<8x1xi64>
  %g:2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0, 0)>, affine_map<(d0) -> (d0, 0)>], iterator_types = ["parallel"]} outs(%e0, %e1 : tensor<8x1xi64>, tensor<8x1xi64>) {
  ^bb0(%o0: i64, %o1: i64):
    %i = linalg.index 0 : index
    %w = arith.remsi %i, %c8 : index
    %x = tensor.extract %t[%w, %c0] : tensor<8x1xi64>
    %p = arith.index_cast %w : index to i64
    linalg.yield %p, %x : i64, i64
  } -> (tensor<8x1xi64>, tensor<8x1xi64>)
  %e2 = tensor.empty() : tensor<8x2xi64>
  %f = linalg.fill ins(%z : i64) outs(%e2 : tensor<8x2xi64>) -> tensor<8x2xi64>
  %s0 = tensor.insert_slice %g#0 into %f[0, 0] [8, 1] [1, 1] : tensor<8x1xi64> into tensor<8x2xi64>
  %s1 = tensor.insert_slice %g#1 into %s0[0, 1] [8, 1] [1, 1] : tensor<8x1xi64> into tensor<8x2xi64>
  %r = tm_tensor.scatter {dimension_map = array<i64: 0, 1>} unique_indices(false) ins(%u, %s1 : tensor<8xf32>, tensor<8x2xi64>) outs(%orig : tensor<8x5xf32>) {
  ^bb0(%a: f32, %b: f32):
    COMBINE
  } -> tensor<8x5xf32>
  return %r : tensor<8x5xf32>
}
"""
ASSIGN = "tm_tensor.yield %a : f32"
ADD = "%s = arith.addf %b, %a : f32\n    tm_tensor.yield %s : f32"
MAX = "%s = arith.maximumf %b, %a : f32\n    tm_tensor.yield %s : f32"

# An embedding's backward: the rows come from data, so nothing says where updates land.
EMBEDDING_BACKWARD = """
func.func @rows(%u: tensor<6x1x4xf32>, %ids: tensor<6x1xi64>, %orig: tensor<10x4xf32>) -> tensor<10x4xf32> {
  %r = tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(false) ins(%u, %ids : tensor<6x1x4xf32>, tensor<6x1xi64>) outs(%orig : tensor<10x4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %b, %a : f32
    tm_tensor.yield %s : f32
  } -> tensor<10x4xf32>
  return %r : tensor<10x4xf32>
}
"""


def _rewritten(text: str) -> tuple[str, int]:
    module = LocatingParser(make_context(), text, "<test>").parse_module()
    count = scatters_by_position(module)
    module.verify()
    return module_to_string(module), count


@pytest.mark.parametrize("combine", [ASSIGN, ADD, MAX], ids=["assign", "add", "max"])
def test_scatter_by_position_is_an_elementwise_generic_with_the_same_result(combine):
    text = ONE_HOT.replace("COMBINE", combine)
    out, count = _rewritten(text)
    assert count == 1
    assert "tm_tensor.scatter" not in out and "tensor.insert_slice" not in out
    assert 'iterator_types = ["parallel", "parallel"]' in out
    rng = np.random.default_rng(0)
    args = [rng.integers(0, 5, (8, 1)).astype(np.int64), rng.standard_normal(8).astype(np.float32),
            rng.standard_normal((8, 5)).astype(np.float32)]
    (want,) = run_program(text, args)
    (got,) = run_program(out, args)
    np.testing.assert_array_equal(got, want)


def test_scatter_by_data_is_left_alone():
    out, count = _rewritten(EMBEDDING_BACKWARD)
    assert count == 0 and "tm_tensor.scatter" in out


def test_scatter_whose_first_column_is_not_the_position_is_left_alone():
    # Column 0 holds the target, column 1 the position: rows come from data.
    text = ONE_HOT.replace("COMBINE", ASSIGN)
    text = text.replace("%g#0 into %f", "%g#1 into %f").replace("%g#1 into %s0", "%g#0 into %s0")
    out, count = _rewritten(text)
    assert count == 0 and "tm_tensor.scatter" in out and out.count("tensor.insert_slice") == 2


def test_wrap_by_fewer_than_the_rows_is_not_the_position():
    # remsi by 4 over 8 rows: rows 4..7 land on 0..3, not on themselves.
    text = ONE_HOT.replace("COMBINE", ADD).replace("%c8 = arith.constant 8", "%c8 = arith.constant 4")
    out, count = _rewritten(text)
    assert count == 0 and "tm_tensor.scatter" in out


def test_combine_with_a_region_is_left_alone():
    combine = "%s = scf.execute_region -> f32 {\n      scf.yield %a : f32\n    }\n    tm_tensor.yield %s : f32"
    out, count = _rewritten(ONE_HOT.replace("COMBINE", combine))
    assert count == 0 and "tm_tensor.scatter" in out


def test_the_pass_by_name_is_the_function():
    from shardc.passes import all_passes

    text = ONE_HOT.replace("COMBINE", ADD)
    module = LocatingParser(make_context(), text, "<test>").parse_module()
    all_passes()["scatter-by-position"]()().apply(make_context(), module)
    assert module_to_string(module) == _rewritten(text)[0]


def test_torch_cleanup_pipeline_runs_the_import_rewrites_in_order():
    from shardc.passes import all_pipelines

    pipeline = all_pipelines()["torch-cleanup-pipeline"]()()
    assert [stage.name for stage in pipeline.stages()] == [
        "uncollapse-batch-matmuls",
        "scatter-by-position",
        "scatter-windows",
        "expand-shapes-before-pads",
        "iota-operands-as-indices",
        "split-shared-inits",
    ]
    # The one-hot scatter, and the fill and empty it shared with nothing, as one run.
    module = LocatingParser(make_context(), ONE_HOT.replace("COMBINE", ADD), "<test>").parse_module()
    pipeline.apply(make_context(), module)
    out = module_to_string(module)
    assert "tm_tensor.scatter" not in out and "linalg.fill" not in out
