"""The collectives each training policy implies on torch-mlir's GPT step, and the
rewrite that keeps cross-entropy's backward data parallel.

Under plain data parallelism a step needs only the gradient all-reduces (and the loss's
two scalars); torch-mlir's backward of `nll_loss` used to cost four all-gathers over
`batch`: its targets read at `remsi(linalg.index 0, rows)` (now followed like
`linalg.index 0`, `interfaces.linalg._index_loop`) and a `tm_tensor.scatter` of the
one-hot rows, whose indexed dimensions cannot split (now an elementwise generic,
`torch_rewrite.scatters_by_position`)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from shardc.context import make_context
from shardc.frontends.torch_rewrite import scatters_by_position
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import module_to_string
from shardc.runtime.launch import run_program

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
    return module_to_string(module), count


@pytest.mark.parametrize("combine", [ASSIGN, ADD], ids=["assign", "add"])
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
    assert count == 0 and "tm_tensor.scatter" in out


# ---- the GPT step under each policy (torch-mlir) --------------------------------------

EXAMPLE = str(Path(__file__).resolve().parents[3] / "examples" / "torch_gpt.py")
SMALL = dict(vocab_size=32, block_size=8, n_layer=1, n_head=2, n_embd=16)


@pytest.fixture(scope="module")
def exported():
    pytest.importorskip("torch_mlir", reason="needs torch-mlir (the [torch] extra)")
    import torch

    from shardc.frontends.torch_train import export_train_step, load_task

    task = load_task(f"{EXAMPLE}:make", **SMALL)
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randint(0, 32, (4, 8), generator=g) for _ in range(2))
    return task, export_train_step(task.model, (x,), (y,), task.loss_fn)


def _step(exported, world, tp, zero=False, fsdp=False):
    """(shard collectives of @train_step by grid axes, its partitioned text)."""
    from shardc.frontends.torch_train import TorchStepProgram
    from shardc.training.axis import ShardingPolicy
    from shardc.training.mesh import make_grid

    task, ex = exported
    prog = TorchStepProgram.build(ex, task.axes, task.plan, ShardingPolicy(tp, zero, fsdp), make_grid(world, tp), keep_text=True)
    text = dict(prog.stage_texts())["05-cse.mlir"]
    step = re.search(r"func\.func @train_step\(.*?\n  \}\n", text, re.S)
    assert step is not None
    return prog, prog.shard_collectives["train_step"], step.group(0)


@pytest.mark.slow
def test_data_parallel_step_gathers_nothing(exported):
    prog, step, _ = _step(exported, 2, 1)
    assert not any(k.startswith("shard.all_gather") for k in step), step
    # Only the gradient all-reduces: one per parameter (the tied table two: its head
    # and embedding gradients), and the loss's sum and count of targets.
    assert set(step) <= {"shard.all_reduce[0]", "shard.all_slice[0]"}, step
    assert step["shard.all_reduce[0]"] <= len(prog.params) + 1 + 2


@pytest.mark.slow
def test_zero_step_gathers_nothing(exported):
    _, step, _ = _step(exported, 2, 1, zero=True)
    assert not any(k.startswith("shard.all_gather") for k in step), step
    assert step["shard.reduce_scatter[0]"] >= 1


@pytest.mark.slow
def test_fsdp_gathers_each_split_parameter_once(exported):
    prog, step, text = _step(exported, 2, 1, zero=True, fsdp=True)
    # FSDP stores what ZeRO splits over `batch`; compute needs each whole, once per step
    # (the tied table, read by the embedding and the head, too).
    split = [p for p, lay in zip(prog.params, prog.layouts) if any(d and "batch" in d for d in lay.storage)]
    gathered = re.findall(r"shard\.all_gather (%\w+)", text)
    assert all(v.startswith("%arg") for v in gathered), gathered  # parameters, no activation
    assert len(gathered) == len(set(gathered)) == step["shard.all_gather[0]"]
    assert len(gathered) == len(split)


@pytest.mark.slow
def test_tensor_and_data_parallel_step(exported):
    _, step, _ = _step(exported, 4, 2)
    # Across `shard`: the row-parallel outputs and the column-parallel input gradients of
    # attention and the MLP; across `batch`: the gradients. Nothing is gathered.
    assert not any(k.startswith("shard.all_gather") for k in step), step
    assert set(step) <= {"shard.all_reduce[0]", "shard.all_slice[0]", "shard.all_reduce[1]", "shard.all_slice[1]"}, step
    assert step["shard.all_reduce[1]"] == 6 * SMALL["n_layer"]
