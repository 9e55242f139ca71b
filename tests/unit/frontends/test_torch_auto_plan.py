"""`shardc-train --torch-model ... --auto` / `--plan-only` (`shardc.frontends.torch_plan`):
the hand policies priced from the torch module itself, for a module with logical axes
written (examples/torch_gpt.py), a transformers model built from its config with none
written (axes derived), and a plain module with none at all (tp left out, said so)."""

import csv
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

from shardc.frontends.torch_plan import module_shape  # noqa: E402
from shardc.frontends.torch_train import load_task  # noqa: E402
from shardc.passes.cost_model import DEFAULT_RATES, CostModel  # noqa: E402
from shardc.tools.train import main  # noqa: E402
from shardc.training.auto_plan import choose_module, policy_name, predict_module  # noqa: E402
from shardc.training.axis import ShardingPolicy  # noqa: E402
from shardc.training.mesh import make_grid  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = f"{ROOT / 'examples' / 'torch_gpt.py'}:make"
SMALL = ["--block-size", "8", "--per-device-batch", "2", "--quiet", "--eval-every", "0", "--checkpoint-every", "0"]
GPT2 = {"n_embd": 32, "n_layer": 1, "n_head": 4, "n_positions": 16}
PLAIN = '''
import torch.nn as nn
import torch.nn.functional as F
from shardc.frontends.torch_train import TorchTask

class LM(nn.Module):
    def __init__(self, vocab, width):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.hidden = nn.Linear(width, 2 * width)
        self.out = nn.Linear(2 * width, vocab)

    def forward(self, idx):
        return self.out(F.gelu(self.hidden(self.emb(idx))))

def make(vocab_size, block_size, seed):
    import torch
    torch.manual_seed(seed)
    return TorchTask(LM(vocab_size, 16), lambda logits, t: F.cross_entropy(logits.reshape(-1, logits.size(-1)), t.reshape(-1)))
'''


def _plain(tmp_path):
    (tmp_path / "plain.py").write_text(PLAIN)
    return f"{tmp_path / 'plain.py'}:make"


def _gpt2_config(tmp_path):
    (tmp_path / "gpt2.json").write_text(json.dumps(GPT2))
    return ["--torch-model", "hf:GPT2LMHeadModel", "--model-config", str(tmp_path / "gpt2.json")]


def test_module_shape_reads_projections_attention_and_the_tied_head():
    task = load_task(EXAMPLE, vocab_size=64, block_size=16, seed=0)
    shape = module_shape(task, 16, 64)
    weights = [lin.weight for lin in shape.linears]
    assert len(weights) == 2 * 6 + 1  # q, k, v, proj, fc, proj per layer, the head
    assert weights[-1] == "wte.weight" and shape.linears[-1].out_features == 64  # the tied head: the embedding's parameter
    assert len(shape.attention) == 2 and shape.attention[0].heads == 4 and shape.attention[0].width == 32
    assert len(shape.norm_widths) == 5
    cost = CostModel(DEFAULT_RATES)
    dp = predict_module(shape, ShardingPolicy(1, False, False), make_grid(2, 1), 4, cost=cost)
    tp = predict_module(shape, ShardingPolicy(2, False, False), make_grid(2, 2), 4, cost=cost)
    assert tp.memory.state.params < dp.memory.state.params and tp.memory.activations < dp.memory.activations
    assert {(c.kind, c.axis) for c in tp.collectives} >= {("all_reduce", "shard")}  # the row-parallel projections
    assert not any(c.axis == "shard" for c in dp.collectives)


def test_plain_module_without_axes_plans_dp_and_says_why_not_the_rest(tmp_path):
    """No axes at all: DP is the plan; ZeRO/FSDP (no ZeRO rule names anything) and tp
    (nothing split over shard) are left out, each with its reason."""
    task = load_task(_plain(tmp_path), vocab_size=32, block_size=8, seed=0)
    plan = choose_module(module_shape(task, 8, 32), 4, 2, cost=CostModel(DEFAULT_RATES))
    assert {policy_name(p.policy) for p in plan.considered} == {"dp"}
    reasons = {policy_name(p): why for p, why in plan.invalid}
    assert set(reasons) == {"zero", "fsdp", "tp=2", "tp=2+zero", "tp=2+fsdp", "tp=4"}
    assert reasons["zero"] == reasons["fsdp"] == "LM's logical axes name nothing ZeRO splits over batch"
    assert reasons["tp=4"] == "LM's logical axes split nothing over shard"
    # the example's axes (heads, MLP, vocabulary) give ZeRO and tp their splits
    example = choose_module(module_shape(load_task(EXAMPLE, vocab_size=64, block_size=16, seed=0), 16, 64), 4, 2, cost=CostModel(DEFAULT_RATES))
    assert {"zero", "fsdp", "tp=2", "tp=4"} <= {policy_name(p.policy) for p in example.considered}


def test_plan_only_for_a_torch_module_with_axes(tmp_path, capsys):
    assert main(["--torch-model", EXAMPLE, "--plan-only", "--world", "8", *SMALL, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("shardc-train: auto plan for 8 ranks (no memory budget; ")
    assert re.search(r"chosen: \S+ on grid \(batch=\d+, shard=\d+\): [0-9.]+ ms/step .* tokens/s, [0-9.]+ [KMG]?i?B/rank", out), out
    priced = int(re.search(r"(\d+) policies priced", out).group(1))
    # tp=1, 2, 4, each with the 27 mixes of dp/zero/fsdp over embeddings, attention, MLP (the plain ones among them), tp=2 and 4 with
    # attention or MLP without TP too (x3); tp=8 would cut the 4 heads, but not with the attention whole (all else dp: one data replica)
    assert priced == 27 + 2 * 27 * 3 + 1
    assert "not on this grid: tp=8 (tp=8 does not divide the 4 attention heads of GPT)" in out
    assert not (tmp_path / "loss.csv").exists()


def test_plan_only_for_a_transformers_model_with_no_axes_written(tmp_path, capsys):
    """GPT-2 from its config: nothing written by the user; the derived axes split its MLP
    for tp (its fused c_attn stays whole), ZeRO splits what they name."""
    assert main([*_gpt2_config(tmp_path), "--plan-only", "--world", "4", *SMALL, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("shardc-train: auto plan for 4 ranks (no memory budget; 55 policies priced")  # tp=1 and 2: 27 mixes each; tp=4: one data replica
    assert "chosen: " in out and "runner-up: " in out
    assert main([*_gpt2_config(tmp_path), "--plan-only", "--world", "4", "--memory-budget", "1KB", *SMALL, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(r"memory budget 1000B per rank fits no plan on 4 ranks: the smallest that fits is \S+ \(\S+\)", err), err


def _losses(out):
    return [float(r["loss"]) for r in csv.DictReader(open(out / "loss.csv"))]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["example", "gpt2"])
def test_auto_trains_a_torch_model_as_the_chosen_hand_policy(model, tmp_path, capsys):
    """A budget DP and ZeRO do not fit: --auto picks a sharded plan, trains it on 2
    simulated ranks and prints the measurement; the same policy by hand gives the same
    losses."""
    spec = ["--torch-model", EXAMPLE] if model == "example" else _gpt2_config(tmp_path)
    common = [*spec, *SMALL, "--steps", "3", "--lr", "1e-2"]
    assert main(["--plan-only", "--world", "2", "--memory-budget", "1KB", *common, "--out", str(tmp_path / "p")]) == 1
    smallest = re.search(r"the smallest that fits is (\S+) ", capsys.readouterr().err).group(1)
    assert main(["--auto", "--simulate", "2", "--memory-budget", smallest, *common, "--out", str(tmp_path / "auto")]) == 0
    out = capsys.readouterr().out
    chosen = re.search(r"chosen: (\S+) on grid", out).group(1)
    assert chosen not in ("dp", "zero")
    measured = [ln for ln in out.splitlines() if ln.startswith("shardc-train: measured ")]
    assert len(measured) == 1 and measured[0].startswith(f"shardc-train: measured {chosen}: ") and "(predicted " in measured[0]
    tp, zero, fsdp = re.search(r"policy tp=(\d+) zero=(\w+) fsdp=(\w+)", out).groups()
    policy = ShardingPolicy(int(tp), zero == "True", fsdp == "True")
    assert policy_name(policy) == chosen  # trained as planned
    flags = ["--tp", tp, "--zero" if policy.zero else "--no-zero", *(["--fsdp"] if policy.fsdp else [])]
    assert main(["--simulate", "2", *flags, *common, "--out", str(tmp_path / "hand")]) == 0
    assert _losses(tmp_path / "auto") == _losses(tmp_path / "hand")


def test_module_shape_reads_activations_and_float64_layer_norms(tmp_path):
    """A transformers GPT-2 (2 layers, n_embd 32): each MLP's tanh GELU at the width of
    the projections beside it (4 x 32), and its LayerNorms, which the import computes in
    float64; they cost elementwise time and the tensors the backward pass keeps, so the
    same shape without them predicts less of both."""
    from dataclasses import replace

    from shardc.frontends.torch_plan import plan_torch_job
    from shardc.training.job import Job
    from shardc.tools.train import arg_parser

    (tmp_path / "gpt2.json").write_text(json.dumps(dict(GPT2, n_layer=2)))
    args = arg_parser().parse_args(["--torch-model", "hf:GPT2LMHeadModel", "--model-config", str(tmp_path / "gpt2.json"), *SMALL])
    cost = CostModel(DEFAULT_RATES)
    shape = plan_torch_job(Job(args, 1), 1, cost=cost).chosen.model
    assert shape.activations == (("gelu_tanh", 128), ("gelu_tanh", 128))
    assert shape.float64_norms == len(shape.norm_widths) == 2 * 2 + 1
    policy, grid = ShardingPolicy(1, False, False), make_grid(1, 1)
    full = predict_module(shape, policy, grid, 2, cost=cost)
    bare = predict_module(replace(shape, activations=(), float64_norms=0), policy, grid, 2, cost=cost)
    assert full.compute_s > bare.compute_s and full.memory.activations > bare.memory.activations
    example = module_shape(load_task(EXAMPLE, vocab_size=64, block_size=16, seed=0), 16, 64)
    # nn.LayerNorm counted, and each MLP's F.gelu (a call in its forward, no module)
    assert example.activations == (("gelu", 128), ("gelu", 128)) and example.float64_norms == 5


MLP_LM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from shardc.frontends.torch_train import TorchTask

class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, 4 * width)
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x):
        # F.relu(x) in a comment is not a call
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))

class ModuleMLP(MLP):
    def __init__(self, width):
        super().__init__(width)
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        return self.proj(self.act(self.fc(x)))

class LM(nn.Module):
    def __init__(self, vocab, width, functional):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.mlp = MLP(width) if functional else ModuleMLP(width)
        self.out = nn.Linear(width, vocab)

    def forward(self, idx):
        h = self.emb(idx)
        return self.out(h + self.mlp(h))

def make(vocab_size, block_size, seed, functional=True):
    torch.manual_seed(seed)
    return TorchTask(LM(vocab_size, 16, functional), lambda logits, t: F.cross_entropy(logits.reshape(-1, logits.size(-1)), t.reshape(-1)))

def make_module(vocab_size, block_size, seed):
    return make(vocab_size, block_size, seed, functional=False)
'''


def test_activation_functions_a_forward_calls_count_as_activation_modules(tmp_path):
    """`F.gelu(...)` written in a forward is an activation as `nn.GELU` is: its kind and the
    width of the projection it reads (read from the source, nothing run), and the same
    prediction as the module form of the same model."""
    (tmp_path / "mlp_lm.py").write_text(MLP_LM)
    functional = module_shape(load_task(f"{tmp_path / 'mlp_lm.py'}:make", vocab_size=64, block_size=8, seed=0), 8, 64)
    modular = module_shape(load_task(f"{tmp_path / 'mlp_lm.py'}:make_module", vocab_size=64, block_size=8, seed=0), 8, 64)
    assert functional.activations == modular.activations == (("gelu_tanh", 64),)
    grid = make_grid(2, 1)
    a = predict_module(functional, ShardingPolicy(1, zero=True, fsdp=False), grid, 2, cost=CostModel(DEFAULT_RATES))
    b = predict_module(modular, ShardingPolicy(1, zero=True, fsdp=False), grid, 2, cost=CostModel(DEFAULT_RATES))
    assert a.memory.activations == b.memory.activations > 0
    plain = module_shape(load_task(_plain(tmp_path), vocab_size=64, block_size=8, seed=0), 8, 64)
    assert plain.activations == (("gelu", 32),)  # F.gelu(self.hidden(...)): the hidden layer's width


def test_auto_on_simulated_ranks_stops_its_trace_while_the_other_rank_waits(tmp_path, capsys, monkeypatch):
    """A torch module's `--auto --simulate 2` run (`ModuleTraining.run`): when the measured
    step's trace stops, rank 1 is parked in the quiet-step barrier, not in numpy
    (tracemalloc.stop() racing another thread's allocations crashes CPython 3.11)."""
    import sys
    import threading
    import tracemalloc

    seen: list[dict[str, list[str]]] = []
    real_stop = tracemalloc.stop

    def stop() -> None:
        if threading.current_thread().name.startswith("shardc-rank-"):
            frames = sys._current_frames()
            stacks = {}
            for t in threading.enumerate():
                if t.name.startswith("shardc-rank-") and t is not threading.current_thread() and t.ident in frames:
                    f, names = frames[t.ident], []
                    while f is not None:
                        names.append(f.f_code.co_qualname)
                        f = f.f_back
                    stacks[t.name] = names
            seen.append(stacks)
        real_stop()

    monkeypatch.setattr(tracemalloc, "stop", stop)
    args = ["--auto", "--simulate", "2", "--torch-model", EXAMPLE, *SMALL, "--steps", "3", "--out", str(tmp_path / "auto")]
    assert main(args) == 0, capsys.readouterr()
    assert "shardc-train: measured " in capsys.readouterr().out
    assert len(seen) == 1 and list(seen[0]) == ["shardc-rank-1"], seen
    assert "_QuietSteps.__call__" in seen[0]["shardc-rank-1"], seen
