"""The cost model: formulas, the alpha-beta fit, the per-machine cache (never measuring on
its own), liveness peaks of partitioned programs. Calibration itself is not run here
(it times BLAS and starts an MPI job); `fit_alpha_beta` is checked on synthetic timings."""

from __future__ import annotations

import json
import os

import pytest
from xdsl.dialects import func

from shardc.dialects.shard import Sharding
from shardc.passes import cost_model
from shardc.passes.cost_model import (
    DEFAULT_RATES,
    AlphaBeta,
    CostModel,
    Rates,
    bytes_factor,
    fit_alpha_beta,
    latency_factor,
    live_ranges,
    load_rates,
    peak_memory,
    tensor_bytes,
)
from shardc.tools.cli import parse_module

RATES = Rates(
    gemm_flops=1e9,
    bandwidth=1e9,
    op_overhead=1e-6,
    collectives={k: AlphaBeta(1e-5, 1e-9) for k in cost_model.COLLECTIVES},
    source="test",
)


def test_collective_times_follow_alpha_beta():
    m = CostModel(RATES)
    n = 1 << 20
    assert m.collective_time("all_reduce", n, 1) == 0.0
    assert m.collective_time("all_reduce", n, 4) == pytest.approx(1e-5 * 2 + 1e-9 * 2 * 3 / 4 * n)
    assert m.collective_time("all_gather", n, 4) == pytest.approx(1e-5 * 2 + 1e-9 * 3 * n)
    assert m.collective_time("reduce_scatter", n, 2) == pytest.approx(1e-5 + 1e-9 * n / 2)
    assert m.collective_time("all_to_all", n, 4) == pytest.approx(1e-5 * 3 + 1e-9 * 3 / 4 * n)
    with pytest.raises(ValueError):
        bytes_factor("broadcast", 2, n)


def test_op_time_contraction_uses_flops_and_others_bytes():
    m = CostModel(RATES)
    assert m.op_time(2e9, 10, True) == pytest.approx(1e-6 + 2.0)
    assert m.op_time(2e9, 1e9, False) == pytest.approx(1e-6 + 1.0)


def test_reshard_time_prices_the_planners_collectives():
    m = CostModel(RATES)
    rep = Sharding("g", ())
    row = Sharding("g", ((0,),))
    col = Sharding("g", ((), (0,)))
    shape, grid = (8, 16), (2,)
    assert m.reshard_time(row, row, shape, grid, 4) == 0.0
    # split -> replicated is one all_gather of the local 4x16 f32 block
    assert m.reshard_time(row, rep, shape, grid, 4) == pytest.approx(m.collective_time("all_gather", 4 * 16 * 4, 2))
    # row -> column split is one all_to_all
    assert m.reshard_time(row, col, shape, grid, 4) == pytest.approx(m.collective_time("all_to_all", 4 * 16 * 4, 2))
    # replicated -> split communicates nothing
    assert m.reshard_time(rep, row, shape, grid, 4) < m.collective_time("all_gather", 4 * 16 * 4, 2)


def test_fit_recovers_alpha_and_beta():
    rows = []
    for kind in cost_model.COLLECTIVES:
        for p in (2, 4, 8):
            for n in (8, 4096, 1 << 20):
                t = 3e-6 * latency_factor(kind, p) + 2e-10 * bytes_factor(kind, p, n)
                rows.append((kind, p, float(n), t))
    fitted = fit_alpha_beta(rows)
    for kind in cost_model.COLLECTIVES:
        assert fitted[kind].alpha == pytest.approx(3e-6, rel=1e-6)
        assert fitted[kind].beta == pytest.approx(2e-10, rel=1e-6)


def test_fit_clamps_negative_alpha():
    # timings proportional to bytes only, with noise that pulls alpha below zero
    rows = [("all_reduce", 2, float(n), 1e-9 * n - 1e-7) for n in (1000, 10_000, 100_000)]
    fitted = fit_alpha_beta(rows)["all_reduce"]
    assert fitted.alpha == 0.0 and fitted.beta > 0


def test_rates_round_trip_through_json():
    data = json.loads(json.dumps(RATES.to_json()))
    assert Rates.from_json(data) == RATES
    del data["collectives"]["halo"]
    with pytest.raises(ValueError):
        Rates.from_json(data)


def test_load_rates_reads_the_cache_and_never_measures(tmp_path, monkeypatch):
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path))
    os.chmod(tmp_path, 0o700)

    def no_calibration(*a, **k):
        raise AssertionError("calibration ran")

    monkeypatch.setattr(cost_model, "calibrate", no_calibration)
    assert load_rates() == DEFAULT_RATES  # nothing cached: the defaults
    path = cost_model.cache_path(None)
    assert path is not None and path.startswith(str(tmp_path))
    with open(path, "w") as f:
        json.dump(RATES.to_json(), f)
    assert load_rates() == RATES
    with open(path, "w") as f:
        f.write("{not json")
    assert load_rates() == DEFAULT_RATES  # a broken file is ignored (with a warning)


def test_recalibrate_measures_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path))
    os.chmod(tmp_path, 0o700)
    calls = []

    def fake_calibration(ranks, launcher):
        calls.append(ranks)
        return RATES

    monkeypatch.setattr(cost_model, "calibrate", fake_calibration)
    assert load_rates(recalibrate=True) == RATES
    assert calls == [2]
    assert load_rates() == RATES and calls == [2]  # read back, not measured again


def test_cache_key_depends_on_the_launcher():
    assert cost_model.machine_key(["mpiexec", "-n", "2"]) != cost_model.machine_key(["srun"])


PARTITIONED = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x8xf64>) -> tensor<4x8xf32> {
  %0 = tosa.exp %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = tosa.abs %0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = tosa.add %1, %0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = tosa.exp %2 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}
"""


def test_liveness_peak_of_a_partitioned_program():
    module = parse_module(PARTITIONED, "<test>")
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    block = function.body.block
    assert tensor_bytes(block.args[1]) == 8 * 8 * 8
    ranges, n = live_ranges(block)
    assert n == 5
    by_value = {v: (s, e) for v, s, e in ranges}
    ops = list(block.ops)
    assert by_value[ops[0].results[0]] == (0, 2)  # %0 read by the add
    assert by_value[block.args[0]] == (0, 4)  # arguments live throughout
    peak, point = peak_memory(block)
    # at the add: both arguments, %0, %1 and %2
    assert peak == 128 + 512 + 3 * 128 and point == 2
    # a sizing of our own (say, everything split in two)
    half, _ = peak_memory(block, lambda v: tensor_bytes(v) / 2)
    assert half == peak / 2


def test_ranks_sharing_cores_scale_compute_and_wait_at_collectives():
    """4 ranks on 2 cores: each op and each collective's own time on half a core, and every
    collective waits `oversubscribed_wait` per extra rank per core; 4 ranks on 4 cores (or
    on 8) and no host (a cluster, a rank per core) price as the rates are."""
    rates = Rates(**{**RATES.__dict__, "oversubscribed_wait": 3e-3})
    alone = CostModel(rates)
    for same in (alone.on_host(None, 2), alone.on_host(4, 4), alone.on_host(4, 8)):
        assert same == alone and same.ranks_per_core == 1.0
    shared = alone.on_host(4, 2)
    assert shared.ranks_per_core == 2.0
    assert shared.contraction_time(1e9) == pytest.approx(2 * alone.contraction_time(1e9))
    assert shared.elementwise_time(1e6) == pytest.approx(2 * alone.elementwise_time(1e6))
    assert shared.op_time(1e6, 1e3, True) == pytest.approx(2 * alone.op_time(1e6, 1e3, True))
    nominal = alone.collective_time("all_reduce", 4096, 4)
    assert shared.collective_time("all_reduce", 4096, 4) == pytest.approx(2 * nominal + 3e-3)
    assert alone.on_host(8, 2).collective_time("all_reduce", 4096, 4) == pytest.approx(4 * nominal + 3 * 3e-3)
    assert shared.collective_time("all_reduce", 4096, 1) == 0.0  # no peers, no wait


def test_rates_cached_before_the_wait_was_measured_read_with_its_default():
    data = RATES.to_json()
    del data["oversubscribed_wait"]
    assert Rates.from_json(data).oversubscribed_wait == cost_model.DEFAULT_OVERSUBSCRIBED_WAIT


def test_calibration_measures_the_wait_with_this_hosts_mpiexec_only(monkeypatch):
    """The wait is the median of the oversubscribed cases, at least 0; a custom launcher
    (srun across hosts) keeps the default."""
    monkeypatch.setattr(cost_model, "measure_compute", lambda: {"gemm_flops": 1e9, "bandwidth": 1e9, "op_overhead": 1e-6})
    monkeypatch.setattr(cost_model, "measure_collectives", lambda ranks, launcher: ([("all_reduce", 2, 8.0, 1e-5), ("all_reduce", 2, 1e6, 1e-3)], "MPI x"))
    monkeypatch.setattr(cost_model, "measure_oversubscription", lambda coll: [4e-3, 1e-3, 2e-3])
    rates = cost_model.calibrate()
    assert rates.oversubscribed_wait == pytest.approx(2e-3) and "oversubscribed" in rates.source
    monkeypatch.setattr(cost_model, "measure_oversubscription", lambda coll: [-1e-3])
    assert cost_model.calibrate().oversubscribed_wait == 0.0
    assert cost_model.calibrate(launcher=["srun"]).oversubscribed_wait == DEFAULT_RATES.oversubscribed_wait


def test_bf16_contractions_run_at_the_bf16_gemm_rate():
    rates = Rates(**{**RATES.__dict__, "bf16_gemm_flops": 4e9})
    m = CostModel(rates)
    assert m.contraction_time(8e9) == pytest.approx(8.0)
    assert m.contraction_time(8e9, "f32") == pytest.approx(8.0)
    assert m.contraction_time(8e9, "bf16") == pytest.approx(2.0)
    assert m.on_host(4, 2).contraction_time(8e9, "bf16") == pytest.approx(4.0)  # two ranks to a core
    assert Rates.from_json(json.loads(json.dumps(rates.to_json()))).bf16_gemm_flops == 4e9


def test_rates_cached_before_the_bf16_rate_was_measured_read_the_f32_rate():
    """An old cache knows this machine's float32 rate; its bf16 products are priced at it
    (no bf16 units assumed) until recalibrated, not at a default from another machine."""
    data = Rates(**{**RATES.__dict__, "gemm_flops": 3e9, "bf16_gemm_flops": 9e9}).to_json()
    del data["bf16_gemm_flops"]
    assert Rates.from_json(data).bf16_gemm_flops == 3e9


def test_calibration_without_a_bf16_rate_uses_the_f32_one(monkeypatch):
    monkeypatch.setattr(cost_model, "measure_compute", lambda: {"gemm_flops": 7e9, "bandwidth": 1e9, "op_overhead": 1e-6})
    monkeypatch.setattr(cost_model, "measure_collectives", lambda ranks, launcher: ([("all_reduce", 2, 8.0, 1e-5), ("all_reduce", 2, 1e6, 1e-3)], "MPI x"))
    assert cost_model.calibrate(launcher=["srun"]).bf16_gemm_flops == 7e9
    measured = {"gemm_flops": 7e9, "bf16_gemm_flops": 2e10, "bandwidth": 1e9, "op_overhead": 1e-6}
    monkeypatch.setattr(cost_model, "measure_compute", lambda: dict(measured))
    assert cost_model.calibrate(launcher=["srun"]).bf16_gemm_flops == 2e10
