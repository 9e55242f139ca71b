"""The whole compile through the cache: `shardc-run`, `run_program`, the torch trainer's
step and the sampler skip parsing and the pass pipeline on a hit (counted by patching
the functions that run passes), miss on any change of what the program is made of,
rebuild a corrupt entry with one warning, give equal results on hit and miss, and
report bad input exactly as without a cache (nothing is stored for it)."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from shardc.runtime.codegen import cache
from shardc.tools import run as run_tool

ROOT = Path(__file__).resolve().parents[3]
MLP = ROOT / "examples" / "mlp.mlir"
PLAIN = """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
"""
MLP_INPUTS = ["--input", "x=random:seed=1", "--input", "w1=random:seed=2", "--input", "w2=random:seed=3"]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(d))
    monkeypatch.delenv("SHARDC_CACHE", raising=False)
    monkeypatch.setenv("SHARDC_CACHE_DEBUG", "1")
    cache._WARNED.clear()  # pyright: ignore[reportPrivateUsage]
    yield d


@pytest.fixture
def passes(monkeypatch):
    """How many times shardc-run parsed a program and ran a pass pipeline."""
    counts = {"parse": 0, "passes": 0}
    parse, apply = run_tool.parse_module, run_tool.apply_passes

    def counted_parse(*a, **k):
        counts["parse"] += 1
        return parse(*a, **k)

    def counted_apply(*a, **k):
        counts["passes"] += 1
        return apply(*a, **k)

    monkeypatch.setattr(run_tool, "parse_module", counted_parse)
    monkeypatch.setattr(run_tool, "apply_passes", counted_apply)
    return counts


def _entries(d: Path) -> list[Path]:
    return sorted(d.rglob("*.entry"))


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = run_tool.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _lookups(stderr: str) -> list[str]:
    return [ln.split()[3] for ln in stderr.splitlines() if ln.startswith("shardc: compile cache: ")]


# --- shardc-run ---------------------------------------------------------------------------


def test_shardc_run_hit_skips_parse_and_pipeline(passes, tmp_path, _own_cache):
    cold = _run(str(MLP), "--simulate", "4", *MLP_INPUTS, "--output", str(tmp_path / "cold"))
    assert cold[0] == 0, cold[2]
    assert passes == {"parse": 1, "passes": 1} and _lookups(cold[2]) == ["miss"]
    assert len(_entries(_own_cache)) == 1
    warm = _run(str(MLP), "--simulate", "4", *MLP_INPUTS, "--output", str(tmp_path / "warm"), "--timing")
    assert warm[0] == 0, warm[2]
    assert passes == {"parse": 1, "passes": 1}, "a hit parsed or ran passes"
    assert _lookups(warm[2]) == ["hit"]
    assert "loaded the compiled program from the compile cache" in warm[1]
    for name in ("result0.npy",):
        np.testing.assert_array_equal(np.load(tmp_path / "cold" / name), np.load(tmp_path / "warm" / name))
    assert len(_entries(_own_cache)) == 1


def test_shardc_run_boundary_from_a_hit(passes):
    """What prepare reads off the transformed module (entry, boundary types and
    shardings, sharded) comes back equal from the entry, without the module."""
    import argparse

    ns = argparse.Namespace(program=str(MLP), entry=None, pipeline="shard-to-mpi-pipeline", simulate=4)
    cold, warm = run_tool.prepare(ns), run_tool.prepare(ns)
    assert (cold.cached, warm.cached) == ("compiled", "cache")
    assert passes["passes"] == 1
    assert warm.entry == cold.entry and warm.sharded == cold.sharded
    assert [(b.label, str(b.type), b.sharding) for b in warm.args] == [(b.label, str(b.type), b.sharding) for b in cold.args]
    assert [(b.label, str(b.type), b.sharding) for b in warm.results] == [(b.label, str(b.type), b.sharding) for b in cold.results]
    assert any(b.sharding is not None for b in warm.args)
    assert {op.name for op in warm.module.walk()} == {op.name for op in cold.module.walk()}  # parsed on demand


@pytest.mark.parametrize(
    "change",
    ["text", "pipeline", "entry", "world", "path"],
)
def test_shardc_run_misses_on_any_change(change, passes, tmp_path, _own_cache):
    prog = tmp_path / "p.mlir"
    prog.write_text(MLP.read_text())
    base = [str(prog), "--simulate", "4", *MLP_INPUTS, "-q"]
    assert _run(*base)[0] == 0
    argv = list(base)
    if change == "text":
        prog.write_text(MLP.read_text() + "\n// the same program, another text\n")
    elif change == "pipeline":
        argv += ["--pipeline", "shard-to-mpi-pipeline"]
    elif change == "entry":
        argv += ["--entry", "mlp"]
    elif change == "world":  # a program without shardings runs on any number of ranks
        prog.write_text(PLAIN)
        assert _run(str(prog), "--simulate", "4", "--input", "x=ones", "-q")[0] == 0
        argv = [str(prog), "--simulate", "2", "--input", "x=ones", "-q"]
    else:
        other = tmp_path / "q.mlir"
        other.write_text(prog.read_text())
        argv[0] = str(other)
    code, _, err = _run(*argv)
    assert code == 0, err
    n = 3 if change == "world" else 2
    assert _lookups(err) == ["miss"] and passes["parse"] == n
    assert len(_entries(_own_cache)) == n


def test_corrupt_entry_is_rebuilt_with_one_warning(passes, _own_cache):
    assert _run(str(MLP), "--simulate", "4", *MLP_INPUTS)[0] == 0
    (entry,) = _entries(_own_cache)
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    code, out, err = _run(str(MLP), "--simulate", "4", *MLP_INPUTS)
    assert code == 0, err
    warnings = [ln for ln in err.splitlines() if ln.startswith("shardc: warning: compile cache:")]
    assert len(warnings) == 1 and "corrupt entry" in warnings[0] and "rebuilding" in warnings[0], err
    assert passes["passes"] == 2
    cache._WARNED.clear()  # pyright: ignore[reportPrivateUsage]
    code, out2, err = _run(str(MLP), "--simulate", "4", *MLP_INPUTS)
    assert code == 0 and _lookups(err) == ["hit"] and "warning" not in err
    assert out2 == out and passes["passes"] == 2


def test_cache_off_compiles_every_time(passes, monkeypatch, _own_cache):
    monkeypatch.setenv("SHARDC_CACHE", "0")
    outs = [_run(str(MLP), "--simulate", "4", *MLP_INPUTS) for _ in range(2)]
    assert all(o[0] == 0 for o in outs) and outs[0][1] == outs[1][1]
    assert passes["passes"] == 2 and [_lookups(o[2]) for o in outs] == [["miss"], ["miss"]]
    assert not _own_cache.exists()


BAD = [
    ("parse", "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %b : tensor<4xf32>\n}\n", []),
    ("pipeline", MLP.read_text(), ["--pipeline", "no-such-pass"]),
    ("entry", MLP.read_text(), ["--entry", "nope"]),
    ("pass", MLP.read_text().replace("shard.grid @grid(shape = 4)", "shard.grid @grid(shape = 3)"), []),
]


@pytest.mark.parametrize(("what", "text", "extra"), BAD, ids=[b[0] for b in BAD])
def test_errors_are_reported_the_same_and_never_cached(what, text, extra, tmp_path, _own_cache, monkeypatch):
    prog = tmp_path / "bad.mlir"
    prog.write_text(text)
    argv = [str(prog), "--simulate", "4", "--input", "x=zeros", "--input", "w1=zeros", "--input", "w2=zeros", *extra]
    first, second = _run(*argv), _run(*argv)
    monkeypatch.setenv("SHARDC_CACHE", "0")
    off = _run(*argv)
    strip = lambda err: "\n".join(ln for ln in err.splitlines() if not ln.startswith("shardc: compile cache: "))  # noqa: E731
    assert first[0] == 1 and second[0] == 1 and off[0] == 1, first
    assert strip(first[2]) == strip(second[2]) == strip(off[2]) and strip(first[2]), first[2]
    assert "Traceback" not in first[2]
    assert _lookups(second[2]) in (["miss"], [])  # looked up and compiled again, or refused before
    assert _entries(_own_cache) == []


def test_diagnostics_of_a_compile_are_replayed_on_a_hit(passes):
    """Remarks a pass wrote while compiling come out the same on a hit."""
    argv = [str(MLP), "--simulate", "4", *MLP_INPUTS, "-q", "--pipeline", "sharding-propagation{explain=true},shard-partition"]
    cold, warm = _run(*argv), _run(*argv)
    assert cold[0] == 0 and warm[0] == 0, cold[2]
    strip = lambda err: [ln for ln in err.splitlines() if not ln.startswith("shardc: compile cache: ")]  # noqa: E731
    assert "remark" in cold[2] and strip(cold[2]) == strip(warm[2])
    assert _lookups(warm[2]) == ["hit"] and passes["passes"] == 1


# --- run_program --------------------------------------------------------------------------


def _mlp_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in (("x", (16, 32)), ("w1", (32, 64)), ("w2", (64, 32)))}


def test_run_program_hit_skips_the_pipeline(passes, capsys, _own_cache):
    from shardc.launch import run_program

    text, inputs = MLP.read_text(), _mlp_inputs()
    (a,) = run_program(text, inputs, ranks=4, pipeline="shard-to-mpi-pipeline")
    (b,) = run_program(text, inputs, ranks=4, pipeline="shard-to-mpi-pipeline")
    np.testing.assert_array_equal(a, b)
    x, w1, w2 = inputs["x"], inputs["w1"], inputs["w2"]
    np.testing.assert_allclose(b, np.maximum(x @ w1, 0) @ w2, rtol=1e-4, atol=1e-3)
    assert passes == {"parse": 1, "passes": 1}
    assert _lookups(capsys.readouterr().err) == ["miss", "hit"]
    (c,) = run_program(text, inputs, ranks=4)  # another pipeline: another key
    np.testing.assert_allclose(c, a, rtol=1e-5, atol=1e-5)
    x1 = np.ones(4, np.float32)
    assert [run_program(PLAIN, [x1], ranks=n)[0].tolist() for n in (1, 2)] == [[2.0] * 4] * 2  # another world: another key
    assert passes["passes"] == 4 and len(_entries(_own_cache)) == 4


def test_run_program_error_is_the_same_on_every_call(_own_cache):
    from shardc.launch import ProgramError, run_program

    bad = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %b : tensor<4xf32>\n}\n"
    messages = []
    for _ in range(2):
        with pytest.raises(ProgramError) as e:
            run_program(bad, [np.zeros(4, np.float32)], name="bad.mlir")
        messages.append(str(e.value))
    assert messages[0] == messages[1] and messages[0].startswith("bad.mlir:") and "undeclared SSA value" in messages[0]
    assert _entries(_own_cache) == []


# --- the sampler --------------------------------------------------------------------------


def test_sampler_compiles_through_the_cache(monkeypatch):
    from shardc.training import sample
    from shardc.training.axis import ShardingPlan, ShardingPolicy
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import Grid

    runs = []
    real = sample.run_pipeline
    monkeypatch.setattr(sample, "run_pipeline", lambda *a, **k: runs.append(1) or real(*a, **k))
    model = GPTConfig(n_layer=1, n_head=2, n_embd=8, block_size=4, vocab_size=16)
    grid, policy, plan = Grid(1, 2), ShardingPolicy(tp=2, zero=False), ShardingPlan()
    cold = sample.Sampler(model, grid, policy, plan)
    warm = sample.Sampler(model, grid, policy, plan)
    assert (cold.cached, warm.cached, len(runs)) == ("compiled", "cache", 1)
    params = dict(init_params(model, seed=0))
    ids = [sample.generate(s, params, [1, 2], 3, temperature=0.0) for s in (cold, warm)]
    np.testing.assert_array_equal(ids[0], ids[1])
    other = sample.Sampler(model, Grid(2, 1), ShardingPolicy(tp=1, zero=False), plan)  # another grid: another key
    assert other.cached == "compiled" and len(runs) == 2


# --- the torch trainer --------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlp_step():
    pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
    pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")
    import torch
    import torch.nn.functional as F

    from shardc.frontends.torch_train import export_train_step
    from shardc.testing import torch_models as tm

    torch.manual_seed(0)
    model = tm.MLP()
    x, y = torch.randn(8, 16), torch.randn(8, 8)
    return export_train_step(model, (x,), (y,), F.mse_loss), export_train_step(model, (x,), (y,), F.mse_loss, func_name="eval_loss", grads=False)


def _torch_build(exported, **changes):
    from shardc.frontends.torch_train import TORCH_ADAMW, TorchStepProgram
    from shardc.training.axis import ShardingPlan, ShardingPolicy
    from shardc.training.mesh import Grid

    kw = dict(
        axes={r"fc1\.weight": ("n_hidden", None), r"fc1\.bias": ("n_hidden",), r"fc2\.weight": (None, "n_hidden")},
        plan=ShardingPlan(tp_rules={"n_hidden": "shard"}), policy=ShardingPolicy(tp=2, zero=False), grid=Grid(1, 2), opt=TORCH_ADAMW,
    )
    kw.update(changes)
    return TorchStepProgram.build(exported, kw.pop("axes"), kw.pop("plan"), kw.pop("policy"), kw.pop("grid"), kw.pop("opt"), **kw)


@pytest.fixture
def pipeline_runs(monkeypatch):
    from shardc.training import pipeline

    runs = []
    real = pipeline.run_pipeline
    monkeypatch.setattr(pipeline, "run_pipeline", lambda *a, **k: runs.append(1) or real(*a, **k))
    return runs


def test_torch_step_hit_skips_the_pipeline(mlp_step, pipeline_runs):
    exported, _ = mlp_step
    cold = _torch_build(exported)
    assert cold.cached == "compiled" and len(pipeline_runs) == 2  # before and after lowering
    warm = _torch_build(exported)
    assert warm.cached == "cache" and len(pipeline_runs) == 2
    assert warm.shard_collectives == cold.shard_collectives and warm.collectives == cold.collectives
    assert [s.name for s in warm.stages] == [s.name for s in cold.stages]
    assert {op.name for op in warm.module.walk()} == {op.name for op in cold.module.walk()}
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(t[1]).astype(t[0]) if t[0] is not None else np.float32(0) for t in warm.compiled.arg_specs("adamw_step")]
    args[-3:] = [np.float32(1e-2), np.int64(1), np.float32(1.0)]
    from shardc.runtime.execute.comm import run_simulated

    outs = [run_simulated(2, lambda *a, p=p: p.call("adamw_step", *a), per_rank_args=[list(map(np.copy, args))] * 2) for p in (cold, warm)]
    for a, b in zip(outs[0][0], outs[1][0]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_torch_step_misses_on_any_change(mlp_step, pipeline_runs):
    from dataclasses import replace

    from shardc.frontends.torch_train import TORCH_ADAMW
    from shardc.training.axis import ShardingPolicy
    from shardc.training.mesh import Grid

    exported, eval_step = mlp_step
    _torch_build(exported)
    changes = [
        dict(exported=replace(exported, text=exported.text + "\n")),
        dict(policy=ShardingPolicy(tp=2, zero=True)),
        dict(grid=Grid(2, 1), policy=ShardingPolicy(tp=1, zero=False)),
        dict(opt=replace(TORCH_ADAMW, weight_decay=0.1)),
        dict(no_decay=[r".*\.bias"]),
        dict(axes={r"fc1\.weight": ("n_hidden", None), r"fc2\.weight": (None, "n_hidden")}),
        dict(eval_step=eval_step),
    ]
    for k, change in enumerate(changes):
        ex = change.pop("exported", exported)
        prog = _torch_build(ex, **change)
        assert prog.cached == "compiled", changes[k]
        assert len(pipeline_runs) == 2 * (k + 2), changes[k]


def test_torch_step_keep_text_compiles_afresh(mlp_step, pipeline_runs):
    exported, _ = mlp_step
    _torch_build(exported)
    prog = _torch_build(exported, keep_text=True)
    assert prog.cached == "compiled" and len(pipeline_runs) == 4
    assert all(text for _, text in prog.stage_texts())


def test_a_pass_registered_from_outside_is_part_of_the_key(tmp_path, monkeypatch):
    """The compiler's identity hashes shardc's own sources only: a pass module from
    elsewhere enters the key with its source's hash, so editing it misses."""
    import sys

    from shardc import passes as registry

    plugin = tmp_path / "hrun_plugin_pass.py"
    body = (ROOT / "tests" / "unit" / "runtime" / "stub_partition.py").read_text()
    plugin.write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.PASSES, "test-stub-partition", "hrun_plugin_pass:StubPartitionPass")
    prog = tmp_path / "p.mlir"
    prog.write_text(PLAIN)
    argv = [str(prog), "--simulate", "1", "--input", "x=ones", "-q", "--pipeline", "canonicalize"]
    runs = [_run(*argv) for _ in range(2)]
    plugin.write_text(body + "\n# edited\n")
    sys.modules.pop("hrun_plugin_pass", None)
    runs.append(_run(*argv))
    assert [r[0] for r in runs] == [0, 0, 0], runs[-1][2]
    assert [_lookups(r[2]) for r in runs] == [["miss"], ["hit"], ["miss"]]
