"""tm_tensor.scatter (torch-mlir's TMTensor op for the backward of nn.Embedding and of
cross-entropy): syntax as torch-mlir prints it, verifier, numpy kernel, sharding.
Needs no torch: the programs are written out as torch-mlir emits them."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.ir.printer import module_to_string
from shardc.launch import ProgramError, run_program
from shardc.tools.cli import apply_passes, parse_module, pipeline_passes

EMBED_GRAD = """\
module {
  func.func @embed_grad(%arg0: tensor<8x1x16xf32>, %arg1: tensor<8x1xi64>, %arg2: tensor<6x16xf32>) -> tensor<6x16xf32> {
    %0 = tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(false) ins(%arg0, %arg1 : tensor<8x1x16xf32>, tensor<8x1xi64>) outs(%arg2 : tensor<6x16xf32>) {
    ^bb0(%arg3: f32, %arg4: f32):
      %1 = arith.addf %arg4, %arg3 : f32
      tm_tensor.yield %1 : f32
    } -> tensor<6x16xf32>
    return %0 : tensor<6x16xf32>
  }
}
"""

POINT_SET = """\
module {
  func.func @point_set(%arg0: tensor<5xf32>, %arg1: tensor<5x2xi64>, %arg2: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = tm_tensor.scatter {dimension_map = array<i64: 0, 1>} unique_indices(false) ins(%arg0, %arg1 : tensor<5xf32>, tensor<5x2xi64>) outs(%arg2 : tensor<4x3xf32>) {
    ^bb0(%arg3: f32, %arg4: f32):
      tm_tensor.yield %arg3 : f32
    } -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
}
"""

UNIQUE_BODY = """\
module {
  func.func @scaled(%arg0: tensor<3x4xf32>, %arg1: tensor<3x1xi64>, %arg2: tensor<5x4xf32>) -> tensor<5x4xf32> {
    %0 = tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(UNIQUE) ins(%arg0, %arg1 : tensor<3x4xf32>, tensor<3x1xi64>) outs(%arg2 : tensor<5x4xf32>) {
    ^bb0(%arg3: f32, %arg4: f32):
      %1 = arith.mulf %arg4, %arg3 : f32
      %2 = arith.addf %1, %arg3 : f32
      tm_tensor.yield %2 : f32
    } -> tensor<5x4xf32>
    return %0 : tensor<5x4xf32>
  }
}
"""


def _round_trip(text: str) -> str:
    return module_to_string(parse_module(text, "t")).rstrip("\n") + "\n"


@pytest.mark.parametrize("text", [EMBED_GRAD, POINT_SET], ids=["embed-grad", "point-set"])
def test_prints_as_torch_mlir_does(text):
    assert _round_trip(text) == text


def test_generic_form_round_trips():
    from subprocess import run

    out = run(["shardc-opt", "-", "--mlir-print-op-generic"], input=EMBED_GRAD, capture_output=True, text=True, check=True).stdout
    assert '"tm_tensor.scatter"' in out and "operandSegmentSizes = array<i32: 2, 1>" in out and "unique_indices = false" in out
    assert _round_trip(out) == EMBED_GRAD


@pytest.mark.parametrize(
    "edit, message",
    [
        (("array<i64: 0>", "array<i64: 0, 1>"), "invalid number of dimension map entries"),
        (("array<i64: 0>", "array<i64: 2>"), "dimension map is invalid"),
        (("tensor<8x1xi64>)", "tensor<7x1xi64>)"), "mismatch in shape of indices and update value at dim#0"),
        (("tm_tensor.yield %1 : f32", "tm_tensor.yield %1, %1 : f32, f32"), "expected region to yield a single value"),
    ],
)
def test_verifier(edit, message, tmp_path):
    from subprocess import run

    old, new = edit
    bad = EMBED_GRAD.replace(old, new)
    if old.startswith("tensor<8x1xi64>)"):
        bad = bad.replace("%arg1: tensor<8x1xi64>", "%arg1: tensor<7x1xi64>")
    path = tmp_path / "bad.mlir"
    path.write_text(bad)
    res = run(["shardc-opt", str(path)], capture_output=True, text=True)
    assert res.returncode == 1
    assert f"error: 'tm_tensor.scatter' op {message}" in res.stderr
    assert "Traceback" not in res.stderr


def test_scatter_add_accumulates_repeated_rows():
    rng = np.random.default_rng(0)
    upd = rng.standard_normal((8, 1, 16)).astype(np.float32)
    ind = np.array([[0], [3], [3], [5], [0], [0], [2], [3]], dtype=np.int64)
    orig = rng.standard_normal((6, 16)).astype(np.float32)
    want = orig.copy()
    for n in range(8):
        want[ind[n, 0]] += upd[n, 0]
    (got,) = run_program(EMBED_GRAD, [upd, ind, orig])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_point_assignment():
    upd = np.arange(5, dtype=np.float32) + 1
    ind = np.array([[0, 0], [1, 2], [3, 1], [2, 2], [0, 1]], dtype=np.int64)
    orig = np.zeros((4, 3), np.float32)
    want = orig.copy()
    want[ind[:, 0], ind[:, 1]] = upd
    (got,) = run_program(POINT_SET, [upd, ind, orig])
    np.testing.assert_array_equal(got, want)


def test_general_body_with_unique_indices(capfd):
    rng = np.random.default_rng(1)
    upd = rng.standard_normal((3, 4)).astype(np.float32)
    ind = np.array([[4], [0], [2]], dtype=np.int64)
    orig = rng.standard_normal((5, 4)).astype(np.float32)
    want = orig.copy()
    want[ind[:, 0]] = orig[ind[:, 0]] * upd + upd
    (got,) = run_program(UNIQUE_BODY.replace("UNIQUE", "true"), [upd, ind, orig])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    capfd.readouterr()
    with pytest.raises(ProgramError) as e:
        run_program(UNIQUE_BODY.replace("UNIQUE", "false"), [upd, ind, orig])
    err = str(e.value)  # run_program's exception carries the diagnostic
    assert "error: runtime: 'tm_tensor.scatter' at" in err and "with repeated indices needs a region" in err


# ---------------------------------------------------------------------------------------
# Sharding: the split follows the updates
# ---------------------------------------------------------------------------------------


def _annotated(split_updates: str) -> str:
    """EMBED_GRAD on a 2-rank grid with the updates split as given."""
    return EMBED_GRAD.replace("module {\n", "module {\n  shard.grid @grid(shape = 2)\n").replace(
        "    %0 = tm_tensor.scatter",
        f"    %sharding = shard.sharding @grid split_axes = {split_updates} : !shard.sharding\n"
        "    %s = shard.shard %arg0 to %sharding : tensor<8x1x16xf32>\n"
        "    %0 = tm_tensor.scatter",
    ).replace("ins(%arg0, %arg1", "ins(%s, %arg1")


def _inputs():
    rng = np.random.default_rng(2)
    upd = rng.standard_normal((8, 1, 16)).astype(np.float32)
    ind = rng.integers(0, 6, (8, 1)).astype(np.int64)
    orig = rng.standard_normal((6, 16)).astype(np.float32)
    (want,) = run_program(EMBED_GRAD, [upd, ind, orig])
    return [upd, ind, orig], want


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", [None, "shard-to-mpi-pipeline"], ids=["partitioned", "lowered"])
def test_updates_split_over_n_all_reduce(pipeline):
    """Updates split by row: a local scatter (the original on the lead rank, zeros on the
    others) and an all-reduce where the rows of both ranks meet."""
    text = _annotated("[[0]]")
    module = parse_module(text, "t")
    apply_passes(module, pipeline_passes("sharding-propagation,shard-partition"))
    out = module_to_string(module)
    assert "ins(%" in out and "tensor<4x1x16xf32>, tensor<4x1xi64>) outs(" in out
    assert out.count("shard.all_reduce") == 1 and "scf.if" in out
    args, want = _inputs()
    (got,) = run_program(text, args, ranks=2, pipeline=pipeline)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_updates_split_over_the_slice_needs_no_communication():
    text = _annotated("[[], [], [0]]")
    module = parse_module(text, "t")
    apply_passes(module, pipeline_passes("sharding-propagation,shard-partition"))
    out = module_to_string(module)
    assert "tensor<8x1x8xf32>, tensor<8x1xi64>) outs(%" in out and "tensor<6x8xf32>" in out
    assert "shard.all_reduce" not in out and "shard.all_gather" not in out
    args, want = _inputs()
    (got,) = run_program(text, args, ranks=2)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_split_on_an_indexed_dimension_is_resharded():
    """POINT_SET's updates split by row: an assignment has no neutral element, so the
    op runs on whole updates (gathered at its boundary) and the result is still exact."""
    text = POINT_SET.replace("module {\n", "module {\n  shard.grid @grid(shape = 5)\n").replace(
        "    %0 = tm_tensor.scatter",
        "    %sharding = shard.sharding @grid split_axes = [[0]] : !shard.sharding\n"
        "    %s = shard.shard %arg0 to %sharding : tensor<5xf32>\n"
        "    %0 = tm_tensor.scatter",
    ).replace("ins(%arg0, %arg1", "ins(%s, %arg1")
    upd = np.arange(5, dtype=np.float32) + 1
    ind = np.array([[0, 0], [1, 2], [3, 1], [2, 2], [0, 1]], dtype=np.int64)
    orig = np.zeros((4, 3), np.float32)
    (want,) = run_program(POINT_SET, [upd, ind, orig])
    (got,) = run_program(text, [upd, ind, orig], ranks=5)
    np.testing.assert_array_equal(got, want)
