"""auto-sharding: the ILP's plan is the optimum found by enumerating every combination of
strategies, budgets that nothing fits name the least that does, user annotations stay,
and the annotated output partitions and runs to the unsharded program's results.

Rates are injected (no calibration runs here)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from xdsl.dialects import func

from shardc.dialects.shard import GridOp, ShardOp
from shardc.interfaces.sharding import pass_cache
from shardc.passes.auto_sharding import (
    AutoShardingError,
    Program,
    format_size,
    parse_size,
    plan_function,
    tandem_repeats,
)
from shardc.passes.cost_model import DEFAULT_RATES, AlphaBeta, CostModel, Rates
from shardc.launch import run_program
from shardc.tools.cli import parse_module
from shardc.tools.opt import main as opt_main

MATMUL = """
shard.grid @g(shape = 2)

func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %o: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%o : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
"""

MLP = """
shard.grid @g(shape = 2)

func.func @f(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %o1: tensor<8x32xf32>, %w2: tensor<32x16xf32>, %o2: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %h = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x32xf32>) outs(%o1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%o2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
"""

ELEMENTWISE_2X2 = """
shard.grid @g(shape = 2x2)

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = tosa.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = tosa.exp %0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}
"""

PINNED = """
shard.grid @g(shape = 2)

func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %o: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %y = linalg.matmul ins(%xs, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%o : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
"""

COMPUTE_BOUND = Rates(gemm_flops=1e6, bandwidth=1e6, op_overhead=1e-6, collectives={k: AlphaBeta(1e-6, 1e-9) for k in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "halo")}, source="test")
COMM_BOUND = Rates(gemm_flops=1e12, bandwidth=1e12, op_overhead=1e-6, collectives={k: AlphaBeta(1e-3, 1e-5) for k in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "halo")}, source="test")


def _parse(text: str):
    return parse_module(text, "<test>")


def function_and_grid(module):
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    grid = next(op for op in module.ops if isinstance(op, GridOp))
    return function, grid


def brute_force(program: Program, budget: float | None) -> tuple[float, float]:
    """(best time, its peak) over every combination of strategies."""
    nodes = program.b.nodes
    best = (math.inf, math.inf)
    for combo in itertools.product(*(range(len(n.strategies)) for n in nodes)):
        choice = dict(enumerate(combo))
        peak = program.peak_of(choice)
        if budget is not None and peak > budget:
            continue
        t = program.time_of(choice)
        if t < best[0]:
            best = (t, peak)
    return best


def plan(text: str, rates: Rates, budget: float | None = None, reduce: bool = True):
    module = _parse(text)
    function, grid = function_and_grid(module)
    with pass_cache():
        return plan_function(function, grid, CostModel(rates), budget, reduce)


@pytest.mark.parametrize("text", [MATMUL, MLP, ELEMENTWISE_2X2, PINNED])
@pytest.mark.parametrize("rates", [COMPUTE_BOUND, COMM_BOUND], ids=["compute", "comm"])
@pytest.mark.parametrize("reduce", [False, True], ids=["whole", "folded"])
def test_ilp_finds_the_enumerated_optimum(text, rates, reduce):
    """Enumerated on the whole graph; solved on it or after folding leaves (exact)."""
    _, whole, _ = plan(text, rates, reduce=False)
    best, _ = brute_force(whole, None)
    assert math.isfinite(best)
    b, program, solution = plan(text, rates, reduce=reduce)
    assert solution.time == pytest.approx(best, rel=1e-9, abs=1e-12)
    if reduce:
        assert len(b.nodes) < len(b.all_nodes)  # something folded
    # the expanded choice, priced on the whole graph, is what the solver says
    order = {id(n): i for i, n in enumerate(b.all_nodes)}
    choice = {order[k]: v for k, v in solution.full.items()}
    assert whole.time_of(choice) == pytest.approx(solution.time, rel=1e-9, abs=1e-12)
    assert whole.peak_of(choice) == pytest.approx(solution.peak)


@pytest.mark.parametrize("text", [MATMUL, MLP])
def test_ilp_finds_the_enumerated_optimum_under_a_budget(text):
    _, program, unconstrained = plan(text, COMM_BOUND, reduce=False)
    # every distinct peak the combinations reach, each as a budget
    peaks = sorted({program.peak_of(dict(enumerate(c))) for c in itertools.product(*(range(len(n.strategies)) for n in program.b.nodes))})
    assert len(peaks) > 2
    for budget in peaks[: 4]:
        _, program_b, solution = plan(text, COMM_BOUND, budget)
        best, _ = brute_force(program_b, budget)
        assert solution.peak <= budget + 1e-6
        assert solution.time == pytest.approx(best, rel=1e-9, abs=1e-12)
    if text is MLP:  # here the budgets bind: the tightest one costs more time than none
        _, _, tight = plan(text, COMM_BOUND, peaks[0])
        assert tight.time > unconstrained.time


def test_compute_bound_matmul_splits_and_comm_bound_does_not_communicate():
    b, _, solution = plan(MATMUL, COMPUTE_BOUND)
    matmul = b.all_nodes[-1]
    chosen = matmul.strategies[solution.full[id(matmul)]]
    assert chosen.option is not None and any(chosen.option.sharding_array)  # split somewhere
    # with collectives a thousand times dearer than the whole matmul, nothing is moved
    _, program, solution = plan(MLP, COMM_BOUND)
    assert solution.time < 1e-3


def test_infeasible_budget_names_the_least_that_fits():
    _, program, _ = plan(MLP, COMM_BOUND, reduce=False)
    peaks = sorted({program.peak_of(dict(enumerate(c))) for c in itertools.product(*(range(len(n.strategies)) for n in program.b.nodes))})
    least = peaks[0]
    with pytest.raises(AutoShardingError) as info:
        plan(MLP, COMM_BOUND, least - 1)
    assert f"the smallest budget that fits is {format_size(least)}" in info.value.message
    plan(MLP, COMM_BOUND, least)  # and that one fits


def test_infeasible_budget_on_the_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "mlp.mlir"
    src.write_text(MLP)
    rc = opt_main([str(src), '--auto-sharding=memory-budget=100B'])
    err = capsys.readouterr().err
    assert rc == 1
    lines = [ln for ln in err.splitlines() if "error" in ln]
    assert len(lines) == 1
    assert "mlp.mlir:2:1: error: auto-sharding: memory budget 100B per rank is infeasible; the smallest budget that fits is" in lines[0]
    assert "Traceback" not in err


def test_bad_budget_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "mlp.mlir"
    src.write_text(MLP)
    rc = opt_main([str(src), "--auto-sharding=memory-budget=lots"])
    err = capsys.readouterr().err
    assert rc == 1 and "expected a size such as 512MB or 2GiB, got 'lots'" in err and "Traceback" not in err


@pytest.mark.parametrize("text,size", [("4096", 4096), ("2KB", 2000), ("2KiB", 2048), ("1.5GiB", 3 << 29), ("3 mb", 3_000_000)])
def test_parse_size(text, size):
    assert parse_size(text) == size


def test_user_annotations_are_kept(tmp_path, capsys, monkeypatch):
    b, _, solution = plan(PINNED, COMPUTE_BOUND)
    # the pinned value's producer (argument %x) takes the user's sharding
    x = b.all_nodes[0]
    assert str(x.strategies[solution.full[id(x)]].results[0].split_axes) == "((), (0,))"
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "p.mlir"
    src.write_text(PINNED)
    assert opt_main([str(src), "--auto-sharding"]) == 0
    out = capsys.readouterr().out
    assert "%s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding" in out or "split_axes = [[], [0]]" in out
    module = _parse(out)
    function, _ = function_and_grid(module)
    arg_users = [u.operation for u in function.body.block.args[0].uses]
    assert len(arg_users) == 1 and isinstance(arg_users[0], ShardOp)
    assert not arg_users[0].for_users


def test_annotation_no_strategy_meets_is_a_diagnostic():
    text = PINNED.replace("[[], [0]]", "[[0], [0]]")
    with pytest.raises(Exception):
        plan(text, COMPUTE_BOUND)


def _annotate(text: str, tmp_path, capsys, options: str = "") -> str:
    src = tmp_path / "in.mlir"
    src.write_text(text)
    assert opt_main([str(src), f"--auto-sharding={options}" if options else "--auto-sharding"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("text", [MATMUL, MLP, ELEMENTWISE_2X2, PINNED])
def test_output_partitions_and_runs_like_the_unsharded_program(text, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path / "cache"))
    annotated = _annotate(text, tmp_path, capsys)
    module = _parse(annotated)
    function, grid = function_and_grid(module)
    ranks = math.prod(d for d in grid.shape_tuple if d is not None)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal([d for d in a.type.get_shape()]).astype(np.float32) for a in function.body.block.args]
    unsharded = MATMUL if text is PINNED else text  # the same computation without the annotation
    expected = run_program(unsharded, inputs, ranks=1)
    got = run_program(annotated, inputs, ranks=ranks)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_output_is_a_fixed_point_of_propagation(tmp_path, capsys, monkeypatch):
    """Propagation takes the plan as it is: it adds no annotation of its own."""
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path / "cache"))
    annotated = _annotate(MLP, tmp_path, capsys)
    src = tmp_path / "a.mlir"
    src.write_text(annotated)
    assert opt_main([str(src), "--sharding-propagation"]) == 0
    propagated = capsys.readouterr().out
    assert propagated.count("shard.shard") == annotated.count("shard.shard")


def test_explain_gives_cost_and_runner_up(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "m.mlir"
    src.write_text(MATMUL)
    assert opt_main([str(src), "--auto-sharding=explain=true"]) == 0
    err = capsys.readouterr().err
    remarks = [ln for ln in err.splitlines() if "remark: auto-sharding" in ln]
    assert any("predicted" in ln and "peak" in ln for ln in remarks)
    matmul = [ln for ln in remarks if "auto-sharding: linalg.matmul:" in ln]
    assert len(matmul) == 1 and "own cost" in matmul[0] and "runner-up" in matmul[0]
    args = [ln for ln in remarks if "argument #" in ln]
    assert len(args) == 3  # folded into the matmul, which alone reads them
    assert all("the best for the choice of linalg.matmul" in ln for ln in args)


GROUPED = """
shard.grid @g(shape = 2x1)

func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %o: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %s = shard.sharding @g split_axes = [[1, 0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %y = linalg.matmul ins(%xs, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%o : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
"""


def test_axis_groups_as_annotations_write_them(tmp_path, capsys, monkeypatch):
    """A 2x1 grid annotated `[[1, 0]]` (as the trainer writes batch splits): the plan
    offers that group, so the matmul splits its rows by it and nothing is gathered."""
    b, _, solution = plan(GROUPED, COMPUTE_BOUND)
    assert (1, 0) in b.axis_groups and (1,) not in b.axis_groups  # axis 1 alone splits nothing
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path / "cache"))
    annotated = _annotate(GROUPED, tmp_path, capsys)
    src = tmp_path / "a.mlir"
    src.write_text(annotated)
    assert opt_main([str(src), "--sharding-propagation", "--shard-partition", "--canonicalize"]) == 0
    partitioned = capsys.readouterr().out
    assert "shard.all_gather" not in partitioned and "tensor<4x32xf32>" in partitioned
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 32), (8, 32))]
    expected = run_program(MATMUL, inputs, ranks=1)
    np.testing.assert_allclose(run_program(annotated, inputs, ranks=2)[0], expected[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("text", [MATMUL, MLP, ELEMENTWISE_2X2])
def test_runner_up_is_the_best_single_change(text):
    """The runner-up's extra time equals re-pricing the whole plan with that one change."""
    from shardc.passes.auto_sharding import runner_up

    _, program, solution = plan(text, COMPUTE_BOUND, reduce=False)
    for i, node in enumerate(program.b.nodes):
        alt = runner_up(program, solution, i)
        others = [program.time_of({**solution.choice, i: k}) for k in range(len(node.strategies)) if k != solution.choice[i]]
        others = [t for t in others if math.isfinite(t)]
        if alt is None:
            assert not others
            continue
        assert alt[1] >= -1e-15  # the optimum: no single change is cheaper
        assert solution.time + alt[1] == pytest.approx(min(others), rel=1e-9, abs=1e-15)


def test_the_solver_prints_nothing_into_the_ir_on_stdout(tmp_path):
    """HiGHS 1.16 prints a banner from C++ when a solver is made; shardc-opt's stdout is
    the program, so a fresh process's output must parse back as it is."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import shardc

    src = tmp_path / "mlp.mlir"
    src.write_text(MLP)
    env = {**os.environ, "PYTHONPATH": str(Path(shardc.__file__).resolve().parents[1]), "SHARDC_CACHE": "0"}
    done = subprocess.run([sys.executable, "-m", "shardc.tools.opt", str(src), "--auto-sharding=rates=default"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("module {"), done.stdout[:200]
    again = subprocess.run([sys.executable, "-m", "shardc.tools.opt", "-"], input=done.stdout, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0, again.stderr


def _gpt_step(n_layer: int):
    """The built-in GPT's training step, unannotated, on a 3x2 grid (axes of different
    sizes: no two optima that only swap the axes)."""
    from shardc.training.gpt import GPTConfig
    from shardc.training.mesh import make_grid
    from shardc.training.step import build_step_module

    module = build_step_module(GPTConfig(n_layer, 2, 24, 6, 48), 6, only=["train_step"])
    grid = make_grid(6, 2).grid_op()
    module.body.block.insert_op_before(grid, module.body.block.first_op)
    return next(op for op in module.body.block.ops if isinstance(op, func.FuncOp)), grid


def test_tandem_repeats_find_layers_not_short_runs():
    layer = list(range(10))
    codes = [90, 91, *layer, *layer, *layer, 92, 5, 5, 5, 5, *reversed(layer), *reversed(layer)]
    assert tandem_repeats(codes) == [(2, 10, 3), (37, 10, 2)]  # the run of four 5s is no layer


@pytest.mark.slow  # two solves of a 5-layer step: about 20 s
def test_shared_layers_solve_as_the_unshared_program():
    """A 5-layer GPT step: the interior layers (forward and backward) take the second
    layer's solution (a third of the nodes tied, a smaller program) and it is the
    unshared program's optimum, choice by choice."""
    fn, grid = _gpt_step(5)
    model = CostModel(DEFAULT_RATES)
    b1, separate, s1 = plan_function(fn, grid, model, None, share_layers=False)
    b2, shared, s2 = plan_function(fn, grid, model, None, share_layers=True)
    assert separate.tied == 0 and shared.tied > len(b2.nodes) // 3
    assert len(shared.costs) < len(separate.costs) * 3 // 4
    assert s2.time == pytest.approx(s1.time, rel=1e-9)
    chosen1 = [n.strategies[s1.full[id(n)]].results for n in b1.all_nodes]
    chosen2 = [n.strategies[s2.full[id(n)]].results for n in b2.all_nodes]
    assert chosen1 == chosen2
