"""The collectives each training policy implies on torch-mlir's GPT step.

Under plain data parallelism a step needs only the gradient all-reduces (and the loss's
two scalars); torch-mlir's backward of `nll_loss` used to cost four all-gathers over
`batch`: its targets read at `remsi(linalg.index 0, rows)` (now followed like
`linalg.index 0`, `interfaces.linalg.index_loop`) and a `tm_tensor.scatter` of the
one-hot rows, whose indexed dimensions cannot split (now an elementwise generic, the
`scatter-by-position` pass, tests/unit/passes/test_scatter_by_position.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
