"""shard-partition on any fully annotated program: values with several annotations for
users (each resharded on its own), block arguments annotated once and used by several
annotations, the same value returned twice, multi-result ops, 0-d tensors and scalars,
grid axes in any order, tensors captured by a body (gathered whole), and one error per
function that is not fully annotated. Each program is also run: partitioned and lowered
on simulated ranks, it must agree with its unsharded run."""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.dialects import func

from shardc.context import make_context
from shardc.ir import diagnostics
from shardc.ir.diagnostics import DiagnosticEngine, DiagnosticError
from shardc.ir.printer import module_to_string
from shardc.passes.partition import ShardPartitionPass
from shardc.tools.cli import apply_passes, parse_module, pipeline_passes
from shardc.tools.verification import verify


def _partition(text: str) -> str:
    with diagnostics.engine_scope(DiagnosticEngine(stream=StringIO())):
        module = parse_module(text, "<test>")
        ShardPartitionPass().apply(make_context(), module)
        module.verify()
        return module_to_string(module)


def _agrees(text: str, ranks: int | None = None) -> None:
    """Partition alone (the program is fully annotated) and then lower: both agree with
    the unsharded run."""
    report = verify(text, pipeline="shard-partition", stage="all", ranks=ranks)
    assert report.ok, report.summary()


GRID = "shard.grid @g(shape = 2x2)\n"
SHARDINGS = """
  %row = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %col = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %both = shard.sharding @g split_axes = [[1, 0]] : !shard.sharding
  %rep = shard.sharding @g split_axes = [[]] : !shard.sharding
"""


def test_one_producer_many_user_shardings() -> None:
    """One annotated value, three users each wanting another sharding (one with the grid
    axes in reverse order): three independent reshardings of the same local tensor."""
    text = GRID + """func.func @f(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {""" + SHARDINGS + """
  %xa = shard.shard %x to %row : tensor<8x8xf32>
  %x1 = shard.shard %xa to %col annotate_for_users : tensor<8x8xf32>
  %x2 = shard.shard %xa to %both annotate_for_users : tensor<8x8xf32>
  %x3 = shard.shard %xa to %rep annotate_for_users : tensor<8x8xf32>
  %a = tosa.abs %x1 : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %aa = shard.shard %a to %col : tensor<8x8xf32>
  %b = tosa.abs %x2 : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %ba = shard.shard %b to %both : tensor<8x8xf32>
  %c = tosa.abs %x3 : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %ca = shard.shard %c to %rep : tensor<8x8xf32>
  return %aa, %ba, %ca : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
"""
    out = _partition(text)
    assert "func.func @f(%arg0: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<2x8xf32>, tensor<8x8xf32>)" in out, out
    assert out.count("shard.all_gather") >= 2 and "shard.all_to_all" in out, out
    _agrees(text)


def test_argument_annotated_once_used_by_several_annotations() -> None:
    """The argument's one use is its producer annotation; that has several users, among
    them func.return (in the producer's sharding) and one op reading it twice."""
    text = GRID + """func.func @f(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {""" + SHARDINGS + """
  %xa = shard.shard %x to %both : tensor<8x8xf32>
  %x1 = shard.shard %xa to %row annotate_for_users : tensor<8x8xf32>
  %x2 = shard.shard %xa to %row annotate_for_users : tensor<8x8xf32>
  %a = tosa.sub %x1, %x2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %aa = shard.shard %a to %row : tensor<8x8xf32>
  %ar = shard.shard %aa to %rep annotate_for_users : tensor<8x8xf32>
  return %xa, %ar, %xa : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
"""
    out = _partition(text)
    assert "(%arg0: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>)" in out, out
    assert "return %arg0, %" in out and out.rstrip().splitlines()[-3].strip().endswith("tensor<2x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>"), out
    _agrees(text)


def test_same_copy_returned_twice() -> None:
    text = GRID + """func.func @f(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {""" + SHARDINGS + """
  %xa = shard.shard %x to %row : tensor<8x8xf32>
  %xr = shard.shard %xa to %rep annotate_for_users : tensor<8x8xf32>
  return %xr, %xr : tensor<8x8xf32>, tensor<8x8xf32>
}
"""
    out = _partition(text)
    assert out.count("shard.all_gather") == 1 and "return %cast, %cast" in out, out
    _agrees(text)


ARGMAX = """
func.func @f(%x: tensor<8x8xf32>) -> (tensor<8xf32>, tensor<8xi64>) {
  %row = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %xa = shard.shard %x to %row : tensor<8x8xf32>
  %x1 = shard.shard %xa to %row annotate_for_users : tensor<8x8xf32>
  %e = tensor.empty() : tensor<8xf32>
  %ea = shard.shard %e to %row : tensor<8xf32>
  %c = arith.constant 0xFF800000 : f32
  %e1 = shard.shard %ea to %row annotate_for_users : tensor<8xf32>
  %v = linalg.fill ins(%c : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %va = shard.shard %v to %row : tensor<8xf32>
  %v1 = shard.shard %va to %row annotate_for_users : tensor<8xf32>
  %ei = tensor.empty() : tensor<8xi64>
  %eia = shard.shard %ei to %row : tensor<8xi64>
  %ci = arith.constant 0 : i64
  %ei1 = shard.shard %eia to %row annotate_for_users : tensor<8xi64>
  %i = linalg.fill ins(%ci : i64) outs(%ei1 : tensor<8xi64>) -> tensor<8xi64>
  %ia = shard.shard %i to %row : tensor<8xi64>
  %i1 = shard.shard %ia to %row annotate_for_users : tensor<8xi64>
  %g:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x1 : tensor<8x8xf32>) outs(%v1, %i1 : tensor<8xf32>, tensor<8xi64>) {
  ^bb0(%in: f32, %out: f32, %out1: i64):
    %k = linalg.index 1 : index
    %ki = arith.index_cast %k : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %am = arith.select %gt, %ki, %out1 : i64
    linalg.yield %mx, %am : f32, i64
  } -> (tensor<8xf32>, tensor<8xi64>)
  %g0 = shard.shard %g#0 to %row : tensor<8xf32>
  %g1 = shard.shard %g#1 to %row : tensor<8xi64>
  return %g0, %g1 : tensor<8xf32>, tensor<8xi64>
}
"""


def test_multi_result_generic() -> None:
    """Each result of `%g:2` has its own annotation; the rows are split, the reduced
    dimension is whole, so each process computes its rows' max and argmax."""
    text = "shard.grid @g(shape = 2)\n" + ARGMAX
    out = _partition(text)
    assert "%4:2 = linalg.generic" in out and "return %4#0, %4#1 : tensor<4xf32>, tensor<4xi64>" in out, out
    _agrees(text)


def test_zero_d_tensors_and_scalars() -> None:
    """A 0-d sum (partial on each process: all_reduce) with no annotation, read back as a
    scalar and captured by a body, next to a scalar argument: none is annotated, all
    are the same on every process."""
    text = """shard.grid @g(shape = 4)
func.func @f(%x: tensor<8x4xf32>, %alpha: f32) -> (tensor<8x4xf32>, tensor<f32>, f32) {
  %row = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %xa = shard.shard %x to %row : tensor<8x4xf32>
  %x1 = shard.shard %xa to %row annotate_for_users : tensor<8x4xf32>
  %x2 = shard.shard %xa to %row annotate_for_users : tensor<8x4xf32>
  %e = tensor.empty() : tensor<f32>
  %zero = arith.constant 0.000000e+00 : f32
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%x1 : tensor<8x4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  %total = tensor.extract %s[] : tensor<f32>
  %scaled = arith.mulf %total, %alpha : f32
  %o = tensor.empty() : tensor<8x4xf32>
  %oa = shard.shard %o to %row : tensor<8x4xf32>
  %o1 = shard.shard %oa to %row annotate_for_users : tensor<8x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x2 : tensor<8x4xf32>) outs(%o1 : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.subf %in, %scaled : f32
    linalg.yield %d : f32
  } -> tensor<8x4xf32>
  %ya = shard.shard %y to %row : tensor<8x4xf32>
  return %ya, %s, %scaled : tensor<8x4xf32>, tensor<f32>, f32
}
"""
    out = _partition(text)
    assert "shard.all_reduce" in out and "-> (tensor<2x4xf32>, tensor<f32>, f32)" in out, out
    _agrees(text)


GATHER = """shard.grid @g(shape = 2x2)
func.func @f(%ids: tensor<4x8xi64>, %table: tensor<16x8xf32>) -> tensor<4x8x8xf32> {
  %s0 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %s1 = shard.sharding @g split_axes = [[1]] : !shard.sharding
  %s3 = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %ia = shard.shard %ids to %s3 : tensor<4x8xi64>
  %i1 = shard.shard %ia to %s3 annotate_for_users : tensor<4x8xi64>
  %ta = shard.shard %table to %s1 : tensor<16x8xf32>
  %e = tensor.empty() : tensor<4x8x8xf32>
  %ea = shard.shard %e to %s3 : tensor<4x8x8xf32>
  %e1 = shard.shard %ea to %s3 annotate_for_users : tensor<4x8x8xf32>
  %c16 = arith.constant 16 : index
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%i1 : tensor<4x8xi64>) outs(%e1 : tensor<4x8x8xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %m = arith.remsi %i, %c16 : index
    %p = arith.addi %m, %c16 : index
    %q = arith.remsi %p, %c16 : index
    %j = linalg.index 2 : index
    %x = tensor.extract %ta[%q, %j] : tensor<16x8xf32>
    linalg.yield %x : f32
  } -> tensor<4x8x8xf32>
  %ra = shard.shard %r to %s3 : tensor<4x8x8xf32>
  return %ra : tensor<4x8x8xf32>
}
"""


def test_captured_table_is_gathered() -> None:
    """The embedding table is split but read by `tensor.extract` at global row indices
    inside the body: the body reads an all_gather of it, not the local shard."""
    out = _partition(GATHER)
    assert "func.func @f(%arg0: tensor<2x4xi64>, %arg1: tensor<8x8xf32>) -> tensor<2x4x8xf32>" in out, out
    gathered = next(line for line in out.splitlines() if "shard.all_gather %arg1" in line)
    assert "grid_axes = [1] gather_axis = 0" in gathered and "-> tensor<16x8xf32>" in gathered, out
    assert "tensor.extract %cast[" in out, out
    _agrees(GATHER)


def test_captured_table_with_split_embedding_loop() -> None:
    """The loop reading the table's columns (`linalg.index 2`) is split too: the
    table's columns follow it (resharded from rows to columns, not gathered) and the
    body reads them at the local column."""
    text = (
        GATHER.replace("%s3 = shard.sharding @g split_axes = [[0], [1]]", "%s3 = shard.sharding @g split_axes = [[0], [], [1]]")
        .replace("%ia = shard.shard %ids to %s3", "%ia = shard.shard %ids to %s0")
        .replace("%i1 = shard.shard %ia to %s3", "%i1 = shard.shard %ia to %s0")
    )
    out = _partition(text)
    assert "-> tensor<2x8x4xf32>" in out and "shard.all_gather %arg1" not in out, out
    assert "shard.all_to_all %arg1" in out and "tensor<16x4xf32>" in out, out
    assert "tensor.extract %cast[%6, %7] : tensor<16x4xf32>" in out and "%7 = linalg.index 2" in out, out
    _agrees(text)


def test_replicated_capture_is_read_as_is() -> None:
    out = _partition(GATHER.replace("%ta = shard.shard %table to %s1", "%ta = shard.shard %table to %s0").replace("split_axes = [[0]]", "split_axes = [[]]"))
    assert "shard.all_gather" not in out and "tensor.extract %arg1[" in out, out


# ---- diagnostics -----------------------------------------------------------------------

TWO_BAD = """shard.grid @g(shape = 2)
func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<4xf32>
  %r = tosa.abs %a : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @good(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4xf32>
  return %a : tensor<4xf32>
}
func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4xf32>
  %b = tosa.abs %x : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}
"""


def test_one_error_per_function() -> None:
    """Every function that is not fully annotated reports its error; the pass fails
    with the last; the other functions are partitioned, the failing ones left as they
    were."""
    stream = StringIO()
    with diagnostics.engine_scope(DiagnosticEngine(stream=stream, print_op_on_diagnostic=False)):
        module = parse_module(TWO_BAD, "two.mlir")
        with pytest.raises(DiagnosticError) as raised:
            ShardPartitionPass().apply(make_context(), module)
        diagnostics.report_exception(raised.value)
    errors = [line for line in stream.getvalue().splitlines() if ": error: " in line]
    assert errors == [
        "two.mlir:5:8: error: Cannot partition: user of result 0 must be shard.shard operation.",
        "two.mlir:13:1: error: Cannot partition: expected a single use for block argument 0 in block 0",
    ], stream.getvalue()
    functions = {f.sym_name.data: f for f in module.walk() if isinstance(f, func.FuncOp)}
    assert str(functions["good"].function_type) == "(tensor<2xf32>) -> tensor<2xf32>"
    for name in ("first", "second"):
        assert len(functions[name].body.blocks) == 1
        assert str(functions[name].function_type) == "(tensor<4xf32>) -> tensor<4xf32>"
    module.verify()


def test_scalar_results_still_follow_trunk_when_annotated() -> None:
    """A 0-d result no annotation uses is accepted; one used by an annotation for users
    gets trunk's diagnostic."""
    text = """shard.grid @g(shape = 2)
func.func @f(%x: tensor<4xf32>) -> tensor<f32> {
  %s = shard.sharding @g split_axes = [[]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<4xf32>
  %e = tensor.empty() : tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%a : tensor<4xf32>) outs(%e : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<f32>
  %ra = shard.shard %r to %s annotate_for_users : tensor<f32>
  return %ra : tensor<f32>
}
"""
    with pytest.raises(DiagnosticError, match="shard.shard for result 0 must not set 'annotate_for_users'"):
        _partition(text)


# ---- real IR -------------------------------------------------------------------------

DATA = __import__("pathlib").Path(__file__).resolve().parents[2] / "data" / "torch_mlir"


@pytest.mark.slow
def test_torch_mlir_gpt_with_split_tokens() -> None:
    """torch-mlir's 1-layer nanoGPT (embedding gathers, layernorm, attention, softmax's
    max/argmax generic, GELU, tied head), its token ids split over the sequence on 2
    processes and nothing else annotated: propagated, partitioned and lowered, it
    agrees with the unsharded run on PyTorch's inputs."""
    import numpy as np

    text = (DATA / "gpt.mlir").read_text()
    text = text.replace("module {\n", "module {\n  shard.grid @grid(shape = 2)\n", 1)
    head, sep, body = text.partition(") -> tensor<4x8x32xf32> {\n")
    annotation = (
        "    %split = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding\n"
        "    %ids = shard.shard %arg0 to %split : tensor<4x8xi64>\n"
    )
    text = head + sep + annotation + body.replace("ins(%arg0 :", "ins(%ids :")
    data = np.load(DATA / "gpt.npz")
    inputs = [data[k] for k in data.files if k != "result"]
    report = verify(text, inputs=inputs, stage="all", rtol=1e-3, atol=1e-4, name="gpt.mlir")
    assert report.ok, report.summary()
    with diagnostics.engine_scope(DiagnosticEngine(stream=StringIO())):
        module = parse_module(text, "gpt.mlir")
        apply_passes(module, pipeline_passes("sharding-propagation,shard-partition"))
    out = module_to_string(module)
    assert "func.func @gpt(%arg0: tensor<4x4xi64>," in out and "shard.all_gather" in out
