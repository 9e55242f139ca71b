"""`--grad-reduce bf16`: the gradients' sums over the batch axis reduce bf16 copies
(`reduction-precision` after `shard-simplify`; `runtime/execute/bf16_sums.py` moves
their 16 bits). Which collectives it narrows in the step, the training numerics against
`--grad-reduce f32` (each rank's partial sum rounded to bf16 once and the sum rounded
once more: the loss moves by far less than test_precision.py's bf16 bound, REDUCE_TOL),
one rank (nothing to reduce: the float32 run), resume, and the command line."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from shardc.training.checkpoint import CheckpointOptions, step_dir
from shardc.training.data import CharTokenizer, split, synthetic_corpus
from shardc.training.gpt import GPTConfig
from shardc.training.pipeline import GRAD_REDUCE_BF16, step_pipeline
from shardc.training.trainer import TrainingConfig, train_simulated

TEXT = synthetic_corpus(4000, seed=0)
TOK = CharTokenizer.from_text(TEXT, pad_to=8)
TRAIN, _ = split(TOK.encode(TEXT))
MODEL = GPTConfig(n_layer=1, n_head=4, n_embd=32, block_size=8, vocab_size=TOK.vocab_size)
BASE = TrainingConfig(MODEL, per_device_batch=4, steps=3, warmup_steps=1, eval_every=0)
REDUCE_TOL = 5e-4  # measured: at most 9.3e-5 (plain DP, float32 products); 7.2e-5 FSDP and tp=2; 1.5e-5 the torch GPT


def run(world: int, grad_reduce: str, precision: str = "bf16", tp: int = 1, fsdp: bool = True, steps: int = 3, **kw):
    cfg = replace(BASE, per_device_batch=4 // (world // tp), steps=steps, precision=precision, grad_reduce=grad_reduce).shard(tp=tp, fsdp=fsdp)
    return train_simulated(cfg, TRAIN, world, **kw)


def test_pipeline_places_the_pass_after_simplify():
    passes = step_pipeline("bf16", "bf16")
    assert passes[passes.index("shard-simplify") + 1] == GRAD_REDUCE_BF16
    assert GRAD_REDUCE_BF16 not in step_pipeline("bf16") and GRAD_REDUCE_BF16 in step_pipeline("f32", "bf16")
    with pytest.raises(ValueError, match="grad_reduce must be one of f32, bf16"):
        step_pipeline("f32", "f16")


def _collectives(grad_reduce: str, world: int = 4, tp: int = 2):
    """The train step's sum collectives after the shard passes: (op name, grid axes,
    input element type, result elements) each."""
    from xdsl.dialects import func

    from shardc.training.pipeline import run_pipeline
    from shardc.training.step import Sharded, build_step_module

    cfg = BASE.shard(tp=tp, fsdp=True)
    grid = cfg.grid(world)
    module = build_step_module(MODEL, cfg.microbatch(grid), "float32", cfg.opt, Sharded(grid, cfg.plan, cfg.policy))
    passes = step_pipeline("bf16", grad_reduce)
    run_pipeline(module, passes[: passes.index("convert-shard-to-mpi")])
    (step,) = [f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == "train_step"]
    return [
        (op.name, op.grid_axes_tuple, type(op.input.type.element_type).__name__, int(np.prod(op.result.type.get_shape())))
        for op in step.walk()
        if op.name in ("shard.all_reduce", "shard.reduce_scatter")
    ]


def test_bf16_narrows_the_batch_sums_and_keeps_the_rest():
    f32, bf = _collectives("f32"), _collectives("bf16")
    assert [(n, a, e) for n, a, _, e in bf] == [(n, a, e) for n, a, _, e in f32]  # the same collectives
    batch = [(n, t, e) for n, a, t, e in bf if a == (0,)]
    assert any(n == "shard.reduce_scatter" for n, _, _ in batch) and any(n == "shard.all_reduce" and e > 1 for n, _, e in batch)
    for name, axes, element, elements in bf:
        gradient = axes == (0,) and elements > 1  # not tensor parallel's, not the loss's
        assert element == ("BFloat16Type" if gradient else "Float32Type"), (name, axes, elements)
    assert all(t == "Float32Type" for _, _, t, _ in f32)
    assert any(a == (1,) for _, a, _, _ in bf)  # tp's sums exist and stayed float32


@pytest.fixture(scope="module")
def fsdp2():
    return run(2, "f32"), run(2, "bf16")


def test_bf16_reduction_trains_to_tolerance_of_float32_reduction(fsdp2):
    f32, bf = fsdp2
    assert np.allclose(bf.losses, f32.losses, rtol=0, atol=REDUCE_TOL), (bf.losses, f32.losses)
    assert bf.losses[1:] != f32.losses[1:]  # the gradients were rounded
    assert all(p.dtype == np.float32 for p in bf.params.values())  # float32 masters
    assert sum(not np.array_equal(p, f32.params[k]) for k, p in bf.params.items()) == len(bf.params)  # every gradient was rounded


def test_bf16_reduction_under_tp_and_float32_products():
    tp = run(4, "bf16", tp=2)
    assert np.allclose(tp.losses, run(4, "f32", tp=2).losses, rtol=0, atol=REDUCE_TOL)
    plain = run(2, "bf16", precision="f32", fsdp=False)  # plain data parallel: all_reduces
    ref = run(2, "f32", precision="f32", fsdp=False)
    assert np.allclose(plain.losses, ref.losses, rtol=0, atol=REDUCE_TOL) and plain.losses[1:] != ref.losses[1:]


def test_one_rank_has_nothing_to_reduce():
    assert run(1, "bf16", fsdp=False).losses == run(1, "f32", fsdp=False).losses


def test_resume_is_bitwise(tmp_path):
    full = run(2, "bf16", steps=4, checkpoint=CheckpointOptions(Path(tmp_path), 2, 10))
    resumed = run(2, "bf16", steps=4, resume=step_dir(tmp_path, 2))
    assert resumed.losses == full.losses
    for k in full.params:
        assert np.array_equal(full.params[k], resumed.params[k]), k


SMALL = ["--n-layer", "1", "--n-embd", "32", "--block-size", "8", "--per-device-batch", "2", "--steps", "2", "--eval-every", "0", "--checkpoint-every", "0"]


def test_cli_runs_and_says_so(capsys, tmp_path):
    from shardc.tools.train import main

    assert main(["--simulate", "2", "--fsdp", "--precision", "bf16", "--grad-reduce", "bf16", *SMALL, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "grad-reduce bf16: gradients summed over the batch axis as bf16 copies" in out
    assert main(["--simulate", "2", "--fsdp", "--grad-reduce", "f32", *SMALL, "--quiet", "--out", str(tmp_path / "f32")]) == 0
    assert "grad-reduce" not in capsys.readouterr().out


def test_auto_plan_prices_bf16_gradient_reductions():
    """`--auto --grad-reduce bf16`: the gradients' collectives over batch at bf16's bytes
    (ZeRO's reduce_scatter, the replicated ones' all_reduce, plain DP's all_reduce), the
    loss's all_reduce and the gathers as before; the casts cost compute; one rank has
    nothing to reduce and no casts; the plan line says so."""
    from shardc.passes.cost_model import DEFAULT_RATES, AlphaBeta, CostModel, Rates
    from shardc.training.auto_plan import predict, prediction_text
    from shardc.training.axis import ShardingPolicy
    from shardc.training.mesh import make_grid

    model = GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=64)
    cm = CostModel(Rates(gemm_flops=1e9, bf16_gemm_flops=2e9, bandwidth=1e10, op_overhead=1e-6, collectives={k: AlphaBeta(1e-5, 1e-9) for k in DEFAULT_RATES.collectives}, source="test"))

    def pair(policy: ShardingPolicy, world: int):
        grid = make_grid(world, policy.tp)
        return [predict(model, policy, grid, 2, 1, cm, precision="bf16", grad_reduce=g) for g in ("f32", "bf16")]

    for policy in (ShardingPolicy(1, True, True), ShardingPolicy(1, True, False), ShardingPolicy(1, False, False)):
        f32, bf = pair(policy, 2)
        by_kind = lambda p: {(c.kind, c.count): c for c in p.collectives}  # noqa: E731
        a, b = by_kind(f32), by_kind(bf)
        assert a.keys() == b.keys()
        gradients = [k for k in a if k[0] in ("reduce_scatter", "all_reduce") and a[k].nbytes > 4]
        assert gradients
        for k in gradients:
            assert b[k].nbytes == a[k].nbytes / 2, (policy, k)
        for k in a:
            if k not in gradients:
                assert b[k] == a[k], (policy, k)  # the loss's all_reduce, the gathers
        assert bf.comm_s < f32.comm_s and bf.compute_s > f32.compute_s
        assert "gradients reduced in bf16" in prediction_text(bf) and "gradients reduced" not in prediction_text(f32)
    one_f32, one_bf = pair(ShardingPolicy(1, False, False), 1)
    assert (one_bf.compute_s, one_bf.comm_s) == (one_f32.compute_s, one_f32.comm_s)
    assert "gradients reduced" not in prediction_text(one_bf)


def test_torch_model_reduces_gradients_in_bf16(tmp_path, capsys):
    """`--torch-model` under `--grad-reduce bf16`: torch-mlir's step gets the same pass
    (its gradients' sums over batch), losses within tolerance of `--grad-reduce f32`'s,
    not equal."""
    pytest.importorskip("torch")
    pytest.importorskip("torch_mlir")
    import csv

    from shardc.tools.train import main

    example = str(Path(__file__).resolve().parents[3] / "examples" / "torch_gpt.py") + ":make"
    losses = {}
    for g in ("f32", "bf16"):
        out = tmp_path / g
        args = ["--torch-model", example, "--n-layer", "1", "--steps", "3", "--simulate", "2", "--fsdp", "--eval-every", "0", "--checkpoint-every", "0", "--precision", "bf16", "--grad-reduce", g]
        assert main([*args, "--emit-ir", str(tmp_path / f"ir-{g}"), "--out", str(out)]) == 0
        losses[g] = [float(r["loss"]) for r in csv.DictReader(open(out / "loss.csv"))]
    assert "grad-reduce bf16: gradients summed over the batch axis as bf16 copies" in capsys.readouterr().out
    assert np.allclose(losses["bf16"], losses["f32"], rtol=0, atol=REDUCE_TOL) and losses["bf16"] != losses["f32"]
    (narrowed,) = [p.read_text() for p in (tmp_path / "ir-bf16").glob("*reduction-precision*.mlir")]
    # a gradient's collective on bf16 (FSDP's bf16 all_gathers are mixed-precision's, there before)
    assert re.search(r"shard\.(reduce_scatter|all_reduce) .*xbf16> -> tensor<", narrowed), narrowed[:2000]
