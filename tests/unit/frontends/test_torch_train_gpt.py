"""The example GPT (examples/torch_gpt.py: nn.Embedding, nn.LayerNorm, nn.Linear, SDPA,
tied head) trained by shardc under TP, ZeRO and FSDP on 1, 2 and 4 simulated ranks must
equal the same module trained by torch.optim.AdamW (float64, 1e-9); its forward runs
sharded by the same plan through the API and `shardc-run`."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402

from shardc.frontends.torch_train import forward_module, load_task, sharded_forward, train_module  # noqa: E402
from shardc.training.axis import ShardingPolicy  # noqa: E402

pytestmark = pytest.mark.slow  # its module fixture exports the GPT example; the CLI runs train it

EXAMPLE = str(Path(__file__).resolve().parents[3] / "examples" / "torch_gpt.py")
SMALL = dict(vocab_size=32, block_size=8, n_layer=1, n_head=2, n_embd=16)


@pytest.fixture(scope="module")
def task():
    return load_task(f"{EXAMPLE}:make", **SMALL)


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
    # name: (world, tp, zero, fsdp, accum): every policy on 1, 2 and 4 ranks, tp in
    # {1, 2}, zero and fsdp on and off, accumulation 1 and 2.
    "1rank": (1, 1, False, False, 1),
    "1rank-accum2": (1, 1, False, False, 2),
    "dp2": (2, 1, False, False, 1),
    "dp2-zero-accum2": (2, 1, True, False, 2),
    "dp2-fsdp": (2, 1, True, True, 1),
    "tp2": (2, 2, False, False, 1),
    "tp2-fsdp-accum2": (2, 2, True, True, 2),
    "4ranks-dp4-zero": (4, 1, True, False, 1),
    "4ranks-dp4-fsdp-accum2": (4, 1, True, True, 2),
    "4ranks-tp2-accum2": (4, 2, False, False, 2),
    "4ranks-tp2-zero": (4, 2, True, False, 1),
    "4ranks-tp2-fsdp": (4, 2, True, True, 1),
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
    # TP: attention runs on each rank's heads (passes.uncollapse_batch_matmuls),
    # so across `shard` the step only all-reduces (all_slice is local, no communication).
    assert {k for k in step if k.endswith("[1]")} <= {"shard.all_reduce[1]", "shard.all_slice[1]"}
    if tp > 1:
        # Per layer: the row-parallel outputs of attention and the MLP (forward), and the
        # input gradients of q, k, v and the MLP's column-parallel fc (backward).
        assert step["shard.all_reduce[1]"] == 6 * SMALL["n_layer"]
    if world // tp > 1 and zero:
        assert step["shard.reduce_scatter[0]"] >= 1  # ZeRO: gradients go to their owners
    if world // tp > 1 and not zero:
        assert not any(k.startswith("shard.reduce_scatter") for k in step)
    assert any(k.endswith("[0]") for k in step) == (world // tp > 1)
    if fsdp and world // tp > 1:
        assert step["shard.all_gather[0]"] >= 1 and step["shard.reduce_scatter[0]"] >= 1
    # The tied head trains with the embedding and loads back as such.
    trained = copy.deepcopy(model)
    trained.load_state_dict(result.state_dict(trained))
    assert trained.lm_head.weight is trained.wte.weight
    np.testing.assert_array_equal(trained.wte.weight.detach().numpy(), result.params["wte.weight"])


def test_gpt_no_decay_groups_equal_torch_param_groups(task):
    """The example's `no_decay` (biases, LayerNorm gains) against torch.optim.AdamW with
    nanoGPT's two parameter groups, on 4 ranks with TP and ZeRO."""
    import re as _re

    model = copy.deepcopy(task.model).double()
    batches = _batches(3)
    result = train_module(model, batches, task.loss_fn, axes=task.axes, plan=task.plan, no_decay=task.no_decay,
                          policy=ShardingPolicy(2, True), world=4, steps=3, lr=1e-2)
    m = copy.deepcopy(model)
    named = list(m.named_parameters())
    skip = {n for n, _ in named if any(_re.fullmatch(x, n) for x in task.no_decay)}
    assert "wte.weight" not in skip and "h.0.ln_1.weight" in skip and "h.0.attn.q.bias" in skip
    opt = torch.optim.AdamW([
        {"params": [p for n, p in named if n not in skip], "weight_decay": 0.01},
        {"params": [p for n, p in named if n in skip], "weight_decay": 0.0},
    ], lr=1e-2)
    want = []
    for x, y in batches:
        opt.zero_grad()
        loss = task.loss_fn(m(x), y)
        loss.backward()
        opt.step()
        want.append(loss.item())
    np.testing.assert_allclose(result.losses, want, rtol=0, atol=1e-9)
    for n, p in m.named_parameters():
        np.testing.assert_allclose(result.params[n], p.detach().numpy(), rtol=0, atol=1e-9, err_msg=n)
    assert {p.path for p in result.program.params if not p.decay} == skip


def test_uncollapsed_attention_equals_pytorch(task):
    """The rewrite of attention's 3-D bmms into 4-D contractions keeps the step exact."""
    from shardc.context import make_context
    from shardc.passes.uncollapse_batch_matmuls import uncollapse_batch_matmuls
    from shardc.frontends.torch_train import export_train_step
    from shardc.ir.locations import LocatingParser
    from shardc.ir.printer import module_to_string
    from shardc.launch import run_program

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
    """The issue's command (with --simulate for --np): the built-in GPT's outputs."""
    res = _cli("--torch-model", f"{EXAMPLE}:make", "--simulate", "4", "--tp", "2", "--fsdp", "--accum", "2",
               *CLI_SMALL, "--eval-every", "2", "--out", str(tmp_path), "--emit-ir", str(tmp_path / "ir"))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "GPT from " in out and "4 ranks, grid (batch=2, shard=2), policy tp=2 zero=True fsdp=True" in out
    assert "global batch: 2 per device x 2 data replicas x 2 accumulation steps = 8 sequences (64 tokens; microbatch 4)" in out
    assert re.search(r"per-rank state: params [\d.]+ KiB, grads [\d.]+ KiB, optimizer [\d.]+ KiB", out)
    assert "collectives in @train_step: " in out and "all_gather over batch" in out and "all_reduce over shard" in out
    assert "collectives in @eval_loss: " in out
    rows = (tmp_path / "loss.csv").read_text().splitlines()
    assert rows[0] == "step,loss,eval_loss,lr,seconds,tokens_per_s" and len(rows) == 4
    assert [bool(r.split(",")[2]) for r in rows[1:]] == [False, True, True]  # held-out at 2 and at the end
    for f in ("loss.png", "tokens_per_s.png", "vocab.txt", "checkpoints/step-00000003/manifest.json"):
        assert (tmp_path / f).is_file(), f
    stages = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert stages[0] == "00-input.mlir" and stages[-1] == "08-canonicalize.mlir" and len(stages) == 9
    first, last = ((tmp_path / "ir" / stages[i]).read_text() for i in (0, -1))
    assert "func.func @train_step" in first and "func.func @eval_loss" in first and "func.func @adamw_step" in first
    assert "shard.shard" in first and "mpi.allgather" in last
    params = np.load(tmp_path / "params.npz")
    assert "wte.weight" in params.files and "h.0.mlp.fc.weight" in params.files and "lm_head.weight" not in params.files
    # model.safetensors is the module's state_dict (tied alias included): strict load.
    from safetensors.torch import load_file

    task = load_task(f"{EXAMPLE}:make", vocab_size=params["wte.weight"].shape[0], block_size=8)
    task.model.load_state_dict(load_file(tmp_path / "model.safetensors"))
    np.testing.assert_array_equal(task.model.lm_head.weight.detach().numpy(), params["wte.weight"])


def test_cli_resume_equals_an_uninterrupted_run(tmp_path):
    """Resumed from the step-2 checkpoint of a 4-step run on another grid and policy: the
    losses of steps 3 and 4 are the uninterrupted run's, and --sample draws from the
    trained module through the factory's hook."""
    common = ["--torch-model", f"{EXAMPLE}:make", "--block-size", "8", "--quiet", "--eval-every", "0", "--steps", "4"]
    full = _cli(*common, "--simulate", "2", "--tp", "2", "--per-device-batch", "2", "--checkpoint-every", "2",
                "--keep", "3", "--out", str(tmp_path / "full"))
    assert full.returncode == 0, full.stderr
    # Same global batch (2 sequences), now 2 data replicas of 1 sequence with FSDP.
    resumed = _cli(*common, "--simulate", "2", "--fsdp", "--per-device-batch", "1", "--out", str(tmp_path / "part"),
                   "--resume", str(tmp_path / "full" / "checkpoints" / "step-00000002"), "--sample", "12", "--prompt", "the")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from " in resumed.stdout and "(step 2, saved on 2 ranks, grid (batch=1, shard=2))" in resumed.stdout

    def losses(d):
        return [float(r.split(",")[1]) for r in (tmp_path / d / "loss.csv").read_text().splitlines()[1:]]

    assert len(losses("part")) == 4
    np.testing.assert_allclose(losses("part"), losses("full"), rtol=1e-5)
    assert "sample (12 tokens, temperature 0.8, top-k 200, seed 0):" in resumed.stdout
    text = resumed.stdout.split("seed 0):\n", 1)[1]
    assert text.startswith("the") and len(text.rstrip("\n")) > len("the")


def test_sample_without_a_hook_says_why(capsys):
    import argparse
    import dataclasses

    from shardc.frontends.torch_source import sample
    from shardc.training.job import Job

    task = dataclasses.replace(load_task(f"{EXAMPLE}:make", **SMALL), generate=None)
    sample(Job(argparse.Namespace(torch_model="m.py:make"), 1), task, None, None)
    assert capsys.readouterr().out == "shardc-train: --sample skipped: m.py:make gives no generate hook (TorchTask.generate)\n"


def test_the_earlier_factory_name_still_works():
    a, b = load_task(f"{EXAMPLE}:task", **SMALL), load_task(f"{EXAMPLE}:make", **SMALL)
    assert type(a.model).__name__ == type(b.model).__name__ == "GPT" and a.axes == b.axes and a.no_decay == b.no_decay
    for (n, p), (m, q) in zip(a.model.named_parameters(), b.model.named_parameters()):
        assert n == m and torch.equal(p, q)


def test_cli_help_documents_the_contract():
    res = _cli("--help")
    assert res.returncode == 0
    assert "FILE.py:FACTORY" in res.stdout and "TorchTask" in res.stdout


def test_cli_under_mpiexec(tmp_path):
    res = _cli("--torch-model", f"{EXAMPLE}:make", "--np", "2", "--tp", "2", *CLI_SMALL, "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "2 ranks, grid (batch=1, shard=2), policy tp=2" in res.stdout
    assert len((tmp_path / "loss.csv").read_text().splitlines()) == 4
    assert (tmp_path / "checkpoints" / "step-00000003" / "manifest.json").is_file()


_FACTORY = """
import torch
from shardc.frontends.torch_train import TorchTask
from shardc.training.axis import ShardingPlan

class Tiny(torch.nn.Module):
    def __init__(self, vocab_size, block_size):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab_size, 16)
        self.head = torch.nn.Linear(16, vocab_size)

    def forward(self, idx):
        h = self.emb(idx)
        if BAD:  # an op torch-mlir has no lowering for
            h = h + torch.linalg.eigvals(h[0, :4, :4]).real.sum()
        return self.head(torch.sin(h))

def loss(logits, targets):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

BAD = False

def make(vocab_size, block_size, seed):
    return TorchTask(Tiny(vocab_size, block_size), loss, AXES, ShardingPlan(tp_rules={"hidden": "shard"}))
"""


@pytest.mark.parametrize(
    "axes, bad, message",
    [
        ('{r"emb\\.weight": (None, "hidden"), r"head\\.wieght": ("hidden", None)}', False,
         "axes pattern 'head\\\\.wieght' matches no parameter (parameters: emb.weight, head.weight, head.bias)"),
        ('{r"emb\\.weight": (None, "hiden")}', False,
         "parameter emb.weight of shape (32, 16): logical axis 'hiden' is not in the plan"),
        ('{r"head\\.weight": ("hidden", None)}', False,
         "state params/head.weight of shape (32, 16) with partition spec PartitionSpec(('shard',), None) does not fit grid (batch=1, shard=3)"),
        ("{}", True, "torch-mlir cannot import the training step of Tiny: no lowering to linalg for torch.aten.linalg_eig"),
    ],
    ids=["pattern-matches-nothing", "axis-not-in-plan", "does-not-divide", "cannot-import"],
)
def test_cli_bad_module_input_is_one_line(axes, bad, message, tmp_path):
    """Each bad-input case of the issue, through the CLI: one line naming the parameter
    or the op, exit 1, no traceback."""
    (tmp_path / "m.py").write_text(_FACTORY.replace("BAD = False", f"BAD = {bad}") + f"\nAXES = {axes}\n")
    world = ["--simulate", "3", "--tp", "3"] if "does not fit" in message else ["--simulate", "1"]
    res = _cli("--torch-model", f"{tmp_path}/m.py:make", *world, *CLI_SMALL, "--out", str(tmp_path / "o"))
    assert res.returncode == 1, res.stdout
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert message in res.stderr
    assert not (tmp_path / "o").exists()  # nothing written


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
    res = _cli("--torch-model", f"{EXAMPLE}:make", "--simulate", "3", "--tp", "3", *CLI_SMALL, "--out", str(tmp_path))
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "state params/h.0.attn.q.weight of shape (32, 32)" in res.stderr and "split 3 ways" in res.stderr


def test_cli_show_layouts_of_a_torch_model(tmp_path):
    """--show-layouts with --torch-model: each parameter's layouts from its logical axes,
    nothing imported or compiled, no job launched for --np."""
    res = _cli("--torch-model", f"{EXAMPLE}:make", "--np", "4", "--tp", "2", "--fsdp", "--show-layouts", "--block-size", "8")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "GPT from " in out and "4 ranks, grid (batch=2, shard=2), policy tp=2 zero=True fsdp=True" in out
    assert "h.0.attn.q.weight  [32, 32]  axes (n_attn, -)" in out
    assert "storage = update: split (shard+batch, -), per rank [8, 32]" in out
    assert "wpe.weight  [8, 32]  axes (-, -)\n  storage = compute = update: replicated" in out
    assert "imported" not in out and "compiled" not in out
