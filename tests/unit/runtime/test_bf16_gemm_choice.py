"""`SHARDC_BF16_GEMM=auto`'s routing between oneDNN and MKL: measured once per machine
and kept (`bf16_gemm_choice`), applied to the products the shape rule gives MKL, and
rank 0's answer for every rank of a run (`bf16_gemm.agree`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shardc.runtime.execute.kernels import agreement, bf16_gemm, bf16_gemm_choice, blas, onednn_matmul
from shardc.runtime.execute.kernels.bf16_run import bfloat16


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty cache directory, `auto`, no routing decided yet in this process."""
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SHARDC_CACHE", raising=False)
    monkeypatch.setenv("SHARDC_BF16_GEMM", "auto")
    monkeypatch.setattr(bf16_gemm, "_ROUTING", {})
    return tmp_path / "cache"


def _need_both():
    if bf16_gemm._mkl_gemm() is None or not onednn_matmul.available():  # pyright: ignore[reportPrivateUsage]
        pytest.skip("needs MKL's bf16 GEMM and oneDNN (the [fast] extra)")


def _files():
    return (blas.library_path(), onednn_matmul.library_path())


def test_onednn_only_where_it_wins_by_the_margin():
    m = bf16_gemm_choice.MARGIN
    assert bf16_gemm_choice.decide({"mkl": 3.0, "onednn": 1.0}) == "onednn"
    assert bf16_gemm_choice.decide({"mkl": m * 1.0, "onednn": 1.0}) == "onednn"
    assert bf16_gemm_choice.decide({"mkl": m * 0.99, "onednn": 1.0}) == "shaped"  # faster, not by enough
    assert bf16_gemm_choice.decide({"mkl": 1.0, "onednn": 2.0}) == "shaped"


@pytest.mark.parametrize("seconds, routing", [({"mkl": 3.0, "onednn": 1.0}, "onednn"), ({"mkl": 1.0, "onednn": 1.2}, "shaped")])
def test_the_routing_is_measured_once_and_kept(fresh, monkeypatch, seconds, routing):
    _need_both()
    monkeypatch.setattr(bf16_gemm_choice, "measure", lambda runners, bf: seconds)
    assert bf16_gemm.routing() == routing
    (record,) = fresh.glob("bf16-gemm-choice-*.json")
    kept = json.loads(record.read_text())
    assert kept["choice"] == routing and kept["seconds"] == seconds
    assert (record.stat().st_mode & 0o777) == 0o600

    def no_measuring(runners, bf):
        raise AssertionError("measured again although the answer was kept")

    monkeypatch.setattr(bf16_gemm_choice, "measure", no_measuring)
    monkeypatch.setattr(bf16_gemm, "_ROUTING", {})  # as a new process would start
    assert bf16_gemm.routing() == routing


def test_a_damaged_record_is_measured_over(fresh, monkeypatch):
    _need_both()
    fresh.mkdir(mode=0o700)
    (fresh / f"bf16-gemm-choice-{bf16_gemm_choice.key(_files())}.json").write_text('{"choice": "fastest"}')
    monkeypatch.setattr(bf16_gemm_choice, "measure", lambda runners, bf: {"mkl": 5.0, "onednn": 1.0})
    assert bf16_gemm.routing() == "onednn"


def test_an_explicit_onednn_routes_everything_without_measuring(fresh, monkeypatch):
    monkeypatch.setenv("SHARDC_BF16_GEMM", "onednn")

    def no_measuring(runners, bf):
        raise AssertionError("measured under an explicit choice")

    monkeypatch.setattr(bf16_gemm_choice, "measure", no_measuring)
    assert bf16_gemm.routing() == "onednn"


def test_the_measurement_runs_both_libraries_on_the_probe():
    _need_both()
    calls: dict[str, list[tuple[tuple[int, ...], bool]]] = {"mkl": [], "onednn": []}

    def runner(name):
        def run(a, b, out):
            calls[name].append((out.shape, a.strides[-1] != a.itemsize))
            out[...] = 0

        return run

    seconds = bf16_gemm_choice.measure({n: runner(n) for n in calls}, bfloat16())
    assert set(seconds) == {"mkl", "onednn"} and all(0 <= s < 10 for s in seconds.values())
    for name, got in calls.items():  # a warm-up call and ROUNDS timed ones per shape
        assert len(got) == (bf16_gemm_choice.ROUNDS + 1) * len(bf16_gemm_choice.SHAPES), name
        assert ((384, 512), True) in got and ((512, 384), False) in got  # the weight gradient's `a` is a transposed view


def _weight_gradient():
    """A product the shape rule leaves to MKL: `a` transposed, contraction 1024."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1024, 96), np.float32).astype(bfloat16()).T
    b = rng.standard_normal((1024, 64), np.float32).astype(bfloat16())
    assert not bf16_gemm.onednn_suits((96, 64), 1024, a_rows=False)
    return a, b


@pytest.mark.parametrize("routing, to_onednn", [("onednn", True), ("shaped", False)])
def test_the_routing_decides_where_the_rules_products_run(fresh, monkeypatch, routing, to_onednn):
    _need_both()
    if not bf16_gemm.bf16_units():
        pytest.skip("this CPU has no bf16 units: bf16 products run numpy's float32 matmul")
    monkeypatch.setattr(bf16_gemm, "_ROUTING", {"agreed": routing})
    seen = []
    real = onednn_matmul.matmul
    monkeypatch.setattr(onednn_matmul, "matmul", lambda *args: seen.append(1) or real(*args))
    a, b = _weight_gradient()
    got = bf16_gemm.matmul(a, b)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert bool(seen) == to_onednn


class _World:
    def __init__(self, rank, says):
        self.rank, self.says, self.sent = rank, says, []

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return 2

    def bcast(self, value, root=0):
        self.sent.append(value)
        return value if self.rank == root else self.says


def test_agree_takes_rank_0s_routing(fresh, monkeypatch):
    _need_both()
    if not bf16_gemm.bf16_units():
        pytest.skip("this CPU has no bf16 units: no routing to agree on")
    monkeypatch.setattr(bf16_gemm_choice, "measure", lambda runners, bf: {"mkl": 1.0, "onednn": 1.0})
    w = _World(1, "onednn")
    bf16_gemm.agree(w)
    assert w.sent == [None] and bf16_gemm.routing() == "onednn"  # this rank would have measured `shaped`
    root = _World(0, None)
    bf16_gemm.agree(root)
    assert root.sent == ["onednn"]  # rank 0 sends what it runs
    monkeypatch.setattr(bf16_gemm, "_ROUTING", {})
    monkeypatch.setenv("SHARDC_BF16_GEMM", "mkl")  # no routing under an explicit library: rank 0 sends none
    root = _World(0, None)
    bf16_gemm.agree(root)
    assert root.sent == [None] and "agreed" not in bf16_gemm._ROUTING  # pyright: ignore[reportPrivateUsage]


def test_entry_points_agree_on_both_choices(fresh, monkeypatch):
    """`agreement.agree` (what every MPI entry point calls) sends rank 0's BLAS, then its
    bf16 routing; a rank takes both."""
    _need_both()
    if not bf16_gemm.bf16_units():
        pytest.skip("this CPU has no bf16 units: no routing to agree on")
    monkeypatch.setattr(blas, "_AGREED", [])
    monkeypatch.setattr(blas, "_ACTIVE", {})
    monkeypatch.setenv("SHARDC_BLAS", "auto")
    monkeypatch.setattr(bf16_gemm_choice, "measure", lambda runners, bf: {"mkl": 4.0, "onednn": 1.0})
    root = _World(0, None)
    agreement.agree(root)
    assert root.sent == [blas.active_name(), "onednn"]

    class Rank1(_World):
        def bcast(self, value, root=0):
            self.sent.append(value)
            return ["openblas", "shaped"][len(self.sent) - 1]

    monkeypatch.setattr(bf16_gemm, "_ROUTING", {})
    one = Rank1(1, None)
    agreement.agree(one)
    assert one.sent == [None, None] and bf16_gemm.routing() == "shaped"
