"""TP per parameter group for torch modules: `predict_module` prices an attention kept
whole over `shard` (its projections' FLOPs whole, no all_reduce of its row-parallel
output projection), and a transformers Llama trains under `--tp 2` with its attention
TP-off as it does with TP everywhere."""

import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("transformers", reason="needs the [torch] extra: pip install -e '.[torch]'")

from shardc.frontends.torch_plan import module_shape  # noqa: E402
from shardc.frontends.torch_train import load_task  # noqa: E402
from shardc.passes.cost_model import DEFAULT_RATES, CostModel  # noqa: E402
from shardc.tools.train import main  # noqa: E402
from shardc.training.auto_plan import predict_module  # noqa: E402
from shardc.training.axis import LayoutOverride, ShardingPolicy, check_overrides  # noqa: E402
from shardc.training.mesh import make_grid  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = f"{ROOT / 'examples' / 'torch_gpt.py'}:make"
LLAMA = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)


def test_predict_module_prices_a_tp_off_attention():
    shape = module_shape(load_task(EXAMPLE, vocab_size=64, block_size=16, seed=0), 16, 64)
    attn = LayoutOverride(r".*attn.*", False, False, name="attention", tp=False)
    check_overrides(shape.params, ShardingPolicy(2, False, False, (attn,)))  # it names the attention's parameters
    cost, grid = CostModel(DEFAULT_RATES), make_grid(4, 2)
    tp = predict_module(shape, ShardingPolicy(2, False, False), grid, 4, cost=cost)
    off = predict_module(shape, ShardingPolicy(2, False, False, (attn,)), grid, 4, cost=cost)

    def shard_reduces(p) -> int:
        return sum(c.count for c in p.collectives if c.axis == "shard")

    # per layer the MLP's row-parallel projection is left: two all_reduces (forward, backward)
    assert shard_reduces(tp) == 2 * shard_reduces(off) == 4 * len(shape.attention)
    assert off.compute_s > tp.compute_s and off.memory.state.params > tp.memory.state.params


def test_llama_trains_with_attention_tp_off(tmp_path, capsys):
    (tmp_path / "cfg.json").write_text(json.dumps(LLAMA))
    common = ["--torch-model", "hf:LlamaForCausalLM", "--model-config", str(tmp_path / "cfg.json"), "--simulate", "2", "--tp", "2", "--steps", "3", "--lr", "1e-2",
              "--per-device-batch", "2", "--block-size", "8", "--quiet", "--eval-every", "0", "--checkpoint-every", "0"]
    assert main([*common, "--policy-override", r".*self_attn.*=zero/notp", "--out", str(tmp_path / "mix")]) == 0
    assert main([*common, "--out", str(tmp_path / "tp")]) == 0

    def losses(d):
        return [float(r.split(",")[1]) for r in (d / "loss.csv").read_text().splitlines()[1:]]

    assert losses(tmp_path / "mix") == pytest.approx(losses(tmp_path / "tp"), rel=1e-5)
