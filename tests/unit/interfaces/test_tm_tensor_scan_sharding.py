"""tm_tensor.scan sharded: partitioned (sharding-propagation, shard-partition), lowered
(convert-shard-to-mpi) and run on 2 and 4 simulated ranks against PyTorch's cumulative
ops and the step-by-step definition; a split along the scan dimension moves one slice
per rank (the totals), never the data. Then OPT as transformers builds it, whose
position ids are a cumsum, with its sequence split."""

from __future__ import annotations

import re

import numpy as np
import pytest

from shardc.launch import run_program
from shardc.tools.cli import apply_passes, parse_module, pipeline_passes
from shardc.ir.printer import module_to_string

LOWERED = "builtin.module(sharding-propagation,shard-partition,canonicalize,convert-shard-to-mpi,canonicalize)"

PROGRAM = """\
shard.grid @grid(shape = {grid})
func.func @main(%arg0: tensor<{shape}x{t}>, %acc: tensor<{acc_shape}{t}>) -> (tensor<{shape}x{t}>, tensor<{acc_shape}{t}>) {{
  %s = shard.sharding @grid split_axes = {split} : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<{shape}x{t}>
  %o = tensor.empty() : tensor<{shape}x{t}>
  %r:2 = tm_tensor.scan dimension({dim}) inclusive({inclusive}) ins(%x : tensor<{shape}x{t}>) outs(%o, %acc : tensor<{shape}x{t}>, tensor<{acc_shape}{t}>) {{
  ^bb0(%prev: {t}, %cur: {t}):
    %c = {combiner} %prev, %cur : {t}
    tm_tensor.yield %c : {t}
  }} -> tensor<{shape}x{t}>, tensor<{acc_shape}{t}>
  return %r#0, %r#1 : tensor<{shape}x{t}>, tensor<{acc_shape}{t}>
}}
"""


def program(grid: str, split: str, shape: tuple[int, ...], dim: int, t: str, combiner: str, inclusive: bool) -> str:
    acc = [n for d, n in enumerate(shape) if d != dim]
    return PROGRAM.format(
        grid=grid, split=split, shape="x".join(map(str, shape)), acc_shape="".join(f"{n}x" for n in acc),
        t=t, dim=dim, combiner=combiner, inclusive="true" if inclusive else "false",
    )


def stepwise(step, x: np.ndarray, acc: np.ndarray, dim: int, inclusive: bool) -> tuple[np.ndarray, np.ndarray]:
    """torch-mlir's ScanOp one step at a time along `dim`."""
    xs = np.moveaxis(x, dim, 0)
    out = np.empty_like(xs)
    out[0] = xs[0] if inclusive else acc
    for i in range(1, len(xs)):
        out[i] = step(out[i - 1], xs[i] if inclusive else xs[i - 1])
    return np.moveaxis(out, 0, dim), out[-1]


def partitioned(text: str) -> str:
    module = parse_module(text, "<scan>")
    apply_passes(module, pipeline_passes("sharding-propagation,shard-partition"))
    return module_to_string(module)


# grid, split_axes of the (rows, scan dimension) input, ranks
SPLITS = [
    ("2", "[[], [0]]", 2),
    ("4", "[[], [0]]", 4),
    ("2x2", "[[0], [1]]", 4),
    ("2x2", "[[], [0, 1]]", 4),
    ("2x2", "[[], [1, 0]]", 4),
    ("4", "[[0]]", 4),
]


@pytest.mark.parametrize("grid, split, ranks", SPLITS)
@pytest.mark.parametrize("torch_op, combiner", [("cumsum", "arith.addf"), ("cumprod", "arith.mulf"), ("cummax", "arith.maximumf"), ("cummin", "arith.minimumf")])
def test_inclusive_split_scan_matches_torch(grid: str, split: str, ranks: int, torch_op: str, combiner: str) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install -e '.[torch]'")
    rng = np.random.default_rng(ranks)
    x = (rng.uniform(0.6, 1.4, (4, 8)) * rng.choice([-1.0, 1.0], (4, 8))).astype(np.float32)
    acc = np.zeros(4, np.float32)
    out, last = run_program(program(grid, split, x.shape, 1, "f32", combiner, True), [x, acc], ranks=ranks, pipeline=LOWERED)
    want = getattr(torch, torch_op)(torch.from_numpy(x), 1)
    want = (want.values if torch_op in ("cummax", "cummin") else want).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(last, want[:, -1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grid, split, ranks", SPLITS)
@pytest.mark.parametrize(
    "combiner, step",
    [("arith.addi", np.add), ("arith.maxsi", np.maximum), ("arith.minsi", np.minimum), ("arith.muli", np.multiply), ("arith.xori", np.bitwise_xor)],
)
def test_exclusive_integer_split_scan(grid: str, split: str, ranks: int, combiner: str, step) -> None:
    """Exclusive scans start from the accumulator: only the first rank's part does, the
    others from the totals before them."""
    rng = np.random.default_rng(5)
    x = rng.integers(-4, 5, (4, 8)).astype(np.int64)
    acc = rng.integers(-4, 5, 4).astype(np.int64)
    out, last = run_program(program(grid, split, x.shape, 1, "i64", combiner, False), [x, acc], ranks=ranks, pipeline=LOWERED)
    want, want_last = stepwise(step, x, acc, 1, False)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(last, want_last)


def test_scan_along_a_split_dimension_moves_only_the_totals() -> None:
    text = partitioned(program("4", "[[0], []]", (8, 6), 0, "f32", "arith.addf", True))
    gathers = re.findall(r"shard\.all_gather .* : tensor<(\w+)xf32> -> tensor<(\w+)xf32>", text)
    # the totals (one row per rank) and the accumulator result's last row: never the 2x6 parts
    assert gathers == [("1x6", "4x6"), ("1x6", "4x6")], text
    assert "shard.all_slice" not in text and "shard.all_reduce" not in text
    assert text.count("tm_tensor.scan") == 2 and "inclusive(false) ins(%all_gather" in text


def test_rows_split_scan_moves_nothing() -> None:
    text = partitioned(program("2", "[[0]]", (4, 6), 1, "f32", "arith.addf", True))
    assert "shard.all_" not in text
    assert "tm_tensor.scan dimension(1) inclusive(true) ins(%arg0 : tensor<2x6xf32>)" in text


def test_scan_without_neutral_element_runs_whole() -> None:
    """previous - current has no neutral element: the scan dimension is not split, the
    input is gathered at the boundary, and the numbers are still the definition's."""
    text = program("2", "[[], [0]]", (3, 8), 1, "f32", "arith.subf", True)
    assert re.search(r"shard\.all_gather .* tensor<3x4xf32> -> tensor<3x8xf32>", partitioned(text))
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    acc = np.zeros(3, np.float32)
    out, _ = run_program(text, [x, acc], ranks=2, pipeline=LOWERED)
    np.testing.assert_array_equal(out, stepwise(np.subtract, x, acc, 1, True)[0])


@pytest.mark.slow
@pytest.mark.parametrize("split, ranks", [({0: [[], [0]]}, 2), ({0: [[], [0]]}, 4), ({0: [[0]]}, 4)])
def test_opt_position_ids_with_sequence_split(split, ranks: int) -> None:
    """OPT as transformers builds it computes its position ids with a cumsum of the
    attention mask: split by sequence, each rank scans its part and the totals move."""
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install -e '.[torch]'")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[torch]'")
    from shardc.frontends.annotate import annotate_arguments
    from shardc.frontends.torch import export_module

    torch.manual_seed(0)
    config = transformers.OPTConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=64,
        max_position_embeddings=64, word_embed_proj_dim=32, use_cache=False,
    )
    model = transformers.OPTForCausalLM(config).eval()
    ids = torch.randint(3, 64, (4, 8))
    exported = export_module(model, [ids])
    assert exported.text.count("tm_tensor.scan") == 1
    text = annotate_arguments(exported.text, (ranks,), split)
    if split[0] == [[], [0]]:
        part = partitioned(text)
        assert re.search(rf"shard\.all_gather .* tensor<4x1xf32> -> tensor<4x{ranks}xf32>", part)
    (logits,) = run_program(text, exported.arguments(model, [ids]), ranks=ranks)
    with torch.no_grad():
        want = model(ids).logits.numpy()
    assert np.abs(logits - want).max() <= 1e-5 * np.abs(want).max()


@pytest.mark.slow
@pytest.mark.parametrize("parallel", ["data", "tensor"])
def test_cumsum_trains_like_torch(parallel: str) -> None:
    """A cumsum along the sequence of activations: its backward is a scan too (torch's
    reversed cumsum). 3 AdamW steps on 2 ranks, data parallel or with the hidden
    features (the scan's other dimension) split, against torch.optim.AdamW."""
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install -e '.[torch]'")
    import copy

    from shardc.frontends.torch_train import train_module
    from shardc.training.axis import ShardingPlan, ShardingPolicy

    class PrefixSum(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(6, 6)
            self.b = torch.nn.Linear(6, 3)

        def forward(self, x):
            return self.b(torch.cumsum(torch.tanh(self.a(x)), dim=1))

    torch.manual_seed(0)
    model = PrefixSum()
    x, y = torch.randn(4, 5, 6), torch.randn(4, 5, 3)
    ref = copy.deepcopy(model)
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ref(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    kwargs = {}
    if parallel == "tensor":
        kwargs = dict(
            axes={r"a\.weight": ("n_hidden", None), r"a\.bias": ("n_hidden",), r"b\.weight": (None, "n_hidden")},
            plan=ShardingPlan(tp_rules={"n_hidden": "shard"}),
            policy=ShardingPolicy(tp=2, zero=False),
        )
    result = train_module(copy.deepcopy(model), [(x, y)] * 3, torch.nn.functional.mse_loss, world=2, steps=3, lr=1e-2, **kwargs)
    np.testing.assert_allclose([s.loss for s in result.log], losses, rtol=1e-5)
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(result.params[name], p.detach().numpy(), rtol=1e-4, atol=1e-6)
