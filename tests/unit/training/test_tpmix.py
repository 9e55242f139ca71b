"""TP per parameter group (issue 34 item 3): an override with `tp=False` keeps its group
whole over `shard` while the rest is tensor parallel. Its layouts, its prediction (the
group's FLOPs whole, no TP all_reduces of its blocks, its parameters whole per rank),
--auto's enumeration of attention/MLP with and without TP, the `/notp` spelling of
`--policy-override` and training under it on simulated ranks."""

import numpy as np
import pytest

from shardc.passes.cost_model import DEFAULT_RATES, CostModel
from shardc.tools.train import layout_override, main
from shardc.training.auto_plan import group_kinds, mixed_policies, plan_lines, policy_name, predict, choose
from shardc.training.axis import GPT_PLAN, LayoutOverride, ShardingPolicy, per_rank_bytes, resolve, validate_layouts
from shardc.training.checkpoint import CheckpointOptions, step_dir
from shardc.training.gpt import GPTConfig, param_specs
from shardc.training.mesh import make_grid
from shardc.training.trainer import TrainingConfig, train_simulated

MODEL = GPTConfig(n_layer=2, n_head=4, n_embd=32, block_size=16, vocab_size=64)
COST = CostModel(DEFAULT_RATES)
ATTN_NOTP = LayoutOverride(r".*attn.*", False, False, name="attention", tp=False)
MLP_NOTP = LayoutOverride(r".*mlp.*", True, True, name="mlp", tp=False)
DATA = np.random.default_rng(0).integers(0, 32, 3000).astype(np.int32)


def _has(spec, axis: str) -> bool:
    return any(axis in (d or ()) for d in spec)


def test_a_group_without_tp_is_computed_whole_over_shard():
    policy = ShardingPolicy(2, True, False, (ATTN_NOTP,))
    specs = {s.path: s for s in param_specs(MODEL)}
    attn = resolve(specs["h.0.attn.c_attn.weight"].axes, GPT_PLAN, policy, "h.0.attn.c_attn.weight")
    mlp = resolve(specs["h.0.mlp.c_fc.weight"].axes, GPT_PLAN, policy, "h.0.mlp.c_fc.weight")
    assert not any(_has(x, "shard") for x in (attn.storage, attn.compute, attn.update))  # dp, no TP
    assert _has(mlp.compute, "shard") and _has(mlp.update, "batch")  # the rest: tp=2 + ZeRO
    # ZeRO/FSDP still split a TP-off group over batch
    fsdp = ShardingPolicy(2, True, False, (MLP_NOTP,))
    lay = resolve(specs["h.0.mlp.c_fc.weight"].axes, GPT_PLAN, fsdp, "h.0.mlp.c_fc.weight")
    assert not _has(lay.compute, "shard") and _has(lay.storage, "batch") and not _has(lay.storage, "shard")
    assert policy.uses_tp("h.0.attn.c_proj.bias") is False and policy.uses_tp("wte") is True
    assert ATTN_NOTP.kind == "dp/notp" and MLP_NOTP.kind == "fsdp/notp"
    assert policy.text() == "tp=2 zero=True fsdp=False attention=dp/notp"
    assert ATTN_NOTP != LayoutOverride(r".*attn.*", False, False)  # the cache key tells them apart
    # stored whole over shard: the attention's bytes per rank double against tp=2 everywhere
    grid = make_grid(4, 2)
    validate_layouts(param_specs(MODEL), GPT_PLAN, policy, grid)
    assert per_rank_bytes(param_specs(MODEL), GPT_PLAN, policy, grid).params > per_rank_bytes(param_specs(MODEL), GPT_PLAN, ShardingPolicy(2, True, False), grid).params


def test_prediction_of_a_tp_off_group():
    """Fixed rates: attention without TP computes its FLOPs whole (slower compute), drops
    its two all_reduces per layer over shard, and keeps its parameters whole per rank."""
    grid = make_grid(4, 2)  # (the loss is reduced over batch)
    tp = predict(MODEL, ShardingPolicy(2, False, False), grid, 2, cost=COST)
    off = predict(MODEL, ShardingPolicy(2, False, False, (ATTN_NOTP,)), grid, 2, cost=COST)
    both = predict(MODEL, ShardingPolicy(2, False, False, (ATTN_NOTP, LayoutOverride(r".*mlp.*", False, tp=False))), grid, 2, cost=COST)
    whole = predict(MODEL, ShardingPolicy(1, False, False), make_grid(2, 1), 2, cost=COST)

    def shard_reduces(p) -> int:
        return sum(c.count for c in p.collectives if c.kind == "all_reduce" and c.axis == "shard")

    assert shard_reduces(tp) == 4 * MODEL.n_layer and shard_reduces(off) == 2 * MODEL.n_layer
    assert shard_reduces(both) == 0
    assert tp.compute_s < off.compute_s < both.compute_s
    assert both.compute_s == pytest.approx(whole.compute_s, rel=1e-12)  # nothing split: one rank's work
    assert off.memory.state.params > tp.memory.state.params and both.memory.state.params == whole.memory.state.params
    assert off.memory.activations > tp.memory.activations


def test_auto_enumerates_tp_on_and_off_for_attention_and_mlp():
    specs = param_specs(MODEL)
    one, two = mixed_policies(specs, GPT_PLAN, 1), mixed_policies(specs, GPT_PLAN, 2)
    assert len(one) == 27 and all(all(o.tp for o in p.overrides) for p in one)
    # attention and MLP: 3 kinds x TP on/off each, both off excluded: 27 x (4 - 1)
    assert len(two) == 81 and len(set(two)) == 81
    dropped = {o.name for p in two for o in p.overrides if not o.tp}
    assert dropped == {"attention", "mlp"}
    assert not any({"attention", "mlp"} <= {o.name for o in p.overrides if not o.tp} for p in two)
    for p in two:
        validate_layouts(specs, GPT_PLAN, p, make_grid(4, 2))
    mix = next(p for p in two if [(o.name, o.kind) for o in p.overrides] == [("attention", "dp/notp")])
    assert policy_name(mix) == "tp=2[attention=dp/notp]"
    assert "attention=dp/notp" in group_kinds(mix, specs) and "mlp=dp" in group_kinds(mix, specs)


def test_plan_lines_print_a_chosen_tp_off_group():
    """Priced alone, a TP-off mix is printed with its groups' kinds."""
    mix = ShardingPolicy(2, False, False, (ATTN_NOTP,))
    plan = choose(MODEL, 2, 2, cost=COST, policies=[mix])
    lines = "\n".join(plan_lines(plan))
    assert "tp=2[attention=dp/notp]" in lines and "layouts per group: " in lines and "attention=dp/notp" in lines


def test_policy_override_spelling():
    o = layout_override(r".*attn.*=zero/notp")
    assert (o.pattern, o.zero, o.fsdp, o.tp) == (r".*attn.*", True, False, False)
    assert layout_override("a=b=fsdp").tp is True


@pytest.mark.parametrize(
    "value, message",
    [
        ("wte=notp", "--policy-override: 'wte=notp': unknown layout 'notp' (expected one of dp, zero, fsdp, each optionally with /notp)"),
        ("wte=dp/tp", "unknown layout 'dp/tp'"),
        ("wte=/notp", "unknown layout '/notp'"),
    ],
)
def test_bad_notp_overrides_give_one_line(value, message, capsys, tmp_path):
    small = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--steps", "1", "--quiet"]
    assert main(["--policy-override", value, *small, "--simulate", "2", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("shardc-train: error: "), err
    assert message in err


def test_cli_trains_with_attention_tp_off(tmp_path, capsys):
    small = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2", "--steps", "3", "--eval-every", "0", "--checkpoint-every", "0", "--quiet"]
    assert main(["--simulate", "2", "--tp", "2", "--policy-override", r".*attn.*=dp/notp", *small, "--out", str(tmp_path / "mix")]) == 0
    assert main(["--simulate", "2", "--tp", "2", *small, "--out", str(tmp_path / "tp")]) == 0
    out = capsys.readouterr().out
    assert "policy tp=2 zero=True fsdp=False .*attn.*=dp/notp" in out

    def losses(d):
        return [float(line.split(",")[1]) for line in (d / "loss.csv").read_text().splitlines()[1:]]

    np.testing.assert_allclose(losses(tmp_path / "mix"), losses(tmp_path / "tp"), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_checkpoint_round_trip_with_a_tp_off_group(tmp_path):
    """Saved at step 2 under tp=2 with the MLP whole over shard; resumed under the same
    mix and on one rank: both continue as the uninterrupted run (float64)."""
    model = GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32)
    base = TrainingConfig(model, per_device_batch=2, steps=4, lr=1e-2, warmup_steps=1, dtype="float64")
    mixed = base.shard(2, True, False, overrides=(MLP_NOTP,))
    full = train_simulated(mixed, DATA, 2, checkpoint=CheckpointOptions(tmp_path, 2, 2))
    for cfg, world in ((mixed, 2), (base.shard(1, False, False, overrides=()), 1)):
        resumed = train_simulated(cfg, DATA, world, resume=step_dir(tmp_path, 2))
        np.testing.assert_allclose(resumed.losses[-2:], full.losses[2:], rtol=1e-10, atol=1e-10)
        for path, p in full.params.items():
            np.testing.assert_allclose(resumed.params[path], p, rtol=1e-10, atol=1e-10, err_msg=path)
