"""`bench/train_step.py`'s shardc rows: the sharding each row runs (`row_policy`: the
plan `shardc-train --auto` would choose for the row's grid, keeping its tp, or the one
`--policy` names), and a `--quick` run that names it in the header and times every row."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shardc import host
from shardc.passes import cost_model
from shardc.passes.cost_model import DEFAULT_RATES, default_mpiexec
from shardc.training.auto_plan import auto_policies, choose, host_cost_model, policy_name
from shardc.training.axis import GPT_PLAN
from shardc.training.gpt import GPTConfig, param_specs

BENCH = Path(__file__).resolve().parents[2] / "bench" / "train_step.py"


def _load_bench():
    """The bench as a module: its folder on the path for its `_paired` import, and the
    thread-count defaults it sets at import taken back (they are for its own processes)."""
    spec = importlib.util.spec_from_file_location("train_step_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    env, path = dict(os.environ), list(sys.path)
    sys.path.insert(0, str(BENCH.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
        os.environ.clear()
        os.environ.update(env)
    return module


train_step_bench = _load_bench()

CFG = GPTConfig(n_layer=2, n_head=4, n_embd=64, block_size=32, vocab_size=64)


@pytest.mark.parametrize(("precision", "want"), [("f32", "zero"), ("bf16", "fsdp")])
def test_auto_row_runs_the_plan_auto_chooses_for_its_grid(precision: str, want: str, monkeypatch) -> None:
    """dp=2's row, priced with the default rates on a 2-core host, is the plan `--auto`
    picks there: FSDP in bf16 (its all-gathers move bf16, half of ZeRO's float32
    parameter bytes), ZeRO in float32; and it is `choose`'s pick among the tp=1 mixes."""
    monkeypatch.setattr(cost_model, "load_rates", lambda *a, **k: DEFAULT_RATES)
    monkeypatch.setattr(host, "physical_cores", lambda: 2)
    got = train_step_bench.row_policy(CFG, 2, 1, precision, "f32", "auto")
    assert policy_name(got) == want
    kept = [p for p in auto_policies(param_specs(CFG), GPT_PLAN, 2) if p.tp == 1]
    assert got == choose(CFG, 2, train_step_bench.BATCH // 2, policies=kept, cost=host_cost_model(None, 2), precision=precision).chosen.policy


def test_auto_row_keeps_the_rows_tp_for_every_group() -> None:
    """The tp=2 row stays tensor parallel everywhere: no group's `/notp` mix, which would
    make it another row."""
    got = train_step_bench.row_policy(CFG, 2, 2, "bf16", "f32", "auto")
    assert got.tp == 2
    assert all(o.tp for o in got.overrides), policy_name(got)


@pytest.mark.parametrize(("choice", "fsdp"), [("zero", False), ("fsdp", True)])
def test_named_policy_is_run_as_named(choice: str, fsdp: bool) -> None:
    got = train_step_bench.row_policy(CFG, 2, 1, "bf16", "f32", choice)
    assert (got.tp, got.zero, got.fsdp, got.overrides) == (1, True, fsdp, ())


@pytest.mark.slow
@pytest.mark.mpi
def test_quick_run_names_each_rows_sharding() -> None:
    if default_mpiexec() is None:
        pytest.skip("no mpiexec")
    p = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--no-torch", "--rounds", "1", "--repeats", "1", "--precision", "bf16", "--policy", "fsdp"],
        capture_output=True, text=True, timeout=600,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    # 1 rank and tp=2 have one data replica: FSDP's name is kept, it splits nothing there
    assert re.search(r"^shardc's sharding \(--policy fsdp\): 1 rank fsdp, dp=2 fsdp, tp=2 tp=2\+fsdp$", p.stdout, re.M), p.stdout
    for row in ("1 rank", "dp=2", "tp=2"):
        assert re.search(rf"^{row}\s+[0-9,]+\s+[0-9.]+\s+[0-9]+\s+[0-9.]+%", p.stdout, re.M), p.stdout
