"""shardc.tools.verification and shardc-verify: agreement, mismatches found and located, rejections
and usage errors reported cleanly."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from shardc.dialects import shard
from shardc.tools.verification import PARTITION_PIPELINE, VerifyError, compare_result, verify

ROOT = Path(__file__).resolve().parents[2]

MATMUL = """module {
  shard.grid @grid(shape = 2x2)
  func.func @f(%a: tensor<8x16xf32>, %b: tensor<16x8xf32>, %c: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %s0 = shard.sharding @grid split_axes = [[0], [1]] : !shard.sharding
    %s1 = shard.sharding @grid split_axes = [[1]] : !shard.sharding
    %s2 = shard.sharding @grid split_axes = [[0]] : !shard.sharding
    %a0 = shard.shard %a to %s0 : tensor<8x16xf32>
    %a1 = shard.shard %a0 to %s0 annotate_for_users : tensor<8x16xf32>
    %b0 = shard.shard %b to %s1 : tensor<16x8xf32>
    %b1 = shard.shard %b0 to %s1 annotate_for_users : tensor<16x8xf32>
    %c0 = shard.shard %c to %s1 : tensor<8x8xf32>
    %c1 = shard.shard %c0 to %s2 annotate_for_users : tensor<8x8xf32>
    %m = linalg.matmul ins(%a1, %b1 : tensor<8x16xf32>, tensor<16x8xf32>) outs(%c1 : tensor<8x8xf32>) -> tensor<8x8xf32>
    %m0 = shard.shard %m to %s2 : tensor<8x8xf32>
    %m1 = shard.shard %m0 to %s1 annotate_for_users : tensor<8x8xf32>
    return %m1 : tensor<8x8xf32>
  }
}
"""

INT_REDUCE = """module {
  shard.grid @grid(shape = 4)
  func.func @main(%x: tensor<8x4xi32>, %i: tensor<4xi32>) -> (tensor<4xi32>, tensor<8x4xi32>) {
    %s0 = shard.sharding @grid split_axes = [[0]] : !shard.sharding
    %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
    %x0 = shard.shard %x to %s0 : tensor<8x4xi32>
    %x1 = shard.shard %x0 to %s0 annotate_for_users : tensor<8x4xi32>
    %i0 = shard.shard %i to %r : tensor<4xi32>
    %i1 = shard.shard %i0 to %r annotate_for_users : tensor<4xi32>
    %red = linalg.reduce ins(%x1 : tensor<8x4xi32>) outs(%i1 : tensor<4xi32>) dimensions = [0]
      (%in: i32, %acc: i32) {
        %y = arith.maxsi %in, %acc : i32
        linalg.yield %y : i32
      }
    %red0 = shard.shard %red to %r : tensor<4xi32>
    %red1 = shard.shard %red0 to %r annotate_for_users : tensor<4xi32>
    %x2 = shard.shard %x0 to %s0 annotate_for_users : tensor<8x4xi32>
    return %red1, %x2 : tensor<4xi32>, tensor<8x4xi32>
  }
}
"""


@dataclass(frozen=True)
class DropAllReduce(ModulePass):
    """A deliberately wrong step: partial results are no longer combined."""

    name = "test-drop-all-reduce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in list(op.walk()):
            if isinstance(o, shard.AllReduceOp):
                o.result.replace_all_uses_with(o.input)
                o.detach()
                o.erase()


@dataclass(frozen=True)
class Explode(ModulePass):
    name = "test-explode"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise RuntimeError("boom")


# ---- agreement ----------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["partitioned", "lowered", "all"])
def test_matmul_with_split_reduction_agrees(stage: str) -> None:
    report = verify(MATMUL, stage=stage)  # type: ignore[arg-type]
    assert report.status == "ok", report.message
    assert report.ranks == 4
    assert [s.stage for s in report.stages] == (["partitioned", "lowered"] if stage == "all" else [stage])
    assert report.summary().startswith("OK: 1 result match")


def test_integer_reduction_and_replicated_result_exact() -> None:
    report = verify(INT_REDUCE, stage="all")
    assert report.ok, report.message
    assert len(report.stages[0].results) == 2
    assert all(r.max_abs == 0 for s in report.stages for r in s.results)


def test_more_ranks_than_grid_is_a_usage_error() -> None:
    with pytest.raises(VerifyError, match="has 4 devices but the world has 3 ranks"):
        verify(MATMUL, ranks=3)


def test_given_inputs_are_used() -> None:
    a = np.ones((8, 16), np.float32)
    b = np.ones((16, 8), np.float32)
    c = np.zeros((8, 8), np.float32)
    assert verify(MATMUL, inputs=[a, b, c]).ok
    with pytest.raises(VerifyError, match="takes 3 arguments, 1 inputs given"):
        verify(MATMUL, inputs=[a])


# ---- mismatches ----------------------------------------------------------------------


def test_wrong_partition_is_a_mismatch_with_location() -> None:
    report = verify(MATMUL, pipeline=[*PARTITION_PIPELINE, DropAllReduce()], name="mm.mlir")
    assert report.status == "mismatch"
    found = report.first_mismatch()
    assert found is not None
    stage, check = found
    assert stage.stage == "partitioned"
    assert check.index == 0 and "linalg.matmul" in check.name
    assert check.location == "mm.mlir:13:10"
    assert check.max_abs > 0.1 and check.worst is not None
    assert report.summary().startswith("MISMATCH (partitioned, 4 ranks): result #0 (%m = linalg.matmul) at mm.mlir:13:10: max abs error")


def test_replicated_result_differing_on_one_rank() -> None:
    # max over a split dim without its all_reduce: each rank keeps its own partial max.
    report = verify(INT_REDUCE, pipeline=[*PARTITION_PIPELINE, DropAllReduce()])
    assert report.status == "mismatch"
    _, check = report.first_mismatch()  # type: ignore[misc]
    assert check.index == 0


def test_compare_result_rules() -> None:
    w = np.array([1.0, 2.0, np.nan, np.inf], np.float32)
    assert compare_result(0, "r", "l", w, w.copy(), 1e-4, 1e-5).ok
    bad = compare_result(0, "r", "l", w, np.array([1.0, 2.5, np.nan, np.inf], np.float32), 1e-4, 1e-5)
    assert not bad.ok and bad.worst == (1,) and bad.max_abs == pytest.approx(0.5)
    nan = compare_result(0, "r", "l", w, np.array([1.0, 2.0, 0.0, np.inf], np.float32), 1e-4, 1e-5)
    assert not nan.ok and nan.worst == (2,)
    assert "shape (3,) instead of (4,)" in compare_result(0, "r", "l", w, w[:3], 1e-4, 1e-5).describe()
    assert "elements of float64" in compare_result(0, "r", "l", w, w.astype(np.float64), 1e-4, 1e-5).detail
    ints = compare_result(1, "r", "l", np.arange(4), np.array([0, 1, 2, 4]), 1.0, 1.0)
    assert not ints.ok and ints.worst == (3,)  # integers compare exactly, whatever the tolerances


# ---- rejections and crashes ------------------------------------------------------------


def test_parse_error_is_a_diagnostic() -> None:
    report = verify("module {\n  func.func @f( {\n}\n", name="bad.mlir")
    assert report.status == "rejected"
    assert report.message.startswith("bad.mlir:2:")
    assert "Traceback" not in report.message


def test_partition_rejection_is_reported() -> None:
    text = MATMUL.replace("%a1 = shard.shard %a0 to %s0 annotate_for_users", "%a1 = shard.shard %a0 to %s0")
    report = verify(text, name="p.mlir", pipeline="shard-partition")  # propagation would mend it
    assert report.status == "rejected"
    assert "Cannot partition" in report.message and "p.mlir:" in report.message


def test_pass_exception_is_a_crash() -> None:
    report = verify(MATMUL, pipeline=["sharding-propagation", Explode()])
    assert report.status == "crash"
    assert "internal error in pass 'test-explode': RuntimeError: boom" in report.message


def test_unknown_pass_and_entry_are_usage_errors() -> None:
    with pytest.raises(VerifyError, match="'nope' does not refer to a registered pass"):
        verify(MATMUL, pipeline="nope")
    with pytest.raises(VerifyError, match="no function @g"):
        verify(MATMUL, entry="g")
    with pytest.raises(VerifyError, match="unknown stage"):
        verify(MATMUL, stage="bogus")  # type: ignore[arg-type]


def test_dynamic_grid_needs_ranks() -> None:
    text = MATMUL.replace("shape = 2x2", "shape = 2x?")
    with pytest.raises(VerifyError, match="dynamic dimensions"):
        verify(text)


# ---- the command line ------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shardc.tools.verify", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.mark.slow
def test_cli_ok_mismatch_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "mm.mlir"
    good.write_text(MATMUL)
    r = _cli(str(good), "--stage", "all", "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "OK: 1 result match (partitioned, lowered, 4 ranks)"

    bad = tmp_path / "bad.mlir"
    bad.write_text(MATMUL.replace("%a1 = shard.shard %a0 to %s0 annotate_for_users", "%a1 = shard.shard %a0 to %s0"))
    r = _cli(str(bad), "--pipeline", "builtin.module(shard-partition)")
    assert r.returncode == 1
    assert f"{bad}:13:10: error: Cannot partition" in r.stderr
    assert "Traceback" not in r.stderr

    r = _cli(str(good), "--simulate", "3")
    assert r.returncode == 1
    assert r.stderr.strip() == "shardc-verify: error: input %a: grid of shape 2x2 has 4 devices but the world has 3 ranks"

    r = _cli(str(tmp_path / "missing.mlir"))
    assert r.returncode == 1 and r.stderr.startswith("shardc-verify: error: cannot read")

    r = _cli(str(good), "--stage", "wrong")
    assert r.returncode == 1 and "invalid choice" in r.stderr and "Traceback" not in r.stderr

    r = _cli(str(good), "--seed", "-1")
    assert r.returncode == 1 and r.stderr == "shardc-verify: error: --seed must not be negative, got -1\n"
    r = _cli(str(good), "--rtol", "nan")
    assert r.returncode == 1 and r.stderr == "shardc-verify: error: --rtol and --atol must be finite and not negative\n"


def test_cli_mismatch_exit_code_and_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import shardc.tools.verification
    from shardc.tools.verify import main

    monkeypatch.setattr(shardc.tools.verification, "PARTITION_PIPELINE", (*PARTITION_PIPELINE, DropAllReduce()))
    path = tmp_path / "mm.mlir"
    path.write_text(MATMUL)
    assert main([str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"MISMATCH (partitioned, 4 ranks): result #0 (%m = linalg.matmul) at {path}:13:10: max abs error")
