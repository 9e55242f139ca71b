"""sharding-propagation beyond upstream: the completion after upstream's traversals.

Every test here is on a program upstream's algorithm leaves unfinished (several uses,
unannotated arguments, disagreeing users, ops without an interface, reshapes, index
reads) and checks that the result is fully annotated: `shard-partition` accepts it and,
run on simulated ranks, the sharded program computes what the unsharded one does.
"""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.dialects.shard import ShardOp
from shardc.ir import diagnostics
from shardc.ir.diagnostics import DiagnosticEngine, DiagnosticError
from shardc.ir.printer import module_to_string
from shardc.passes.partition import ShardPartitionPass
from shardc.passes.sharding_propagation import ShardingPropagationPass
from shardc.testing.gen_programs import generate_program, traversal_for
from shardc.tools.verification import verify

DATA = Path(__file__).resolve().parents[2] / "data" / "torch_mlir"


def _parse(text: str):
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def propagate(text: str, **options) -> tuple[str, str]:
    """Propagated program and the diagnostics text."""
    stream = StringIO()
    with diagnostics.engine_scope(DiagnosticEngine(stream=stream)):
        module = _parse(text)
        ShardingPropagationPass(**options).apply(make_context(), module)
    return module_to_string(module), stream.getvalue()


def partitioned(text: str) -> str:
    module = _parse(propagate(text)[0])
    with diagnostics.engine_scope(DiagnosticEngine(stream=StringIO())):
        ShardPartitionPass().apply(make_context(), module)
    return module_to_string(module)


def check_equal(text: str, inputs=None, ranks: int = 4) -> None:
    report = verify(text, ranks=ranks, inputs=inputs)
    assert report.status == "ok", report


def annotate_args(text: str, grid: str, shardings: dict[int, str]) -> str:
    """Producer annotations on some arguments of the (one) function of torch-mlir IR."""
    text = text.replace("module {", f"module {{\n  shard.grid @grid(shape = {grid})", 1)
    m = re.search(r"func\.func @\w+\((.*?)\) -> .*?\{\n", text)
    assert m is not None
    types = dict(re.findall(r"%arg(\d+): (tensor<[^>]*>)", m.group(1)))
    body = text[m.end() :]
    lines = []
    for i, axes in shardings.items():
        lines.append(f"    %sh_a{i} = shard.sharding @grid split_axes = {axes} : !shard.sharding")
        lines.append(f"    %an_a{i} = shard.shard %arg{i} to %sh_a{i} : {types[str(i)]}")
        body = re.sub(rf"%arg{i}\b", f"%an_a{i}", body)
    return text[: m.end()] + "\n".join(lines) + "\n" + body


def npz_inputs(name: str) -> list[np.ndarray]:
    data = np.load(DATA / f"{name}.npz")
    return [data[k] for k in data.files if k != "result"]


# =========================================================================================
# Real IR from torch-mlir, some arguments annotated, on a 2x2 grid
# =========================================================================================


def test_mlp_batch_and_megatron_splits():
    text = annotate_args(
        (DATA / "mlp.mlir").read_text(), "2x2", {0: "[[0]]", 1: "[[1]]", 3: "[[], [1]]"}
    )
    assert "shard.all_reduce" in partitioned(text) or "tensor<2x16xf32>" in partitioned(text)
    check_equal(text, npz_inputs("mlp"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt", "gpt_2layer"])
def test_gpt_batch_and_megatron_splits(name):
    text = (DATA / f"{name}.mlir").read_text()
    qkv = [int(i) for i in re.findall(r"%arg(\d+): tensor<48x16xf32>", text)]
    proj = [int(i) for i in re.findall(r"%arg(\d+): tensor<16x16xf32>", text)]
    fc = [int(i) for i in re.findall(r"%arg(\d+): tensor<64x16xf32>", text)]
    out = [int(i) for i in re.findall(r"%arg(\d+): tensor<16x64xf32>", text)]
    spec = {0: "[[0]]"}
    spec.update({i: "[[1]]" for i in qkv + fc})
    spec.update({i: "[[], [1]]" for i in proj + out})
    text = annotate_args(text, "2x2", spec)
    local = partitioned(text)
    assert "tensor<24x16xf32>" in local  # the qkv weight stays split
    assert "tensor<2x8xi64>" in local  # so does the batch
    check_equal(text, npz_inputs(name))


@pytest.mark.parametrize("axes", ["[[0]]", "[[], [1]]"])
def test_mlp_with_baked_weights(axes):
    """Weights as `dense_resource` constants: the traversals may split them; partition
    slices each process's shard out of the whole constant."""
    text = annotate_args((DATA / "mlp_baked.mlir").read_text(), "2x2", {0: axes})
    check_equal(text)


# =========================================================================================
# Hand-written programs, one rule each
# =========================================================================================

GRID = "shard.grid @g(shape = 2x2)\n"


TWO_USERS = GRID + """
func.func @f(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tosa.exp %x : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %s0 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %e to %s0 annotate_for_users : tensor<8x8xf32>
  %s1 = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %b = shard.shard %e to %s1 annotate_for_users : tensor<8x8xf32>
  %r0 = tosa.abs %a : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %r1 = tosa.abs %b : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r0, %r1 : tensor<8x8xf32>, tensor<8x8xf32>
}
"""


def test_disagreeing_users_get_one_annotation_each():
    text = TWO_USERS
    # upstream asserts here (different shardings of one value's users)
    with pytest.raises(DiagnosticError):
        with diagnostics.engine_scope(DiagnosticEngine(stream=StringIO())):
            ShardingPropagationPass(complete=False).apply(make_context(), _parse(text))
    out, _ = propagate(text)
    module = _parse(out)
    exp = next(op for op in module.walk() if op.name == "tosa.exp")
    (use,) = exp.results[0].uses  # one producer annotation ...
    hub = use.operation
    assert isinstance(hub, ShardOp) and not hub.for_users
    users = {str(u.operation.sharding.owner.split_axes) for u in hub.result.uses}
    assert len(users) == 2  # ... and one annotation per use, as each user wants
    check_equal(text)


def test_value_used_twice_by_one_op_and_returned_twice():
    text = GRID + """
func.func @f(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x8xf32>
  %e = tosa.exp %a : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = tosa.add %e, %e : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %m, %m : tensor<8x8xf32>, tensor<8x8xf32>
}
"""
    assert "tensor<4x8xf32>" in partitioned(text)
    check_equal(text)


UNANNOTATED_ARG = GRID + """
func.func @f(%x: tensor<8x6xf32>, %w: tensor<6x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x6xf32>
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<8x4xf32>
  %e = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %r = linalg.matmul ins(%a, %w : tensor<8x6xf32>, tensor<6x4xf32>) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  %t = tosa.exp %w : (tensor<6x4xf32>) -> tensor<6x4xf32>
  %s2 = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %b = shard.shard %t to %s2 : tensor<6x4xf32>
  %e2 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %r2 = linalg.matmul ins(%a, %b : tensor<8x6xf32>, tensor<6x4xf32>) outs(%e2 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %sum = tosa.add %r, %r2 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %sum : tensor<8x4xf32>
}
"""


def test_unannotated_argument_is_recorded_and_explained():
    out, remarks = propagate(UNANNOTATED_ARG, explain=True)
    module = _parse(out)
    f = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    w = f.body.block.args[1]
    (use,) = w.uses
    assert isinstance(use.operation, ShardOp) and not use.operation.for_users
    assert "argument #1 has no annotation" in remarks
    assert "argument #0" not in remarks  # annotated by the user
    _, remarks = propagate(TWO_USERS, explain=True)
    assert "remark: sharding completed: results @g split_axes = [[]]" in remarks
    check_equal(UNANNOTATED_ARG)


def test_unannotated_argument_takes_agreeing_users_sharding():
    text = GRID + """
func.func @f(%x: tensor<8x6xf32>, %y: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %r = tosa.add %x, %y : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %r to %s : tensor<8x6xf32>
  %r2 = tosa.exp %y : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %s2 = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %b = shard.shard %r2 to %s2 : tensor<8x6xf32>
  %m = tosa.add %a, %b : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  return %m : tensor<8x6xf32>
}
"""
    local = partitioned(text)
    assert re.search(r"func.func @f\(%\w+: tensor<4x3xf32>, %\w+: tensor<4x3xf32>\)", local), local
    check_equal(text)


def test_op_without_interface_runs_replicated_with_a_warning():
    text = GRID + """
func.func private @callee(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8xf32>
  %e = tosa.exp %a : (tensor<8xf32>) -> tensor<8xf32>
  %r = func.call @callee(%e) : (tensor<8xf32>) -> tensor<8xf32>
  %l = tosa.log %r : (tensor<8xf32>) -> tensor<8xf32>
  return %l : tensor<8xf32>
}
"""
    _, messages = propagate(text)
    assert "warning: 'func.call' has no sharding interface" in messages
    partitioned(text)


def test_collapse_split_follows_the_major_dimension():
    text = GRID + """
func.func @f(%x: tensor<4x8x6xf32>) -> tensor<32x6xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4x8x6xf32>
  %c = tensor.collapse_shape %a [[0, 1], [2]] : tensor<4x8x6xf32> into tensor<32x6xf32>
  %e = tosa.exp %c : (tensor<32x6xf32>) -> tensor<32x6xf32>
  return %e : tensor<32x6xf32>
}
"""
    local = partitioned(text)
    assert "tensor<16x6xf32>" in local and "all_gather" not in local
    check_equal(text)


def test_expand_split_of_a_minor_dimension_replicates_the_group():
    text = GRID + """
func.func @f(%x: tensor<32x6xf32>) -> tensor<4x8x6xf32> {
  %c = tensor.expand_shape %x [[0, 1], [2]] output_shape [4, 8, 6] : tensor<32x6xf32> into tensor<4x8x6xf32>
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %c to %s : tensor<4x8x6xf32>
  %e = tosa.exp %a : (tensor<4x8x6xf32>) -> tensor<4x8x6xf32>
  return %e : tensor<4x8x6xf32>
}
"""
    local = partitioned(text)
    assert "tensor<32x6xf32> into tensor<4x8x6xf32>" in local  # reshaped whole
    check_equal(text)


def test_extract_slice_splits_only_whole_dimensions():
    text = GRID + """
func.func @f(%x: tensor<8x12xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x12xf32>
  %v = tensor.extract_slice %a[0, 4] [8, 4] [1, 1] : tensor<8x12xf32> to tensor<8x4xf32>
  %e = tosa.exp %v : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %e : tensor<8x4xf32>
}
"""
    local = partitioned(text)
    assert "[4, 4] [1, 1] : tensor<4x12xf32> to tensor<4x4xf32>" in local
    check_equal(text)


def test_index_of_a_split_loop_reads_the_global_index():
    text = GRID + """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<8x4xf32>
  %e = tensor.empty() : tensor<8x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c10 = arith.constant 10 : index
    %k = arith.muli %i, %c10 : index
    %l = arith.addi %k, %j : index
    %n = arith.index_cast %l : index to i64
    %f = arith.sitofp %n : i64 to f32
    %y = arith.addf %in, %f : f32
    linalg.yield %y : f32
  } -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
"""
    assert "shard.process_multi_index" in partitioned(text)
    check_equal(text)


def test_gather_from_a_captured_table():
    text = GRID + """
#m = affine_map<(d0, d1) -> (d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%idx: tensor<8xi64>, %table: tensor<5x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %idx to %s : tensor<8xi64>
  %e = tensor.empty() : tensor<8x4xf32>
  %r = linalg.generic {indexing_maps = [#m, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<8xi64>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %j = linalg.index 1 : index
    %v = tensor.extract %table[%i, %j] : tensor<5x4xf32>
    linalg.yield %v : f32
  } -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
"""
    partitioned(text)
    inputs = [np.array([4, 0, 1, 3, 2, 2, 0, 4], dtype=np.int64), np.arange(20, dtype=np.float32).reshape(5, 4)]
    check_equal(text, inputs)


def test_argmax_reduction_loop_is_not_split():
    text = GRID + """
#id = affine_map<(d0, d1) -> (d0, d1)>
#r = affine_map<(d0, d1) -> (d0)>
func.func @f(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xi64>) {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4x8xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i64
  %m00 = tensor.empty() : tensor<4xf32>
  %i00 = tensor.empty() : tensor<4xi64>
  %m0 = linalg.fill ins(%ninf : f32) outs(%m00 : tensor<4xf32>) -> tensor<4xf32>
  %i0 = linalg.fill ins(%c0 : i64) outs(%i00 : tensor<4xi64>) -> tensor<4xi64>
  %r:2 = linalg.generic {indexing_maps = [#id, #r, #r], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<4x8xf32>) outs(%m0, %i0 : tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%in: f32, %out: f32, %out_i: i64):
    %j = linalg.index 1 : index
    %jj = arith.index_cast %j : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %sel = arith.select %gt, %jj, %out_i : i64
    linalg.yield %mx, %sel : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xi64>
}
"""
    local = partitioned(text)
    assert "shard.all_reduce" not in local
    inputs = [np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)]
    check_equal(text, inputs)


# =========================================================================================
# Upstream's result is kept; any generated program ends fully annotated
# =========================================================================================

STRUCTURE_ERRORS = (
    "must be defined by a shard.shard",
    "must have exactly one use",
    "expected a single use",
    "must set 'annotate_for_users'",
    "expected a shard.shard op",
    "must be shard.shard operation",
    "must not set 'annotate_for_users'",
    "internal error",
)


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [range(0, 40), range(40, 80)])
def test_upstream_annotations_kept_and_programs_partition(seeds):
    kept = 0
    for seed in seeds:
        text = generate_program(seed)
        traversal = traversal_for(seed)
        try:
            upstream, _ = propagate(text, traversal=traversal, complete=False)
        except DiagnosticError:
            upstream = None
        ours, _ = propagate(text, traversal=traversal)
        if upstream is not None and _partitions(upstream):
            # Upstream's output is complete already: the completion changes nothing.
            assert upstream == ours, f"seed {seed}"
            kept += 1
        stream = StringIO()
        with diagnostics.engine_scope(DiagnosticEngine(stream=stream)):
            module = _parse(ours)
            try:
                ShardPartitionPass().apply(make_context(), module)
            except DiagnosticError:
                pass
        assert not any(e in stream.getvalue() for e in STRUCTURE_ERRORS), f"seed {seed}: {stream.getvalue()}"
    assert kept  # the comparison did happen


def _partitions(text: str) -> bool:
    with diagnostics.engine_scope(DiagnosticEngine(stream=StringIO())):
        try:
            ShardPartitionPass().apply(make_context(), _parse(text))
        except DiagnosticError:
            return False
    return True


@pytest.mark.slow
def test_shardc_run_scatters_unannotated_arguments_by_the_chosen_sharding(tmp_path):
    """`shardc-run --simulate 4` reads the argument shardings the completion recorded:
    the inputs are scattered to match and the gathered result is the unsharded one."""
    import subprocess
    import sys

    program = tmp_path / "p.mlir"
    program.write_text(GRID + """
func.func @f(%x: tensor<8x6xf32>, %y: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %r = tosa.add %x, %y : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %r to %s : tensor<8x6xf32>
  %e = tosa.exp %a : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %e : tensor<8x6xf32>
}
""")
    local = partitioned(program.read_text())
    assert re.search(r"@f\(%\w+: tensor<4x3xf32>, %\w+: tensor<4x3xf32>\)", local)
    outputs = []
    for extra, name in ((["--simulate", "4"], "sharded"), (["--pipeline", ""], "whole")):
        out = tmp_path / name
        cmd = [sys.executable, "-m", "shardc.tools.run", str(program), *extra, "--output", str(out),
               "--input", "x=random:seed=1", "--input", "y=random:seed=2"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        outputs.append(np.load(out / "result0.npy"))
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_gpt_with_random_argument_annotations(seed):
    """Any annotated subset of the arguments, any splits: the program partitions and
    computes the unsharded result."""
    import random

    rng = random.Random(seed)
    text = (DATA / "gpt.mlir").read_text()
    head = re.search(r"func\.func @\w+\((.*?)\) ->", text)
    assert head is not None
    ranks = {int(i): t.count("x") for i, t in re.findall(r"%arg(\d+): (tensor<[^>]*>)", head.group(1))}
    spec: dict[int, str] = {}
    for arg, rank in ranks.items():
        if rng.random() < 0.4:
            split: list[list[int]] = [[] for _ in range(rank)]
            for axis in (0, 1):
                if rng.random() < 0.6:
                    split[rng.randrange(rank)].append(axis)
            spec[arg] = "[" + ", ".join("[" + ", ".join(map(str, s)) + "]" for s in split) + "]"
    check_equal(annotate_args(text, "2x2", spec), npz_inputs("gpt"))


def test_one_value_read_at_two_operand_positions_in_two_shardings():
    """`matmul(%a, %a)` with %a split by rows: as lhs it may stay so, as rhs (rows are
    the contraction) it is read in another sharding; each position gets its own
    annotation."""
    text = GRID.replace("2x2", "2") + """
func.func @f(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4x4xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %s2 = shard.sharding @g split_axes = [[], []] : !shard.sharding
  %b = shard.shard %i to %s2 annotate_for_users : tensor<4x4xf32>
  %r = linalg.matmul ins(%a, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%b : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
"""
    partitioned(text)
    check_equal(text, ranks=2)
