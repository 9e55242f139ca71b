"""Training steps of PyTorch modules imported through torch-mlir and trained by shardc.

The imported step (loss and gradients from PyTorch's autograd) must equal PyTorch's own
loss and gradients; a module trained by `train_module` on simulated ranks under every
policy must equal the same module trained by `torch.optim.AdamW` on one process with the
same batches (float64: 1e-9; float32: 1e-5 relative), with the collectives the policy
implies in the compiled IR; bad input is one clear error naming the parameter or the op.
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from shardc.frontends.torch_train import TorchTrainError, export_train_step, train_module  # noqa: E402
from shardc.launch import run_program  # noqa: E402
from shardc.testing import torch_models as tm  # noqa: E402
from shardc.training.axis import PartitionSpec, ShardingPlan, ShardingPolicy, ShardingValidationError  # noqa: E402

MLP_AXES = {r"fc1\.weight": ("n_hidden", None), r"fc1\.bias": ("n_hidden",), r"fc2\.weight": (None, "n_hidden")}
MLP_PLAN = ShardingPlan(tp_rules={"n_hidden": "shard"})


def _torch_grads(model, inputs, targets, loss_fn):
    m = copy.deepcopy(model)
    loss = loss_fn(m(*inputs), *targets)
    loss.backward()
    return loss.item(), {n: p.grad.numpy() for n, p in m.named_parameters()}


def _check_step(model, inputs, targets, loss_fn, tol):
    exported = export_train_step(model, inputs, targets, loss_fn)
    params = [p.detach().numpy() for _, p in model.named_parameters()]
    outs = run_program(exported.text, [*(x.numpy() for x in (*inputs, *targets)), *params], ranks=1)
    want_loss, want = _torch_grads(model, inputs, targets, loss_fn)
    assert abs(float(outs[0]) - want_loss) < tol
    assert len(outs) == 1 + len(want) and exported.result_names[1:] == [f"grad.{n}" for n in want]
    for name, got in zip(exported.param_names, outs[1:]):
        assert got.shape == want[name].shape
        assert np.abs(got - want[name]).max() < tol, name
    return exported


@pytest.mark.parametrize("loss", ["mse", "cross_entropy"])
def test_mlp_step_equals_pytorch(loss):
    torch.manual_seed(0)
    model = tm.MLP()
    x = torch.randn(8, 16)
    if loss == "mse":
        exported = _check_step(model, (x,), (torch.randn(8, 8),), F.mse_loss, 1e-6)
    else:
        exported = _check_step(model, (x,), (torch.randint(0, 8, (8,)),), F.cross_entropy, 1e-6)
    # Parameters are arguments named by FQN, never baked constants.
    assert exported.param_names == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert "dense_resource" not in exported.text


@pytest.mark.slow
def test_gpt_step_with_embedding_backward_equals_pytorch():
    """nn.Embedding's and cross-entropy's backward come out as tm_tensor.scatter; SDPA is
    imported in its math form; the tied head's gradient lands on wte.weight."""
    cfg = tm.GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32)
    torch.manual_seed(0)
    model = tm.GPT(cfg)
    idx = torch.randint(0, cfg.vocab_size, (4, cfg.block_size))
    tgt = torch.randint(0, cfg.vocab_size, (4, cfg.block_size))

    def loss_fn(logits, targets):
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    exported = _check_step(model, (idx,), (tgt,), loss_fn, 1e-5)
    assert exported.text.count("tm_tensor.scatter") >= 2
    assert "head.weight" not in exported.param_names


# ---------------------------------------------------------------------------------------
# Training against torch.optim.AdamW
# ---------------------------------------------------------------------------------------


def _reference(model, batches, loss_fn, accum, steps, lr):
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    losses = []
    for s in range(steps):
        opt.zero_grad()
        total = 0.0
        for x, y in batches[s * accum : (s + 1) * accum]:
            loss = loss_fn(m(x), y)
            (loss / accum).backward()
            total += loss.item()
        opt.step()
        losses.append(total / accum)
    return losses, {k: v.detach().numpy() for k, v in m.named_parameters()}


def _mlp_case(dtype):
    torch.manual_seed(0)
    model = tm.MLP().to(dtype)
    batches = [(torch.randn(8, 16, dtype=dtype), torch.randn(8, 8, dtype=dtype)) for _ in range(6)]
    return model, batches


POLICIES = {
    # name: (world, tp, zero, fsdp, accum): every policy on 1, 2 and 4 ranks, tp in
    # {1, 2}, zero and fsdp on and off, accumulation 1 and 2.
    "1rank": (1, 1, False, False, 1),
    "1rank-accum2": (1, 1, False, False, 2),
    "1rank-fsdp": (1, 1, True, True, 1),
    "dp2": (2, 1, False, False, 1),
    "dp2-accum2": (2, 1, False, False, 2),
    "dp2-zero": (2, 1, True, False, 2),
    "dp2-fsdp": (2, 1, True, True, 1),
    "tp2": (2, 2, False, False, 1),
    "tp2-zero-accum2": (2, 2, True, False, 2),
    "tp2-fsdp": (2, 2, True, True, 1),
    "dp4-accum2": (4, 1, False, False, 2),
    "dp4-zero": (4, 1, True, False, 1),
    "dp4-fsdp-accum2": (4, 1, True, True, 2),
    "4ranks-tp2": (4, 2, False, False, 1),
    "4ranks-tp2-zero-accum2": (4, 2, True, False, 2),
    "4ranks-tp2-fsdp": (4, 2, True, True, 1),
    "4ranks-tp2-fsdp-accum2": (4, 2, True, True, 2),
}


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", list(POLICIES), ids=list(POLICIES))
def test_mlp_training_equals_torch_adamw(case, dtype):
    world, tp, zero, fsdp, accum = POLICIES[case]
    model, batches = _mlp_case(dtype)
    plan = ShardingPlan(tp_rules={"n_hidden": "shard"}, zero_rules={"n_hidden": "batch"})
    result = train_module(
        model, batches, F.mse_loss, axes=MLP_AXES, plan=plan, policy=ShardingPolicy(tp, zero, fsdp),
        world=world, accum=accum, steps=3, lr=1e-2,
    )
    want_losses, want = _reference(model, batches, F.mse_loss, accum, 3, 1e-2)
    if dtype == torch.float64:
        np.testing.assert_allclose(result.losses, want_losses, rtol=0, atol=1e-9)
        for k in want:
            np.testing.assert_allclose(result.params[k], want[k], rtol=0, atol=1e-9, err_msg=k)
    else:
        np.testing.assert_allclose(result.losses, want_losses, rtol=1e-5)
        for k in want:
            np.testing.assert_allclose(result.params[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)

    # Collectives per step, as the policy implies them (grid axis 0: batch, 1: shard).
    step, adamw = (result.program.shard_collectives[f] for f in ("train_step", "adamw_step"))
    on_batch = sum(n for k, n in step.items() if k.endswith("[0]"))
    on_shard = sum(n for k, n in step.items() if k.endswith("[1]"))
    assert (on_batch > 0) == (world // tp > 1)  # data replicas reduce their gradients
    assert (on_shard > 0) == (tp > 1)  # TP: the row-parallel product is all-reduced
    assert all(k.startswith("shard.all_reduce") for k in step if k.endswith("[1]"))
    if world // tp > 1 and zero:
        assert step["shard.reduce_scatter[0]"] >= 1  # ZeRO: gradients go to their owners
    if zero and not fsdp and world // tp > 1:
        assert adamw["shard.all_gather[0]"] >= 1  # updated pieces gathered back
    else:
        assert not adamw  # the update runs where the parameter is stored
    if fsdp and world // tp > 1:
        assert step["shard.all_gather[0]"] == 3  # each split parameter gathered to compute
    else:
        # Nothing else is gathered: the zeros torch-mlir shares between the inits of
        # forward and backward products are rebuilt per use (split-shared-inits).
        assert not any(k.startswith("shard.all_gather") for k in step)
    if world // tp > 1 and not zero:
        assert step["shard.all_reduce[0]"] == 5  # four gradients and the loss

    # The trained values load back into the module.
    trained = copy.deepcopy(model)
    trained.load_state_dict(result.state_dict(trained))
    np.testing.assert_array_equal(trained.fc1.weight.detach().numpy(), result.params["fc1.weight"])


@pytest.mark.slow
def test_lr_schedule_and_cross_entropy():
    torch.manual_seed(1)
    model = tm.MLP()
    batches = [(torch.randn(8, 16), torch.randint(0, 8, (8,))) for _ in range(3)]
    lrs = {1: 1e-2, 2: 5e-3, 3: 1e-3}
    result = train_module(model, batches, F.cross_entropy, axes=MLP_AXES, plan=MLP_PLAN,
                          policy=ShardingPolicy(2, False), world=2, steps=3, lr=lrs.__getitem__)
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    want = []
    for s, (x, y) in enumerate(batches, start=1):
        for group in opt.param_groups:
            group["lr"] = lrs[s]
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        want.append(loss.item())
    np.testing.assert_allclose(result.losses, want, rtol=1e-5)
    for k, v in m.named_parameters():
        np.testing.assert_allclose(result.params[k], v.detach().numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# Bad input: one clear line
# ---------------------------------------------------------------------------------------


def _train(**kw):
    model, batches = _mlp_case(torch.float32)
    args = dict(axes=MLP_AXES, plan=MLP_PLAN, policy=ShardingPolicy(2, False), world=2, steps=1)
    args.update(kw)
    return train_module(model, batches, F.mse_loss, **args)


def test_pattern_matching_no_parameter():
    with pytest.raises(TorchTrainError, match=r"axes pattern 'fc3\\\\.weight' matches no parameter"):
        _train(axes={**MLP_AXES, r"fc3\.weight": ("n_hidden", None)})


def test_logical_axis_unknown_to_the_plan():
    with pytest.raises(TorchTrainError, match=r"parameter fc1\.weight of shape \(32, 16\): logical axis 'n_hiden' is not in the plan"):
        _train(axes={r"fc1\.weight": ("n_hiden", None)})


def test_axes_of_the_wrong_rank():
    with pytest.raises(TorchTrainError, match=r"parameter fc1\.bias of shape \(32,\): logical axes .* name 2 dimensions, it has 1"):
        _train(axes={r"fc1\.bias": ("n_hidden", None)})


def test_dimension_that_does_not_divide():
    """fc1's 32 hidden units split 3 ways by tp=3 on 3 ranks: named with path, shape, spec."""
    with pytest.raises(ShardingValidationError, match=r"state params/fc1\.weight of shape \(32, 16\) with partition spec PartitionSpec\(\('shard',\), None\) does not fit grid \(batch=1, shard=3\)"):
        _train(policy=ShardingPolicy(3, False), world=3)


def test_batch_that_does_not_divide():
    with pytest.raises(ShardingValidationError, match=r"state data/input0 of shape \(8, 16\) .* split 3 ways"):
        _train(policy=ShardingPolicy(1, False), world=3)


def test_module_torch_mlir_cannot_import():
    class Sorts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4))

        def forward(self, x):
            return torch.linalg.eigvals(x * self.w).real

    with pytest.raises(TorchTrainError, match=r"torch-mlir cannot import the training step of Sorts: no lowering to linalg for torch\.aten\.linalg_eig$"):
        export_train_step(Sorts(), (torch.randn(4, 4),), (torch.randn(4),), F.mse_loss)


def test_buffer_updated_by_the_forward_is_a_result_of_the_step():
    """Train-mode BatchNorm's running statistics leave the step as its last results
    (trained, checkpointed and refused where the trace loses them: test_torch_batchnorm)."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    exported = export_train_step(model, (torch.randn(8, 4),), (torch.randn(8, 4),), F.mse_loss)
    stats = ["1.running_mean", "1.running_var", "1.num_batches_tracked"]
    assert exported.updated_buffers == stats
    assert exported.result_names[-3:] == [f"buffer.{n}" for n in stats]
    assert exported.text.count("tensor<4xf32>, tensor<4xf32>, tensor<i64>\n") == 1  # the return's last types


def test_bad_input_is_refused_before_anything_is_imported_or_allocated(monkeypatch):
    """Layout problems are found from the module's parameters alone: torch-mlir is never
    called and no rank state is made."""
    import shardc.frontends.torch_train as tt
    import shardc.training.module_run as module_run

    def never(*a, **k):
        raise AssertionError("imported or allocated before validation")

    monkeypatch.setattr(tt, "export_train_step", never)
    monkeypatch.setattr(module_run, "RankModule", never)
    with pytest.raises(TorchTrainError, match="matches no parameter"):
        _train(axes={r"nope": ("n_hidden",)})
    with pytest.raises(TorchTrainError, match="is not in the plan"):
        _train(axes={r"fc1\.weight": ("n_hiden", None)})
    with pytest.raises(ShardingValidationError, match=r"params/fc1\.weight"):
        _train(policy=ShardingPolicy(3, False), world=3)
    with pytest.raises(TorchTrainError, match=r"no_decay pattern 'fc9\\\\\.bias' matches no parameter"):
        _train(no_decay=[r"fc9\.bias"])


def test_module_torch_mlir_cannot_import_through_train_module():
    class Eig(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4))

        def forward(self, x):
            return torch.linalg.eigvals(x * self.w).real

    batches = [(torch.randn(4, 4), torch.randn(4))]
    with pytest.raises(TorchTrainError, match=r"^torch-mlir cannot import the training step of Eig: no lowering to linalg for torch\.aten\.linalg_eig$"):
        train_module(Eig(), batches, F.mse_loss, world=1)


# ---------------------------------------------------------------------------------------
# Buffers, parameter groups, evaluation, checkpoints
# ---------------------------------------------------------------------------------------


class Buffered(torch.nn.Module):
    """An MLP whose hidden units are gated by a constant mask and shifted by a position
    table: both buffers (register_buffer), read by the forward, never trained."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)
        self.register_buffer("mask", (torch.arange(32) % 3 != 0).to(torch.get_default_dtype()))
        self.register_buffer("table", torch.linspace(-1.0, 1.0, 8 * 16).reshape(8, 16))

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x + self.table)) * self.mask)


@pytest.mark.slow
@pytest.mark.parametrize("world, tp, fsdp", [(1, 1, False), (2, 2, False), (4, 2, True)])
def test_buffers_are_read_only_arguments(world, tp, fsdp):
    torch.manual_seed(0)
    model = Buffered().double()
    batches = [(torch.randn(8, 16, dtype=torch.float64), torch.randn(8, 8, dtype=torch.float64)) for _ in range(3)]
    axes = {**MLP_AXES, r"mask": ("n_hidden",)}  # a buffer named by the axes is split like fc1's rows
    plan = ShardingPlan(tp_rules={"n_hidden": "shard"})
    result = train_module(model, batches, F.mse_loss, axes=axes, plan=plan, policy=ShardingPolicy(tp, fsdp, fsdp),
                          world=world, steps=3, lr=1e-2)
    want_losses, want = _reference(model, batches, F.mse_loss, 1, 3, 1e-2)
    np.testing.assert_allclose(result.losses, want_losses, rtol=0, atol=1e-9)
    for k in want:
        np.testing.assert_allclose(result.params[k], want[k], rtol=0, atol=1e-9, err_msg=k)
    prog = result.program
    assert prog.exported.buffer_names == ["mask", "table"] and "mask" not in result.params
    assert [str(s) for s in prog.buffer_specs] == [str(PartitionSpec("shard")), str(PartitionSpec(None, None))]
    # Passed as arguments, not baked: the imported step has no constant of the table's size.
    header = prog.exported.text[prog.exported.text.index("func.func @train_step(") :].split("\n", 1)[0]
    assert "%arg7: tensor<8x16xf64>" in header and "%arg8" not in header
    assert not re.search(r"dense<[^>]*> : tensor<(8x16|32)xf64>", prog.exported.text)
    trained = Buffered().double()
    trained.load_state_dict(result.state_dict(model))
    np.testing.assert_array_equal(trained.mask.numpy(), model.mask.numpy())


def _reference_groups(model, batches, loss_fn, steps, lr, no_decay, wd):
    m = copy.deepcopy(model)
    named = list(m.named_parameters())
    skip = [p for n, p in named if any(re.fullmatch(x, n) for x in no_decay)]
    keep = [p for n, p in named if not any(re.fullmatch(x, n) for x in no_decay)]
    opt = torch.optim.AdamW([{"params": keep, "weight_decay": wd}, {"params": skip, "weight_decay": 0.0}], lr=lr)
    losses = []
    for x, y in batches[:steps]:
        opt.zero_grad()
        loss = loss_fn(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().numpy() for k, v in m.named_parameters()}


@pytest.mark.slow
@pytest.mark.parametrize("world, tp, zero", [(1, 1, False), (4, 2, True)])
def test_no_decay_groups_equal_torch_param_groups(world, tp, zero):
    from shardc.training.optimizer import AdamWConfig

    model, batches = _mlp_case(torch.float64)
    opt = AdamWConfig(0.9, 0.999, 1e-8, 0.5)  # a large decay, so leaving it out shows
    no_decay = [r".*\.bias"]
    plan = ShardingPlan(tp_rules={"n_hidden": "shard"})
    kw = dict(axes=MLP_AXES, plan=plan, policy=ShardingPolicy(tp, zero), world=world, steps=3, lr=5e-2, opt=opt)
    result = train_module(model, batches, F.mse_loss, no_decay=no_decay, **kw)
    want_losses, want = _reference_groups(model, batches, F.mse_loss, 3, 5e-2, no_decay, 0.5)
    np.testing.assert_allclose(result.losses, want_losses, rtol=0, atol=1e-9)
    for k in want:
        np.testing.assert_allclose(result.params[k], want[k], rtol=0, atol=1e-9, err_msg=k)
    assert [p.decay for p in result.program.params] == [True, False, True, False]
    everything = train_module(model, batches, F.mse_loss, **kw)
    assert np.abs(everything.params["fc1.bias"] - want["fc1.bias"]).max() > 1e-4  # the groups matter


@pytest.mark.slow
def test_held_out_loss_every_n_steps():
    model, batches = _mlp_case(torch.float64)
    held = [(torch.randn(8, 16, dtype=torch.float64), torch.randn(8, 8, dtype=torch.float64)) for _ in range(2)]
    result = train_module(model, batches, F.mse_loss, axes=MLP_AXES, plan=MLP_PLAN, policy=ShardingPolicy(2, False),
                          world=4, steps=5, lr=1e-2, eval_batches=held, eval_every=2)
    assert [s for s, _ in result.eval_losses] == [2, 4, 5]
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    want = []
    for step, (x, y) in enumerate(batches[:5], start=1):
        opt.zero_grad()
        F.mse_loss(m(x), y).backward()
        opt.step()
        if step in (2, 4, 5):
            with torch.no_grad():
                want.append(float(np.mean([F.mse_loss(m(a), b).item() for a, b in held])))
    np.testing.assert_allclose([v for _, v in result.eval_losses], want, rtol=0, atol=1e-9)
    assert "eval_loss" in result.program.shard_collectives


@pytest.mark.slow
def test_checkpoint_resume_on_another_grid_equals_an_uninterrupted_run(tmp_path):
    from shardc.training.checkpoint import CheckpointOptions, complete_checkpoints
    from shardc.training.train import TrainConfig

    model, batches = _mlp_case(torch.float64)
    sched = TrainConfig(lr=1e-2, min_lr=1e-3, warmup_steps=2, steps=6)
    plan = ShardingPlan(tp_rules={"n_hidden": "shard"}, zero_rules={"n_hidden": "batch"})
    kw = dict(axes=MLP_AXES, plan=plan, steps=6, lr=sched)
    full = train_module(model, batches, F.mse_loss, policy=ShardingPolicy(2, True, True), world=4, **kw)
    opts = CheckpointOptions(tmp_path / "ck", every=2, keep=5)
    train_module(model, batches, F.mse_loss, policy=ShardingPolicy(2, True, True), world=4, checkpoint=opts, **kw)
    steps = [s for s, _ in complete_checkpoints(tmp_path / "ck")]
    assert steps == [2, 4, 6]
    # Resume from step 2 on 2 ranks, data-parallel with ZeRO: the same trajectory.
    resumed = train_module(model, batches, F.mse_loss, policy=ShardingPolicy(1, True), world=2,
                           resume=tmp_path / "ck" / "step-00000002", **kw)
    np.testing.assert_allclose(resumed.losses, full.losses, rtol=0, atol=1e-9)
    for k in full.params:
        np.testing.assert_allclose(resumed.params[k], full.params[k], rtol=0, atol=1e-9, err_msg=k)
    # The manifest keys the state by FQN.
    import json

    manifest = json.loads((tmp_path / "ck" / "step-00000002" / "manifest.json").read_text())
    assert "params/fc1.weight" in manifest["arrays"] and "opt_state/mu/fc2.bias" in manifest["arrays"]
    assert manifest["model"]["module"] == "MLP"


@pytest.mark.slow
def test_checkpoint_refuses_a_resume_that_differs(tmp_path):
    from shardc.training.checkpoint import CheckpointOptions

    model, batches = _mlp_case(torch.float64)
    opts = CheckpointOptions(tmp_path / "ck", every=1)
    train_module(model, batches, F.mse_loss, axes=MLP_AXES, plan=MLP_PLAN, steps=2, lr=1e-2, checkpoint=opts)
    with pytest.raises(TorchTrainError, match=r"saved with a different training configuration: lr is 0\.01 there, 0\.02 here"):
        train_module(model, batches, F.mse_loss, axes=MLP_AXES, plan=MLP_PLAN, steps=3, lr=2e-2, resume=tmp_path / "ck")
    other = torch.nn.Sequential(torch.nn.Linear(16, 8)).double()
    with pytest.raises(TorchTrainError, match=r"saved for a different model: module is MLP there, Sequential here"):
        train_module(other, batches, F.mse_loss, steps=3, lr=1e-2, resume=tmp_path / "ck")
    with pytest.raises(TorchTrainError, match=r"checkpoints record the learning-rate schedule"):
        train_module(model, batches, F.mse_loss, steps=2, lr=lambda s: 1e-2, checkpoint=opts)


def test_inference_validates_like_training():
    from shardc.frontends.torch_train import sharded_forward

    model, batches = _mlp_case(torch.float32)
    with pytest.raises(TorchTrainError, match=r"axes pattern 'fc9' matches no parameter"):
        sharded_forward(model, (batches[0][0],), axes={"fc9": ("n_hidden",)}, plan=MLP_PLAN, policy=ShardingPolicy(2, False), world=2)
    with pytest.raises(ShardingValidationError, match=r"params/fc1\.weight of shape \(32, 16\)"):
        sharded_forward(model, (batches[0][0],), axes=MLP_AXES, plan=MLP_PLAN, policy=ShardingPolicy(3, False), world=3)
