"""`--auto` / `--plan-only` under `--precision bf16`: products priced at the bf16 GEMM's
rate, the casts to bf16 as elementwise traffic, FSDP's gathers of bf16 copies, the copies'
memory, and a plan that says bf16; float32 predictions unchanged by any of it."""

import math

import pytest

from shardc.passes.cost_model import DEFAULT_RATES, AlphaBeta, CostModel, Rates
from shardc.tools.train import main
from shardc.training.auto_plan import (
    BF16_BYTES,
    LinearShape,
    ModuleShape,
    choose,
    gpt_product_operands,
    plan_lines,
    predict,
    predict_module,
)
from shardc.training.axis import GPT_PLAN, ShardingPolicy
from shardc.training.gpt import GPTConfig, param_specs
from shardc.training.mesh import make_grid

MODEL = GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=64)
SMALL = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2", "--quiet"]


def rates(gemm: float = 1e9, bf16: float = 1e9) -> Rates:
    return Rates(
        gemm_flops=gemm, bf16_gemm_flops=bf16, bandwidth=1e10, op_overhead=1e-6,
        collectives={k: AlphaBeta(1e-5, 1e-9) for k in DEFAULT_RATES.collectives}, source="test",
    )


def gpt(precision: str, policy: ShardingPolicy = ShardingPolicy(1, False, False), world: int = 1, **kw: float):
    return predict(MODEL, policy, make_grid(world, policy.tp), 2, 1, CostModel(rates(**kw)), precision=precision)


def test_bf16_products_are_faster_by_the_rate_ratio():
    """Every contraction (forward and backward) runs at the bf16 rate: the step's seconds
    move with it exactly as the float32 step's move with the float32 rate."""
    flops = (gpt("f32", gemm=1e9).compute_s - gpt("f32", gemm=2e9).compute_s) / (1 / 1e9 - 1 / 2e9)
    assert flops > 0
    slow, fast = gpt("bf16", bf16=1e9), gpt("bf16", bf16=4e9)
    assert slow.compute_s - fast.compute_s == pytest.approx(flops * (1 / 1e9 - 1 / 4e9))
    assert gpt("bf16", gemm=3e9, bf16=4e9).compute_s == pytest.approx(fast.compute_s)  # the f32 rate prices no product


def test_f32_predictions_do_not_read_the_bf16_rate():
    for policy, world in ((ShardingPolicy(1, False, False), 1), (ShardingPolicy(1, True, True), 2), (ShardingPolicy(2, False, False), 2)):
        a, b = gpt("f32", policy, world, bf16=1e9), gpt("f32", policy, world, bf16=9e9)
        assert (a.compute_s, a.comm_s, a.memory) == (b.compute_s, b.comm_s, b.memory)
        assert predict(MODEL, policy, make_grid(world, policy.tp), 2, 1, CostModel(rates())) == a


def test_bf16_casts_cost_traffic_at_equal_rates():
    """Without faster products bf16 only adds its casts: each parameter copy per product
    that reads it (6 bytes an element) and the activations' copies (2 bytes)."""
    f32, bf16 = gpt("f32"), gpt("bf16")
    weights = sum(math.prod(s.shape) for s in param_specs(MODEL) if s.path in gpt_product_operands(param_specs(MODEL)))
    extra = bf16.compute_s - f32.compute_s
    assert extra > 2 * weights * 6 / 1e10  # at least two casts of every weight at the bandwidth


def test_fsdp_gathers_bf16_copies_of_the_weights_and_reduces_gradients_in_f32():
    policy = ShardingPolicy(1, True, True)
    f32 = {c.kind: c for c in gpt("f32", policy, 2).collectives}
    bf16 = {c.kind: c for c in gpt("bf16", policy, 2).collectives}
    assert bf16["reduce_scatter"] == f32["reduce_scatter"]  # --grad-reduce f32
    assert bf16["all_gather"].count == f32["all_gather"].count
    assert f32["all_gather"].nbytes / 2 < bf16["all_gather"].nbytes < f32["all_gather"].nbytes  # biases stay f32
    zero = ShardingPolicy(1, True, False)  # ZeRO gathers the updated float32 masters
    assert gpt("bf16", zero, 2).collectives == gpt("f32", zero, 2).collectives


def test_bf16_memory_adds_the_copies_alive():
    f32, bf16 = gpt("f32"), gpt("bf16")
    assert bf16.memory.state == f32.memory.state  # float32 masters, gradients, moments
    assert bf16.memory.activations > f32.memory.activations  # the products' inputs' bf16 copies
    layer = sum(math.prod(s.shape) for s in param_specs(MODEL) if s.path.startswith("h.0.") and s.path in gpt_product_operands(param_specs(MODEL)))
    assert bf16.memory.transient - f32.memory.transient == pytest.approx(layer * BF16_BYTES)  # one layer's weight copies
    policy = ShardingPolicy(1, True, True)
    f, b = gpt("f32", policy, 2), gpt("bf16", policy, 2)
    assert b.memory.transient < f.memory.transient + layer * BF16_BYTES  # gathered in bf16: smaller than float32's


def test_torch_module_bf16_products_at_the_bf16_rate():
    specs = tuple(param_specs(MODEL))
    linears = tuple(LinearShape(s.path, s.shape[0], math.prod(s.shape[1:]), 0) for s in specs if s.path.endswith("mlp.c_fc.weight"))
    shape = ModuleShape("m", specs, GPT_PLAN, linears, (), (32,), 40, MODEL.block_size, MODEL.vocab_size)
    grid, policy = make_grid(1, 1), ShardingPolicy(1, False, False)

    def run(precision: str, **kw: float):
        return predict_module(shape, policy, grid, 2, 1, CostModel(rates(**kw)), precision=precision)

    flops = sum(2 * 2 * MODEL.block_size * lin.in_features * lin.out_features for lin in linears) * 3
    assert run("bf16", bf16=1e9).compute_s - run("bf16", bf16=2e9).compute_s == pytest.approx(flops * (1 / 1e9 - 1 / 2e9))
    assert run("f32", bf16=1e9) == run("f32", bf16=2e9)
    assert run("bf16").memory.activations > run("f32").memory.activations


def test_the_plan_says_bf16():
    cost = CostModel(rates(bf16=4e9))
    bf16 = plan_lines(choose(MODEL, 2, 2, cost=cost, precision="bf16"))
    assert "in bf16 (float32 masters)" in bf16[1]
    assert all("bf16" not in line for line in plan_lines(choose(MODEL, 2, 2, cost=cost)))


def test_plan_only_with_precision_bf16_prices_bf16(capsys):
    assert main(["--plan-only", "--world", "2", "--precision", "bf16", *SMALL]) == 0
    bf16 = capsys.readouterr().out
    assert main(["--plan-only", "--world", "2", *SMALL]) == 0
    f32 = capsys.readouterr().out
    assert "in bf16 (float32 masters)" in bf16 and "bf16" not in f32
