"""Train-mode BatchNorm trained through shardc: the running statistics are state.

The step imported from a module whose forward updates buffers returns their new values
(`ExportedStep.updated_buffers`); the trainer carries them from microbatch to microbatch
and step to step, checkpoints them and returns them. The reference is PyTorch in train
mode on the global batch in one process with `torch.optim.AdamW`: losses, parameters and
running_mean / running_var / num_batches_tracked equal (float32). With the batch split
over ranks the statistics are those of the whole global batch (SyncBatchNorm's
semantics), so the reference is the same on every grid.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from shardc.frontends.torch_train import TorchTrainError, export_train_step, train_module  # noqa: E402
from shardc.launch import run_program  # noqa: E402
from shardc.training.axis import ShardingPolicy  # noqa: E402

STATS = ("running_mean", "running_var", "num_batches_tracked")


class BatchNormCNN(nn.Module):
    """Conv2d + BatchNorm2d + ReLU twice, then a BatchNorm1d MLP head. The layers
    before a BatchNorm have no bias, as ResNet's: BatchNorm removes it, so its gradient
    is rounding noise that AdamW would scale up to a full step in a random direction."""

    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 8, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8, momentum=0.3)
        self.fc1 = nn.Linear(8, 16, bias=False)
        self.bn3 = nn.BatchNorm1d(16)
        self.fc2 = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = x.mean((2, 3))
        return self.fc2(F.relu(self.bn3(self.fc1(x))))


def _case(n_batches: int = 3, batch: int = 8):
    torch.manual_seed(0)
    model = BatchNormCNN()
    batches = [(torch.randn(batch, 3, 8, 8) * 2 + 0.5, torch.randint(0, 4, (batch,))) for _ in range(n_batches)]
    return model, batches


def _reference(model, batches, steps, lr, accum=1):
    """PyTorch in train mode on the global batch, torch.optim.AdamW."""
    m = copy.deepcopy(model).train()
    opt = torch.optim.AdamW(m.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    losses = []
    for s in range(steps):
        opt.zero_grad()
        total = 0.0
        for x, y in batches[s * accum : (s + 1) * accum]:
            loss = F.cross_entropy(m(x), y)
            (loss / accum).backward()
            total += loss.item()
        opt.step()
        losses.append(total / accum)
    return m, losses


def _assert_same_state(result, model, want):
    got = result.state_dict(model)
    assert set(got) == set(want.state_dict())
    for k, v in want.state_dict().items():
        assert got[k].dtype == v.dtype, k
        if k.endswith("num_batches_tracked"):
            assert int(got[k]) == int(v), k
        else:
            np.testing.assert_allclose(got[k].numpy(), v.detach().numpy(), rtol=2e-5, atol=2e-6, err_msg=k)


@pytest.mark.slow
def test_step_returns_the_updated_statistics():
    """One step run unsharded: loss, gradients and the new running statistics equal
    PyTorch's train-mode forward + backward; the exported step names them."""
    model, batches = _case(1)
    x, y = batches[0]
    exported = export_train_step(model, (x,), (y,), F.cross_entropy)
    assert exported.updated_buffers == [f"{m}.{s}" for m in ("bn1", "bn2", "bn3") for s in STATS]
    assert exported.updated_dtypes == ["float32", "float32", "int64"] * 3
    assert exported.result_names[-1] == "buffer.bn3.num_batches_tracked"
    state = {n: t.detach().numpy() for n, t in [*model.named_parameters(), *model.named_buffers()]}
    outs = run_program(exported.text, [x.numpy(), y.numpy(), *(state[n] for n in exported.param_names + exported.buffer_names)], ranks=1)
    m = copy.deepcopy(model)
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    assert abs(float(outs[0]) - loss.item()) < 1e-5
    n = len(exported.param_names)
    for name, got in zip(exported.param_names, outs[1 : 1 + n]):
        np.testing.assert_allclose(got, dict(m.named_parameters())[name].grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    buffers = dict(m.named_buffers())
    for name, got in zip(exported.updated_buffers, outs[1 + n :]):
        assert np.asarray(got).dtype == buffers[name].numpy().dtype and np.shape(got) == tuple(buffers[name].shape), name
        np.testing.assert_allclose(got, buffers[name].numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    # The model given is not changed by the import's eager forward.
    assert int(model.bn1.num_batches_tracked) == 0 and float(model.bn1.running_mean.abs().max()) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("world,accum", [(1, 1), (2, 1), (1, 2), (4, 2)], ids=["1rank", "dp2", "1rank-accum2", "dp4-accum2"])
def test_training_equals_torch_adamw(world, accum):
    """3 steps on 1, 2 and 4 simulated ranks: the statistics reduce over the global batch
    (an all_reduce over `batch` in the compiled step), as PyTorch on one process."""
    model, batches = _case(3 * accum)
    result = train_module(model, batches, F.cross_entropy, world=world, accum=accum, steps=3, lr=1e-2)
    want, losses = _reference(model, batches, 3, 1e-2, accum)
    np.testing.assert_allclose(result.losses, losses, rtol=1e-5, atol=1e-6)
    _assert_same_state(result, model, want)
    assert set(result.buffers) == {f"{m}.{s}" for m in ("bn1", "bn2", "bn3") for s in STATS}
    if world > 1:  # each gradient, and each BatchNorm's batch mean and variance, reduced over `batch`
        counts = result.program.shard_collectives["train_step"]
        assert counts["shard.all_reduce[0]"] >= len(result.params) + 2 * 3
        assert not any("all_gather" in k for k in counts)


@pytest.mark.slow
def test_held_out_loss_uses_the_running_statistics():
    """@eval_loss is the module in eval mode (as a PyTorch validation loop): normalized
    by the running statistics trained so far, which the evaluation does not change."""
    model, batches = _case(4)
    held = [(torch.randn(8, 3, 8, 8), torch.randint(0, 4, (8,)))]
    result = train_module(model, batches, F.cross_entropy, world=2, steps=3, lr=1e-2, eval_batches=held, eval_every=1)
    m = copy.deepcopy(model).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    want = []
    for x, y in batches[:3]:
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
        m.eval()
        with torch.no_grad():
            want.append(F.cross_entropy(m(held[0][0]), held[0][1]).item())
        m.train()
    np.testing.assert_allclose([v for _, v in result.eval_losses], want, rtol=1e-5, atol=1e-6)
    _assert_same_state(result, model, m)  # evaluating changed no statistic
    assert model.training  # the module given is left in the mode it was in


@pytest.mark.slow
def test_checkpoint_resume_keeps_the_statistics(tmp_path):
    """The statistics are saved (`buffers/<FQN>`, their own dtype) and a resume on
    another grid continues bitwise as the uninterrupted run."""
    from shardc.training.checkpoint import CheckpointOptions

    model, batches = _case(4)
    full = train_module(model, batches, F.cross_entropy, world=2, steps=4, lr=1e-2)
    opts = CheckpointOptions(tmp_path / "ck", every=2, keep=5)
    train_module(model, batches, F.cross_entropy, world=2, steps=4, lr=1e-2, checkpoint=opts)
    manifest = json.loads((tmp_path / "ck" / "step-00000002" / "manifest.json").read_text())
    assert manifest["arrays"]["buffers/bn2.running_var"]["dtype"] == "float32"
    assert manifest["arrays"]["buffers/bn1.num_batches_tracked"]["dtype"] == "int64"
    resumed = train_module(model, batches, F.cross_entropy, world=2, steps=4, lr=1e-2, resume=tmp_path / "ck" / "step-00000002")
    np.testing.assert_array_equal(resumed.losses, full.losses)
    for k in full.buffers:
        np.testing.assert_array_equal(resumed.buffers[k], full.buffers[k], err_msg=k)
    for k in full.params:
        np.testing.assert_array_equal(resumed.params[k], full.params[k], err_msg=k)
    assert int(resumed.buffers["bn3.num_batches_tracked"]) == 4
    # and on one rank, another grid: the same numbers to float32 rounding
    one = train_module(model, batches, F.cross_entropy, world=1, steps=4, lr=1e-2, resume=tmp_path / "ck" / "step-00000002",
                       policy=ShardingPolicy(1, False))
    for k in full.buffers:
        np.testing.assert_allclose(one.buffers[k], full.buffers[k], rtol=1e-5, atol=1e-6, err_msg=k)


class HiddenUpdate(nn.Module):
    """Updates a buffer through an op whose schema does not declare the mutation
    (native_batch_norm in training form, without a decomposition for it): the
    import cannot capture it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("seen", torch.zeros(4))
        self.register_buffer("var", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _, _ = torch.ops.aten.native_batch_norm.default(self.fc(x), None, None, self.seen, self.var, True, 0.5, 1e-5)
        return out


def test_an_update_the_import_cannot_capture_is_refused(monkeypatch):
    """With the decomposition that makes BatchNorm's update visible taken away, the lost
    update is found (eager against traced statistics) and refused naming the buffers."""
    import shardc.frontends.torch_decomp as decomp

    real = decomp.training_decompositions

    def without_batch_norm():
        table = real()
        del table[torch.ops.aten.native_batch_norm.default]
        return table

    monkeypatch.setattr(decomp, "training_decompositions", without_batch_norm)
    with pytest.raises(TorchTrainError, match=r"^the forward of HiddenUpdate updates buffers seen, var in place in a way the training import cannot capture"):
        export_train_step(HiddenUpdate(), (torch.randn(8, 4),), (torch.randn(8, 4),), F.mse_loss)


class Tracker(nn.Module):
    """Buffers updated by plain in-place ops, no BatchNorm: a call counter and an
    exponential moving average of the activations."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.register_buffer("ema", torch.zeros(4))
        self.register_buffer("scale", torch.full((4,), 2.0))  # read, never updated

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x) * self.scale
        self.calls += 1
        self.ema.mul_(0.9).add_(0.1 * h.detach().mean(0))
        return h


def test_any_in_place_buffer_update_is_carried():
    """The mechanism is general: whatever the forward writes into a buffer in place is a
    result of the step; the buffers it only reads are not."""
    torch.manual_seed(0)
    model = Tracker()
    batches = [(torch.randn(8, 4), torch.randn(8, 4)) for _ in range(3)]
    exported = export_train_step(model, (batches[0][0],), (batches[0][1],), F.mse_loss)
    assert exported.updated_buffers == ["calls", "ema"] and exported.updated_dtypes == ["int64", "float32"]
    result = train_module(model, batches, F.mse_loss, world=2, steps=3, lr=1e-2)
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    for x, y in batches:
        opt.zero_grad()
        F.mse_loss(m(x), y).backward()
        opt.step()
    assert int(result.buffers["calls"]) == 3
    _assert_same_state(result, model, m)


def _collectives(text: str) -> dict[str, int]:
    """The shard collectives of `@train_step` after propagation and partition."""
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.training.pipeline import PIPELINE, count_collectives, run_pipeline

    module = LocatingParser(make_context(), text, "<step>").parse_module()
    run_pipeline(module, PIPELINE[: PIPELINE.index("convert-shard-to-mpi")])
    return count_collectives(module)["train_step"]


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 4])
def test_height_split_statistics_reduce_over_the_split_rows(ranks):
    """The image split by height: the convolutions exchange halos, each BatchNorm's
    mean and variance are partial sums over the rows a rank holds, all_reduced over the
    split axis; loss, gradients and new statistics equal PyTorch's, nothing gathered."""
    from shardc.frontends.annotate import annotate_arguments

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
        nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4, momentum=0.3),
    )
    x, target = torch.randn(2, 3, 16, 16) * 2 + 1, torch.randn(2, 4, 16, 16)
    step = export_train_step(model, [x], [target], F.mse_loss)
    program = annotate_arguments(step.text, (ranks,), {"input0": [[], [], [0]], "target0": [[], [], [0]]}, names=step.arg_names)
    counts = _collectives(program)
    assert counts["shard.update_halo"] >= 2 and counts["shard.all_reduce"] >= 2 * 2
    assert not any(k in counts for k in ("shard.all_gather", "shard.all_to_all"))
    state = {n: t.detach().numpy() for n, t in [*model.named_parameters(), *model.named_buffers()]}
    got = run_program(program, [x.numpy(), target.numpy(), *(state[n] for n in step.param_names + step.buffer_names)], ranks=ranks)
    m = copy.deepcopy(model)
    loss = F.mse_loss(m(x), target)
    buffers = dict(m.named_buffers())
    want = [loss, *torch.autograd.grad(loss, list(m.parameters())), *(buffers[n] for n in step.updated_buffers)]
    assert len(got) == len(want) == len(step.result_names)
    for name, g, w in zip(step.result_names, got, want):
        w = w.detach().numpy()
        assert np.shape(g) == w.shape, name
        assert float(np.abs(np.asarray(g) - w).max()) <= 1e-5 * max(float(np.abs(w).max()), 1.0), name


@pytest.mark.slow
def test_frozen_batchnorm_in_eval_mode_trains():
    """A module in eval mode (fine-tuning with frozen BatchNorm): normalized by the
    running statistics, which stay as they are; torch-mlir's shape-0 cast of the eval
    form no longer stops the import."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    model[1].running_mean.uniform_(-0.5, 0.5)
    model[1].running_var.uniform_(0.5, 2)
    model.eval()
    batches = [(torch.randn(8, 3, 6, 6), torch.randint(0, 3, (8,))) for _ in range(3)]
    result = train_module(model, batches, F.cross_entropy, world=2, steps=3, lr=1e-2)
    assert result.buffers == {} and result.program.exported.updated_buffers == []
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    np.testing.assert_allclose(result.losses, losses, rtol=1e-5, atol=1e-6)
    _assert_same_state(result, model, m)


def test_cumulative_average_batchnorm_is_one_clear_line():
    """momentum=None averages by `1 / float(num_batches_tracked)`, a value read in
    Python that no traced step can follow: refused saying so and what to change."""
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4, momentum=None))
    with pytest.raises(TorchTrainError, match=r"^cannot trace the training step of Sequential: its forward reads a tensor's value in Python .*give it a momentum\)$"):
        export_train_step(model, (torch.randn(8, 4),), (torch.randn(8, 4),), F.mse_loss)
