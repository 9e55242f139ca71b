"""`--precision bf16`: the mixed-precision pass on the step program, training numerics
against float32 and across grids, checkpoints, the command line and the line a CPU
without bf16 units gets.

Tolerance: bf16 keeps 8 significant bits (relative rounding 2^-9 = 0.2%); a product of
bf16 operands accumulated in float32 is within a few of those roundings of the float32
product, so over 3 steps of a small GPT the loss (about 3.5) moves by well under 1%:
the bound used is 0.02 absolute (0.6%). Measured: 2e-4 from float32; 2 and 4 simulated
ranks equal to 1 rank."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from shardc.training.checkpoint import CheckpointOptions, step_dir
from shardc.training.data import CharTokenizer, split, synthetic_corpus
from shardc.training.gpt import GPTConfig
from shardc.training.trainer import TrainingConfig, compile_program, train_simulated

TEXT = synthetic_corpus(4000, seed=0)
TOK = CharTokenizer.from_text(TEXT, pad_to=8)
TRAIN, VAL = split(TOK.encode(TEXT))
MODEL = GPTConfig(n_layer=1, n_head=4, n_embd=32, block_size=8, vocab_size=TOK.vocab_size)
BASE = TrainingConfig(MODEL, per_device_batch=4, steps=3, warmup_steps=1, eval_every=0)
BF16_LOSS_TOL = 0.02


def run(world: int, tp: int = 1, fsdp: bool = False, precision: str = "bf16", steps: int = 3, **kw):
    cfg = replace(BASE, per_device_batch=4 // (world // tp), steps=steps, precision=precision).shard(tp=tp, fsdp=fsdp)
    return train_simulated(cfg, TRAIN, world, **kw)


@pytest.fixture(scope="module")
def one_rank():
    return run(1, precision="f32"), run(1)


def test_bf16_losses_match_float32_to_bf16_tolerance(one_rank):
    f32, bf = one_rank
    assert len(bf.losses) == 3
    assert np.allclose(bf.losses, f32.losses, rtol=0, atol=BF16_LOSS_TOL), (bf.losses, f32.losses)
    assert bf.losses != f32.losses  # the products did run in bf16
    for k, p in bf.params.items():  # float32 masters
        assert p.dtype == np.float32, k


@pytest.mark.parametrize("world,tp,fsdp", [(2, 1, True), (4, 2, True)], ids=["fsdp2", "tp2-fsdp4"])
def test_bf16_ranks_agree_with_one_rank(one_rank, world, tp, fsdp):
    _, bf1 = one_rank
    got = run(world, tp, fsdp)
    assert np.allclose(got.losses, bf1.losses, rtol=0, atol=BF16_LOSS_TOL), (got.losses, bf1.losses)


def test_bf16_resume_is_bitwise(tmp_path):
    full = run(2, fsdp=True, steps=4, checkpoint=CheckpointOptions(Path(tmp_path), 2, 10))
    resumed = run(2, fsdp=True, steps=4, resume=step_dir(tmp_path, 2))
    assert resumed.losses == full.losses
    for k in full.params:
        assert full.params[k].dtype == np.float32
        assert np.array_equal(full.params[k], resumed.params[k]), k


def test_bf16_checkpoint_resumes_under_float32(tmp_path):
    """Checkpoints hold float32 masters whatever the precision: a bf16 run's resumes in float32."""
    bf = run(1, steps=3, checkpoint=CheckpointOptions(Path(tmp_path), 2, 10))
    f32 = run(1, precision="f32", steps=3, resume=step_dir(tmp_path, 2))
    assert f32.losses[:2] == bf.losses[:2]
    assert abs(f32.losses[2] - bf.losses[2]) <= BF16_LOSS_TOL and f32.losses[2] != bf.losses[2]


def _shard_stage(precision: str, world: int = 2, fsdp: bool = True):
    from shardc.training.pipeline import run_pipeline, step_pipeline
    from shardc.training.step import Sharded, build_step_module

    cfg = BASE.shard(fsdp=fsdp)
    grid = cfg.grid(world)
    module = build_step_module(MODEL, cfg.microbatch(grid), "float32", cfg.opt, Sharded(grid, cfg.plan, cfg.policy))
    passes = step_pipeline(precision)
    run_pipeline(module, passes[: passes.index("convert-shard-to-mpi")])
    return module


def _ops_by_function(module, name: str):
    from xdsl.dialects import func

    return {f.sym_name.data: [op for op in f.walk() if op.name == name] for f in module.ops if isinstance(f, func.FuncOp)}


def _gathered_bytes(module) -> int:
    total = 0
    for op in _ops_by_function(module, "shard.all_gather")["train_step"]:
        t = op.results[0].type
        total += int(np.prod(t.get_shape())) * (2 if type(t.element_type).__name__ == "BFloat16Type" else 4)
    return total


def test_fsdp_gathers_weights_in_bf16_and_adamw_stays_float32():
    bf, f32 = _shard_stage("bf16"), _shard_stage("f32")
    gathers = _ops_by_function(bf, "shard.all_gather")["train_step"]
    assert len(gathers) == len(_ops_by_function(f32, "shard.all_gather")["train_step"])
    assert sum(type(op.results[0].type.element_type).__name__ == "BFloat16Type" for op in gathers) >= 4  # wte, qkv, proj, fc, ...
    assert _gathered_bytes(bf) < 0.55 * _gathered_bytes(f32)  # the weights' half; biases stay float32
    for fn, ops in _ops_by_function(bf, "arith.truncf").items():
        assert (not ops) if fn == "adamw_step" else ops, fn


def test_compile_program_keys_on_precision():
    cfg = replace(BASE, precision="bf16")
    a = compile_program(cfg, cfg.grid(1))
    b = compile_program(replace(BASE, precision="f32"), cfg.grid(1))
    assert a.stages[1].name.startswith("mixed-precision") and not b.stages[1].name.startswith("mixed-precision")


# ---------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------

SMALL = ["--n-layer", "1", "--n-embd", "32", "--block-size", "8", "--per-device-batch", "2", "--steps", "2", "--eval-every", "0", "--checkpoint-every", "0"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--precision", "fp16"], "invalid choice: 'fp16'"),
        (["--grad-reduce", "f16"], "invalid choice: 'f16'"),
    ],
)
def test_bad_precision_flags_give_one_line(args, message, capsys, tmp_path):
    from shardc.tools.train import main

    assert main([*args, "--out", str(tmp_path)]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err


def test_cli_bf16_says_what_runs_the_products(capsys, tmp_path, monkeypatch):
    from shardc.tools.train import main

    monkeypatch.setenv("SHARDC_BF16_UNITS", "1")
    assert main(["--simulate", "1", "--precision", "bf16", *SMALL, "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "precision bf16: bf16 products into float32" in out
    assert "no bf16 units" not in out


def test_no_bf16_units_one_line_and_emulated_run(capsys, tmp_path, monkeypatch):
    from shardc.runtime.execute.kernels import bf16_gemm
    from shardc.tools.train import main

    monkeypatch.setenv("SHARDC_BF16_UNITS", "0")
    monkeypatch.delenv("SHARDC_BF16_GEMM", raising=False)
    assert bf16_gemm.backend() == "numpy"
    assert main(["--simulate", "1", "--precision", "bf16", *SMALL, "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "has no bf16 units" in ln]
    assert len(lines) == 1, out
    assert "runs emulated" in lines[0] and "x a float32 product's time, measured now" in lines[0]
    assert (tmp_path / "loss.csv").exists()


def test_bf16_units_check_reads_cpuinfo_unless_overridden(monkeypatch):
    from shardc.runtime.execute.kernels import bf16_run

    monkeypatch.setenv("SHARDC_BF16_UNITS", "1")
    assert bf16_run.bf16_units()
    monkeypatch.setenv("SHARDC_BF16_UNITS", "0")
    assert not bf16_run.bf16_units()
    monkeypatch.delenv("SHARDC_BF16_UNITS")
    try:
        flags = next(ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")).split()
    except (OSError, StopIteration):
        flags = []
    assert bf16_run.bf16_units() == bool({"amx_bf16", "avx512_bf16"} & set(flags))


def test_pass_output_runs_to_bf16_tolerance_of_float32():
    """The pass's IR (named products rewritten, bf16 copies) runs on the runtime (the bf16
    GEMM) within bf16 rounding of the float32 products."""
    from shardc.launch import run_program

    text = (Path(__file__).resolve().parents[2] / "filecheck" / "passes" / "mixed-precision.mlir").read_text().split("// -----")[-1]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (3, 5), (2, 4, 3), (2, 3, 5))]
    want = [args[0] @ args[1], args[2] @ args[3]]
    got = run_program(text, args, ranks=1, pipeline="mixed-precision")
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        assert np.allclose(g, w, rtol=0, atol=2 ** -7 * 3 * np.abs(w).max())
        assert not np.array_equal(g, w)  # rounded operands: not the float32 product


def test_torch_model_trains_in_bf16(tmp_path, capsys):
    """`--torch-model` under `--precision bf16`: torch-mlir's products (linalg.matmul) go
    through the pass too; losses within bf16 tolerance of the float32 run, not equal."""
    pytest.importorskip("torch")
    pytest.importorskip("torch_mlir")
    import csv

    from shardc.tools.train import main

    example = str(Path(__file__).resolve().parents[3] / "examples" / "torch_gpt.py") + ":make"
    losses = {}
    for p in ("f32", "bf16"):
        out = tmp_path / p
        assert main(["--torch-model", example, "--n-layer", "1", "--steps", "3", "--eval-every", "0", "--checkpoint-every", "0", "--quiet", "--precision", p, "--out", str(out)]) == 0
        losses[p] = [float(r["loss"]) for r in csv.DictReader(open(out / "loss.csv"))]
    text = capsys.readouterr().out
    assert text.count("precision bf16: bf16 products into float32") == 1
    assert np.allclose(losses["bf16"], losses["f32"], rtol=0, atol=BF16_LOSS_TOL) and losses["bf16"] != losses["f32"]


def test_fusion_takes_a_bf16_cast_into_its_chain(monkeypatch):
    """The runtime's elementwise fusion takes a cast to bf16 into its producer's chain:
    the fused kernel stores the bf16 bits in the same pass (`kernels/fused.py`'s
    BF16_BITS), the same bits as the numpy path's cast; a chain doing arithmetic on
    bf16 keeps the cast apart (the numpy path is all it has)."""
    from xdsl.parser import Parser

    from shardc.context import make_context
    from shardc.runtime.codegen.compile import compile_text
    from shardc.runtime.codegen.fusion import fuse_elementwise
    from shardc.runtime.execute.kernels import bf16_run, fused_run

    def text(n: int, then: str = "") -> str:
        t, tb = f"tensor<{n}xf32>", f"tensor<{n}xbf16>"
        return f"""
#m = affine_map<(i) -> (i)>
func.func @f(%x: {t}) -> ({tb}) {{
  %e = tensor.empty() : {t}
  %t = linalg.generic {{indexing_maps = [#m, #m], iterator_types = ["parallel"]}} ins(%x : {t}) outs(%e : {t}) {{
  ^bb0(%a: f32, %o: f32):
    %y = math.tanh %a : f32
    linalg.yield %y : f32
  }} -> {t}
  %s = linalg.generic {{indexing_maps = [#m, #m], iterator_types = ["parallel"]}} ins(%t : {t}) outs(%e : {t}) {{
  ^bb0(%a: f32, %o: f32):
    %y = arith.mulf %a, %a : f32
    linalg.yield %y : f32
  }} -> {t}
  %eb = tensor.empty() : {tb}
  %c = linalg.generic {{indexing_maps = [#m, #m], iterator_types = ["parallel"]}} ins(%s : {t}) outs(%eb : {tb}) {{
  ^bb0(%a: f32, %o: bf16):
    %y = arith.truncf %a : f32 to bf16
    {then}linalg.yield %y : bf16
  }} -> {tb}
  return %c : {tb}
}}
"""

    module = Parser(make_context(), text(8)).parse_module()
    assert fuse_elementwise(module) == 2  # tanh, the square and the cast: one op
    assert sum(op.name == "linalg.generic" for op in module.walk()) == 1
    apart = Parser(make_context(), text(8, "%z = arith.addf %y, %y : bf16\n    ")).parse_module()
    assert fuse_elementwise(apart) == 1  # bf16 arithmetic in the cast's body: kept apart

    if fused_run._numba() is None:
        pytest.skip("numba (the [fast] extra) is not installed")
    ran = []
    call = bf16_run.Bf16Results.__call__
    monkeypatch.setattr(bf16_run.Bf16Results, "__call__", lambda self, a, s: ran.append(r := call(self, a, s)) or r)
    monkeypatch.setattr(fused_run, "MIN_ELEMENTS", 0)
    n = 1000
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32) * 3
    x[7] = np.nan
    cm = compile_text(text(n))
    monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    want = np.asarray(cm.call("f", x))
    monkeypatch.setenv("SHARDC_KERNELS", "auto")
    got = np.asarray(cm.call("f", x))
    assert ran and ran[-1] is not None  # the kernel ran and stored the bits
    assert got.dtype == bf16_run.bfloat16() and got.shape == (n,)
    assert np.array_equal(np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32)))
    ok = ~np.isnan(want.astype(np.float32))
    assert np.array_equal(got.view(np.uint16)[ok], want.view(np.uint16)[ok])
