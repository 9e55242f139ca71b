"""Grid, plan, policy, layouts, state validation and per-rank bytes."""

import itertools
import math

import pytest

from shardc.training.axis import (
    GPT_PLAN,
    PartitionSpec,
    ShardingConfigError,
    ShardingPlan,
    ShardingPolicy,
    ShardingValidationError,
    abstract_state,
    per_rank_bytes,
    resolve,
    validate_layouts,
)
from shardc.training.gpt import GPTConfig, ParamSpec, param_specs
from shardc.training.mesh import GridError, global_batch, make_grid

P = PartitionSpec
QKV = ("n_embd", "qkv", "heads", "head_dim")


def test_policy_defaults_and_validation():
    assert ShardingPolicy() == ShardingPolicy(tp=1, zero=True, fsdp=False)
    with pytest.raises(ShardingConfigError, match=r"^fsdp=True requires zero=True$"):
        ShardingPolicy(zero=False, fsdp=True)
    with pytest.raises(ShardingConfigError, match=r"^tp must be positive, got 0$"):
        ShardingPolicy(tp=0)


def test_plan_zero_rules_default_to_tp_dims():
    plan = ShardingPlan(tp_rules={"heads": "shard"})
    assert plan.zero() == {"heads": "batch"}
    assert GPT_PLAN.zero()["vocab"] == "batch" and "vocab" not in GPT_PLAN.tp_rules
    with pytest.raises(ShardingConfigError, match="TP rules map onto 'shard'"):
        ShardingPlan(tp_rules={"heads": "batch"})


def test_grid_construction():
    g = make_grid(8, tp=2, ranks_per_host=4)
    assert g.shape == (4, 2) and str(g) == "(batch=4, shard=2)"
    assert [g.coords(r) for r in range(4)] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert g.rank_of(3, 1) == 7
    assert make_grid(8, tp=4).shape == (2, 4)
    with pytest.raises(GridError, match=r"^tp=3 does not divide the world size 8$"):
        make_grid(8, tp=3)
    with pytest.raises(
        GridError, match=r"^tp=4 does not divide the 2 ranks per host: a tensor-parallel group must stay within one host$"
    ):
        make_grid(8, tp=4, ranks_per_host=2)


def test_batch_accounting():
    # four replicas, two examples each, eight accumulation steps: 64 examples per step
    assert global_batch(2, make_grid(8, tp=2), accum_steps=8) == 64
    assert global_batch(2, make_grid(8, tp=4), accum_steps=8) == 32  # tp does not multiply


@pytest.mark.parametrize(
    "policy, storage, compute, update",
    [
        (ShardingPolicy(tp=2, zero=False), P(None, None, "shard", None), P(None, None, "shard", None), P(None, None, "shard", None)),
        (ShardingPolicy(tp=2), P(None, None, "shard", None), P(None, None, "shard", None), P(None, None, ("shard", "batch"), None)),
        (ShardingPolicy(tp=2, fsdp=True), P(None, None, ("shard", "batch"), None), P(None, None, "shard", None), P(None, None, ("shard", "batch"), None)),
    ],
)
def test_qkv_layouts(policy, storage, compute, update):
    lay = resolve(QKV, GPT_PLAN, policy)
    assert (lay.storage, lay.compute, lay.update) == (storage, compute, update)
    assert repr(lay.update) in ("PartitionSpec(None, None, ('shard',), None)", "PartitionSpec(None, None, ('shard', 'batch'), None)")


def test_vocab_split_only_for_zero():
    zero = resolve(("vocab", "n_embd"), GPT_PLAN, ShardingPolicy(tp=2))
    assert zero.compute == P(None, None) and zero.update == P("batch", None) and zero.storage == P(None, None)
    fsdp = resolve(("vocab", "n_embd"), GPT_PLAN, ShardingPolicy(tp=2, fsdp=True))
    assert fsdp.storage == P("batch", None)
    assert resolve(("n_embd",), GPT_PLAN, ShardingPolicy(fsdp=True)).storage == P(None)  # replicated
    assert P(None, ("shard", "batch")).split_axes() == [[], [1, 0]]
    assert P("batch", None).split_axes() == [[0]]
    assert P(None, None).split_axes() == P().split_axes() == [[]]  # mlir-opt rejects `[]`


def test_a_mesh_axis_splits_an_array_once():
    lay = resolve(("n_mlp", "heads"), GPT_PLAN, ShardingPolicy(tp=2))
    assert lay.compute == P("shard", None) and lay.update == P(("shard", "batch"), None)


# A GPT whose every split dimension divides by 8.
DIVIDES = GPTConfig(n_layer=2, n_head=8, n_embd=64, block_size=16, vocab_size=64)
POLICIES = [(tp, zero, fsdp) for tp, zero, fsdp in itertools.product((1, 2), (False, True), (False, True)) if zero or not fsdp]


def _theory(cfg, world, tp, zero, fsdp, itemsize=4):
    """Bytes per rank, from the plan written out by hand."""
    batch = world // tp
    tp_split = lambda p: "heads" in p.axes or "n_mlp" in p.axes  # noqa: E731
    zero_split = lambda p: tp_split(p) or "vocab" in p.axes  # noqa: E731
    params = grads = opt = 0
    for p in param_specs(cfg):
        n = math.prod(p.shape) * itemsize // (tp if tp_split(p) else 1)
        params += n // (batch if fsdp and zero_split(p) else 1)
        grads += n // (batch if zero and zero_split(p) else 1)  # ZeRO splits gradients too
        opt += 2 * n // (batch if zero and zero_split(p) else 1)
    return params, grads, opt


@pytest.mark.parametrize("world", [1, 2, 4, 8])
@pytest.mark.parametrize("tp, zero, fsdp", POLICIES)
def test_resolution_validation_and_bytes(world, tp, zero, fsdp):
    if tp > world:
        pytest.skip("tp larger than the world")
    grid = make_grid(world, tp, ranks_per_host=8)
    policy = ShardingPolicy(tp, zero, fsdp)
    specs = param_specs(DIVIDES)
    validate_layouts(specs, GPT_PLAN, policy, grid)
    got = per_rank_bytes(specs, GPT_PLAN, policy, grid)
    assert (got.params, got.grads, got.opt_state) == _theory(DIVIDES, world, tp, zero, fsdp)
    total = sum(math.prod(p.shape) for p in specs) * 4
    if world == 1:
        assert got.total == 4 * total  # params, grads, two moments
    for s in abstract_state(specs, GPT_PLAN, policy):
        lay = resolve(next(p.axes for p in specs if s.path.endswith("/" + p.path)), GPT_PLAN, policy)
        assert s.spec == (lay.storage if s.path.startswith("params/") else lay.update)


def test_fsdp_and_zero_save_memory_on_eight_ranks():
    specs = param_specs(DIVIDES)
    grid = make_grid(8, 2)
    base = per_rank_bytes(specs, GPT_PLAN, ShardingPolicy(2, zero=False), grid)
    zero = per_rank_bytes(specs, GPT_PLAN, ShardingPolicy(2), grid)
    fsdp = per_rank_bytes(specs, GPT_PLAN, ShardingPolicy(2, fsdp=True), grid)
    assert base.params == zero.params > fsdp.params
    assert base.opt_state > zero.opt_state == fsdp.opt_state
    assert fsdp.total < zero.total < base.total


def test_validation_message_is_exact():
    specs = [ParamSpec("w", (6, 4), ("n_mlp", "n_embd"), True)]
    with pytest.raises(ShardingValidationError) as e:
        validate_layouts(specs, GPT_PLAN, ShardingPolicy(tp=2, fsdp=True), make_grid(4, 2))
    line = "state {} of shape (6, 4) with partition spec PartitionSpec(('shard', 'batch'), None) does not fit grid (batch=2, shard=2): dimension 0 of size 6 is split 4 ways"
    paths = ["params/w", "grads/w", "opt_state/mu/w", "opt_state/nu/w"]
    assert str(e.value) == "\n".join(line.format(p) for p in paths)
    assert e.value.failures == [line.format(p) for p in paths]


def test_gpt_heads_do_not_divide_eight_ways():
    cfg = GPTConfig(n_layer=1, n_head=2, n_embd=16, vocab_size=64)
    with pytest.raises(ShardingValidationError) as e:
        validate_layouts(param_specs(cfg), GPT_PLAN, ShardingPolicy(tp=2), make_grid(8, 2))
    assert (
        "state opt_state/mu/h.0.attn.c_attn.weight of shape (16, 3, 2, 8) with partition spec "
        "PartitionSpec(None, None, ('shard', 'batch'), None) does not fit grid (batch=4, shard=2): "
        "dimension 2 of size 2 is split 8 ways"
    ) in e.value.failures
    # storage (= compute without fsdp) divides: only the update-layout state fails
    assert e.value.failures[0].startswith("state grads/h.0.attn.c_attn.weight")
    assert not any(f.startswith("state params/") for f in e.value.failures)
    # without ZeRO the same model fits
    validate_layouts(param_specs(cfg), GPT_PLAN, ShardingPolicy(tp=2, zero=False), make_grid(8, 2))


def test_policy_must_match_grid():
    with pytest.raises(ShardingConfigError, match=r"^policy tp=2 does not match the grid \(batch=8, shard=1\)$"):
        validate_layouts([], GPT_PLAN, ShardingPolicy(tp=2), make_grid(8, 1))
