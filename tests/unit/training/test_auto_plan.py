"""`shardc-train --auto` / `--plan-only` (`shardc.training.auto_plan`): the policy chosen
from predictions under a memory budget, its training equal to one rank's, the plan for
worlds nothing is launched on, and one-line errors."""

import re
import time

import numpy as np
import pytest

from shardc.passes.cost_model import DEFAULT_RATES, CostModel
from shardc.tools.train import main
from shardc.training.auto_plan import PlanError, choose, hand_policies, plan_lines, policy_name, predict
from shardc.training.axis import ShardingPolicy
from shardc.training.gpt import GPTConfig
from shardc.training.trainer import TrainingConfig, compile_program, reference_losses, train_simulated

MODEL = GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32)
COST = CostModel(DEFAULT_RATES)
SMALL = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2", "--quiet"]


def test_hand_policies_cover_every_tp_and_dp_zero_fsdp():
    names = [policy_name(p) for p in hand_policies(4)]
    assert names == ["dp", "zero", "fsdp", "tp=2", "tp=2+zero", "tp=2+fsdp", "tp=4", "tp=4+zero", "tp=4+fsdp"]


def test_without_a_budget_the_fastest_policy_wins():
    plan = choose(MODEL, 2, 2, cost=COST)
    best = max(plan.considered, key=lambda p: p.tokens_per_s)
    assert plan.chosen.tokens_per_s == best.tokens_per_s
    assert plan.runner_up is not None and plan.runner_up.tokens_per_s <= plan.chosen.tokens_per_s
    # tp=2 on 2 ranks leaves one data replica: ZeRO and FSDP would split nothing there
    assert {policy_name(p.policy) for p in plan.considered if not p.policy.overrides} == {"dp", "zero", "fsdp", "tp=2"}
    # 3 groups ZeRO splits (norms: none) x 3 kinds at tp=1, and at tp=2 attention or MLP without TP
    assert len([p for p in plan.considered if p.policy.overrides]) == 27 - 3 + 2
    four_heads = GPTConfig(n_layer=1, n_head=4, n_embd=16, block_size=8, vocab_size=32)
    four = choose(four_heads, 4, 2, cost=COST).considered
    assert {policy_name(p.policy) for p in four if not p.policy.overrides} == {"dp", "zero", "fsdp", "tp=2", "tp=2+zero", "tp=2+fsdp", "tp=4"}
    wide = choose(MODEL, 4, 2, cost=COST)  # 2 heads do not split 4 ways: the ZeRO plans are out, and say why
    assert {policy_name(p.policy) for p in wide.considered if not p.policy.overrides} == {"dp", "tp=2"}
    assert {policy_name(p) for p, _ in wide.invalid} == {"zero", "fsdp", "tp=2+zero", "tp=2+fsdp", "tp=4"}


def test_sharding_lowers_the_predicted_memory_as_it_should():
    by = {policy_name(p.policy): p for p in choose(MODEL, 2, 2, cost=COST).considered}
    state = {k: p.memory.state.total for k, p in by.items()}
    assert state["fsdp"] < state["zero"] < state["dp"]  # ZeRO splits grads and moments, FSDP the parameters too
    assert by["tp=2"].memory.activations < by["dp"].memory.activations  # tp splits heads and the MLP's activations
    assert by["dp"].memory.transient == 0 and by["fsdp"].memory.transient > 0


def test_a_budget_picks_the_fastest_plan_that_fits():
    plan = choose(MODEL, 2, 2, cost=COST)
    budget = min(p.memory.total for p in plan.considered if policy_name(p.policy) in ("dp", "zero")) - 1
    tight = choose(MODEL, 2, 2, budget=budget, cost=COST)
    assert tight.chosen.memory.total <= budget
    assert policy_name(tight.chosen.policy) not in ("dp", "zero")
    fitting = [p for p in plan.considered if p.memory.total <= budget]
    assert tight.chosen.tokens_per_s == max(p.tokens_per_s for p in fitting)
    over = [line for line in plan_lines(tight) if line.startswith("  over budget: ")]
    assert len(over) == 1 and f"{policy_name(tight.chosen.policy)} vs " in over[0] and "x the tokens/s at " in over[0]


def test_an_infeasible_budget_names_the_smallest_that_fits():
    with pytest.raises(PlanError) as e:
        choose(MODEL, 2, 2, budget=1000, cost=COST)
    least = min(p.memory.total for p in choose(MODEL, 2, 2, cost=COST).considered)
    m = re.search(r"the smallest that fits is ([0-9.]+)KiB", str(e.value))
    assert m and "\n" not in str(e.value)
    named = float(m.group(1)) * 1024
    assert least <= named < least + 11  # rounded up to 1/100 KiB: the named budget fits
    assert choose(MODEL, 2, 2, budget=named, cost=COST).chosen.memory.total <= named


@pytest.mark.slow
def test_a_budget_just_short_is_named_in_bytes():
    least = min(p.memory.total for p in choose(MODEL, 2, 2, cost=COST).considered)
    with pytest.raises(PlanError, match=rf"memory budget {int(least) - 1}B per rank fits no plan on 2 ranks: the smallest that fits is {int(least)}B \(tp=2\)"):
        choose(MODEL, 2, 2, budget=int(least) - 1, cost=COST)


@pytest.mark.slow
def test_predicted_collectives_are_the_compiled_steps():
    """The kinds and grid axes the prediction prices are the ones the compiled step holds."""
    model = GPTConfig(n_layer=1, n_head=4, n_embd=16, block_size=8, vocab_size=32)
    policy = ShardingPolicy(tp=2, zero=True, fsdp=True)
    cfg = TrainingConfig(model, per_device_batch=2).shard(tp=2, zero=True, fsdp=True)
    grid = cfg.grid(4)
    prog = compile_program(cfg, grid)
    compiled = set()
    for fn in ("train_step", "adamw_step"):
        for key in prog.shard_collectives[fn]:
            kind = key.split(".")[1].split("[")[0]
            axis = {"[0]": "batch", "[1]": "shard"}.get(key[key.index("["):], "") if "[" in key else ""
            if kind != "all_slice":
                compiled.add((kind, axis))
    predicted = {(c.kind, c.axis) for c in predict(model, policy, grid, 2, cost=COST).collectives}
    assert predicted == compiled


@pytest.mark.slow
def test_tight_budget_plan_trains_as_one_rank_in_float64():
    """A budget neither DP nor ZeRO fits: the plan chosen shards more, and its training on 2
    simulated ranks gives the single-rank float64 losses to 1e-9."""
    data = np.random.default_rng(0).integers(0, MODEL.vocab_size, 3000).astype(np.int32)
    plan = choose(MODEL, 2, 2, cost=COST)
    budget = min(p.memory.total for p in plan.considered if policy_name(p.policy) in ("dp", "zero")) - 1
    p = choose(MODEL, 2, 2, budget=budget, cost=COST).chosen.policy
    assert p.fsdp or p.tp > 1
    cfg = TrainingConfig(MODEL, per_device_batch=2, steps=3, lr=1e-2, warmup_steps=1, dtype="float64", eval_batches=1).shard(p.tp, p.zero, p.fsdp)
    result = train_simulated(cfg, data, 2, data[:400])
    ref, _ = reference_losses(cfg, data, result.grid)
    np.testing.assert_allclose(result.losses, ref, rtol=1e-9, atol=1e-9)


@pytest.mark.slow
def test_auto_trains_and_prints_plan_then_measurement(tmp_path, capsys):
    model = ["--n-layer", "1", "--n-head", "4", "--n-embd", "64", "--block-size", "32", "--per-device-batch", "4", "--quiet"]
    rc = main(["--auto", "--simulate", "2", "--steps", "4", "--checkpoint-every", "0", *model, "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    lines = out.splitlines()
    # 27 mixes of dp/zero/fsdp over embeddings, attention, MLP (3 plain among them), tp=2, and tp=2 with attention or MLP without TP
    assert lines[0].startswith("shardc-train: auto plan for 2 ranks (no memory budget; 30 policies priced, 30 fit")
    chosen = re.search(r"chosen: (\S+) on grid", out).group(1)
    assert "runner-up:" in out and "traded:" in out
    measured = [ln for ln in lines if ln.startswith("shardc-train: measured")]
    assert len(measured) == 1 and measured[0].startswith(f"shardc-train: measured {chosen}: ")
    m = re.search(r"[0-9.]+ ms/step \(predicted [0-9.]+; simulated .*\), memory ([0-9.]+) ([KM])iB/rank \(state \+ a step's peak\) \(predicted ([0-9.]+) ([KM])iB\), resident peak [0-9.]+ (?:[KMG]i)?B/rank", measured[0])  # 0 B where the steps reuse pages the compile left
    assert m, measured[0]
    scale = {"K": 1, "M": 1024}
    ratio = float(m.group(1)) * scale[m.group(2)] / (float(m.group(3)) * scale[m.group(4)])
    assert 0.6 < ratio < 1.6, measured[0]  # the traced state + step peak is what the prediction models


@pytest.mark.slow
def test_auto_with_a_tight_budget_trains_a_sharded_plan(tmp_path, capsys):
    rc = main(["--plan-only", "--world", "2", "--memory-budget", "1KB", *SMALL, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1
    smallest = re.search(r"the smallest that fits is (\S+) ", err).group(1)
    rc = main(["--auto", "--simulate", "2", "--steps", "2", "--checkpoint-every", "0", "--memory-budget", smallest, *SMALL, "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    chosen = re.search(r"chosen: (\S+) on grid", out).group(1)
    assert chosen not in ("dp", "zero")
    tp, zero, fsdp = re.search(r"policy tp=(\d+) zero=(\w+) fsdp=(\w+)", out).groups()
    assert policy_name(ShardingPolicy(int(tp), zero == "True", fsdp == "True")) == chosen  # trained as planned


@pytest.mark.parametrize("world", [8, 1024])
def test_plan_only_plans_large_worlds_without_launching(world, capsys, tmp_path):
    start = time.perf_counter()
    assert main(["--plan-only", "--world", str(world), "--out", str(tmp_path)]) == 0
    assert time.perf_counter() - start < 10
    out = capsys.readouterr().out
    assert out.startswith(f"shardc-train: auto plan for {world} ranks (no memory budget;")
    m = re.search(r"chosen: (\S+) on grid \(batch=(\d+), shard=(\d+)\): ([0-9.]+) ms/step .* ([0-9.]+ [KMG]iB)/rank", out)
    assert m, out
    assert int(m.group(2)) * int(m.group(3)) == world
    assert "not on this grid:" in out  # 4 heads do not split 8 ways: the ZeRO plans are out
    assert not (tmp_path / "loss.csv").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--auto", "--memory-budget", "garbage"], "--memory-budget: expected a size such as 512MB or 2GiB, got 'garbage'"),
        (["--plan-only"], "--plan-only needs --world N: the ranks to plan for"),
        (["--plan-only", "--world", "0"], "--world must be positive, got 0"),
        (["--world", "4"], "--world goes with --plan-only"),
        (["--memory-budget", "1GB"], "--memory-budget goes with --auto"),
        (["--auto", "--tp", "2"], "--auto chooses the policy: drop --tp"),
        (["--auto", "--no-zero"], "--auto chooses the policy: drop --no-zero"),
        (["--plan-only", "--world", "4", "--simulate", "2"], "--plan-only launches nothing"),
        (["--plan-only", "--world", "4", "--memory-budget", "10KB"], "memory budget 9.77KiB per rank fits no plan on 4 ranks: the smallest that fits is "),
    ],
)
def test_bad_auto_flags_give_one_line_and_exit_1(args, message, capsys, tmp_path):
    assert main([*args, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("shardc-train: error: "), err
    assert message in err


def test_four_ranks_on_two_cores_predict_twice_the_compute_of_four_on_four(monkeypatch):
    """`plan_job`'s ranks per host against this host's cores: 4 ranks sharing 2 cores
    compute each step in twice the time of 4 ranks with a core each, and their collectives
    wait for each other; `--plan-only` (no ranks per host: a cluster) is the core-each
    prediction."""
    from dataclasses import replace

    from shardc.training import auto_plan
    from shardc.training.mesh import make_grid

    rates = replace(DEFAULT_RATES, oversubscribed_wait=2e-3)
    cost = CostModel(rates)
    policy, grid = ShardingPolicy(1, False, False), make_grid(4, 1)
    own_core = predict(MODEL, policy, grid, 2, cost=cost.on_host(4, 4))
    shared = predict(MODEL, policy, grid, 2, cost=cost.on_host(4, 2))
    assert shared.compute_s == pytest.approx(2 * own_core.compute_s)
    count = sum(c.count for c in shared.collectives)
    assert shared.comm_s == pytest.approx(2 * own_core.comm_s + count * 2e-3)
    assert own_core.step_s == pytest.approx(predict(MODEL, policy, grid, 2, cost=cost).step_s)

    import shardc.host
    import shardc.passes.cost_model as cm
    from shardc.tools.train import arg_parser
    from shardc.training.job import Job

    monkeypatch.setattr(shardc.host, "physical_cores", lambda: 2)
    monkeypatch.setattr(cm, "load_rates", lambda *a, **k: rates)
    assert auto_plan.host_cost_model(None, 4).ranks_per_core == 2.0
    assert auto_plan.host_cost_model(None, None).ranks_per_core == 1.0
    assert auto_plan.host_cost_model(cost, 2).ranks_per_core == 1.0
    args = arg_parser().parse_args([*SMALL, "--auto"])
    by_name = {}
    for per_host in (None, 4):
        plan = auto_plan.plan_job(Job(args, 4), 4, per_host)
        by_name[per_host] = {p.name: p for p in plan.considered}
    assert by_name[None].keys() == by_name[4].keys()
    for name, cluster in by_name[None].items():
        assert by_name[4][name].compute_s == pytest.approx(2 * cluster.compute_s)
        assert by_name[4][name].comm_s > 2 * cluster.comm_s


def test_zero_holds_one_unreduced_gradient_at_a_time():
    """The compiled GPT step reduce-scatters each gradient as the backward pass makes it:
    ZeRO's transient is the largest parameter's gradient, not a whole microbatch's."""
    from shardc.training.gpt import param_specs
    from shardc.training.mesh import make_grid

    model = GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=32)
    zero = predict(model, ShardingPolicy(1, True, False), make_grid(2, 1), 2, cost=COST)
    largest = max(np.prod(s.shape) for s in param_specs(model))
    assert zero.memory.transient == largest * 4
    assert zero.memory.transient < zero.memory.state.grads
