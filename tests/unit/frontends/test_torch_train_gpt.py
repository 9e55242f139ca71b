"""The example GPT (examples/torch_gpt.py: nn.Embedding, nn.LayerNorm, nn.Linear, SDPA,
tied head) trained by shardc under TP, ZeRO and FSDP on 1, 2 and 4 simulated ranks must
equal the same module trained by torch.optim.AdamW (float64, 1e-9); its forward runs
sharded by the same plan through the API and `shardc-run`."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402

from shardc.frontends.torch_train import forward_module, load_task, sharded_forward, train_module  # noqa: E402
from shardc.training.axis import ShardingPolicy  # noqa: E402

EXAMPLE = str(Path(__file__).resolve().parents[3] / "examples" / "torch_gpt.py")
SMALL = dict(vocab_size=32, block_size=8, n_layer=1, n_head=2, n_embd=16)


@pytest.fixture(scope="module")
def task():
    return load_task(f"{EXAMPLE}:task", **SMALL)


def _batches(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, 32, (4, 8), generator=g), torch.randint(0, 32, (4, 8), generator=g)) for _ in range(n)]


def _reference(task, model, batches, accum, steps, lr):
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=lr)
    losses = []
    for s in range(steps):
        opt.zero_grad()
        total = 0.0
        for x, y in batches[s * accum : (s + 1) * accum]:
            loss = task.loss_fn(m(x), y)
            (loss / accum).backward()
            total += loss.item()
        opt.step()
        losses.append(total / accum)
    return losses, {k: v.detach().numpy() for k, v in m.named_parameters()}


GPT_POLICIES = {
    # name: (world, tp, zero, fsdp, accum)
    "1rank": (1, 1, False, False, 1),
    "dp2-zero-accum2": (2, 1, True, False, 2),
    "tp2": (2, 2, False, False, 1),
    "4ranks-tp2-fsdp": (4, 2, True, True, 1),
    "4ranks-dp4-fsdp-accum2": (4, 1, True, True, 2),
}


@pytest.mark.parametrize("case", list(GPT_POLICIES), ids=list(GPT_POLICIES))
def test_gpt_training_equals_torch_adamw(task, case, capfd):
    world, tp, zero, fsdp, accum = GPT_POLICIES[case]
    model = copy.deepcopy(task.model).double()
    batches = _batches(6)
    result = train_module(
        model, batches, task.loss_fn, axes=task.axes, plan=task.plan,
        policy=ShardingPolicy(tp, zero, fsdp), world=world, accum=accum, steps=3, lr=1e-2,
    )
    want_losses, want = _reference(task, model, batches, accum, 3, 1e-2)
    np.testing.assert_allclose(result.losses, want_losses, rtol=0, atol=1e-9)
    for k in want:
        np.testing.assert_allclose(result.params[k], want[k], rtol=0, atol=1e-9, err_msg=k)
    # Every op has a sharding interface (tm_tensor.scatter's included): no op was
    # replicated for want of one.
    assert "has no sharding interface" not in capfd.readouterr().err
    step = result.program.shard_collectives["train_step"]
    assert any(k.endswith("[1]") for k in step) == (tp > 1)
    # TP: attention runs on each rank's heads (torch_rewrite.uncollapse_batch_matmuls),
    # so across `shard` the step only all-reduces (all_slice is local, no communication).
    assert {k for k in step if k.endswith("[1]")} <= {"shard.all_reduce[1]", "shard.all_slice[1]"}
    assert any(k.endswith("[0]") for k in step) == (world // tp > 1)
    if fsdp and world // tp > 1:
        assert step["shard.all_gather[0]"] >= 1 and step["shard.reduce_scatter[0]"] >= 1
    # The tied head trains with the embedding and loads back as such.
    trained = copy.deepcopy(model)
    trained.load_state_dict(result.state_dict(trained))
    assert trained.lm_head.weight is trained.wte.weight
    np.testing.assert_array_equal(trained.wte.weight.detach().numpy(), result.params["wte.weight"])


def test_uncollapsed_attention_equals_pytorch(task):
    """The rewrite of attention's 3-D bmms into 4-D contractions keeps the step exact."""
    from shardc.context import make_context
    from shardc.frontends.torch_rewrite import uncollapse_batch_matmuls
    from shardc.frontends.torch_train import export_train_step
    from shardc.ir.locations import LocatingParser
    from shardc.ir.printer import module_to_string
    from shardc.runtime.launch import run_program

    idx, tgt = _batches(1)[0]
    exported = export_train_step(task.model, (idx,), (tgt,), task.loss_fn)
    module = LocatingParser(make_context(), exported.text, "<t>").parse_module()
    assert uncollapse_batch_matmuls(module) == 6  # forward: 2, backward: 4
    module.verify()
    text = module_to_string(module)
    assert "linalg.batch_matmul" not in text
    params = [p.detach().numpy() for _, p in task.model.named_parameters()]
    loss, *grads = run_program(text, [idx.numpy(), tgt.numpy(), *params])
    m = copy.deepcopy(task.model)
    want = task.loss_fn(m(idx), tgt)
    want.backward()
    assert abs(float(loss) - want.item()) < 1e-5
    for (name, p), g in zip(m.named_parameters(), grads):
        assert np.abs(g - p.grad.numpy()).max() < 1e-5, name


def test_gpt_float32_on_4_ranks(task):
    model = copy.deepcopy(task.model)
    batches = _batches(3)
    result = train_module(model, batches, task.loss_fn, axes=task.axes, plan=task.plan,
                          policy=ShardingPolicy(2, True, False), world=4, steps=3, lr=1e-2)
    want_losses, want = _reference(task, model, batches, 1, 3, 1e-2)
    np.testing.assert_allclose(result.losses, want_losses, rtol=1e-5)
    for k in want:
        # The key bias's gradient is zero in exact arithmetic (softmax is invariant to a
        # shift of one query's scores), so in float32 both sides take Adam steps on
        # rounding noise of the size of eps: nothing to compare there.
        if not k.endswith("attn.k.bias"):
            np.testing.assert_allclose(result.params[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("world, tp, fsdp", [(1, 1, False), (2, 2, False), (4, 2, True)])
def test_forward_sharded_by_the_plan(task, world, tp, fsdp):
    idx = _batches(1)[0][0]
    with torch.no_grad():
        want = task.model(idx).numpy()
    (got,) = forward_module(task.model, (idx,), axes=task.axes, plan=task.plan,
                            policy=ShardingPolicy(tp, fsdp, fsdp), world=world)
    assert np.abs(got - want).max() < 1e-4


def test_forward_through_shardc_run(task, tmp_path):
    idx = _batches(1)[0][0]
    text, names = sharded_forward(task.model, (idx,), axes=task.axes, plan=task.plan,
                                  policy=ShardingPolicy(2, True, True), world=4)
    prog = tmp_path / "gpt.mlir"
    prog.write_text(text)
    state = dict(task.model.named_parameters())
    arrays = {f"arg{i}": (idx if i == 0 else state[n]).detach().numpy() for i, n in enumerate(names)}
    np.savez(tmp_path / "in.npz", **arrays)
    out = tmp_path / "out"
    res = subprocess.run(
        ["shardc-run", str(prog), "--simulate", "4", "--inputs", str(tmp_path / "in.npz"),
         "--output", str(out), "--pipeline", "shard-to-mpi-pipeline"],
        capture_output=True, text=True,
    )
    assert res.returncode == 0, res.stderr
    files = sorted(out.iterdir())
    assert files, res.stdout
    got = np.load(out / "result0.npy")
    with torch.no_grad():
        want = task.model(idx).numpy()
    assert np.abs(got - want).max() < 1e-4


# ---------------------------------------------------------------------------------------
# shardc-train --torch-model
# ---------------------------------------------------------------------------------------

CLI_SMALL = ["--steps", "3", "--per-device-batch", "2", "--block-size", "8", "--quiet"]


def _cli(*args, cwd=None):
    return subprocess.run(["shardc-train", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_cli_trains_the_example_on_simulated_ranks(tmp_path):
    res = _cli("--torch-model", f"{EXAMPLE}:task", "--simulate", "4", "--tp", "2", "--fsdp", "--accum", "2",
               *CLI_SMALL, "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "policy tp=2 zero=True fsdp=True, global batch 8 (2 per device x 2 replicas x 2 accumulation)" in res.stdout
    assert "@train_step collectives per call: mpi.allgather" in res.stdout
    rows = (tmp_path / "loss.csv").read_text().splitlines()
    assert rows[0] == "step,loss" and len(rows) == 4
    params = np.load(tmp_path / "params.npz")
    assert "wte.weight" in params.files and "h.0.mlp.fc.weight" in params.files and "lm_head.weight" not in params.files


def test_cli_under_mpiexec(tmp_path):
    res = _cli("--torch-model", f"{EXAMPLE}:task", "--np", "2", "--tp", "2", *CLI_SMALL, "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "2 ranks, policy tp=2" in res.stdout
    assert len((tmp_path / "loss.csv").read_text().splitlines()) == 4


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nope.py:task", "--torch-model 'nope.py:task': no file nope.py"),
        (f"{EXAMPLE}", "expected FILE.py:FACTORY"),
        (f"{EXAMPLE}:missing", "has no function missing"),
        (f"{EXAMPLE}:GPTConfig", "GPTConfig(vocab_size=32, block_size=8, seed=0) failed: TypeError: "),
        ("{tmp}/other.py:task", "task() returned dict, not a TorchTask"),
        ("{tmp}/broken.py:task", "importing {tmp}/broken.py failed: ZeroDivisionError: division by zero"),
    ],
)
def test_cli_bad_torch_model_is_one_line(spec, message, tmp_path):
    (tmp_path / "other.py").write_text("def task(**kw):\n    return dict(kw)\n")
    (tmp_path / "broken.py").write_text("x = 1 / 0\n")
    spec, message = spec.replace("{tmp}", str(tmp_path)), message.replace("{tmp}", str(tmp_path))
    res = _cli("--torch-model", spec, *CLI_SMALL, "--out", str(tmp_path))
    assert res.returncode == 1
    assert message in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_cli_layout_that_does_not_divide(tmp_path):
    """tp=3: the 16 attention features of the example do not divide by 3."""
    res = _cli("--torch-model", f"{EXAMPLE}:task", "--simulate", "3", "--tp", "3", *CLI_SMALL, "--out", str(tmp_path))
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "state params/h.0.attn.q.weight of shape (32, 32)" in res.stderr and "split 3 ways" in res.stderr
