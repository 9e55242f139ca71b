"""Mixed policies (issue 34: any mix per tensor): a layout kind (dp, zero, fsdp) per
parameter group, resolved per parameter; `--auto` choosing the mix under a memory
budget; training, checkpoints and the plan text under a mix; `--policy-override`'s
one-line errors."""

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from shardc.passes.cost_model import DEFAULT_RATES, CostModel
from shardc.tools.train import main
from shardc.training.auto_plan import (
    choose,
    mixed_policies,
    param_groups,
    plan_lines,
    policy_name,
    predict,
)
from shardc.training.axis import (
    GPT_PLAN,
    GROUP_NAMES,
    LayoutOverride,
    ShardingConfigError,
    ShardingPolicy,
    group_of,
    per_rank_bytes,
    resolve,
    validate_layouts,
)
from shardc.training.checkpoint import CheckpointOptions, open_checkpoint, step_dir
from shardc.training.gpt import GPTConfig, param_specs
from shardc.training.mesh import make_grid
from shardc.training.trainer import TrainingConfig, compile_program, reference_losses, train_simulated

MODEL = GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32)
COST = CostModel(DEFAULT_RATES)
NORMS_DP = LayoutOverride(r".*ln_.*", False, False, name="norms")
ATTN_ZERO = LayoutOverride(r".*attn.*", True, False, name="attention")
MIX = ShardingPolicy(1, True, True, (NORMS_DP, ATTN_ZERO))  # FSDP for the rest: embeddings, MLP
DATA = np.random.default_rng(0).integers(0, MODEL.vocab_size, 3000).astype(np.int32)


def _has(spec, axis: str) -> bool:
    return any(axis in (d or ()) for d in spec)


def test_overrides_resolve_per_parameter_first_match_wins():
    specs = {s.path: s for s in param_specs(MODEL)}
    lay = {p: resolve(s.axes, GPT_PLAN, MIX, p) for p, s in specs.items()}
    assert _has(lay["h.0.mlp.c_fc.weight"].storage, "batch") and _has(lay["wte"].storage, "batch")  # FSDP
    assert _has(lay["h.0.attn.c_attn.weight"].update, "batch") and not _has(lay["h.0.attn.c_attn.weight"].storage, "batch")  # ZeRO
    first = ShardingPolicy(1, True, True, (LayoutOverride("wte", False), LayoutOverride("w.*", True, True)))
    assert not _has(resolve(specs["wte"].axes, GPT_PLAN, first, "wte").update, "batch")  # the first override that matches
    assert MIX.choice("h.0.ln_1.weight") == (False, False) and MIX.choice("wpe") == (True, True)
    with pytest.raises(ShardingConfigError, match="by parameter path"):
        resolve(specs["wte"].axes, GPT_PLAN, MIX)  # a caller that forgets the path fails loudly


def test_plain_policies_keep_their_repr_and_cache_key():
    assert repr(ShardingPolicy(2, True, False)) == "ShardingPolicy(tp=2, zero=True, fsdp=False)"
    assert "overrides=" in repr(MIX)
    assert ShardingPolicy(1, True, True, (LayoutOverride("a", False, name="x"),)) == ShardingPolicy(1, True, True, (LayoutOverride("a", False),))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: LayoutOverride("wte", False, True), "layout override 'wte': fsdp requires zero"),
        (lambda: LayoutOverride("(", True), "layout override '(': bad regex"),
    ],
)
def test_bad_overrides_are_config_errors(make, message):
    with pytest.raises(ShardingConfigError, match=re.escape(message)):
        make()


def test_an_override_that_matches_no_parameter_is_refused():
    bad = ShardingPolicy(1, True, False, (LayoutOverride("c_fc", False),))  # matched whole: no FQN is `c_fc`
    with pytest.raises(ShardingConfigError, match=r"layout override 'c_fc' matches no parameter \(the FQNs, matched whole: wte, wpe, .*; or a group: norms, embeddings, "):
        validate_layouts(param_specs(MODEL), GPT_PLAN, bad, make_grid(2, 1))
    absent = ShardingPolicy(1, True, False, (LayoutOverride("head", False),))  # a group the GPT has no member of (its head is wte)
    with pytest.raises(ShardingConfigError, match="layout override 'head' matches no parameter"):
        validate_layouts(param_specs(MODEL), GPT_PLAN, absent, make_grid(2, 1))


def test_mixed_state_bytes_sit_between_the_plain_policies():
    grid = make_grid(2, 1)
    size = {p: per_rank_bytes(param_specs(MODEL), GPT_PLAN, p, grid).params for p in (ShardingPolicy(1, True, False), MIX, ShardingPolicy(1, True, True))}
    zero, mix, fsdp = size.values()
    assert fsdp < mix < zero


@pytest.mark.parametrize(
    "path, group",
    [
        ("wte", "embeddings"), ("model.embed_tokens.weight", "embeddings"), ("h.3.ln_1.weight", "norms"),
        ("model.layers.0.post_attention_layernorm.weight", "norms"), ("model.layers.0.self_attn.q_proj.weight", "attention"),
        ("h.0.attn.c_proj.bias", "attention"), ("model.layers.1.mlp.gate_proj.weight", "mlp"), ("lm_head.weight", "head"),
        ("bert.encoder.layer.0.intermediate.dense.weight", "mlp"), ("something.else", "other"),
    ],
)
def test_parameter_groups_by_fqn(path, group):
    assert group_of(path) == group


@pytest.mark.parametrize("tp", [1, 2])
def test_group_names_as_patterns_lay_out_their_groups(tp):
    """`LayoutOverride("attention", ...)` sets the attention group's parameters, as the
    regex `--auto` builds for the group does, so a printed mix can be given back as is."""
    cfg = GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=32)
    specs = param_specs(cfg)
    groups = {g.name: g for g in param_groups(specs)}
    kinds = {"norms": ("dp", True), "attention": ("zero", tp == 1), "mlp": ("fsdp", True)}
    by_name = ShardingPolicy(tp, True, False, tuple(LayoutOverride(g, zero, fsdp, tp=t) for g, (k, t) in kinds.items() for zero, fsdp in [{"dp": (False, False), "zero": (True, False), "fsdp": (True, True)}[k]]))
    by_regex = ShardingPolicy(tp, True, False, tuple(replace(o, pattern=groups[o.pattern].pattern) for o in by_name.overrides))
    for s in specs:
        assert resolve(s.axes, GPT_PLAN, by_name, s.path) == resolve(s.axes, GPT_PLAN, by_regex, s.path), s.path
        assert by_name.uses_tp(s.path) == by_regex.uses_tp(s.path), s.path
    assert by_name.choice("h.1.mlp.c_proj.weight") == (True, True) and by_name.choice("h.0.ln_2.weight") == (False, False)
    assert by_name.choice("wte") == (True, False)  # no override: the policy's own
    llama = ["model.layers.3.self_attn.k_proj.weight", "model.layers.0.mlp.down_proj.weight", "model.norm.weight", "lm_head.weight"]
    assert [[o.pattern for o in by_name.overrides if o.matches(p)] for p in llama] == [["attention"], ["mlp"], ["norms"], []]
    assert set(GROUP_NAMES) == {"embeddings", "attention", "mlp", "norms", "head", "other"}


def test_group_patterns_match_their_members_only():
    specs = param_specs(GPTConfig(n_layer=3, n_head=2, n_embd=16, block_size=8, vocab_size=32))
    groups = param_groups(specs)
    assert [g.name for g in groups] == ["norms", "embeddings", "attention", "mlp"]
    for g in groups:
        assert {s.path for s in specs if re.fullmatch(g.pattern, s.path)} == {s.path for s in g.specs}, g.name


def test_mixes_enumerate_every_distinct_assignment():
    policies = mixed_policies(param_specs(MODEL), GPT_PLAN, 1)
    # norms: ZeRO splits nothing there (one choice); embeddings, attention, MLP: 3 each
    assert len(policies) == 27 and len(set(policies)) == 27
    plain = [p for p in policies if not p.overrides]
    assert sorted(policy_name(p) for p in plain) == ["dp", "fsdp", "zero"]
    for p in policies:  # each is valid on the grid and names its overrides by group
        validate_layouts(param_specs(MODEL), GPT_PLAN, p, make_grid(2, 1))
        assert all(o.name in ("embeddings", "attention", "mlp") for o in p.overrides)


def test_a_budget_only_a_mix_fits_well_picks_the_mix():
    """Whole DP does not fit; whole ZeRO and FSDP fit but are slower than a mix that
    keeps some groups DP: auto picks that mix, and its predicted memory fits."""
    every = choose(MODEL, 2, 2, cost=COST)
    by_name = {p.name: p for p in every.considered}
    dp, zero, fsdp = by_name["dp"], by_name["zero"], by_name["fsdp"]
    faster = [p for p in every.considered if p.policy.overrides and p.memory.total < dp.memory.total and p.tokens_per_s > max(zero.tokens_per_s, fsdp.tokens_per_s)]
    assert faster, "no mix beats whole ZeRO/FSDP under DP's memory"
    budget = max(faster, key=lambda p: p.tokens_per_s).memory.total
    plan = choose(MODEL, 2, 2, budget=budget, cost=COST)
    c = plan.chosen
    assert c.policy.overrides and c.memory.total <= budget < dp.memory.total
    assert c.tokens_per_s > max(zero.tokens_per_s, fsdp.tokens_per_s)
    assert zero in plan.fitting or any(p.name == "zero" for p in plan.fitting)
    assert c.tokens_per_s == max(p.tokens_per_s for p in plan.fitting)
    # the prediction of the mix is the one `predict` gives for it
    again = predict(MODEL, c.policy, c.grid, 2, cost=COST)
    assert again.step_s == pytest.approx(c.step_s) and again.memory.total == pytest.approx(c.memory.total)
    text = "\n".join(plan_lines(plan))
    assert f"chosen: {c.name} on grid" in text and "layouts per group: norms=" in text
    assert re.search(r"layouts per group: norms=\w+, embeddings=\w+, attention=\w+, mlp=\w+", text)
    assert not plan.over_budget or "over budget: dp" in text


def test_without_mixes_auto_prices_the_hand_policies():
    names = {p.name for p in choose(MODEL, 2, 2, cost=COST, mixed=False).considered}
    assert names == {"dp", "zero", "fsdp", "tp=2"}


def test_mixed_prediction_counts_each_kinds_collectives():
    grid = make_grid(2, 1)
    rows = {(c.kind, c.axis): c.count for c in predict(MODEL, MIX, grid, 2, cost=COST).collectives}
    specs = param_specs(MODEL)
    split = [s for s in specs if _has(resolve(s.axes, GPT_PLAN, MIX, s.path).update, "batch")]
    whole = [s for s in specs if s not in split]
    assert {MIX.choice(s.path) for s in split} == {(True, True), (True, False)}  # FSDP and ZeRO arrays among them
    # each split array: a reduce_scatter of its gradient and an all_gather (FSDP: before its
    # microbatch; ZeRO: after the update); the others' gradients and the loss: all_reduce
    assert rows == {("reduce_scatter", "batch"): len(split), ("all_gather", "batch"): len(split), ("all_reduce", "batch"): len(whole) + 1}


@pytest.mark.slow
def test_mixed_predicted_collectives_are_the_compiled_steps():
    cfg = TrainingConfig(MODEL, per_device_batch=2).shard(1, True, True, overrides=MIX.overrides)
    grid = cfg.grid(2)
    prog = compile_program(cfg, grid)
    compiled = set()
    for fn in ("train_step", "adamw_step"):
        for key in prog.shard_collectives[fn]:
            kind = key.split(".")[1].split("[")[0]
            axis = {"[0]": "batch", "[1]": "shard"}.get(key[key.index("["):], "") if "[" in key else ""
            if kind != "all_slice":
                compiled.add((kind, axis))
    assert {(c.kind, c.axis) for c in predict(MODEL, MIX, grid, 2, cost=COST).collectives} == compiled


@pytest.mark.slow
def test_mixed_policy_trains_as_one_rank_in_float64():
    cfg = TrainingConfig(MODEL, per_device_batch=2, steps=3, lr=1e-2, warmup_steps=1, dtype="float64", eval_batches=1)
    cfg = cfg.shard(1, True, True, overrides=MIX.overrides)
    result = train_simulated(cfg, DATA, 2, DATA[:400])
    ref, ref_params = reference_losses(cfg, DATA, result.grid)
    np.testing.assert_allclose(result.losses, ref, rtol=1e-9, atol=1e-9)
    for path, p in ref_params.items():
        np.testing.assert_allclose(result.params[path], p, rtol=1e-9, atol=1e-9, err_msg=path)


@pytest.mark.slow
@pytest.mark.parametrize("resume_on", [(2, "mix"), (4, "dp"), (1, "zero")], ids=str)
def test_checkpoint_round_trip_with_a_mix(tmp_path, resume_on):
    """Save under the mix on 2 ranks at step 2; resume under the mix, or on another grid
    and plain policy (the same global batch): the run continues as the uninterrupted
    one (float64)."""
    base = TrainingConfig(MODEL, per_device_batch=2, steps=4, lr=1e-2, warmup_steps=1, dtype="float64")
    mixed = base.shard(1, True, True, overrides=MIX.overrides)
    full = train_simulated(mixed, DATA, 2, checkpoint=CheckpointOptions(tmp_path, 2, 2))
    recorded = open_checkpoint(step_dir(tmp_path, 2)).manifest["policy"]
    assert [(o["pattern"], o["zero"], o["fsdp"]) for o in recorded["overrides"]] == [(o.pattern, o.zero, o.fsdp) for o in MIX.overrides]
    world, kind = resume_on
    if kind == "mix":
        cfg = mixed
    else:
        cfg = replace(base, per_device_batch=4 // world).shard(1, kind == "zero", False, overrides=())
    resumed = train_simulated(cfg, DATA, world, resume=step_dir(tmp_path, 2))
    np.testing.assert_allclose(resumed.losses[-2:], full.losses[2:], rtol=1e-10, atol=1e-10)
    for path, p in full.params.items():
        np.testing.assert_allclose(resumed.params[path], p, rtol=1e-10, atol=1e-10, err_msg=path)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--policy-override", "wte"], "--policy-override: expected REGEX=LAYOUT (LAYOUT one of dp, zero, fsdp, each optionally with /notp), got 'wte'"),
        (["--policy-override", "=dp"], "--policy-override: expected REGEX=LAYOUT"),
        (["--policy-override", "wte=tp"], "--policy-override: 'wte=tp': unknown layout 'tp' (expected one of dp, zero, fsdp, each optionally with /notp)"),
        (["--policy-override", "(=dp"], "--policy-override: layout override '(': bad regex"),
        (["--policy-override", "mlps=dp"], "layout override 'mlps' matches no parameter"),
        (["--policy-override", "head=dp"], "layout override 'head' matches no parameter"),  # a group the GPT lacks (its head is wte)
        (["--auto", "--policy-override", "wte=dp"], "--auto chooses the policy: drop --policy-override"),
    ],
)
def test_bad_policy_overrides_give_one_line_and_exit_1(args, message, capsys, tmp_path):
    small = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--steps", "1", "--quiet"]
    assert main([*args, *small, "--simulate", "2", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("shardc-train: error: "), err
    assert message in err


def test_show_layouts_draws_the_mix(capsys, tmp_path):
    small = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8"]
    rc = main(["--simulate", "2", "--fsdp", "--policy-override", r".*attn.*=zero", "--policy-override", "wte=dp", "--show-layouts", *small, "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "policy tp=1 zero=True fsdp=True .*attn.*=zero wte=dp" in out
    blocks = {b.split()[0]: b for b in re.split(r"\n(?=\S)", out) if b.strip()}
    assert "storage = compute: replicated" in blocks["h.0.attn.c_attn.weight"] or "storage = compute" in blocks["h.0.attn.c_attn.weight"]
    assert "storage = update" in blocks["h.0.mlp.c_fc.weight"]
    assert "replicated" in blocks["wte"] and "batch" not in blocks["wte"].split("update")[0]


@pytest.mark.slow
def test_cli_mix_trains_as_the_hand_policy(tmp_path, capsys):
    small = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2", "--steps", "3", "--eval-every", "0", "--checkpoint-every", "0", "--quiet"]
    assert main(["--simulate", "2", "--fsdp", "--policy-override", r".*ln_.*|wpe=dp", *small, "--out", str(tmp_path / "mix")]) == 0
    assert main(["--simulate", "2", "--fsdp", *small, "--out", str(tmp_path / "fsdp")]) == 0
    out = capsys.readouterr().out
    assert "policy tp=1 zero=True fsdp=True .*ln_.*|wpe=dp" in out

    def losses(d: Path) -> list[float]:
        return [float(line.split(",")[1]) for line in (d / "loss.csv").read_text().splitlines()[1:]]

    np.testing.assert_allclose(losses(tmp_path / "mix"), losses(tmp_path / "fsdp"), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_auto_trains_the_mix_it_prints(tmp_path, capsys, monkeypatch):
    """`--auto` with the default rates and a budget where a mix is the fastest plan that
    fits: the plan prints the mix per group, and the job trains that mix (its policy line
    names the overrides) with the losses of the same mix given by hand."""
    import shardc.passes.cost_model as cost_model
    from shardc.tools.train import arg_parser
    from shardc.training.auto_plan import plan_job
    from shardc.training.job import Job

    monkeypatch.setattr(cost_model, "load_rates", lambda *a, **k: DEFAULT_RATES)
    small = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2", "--steps", "3", "--lr", "1e-2", "--eval-every", "0", "--checkpoint-every", "0", "--quiet"]
    every = plan_job(Job(arg_parser().parse_args(["--auto", *small]), 2), 2)
    by_name = {p.name: p for p in every.considered}
    mixes = [p for p in every.considered if p.policy.overrides and p.memory.total < by_name["dp"].memory.total and p.tokens_per_s > by_name["zero"].tokens_per_s]
    best = max(mixes, key=lambda p: (p.tokens_per_s, -p.memory.total))
    assert main(["--auto", "--simulate", "2", "--memory-budget", f"{int(best.memory.total) + 1}B", *small, "--out", str(tmp_path / "auto")]) == 0
    out = capsys.readouterr().out
    chosen = re.search(r"chosen: (\S+) on grid", out).group(1)
    assert chosen == best.name and "[" in chosen and "layouts per group: " in out, out
    policy = re.search(r"policy (tp=1 zero=\w+ fsdp=\w+ .*)", out).group(1)  # the job's own line: trained as planned
    assert policy.split()[3:] == [f"{o.name}={o.kind}" for o in best.policy.overrides]
    assert f"shardc-train: measured {chosen}: " in out
    kinds = re.search(r"layouts per group: (.*)", out).group(1)
    hand = [arg for item in kinds.split(", ") for arg in ("--policy-override", item)]  # the printed mix, pasted
    assert main(["--simulate", "2", *hand, *small, "--out", str(tmp_path / "hand")]) == 0

    def losses(d: Path) -> list[float]:
        return [float(line.split(",")[1]) for line in (d / "loss.csv").read_text().splitlines()[1:]]

    assert losses(tmp_path / "auto") == losses(tmp_path / "hand")


@pytest.mark.slow
def test_a_torch_module_trains_under_a_mix_as_under_dp(tmp_path):
    pytest.importorskip("torch", reason="needs the [torch] extra")
    pytest.importorskip("torch_mlir", reason="needs the [torch] extra")
    example = str(Path(__file__).resolve().parents[3] / "examples" / "torch_gpt.py") + ":make"
    common = ["--torch-model", example, "--block-size", "8", "--per-device-batch", "2", "--steps", "3", "--lr", "1e-2", "--eval-every", "0", "--checkpoint-every", "0", "--quiet", "--simulate", "2"]
    assert main([*common, "--fsdp", "--policy-override", r".*ln_.*=dp", "--policy-override", r".*attn.*=zero", "--out", str(tmp_path / "mix")]) == 0
    assert main([*common, "--no-zero", "--out", str(tmp_path / "dp")]) == 0

    def losses(d: Path) -> list[float]:
        return [float(line.split(",")[1]) for line in (d / "loss.csv").read_text().splitlines()[1:]]

    np.testing.assert_allclose(losses(tmp_path / "mix"), losses(tmp_path / "dp"), rtol=1e-5, atol=1e-5)


def test_heads_tp_does_not_divide_leave_tp_to_the_mlp():
    """3 heads on 2 ranks: attention cannot split, but a tp=2 plan that keeps attention
    whole (`/notp`) is priced (the planner refused every tp=2 plan before), plain tp=2
    is refused naming the heads, and the mix trains as one rank in float64."""
    model = GPTConfig(n_layer=1, n_head=3, n_embd=24, block_size=8, vocab_size=32)
    plan = choose(model, 2, 2, cost=COST)
    tp2 = [p for p in plan.considered if p.policy.tp == 2]
    assert tp2 and {p.name for p in tp2} == {"tp=2[attention=dp/notp]"}
    assert any("tp=2 does not divide the 3 heads" in why for _, why in plan.invalid), plan.invalid
    (mix,) = tp2
    cfg = TrainingConfig(model, per_device_batch=2, steps=2, lr=1e-2, warmup_steps=1, dtype="float64", eval_batches=1)
    cfg = cfg.shard(2, False, False, overrides=mix.policy.overrides)
    data = np.random.default_rng(3).integers(0, model.vocab_size, 2000).astype(np.int32)
    result = train_simulated(cfg, data, 2)
    ref, _ = reference_losses(cfg, data, result.grid)
    np.testing.assert_allclose(result.losses, ref, rtol=1e-9, atol=1e-9)
