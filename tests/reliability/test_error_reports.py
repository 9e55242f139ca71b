"""What an internal error or a refused program says from the Python API and the trainer's
pass pipeline (the op, its location, the pass; the diagnostic in the exception), and
shardc-verify's tolerance scaled to rounding."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

ADD = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %b = arith.addf %a, %a : tensor<4xf32>
  return %b : tensor<4xf32>
}
"""


@pytest.fixture
def crashing_pass(monkeypatch: pytest.MonkeyPatch) -> str:
    """`test-crash-on-addf` registered as a pass (a bug: an assertion on an op)."""
    from shardc.passes import PASSES

    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setitem(PASSES, "test-crash-on-addf", "crashing_pass:CrashOnAddf")
    monkeypatch.setenv("SHARDC_CACHE", "0")
    return "test-crash-on-addf"


def test_run_program_error_carries_the_diagnostic_of_an_op_the_runtime_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from shardc.launch import ProgramError, run_program

    monkeypatch.setenv("SHARDC_CACHE", "0")
    text = "func.func @main(%a: f32) -> vector<4xf32> {\n  %b = vector.broadcast %a : f32 to vector<4xf32>\n  return %b : vector<4xf32>\n}\n"
    with pytest.raises(ProgramError) as info:
        run_program(text, [np.float32(1)], name="p.mlir")
    message = str(info.value)
    assert message != "rejected"
    assert "'vector.broadcast' at loc(\"p.mlir\":2:8) in function @main: operation is not supported by the numpy runtime" in message


def test_run_program_error_carries_a_parse_diagnostic_with_its_source_line() -> None:
    from shardc.launch import ProgramError, run_program

    with pytest.raises(ProgramError) as info:
        run_program(ADD.replace("arith.addf", "arith.adf"), [np.ones(4, np.float32)], name="p.mlir")
    assert str(info.value) == "p.mlir:2:8: error: custom op 'arith.adf' is unknown\n  %b = arith.adf %a, %a : tensor<4xf32>\n       ^"


def test_pass_bug_under_run_program_names_the_op_its_location_and_the_pass(crashing_pass: str) -> None:
    from shardc.launch import ProgramError, run_program

    with pytest.raises(ProgramError) as info:
        run_program(ADD, [np.ones(4, np.float32)], pipeline=crashing_pass, name="p.mlir")
    first = str(info.value).splitlines()[0]
    assert first.startswith("p.mlir:2:8: error: internal error in pass 'test-crash-on-addf': AssertionError (on 'arith.addf', at crashing_pass.py:")


def test_pass_bug_in_the_trainers_pipeline_is_one_line(crashing_pass: str) -> None:
    from shardc.tools.cli import parse_module
    from shardc.training.pipeline import PipelineError, run_pipeline

    module = parse_module(ADD, "step.mlir")
    with pytest.raises(PipelineError) as info:
        run_pipeline(module, ["canonicalize", crashing_pass])
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("step.mlir:2:8: error: internal error in pass 'test-crash-on-addf': AssertionError (on 'arith.addf', at crashing_pass.py:")


def test_pipeline_error_reaches_the_user_as_its_line(crashing_pass: str, capsys: pytest.CaptureFixture[str]) -> None:
    """What shardc-train's main does with a PipelineError from compile_program."""
    from shardc.tools.cli import parse_module, run_tool
    from shardc.training.pipeline import run_pipeline

    module = parse_module(ADD, "step.mlir")
    assert run_tool("shardc-train", lambda: run_pipeline(module, [crashing_pass]) and 0) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("step.mlir:2:8: error: internal error in pass 'test-crash-on-addf'")


def test_unexpected_exception_in_a_tool_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from shardc.tools.cli import run_tool

    def body() -> int:
        raise KeyError("x")

    assert run_tool("shardc-run", body) == 1
    assert capsys.readouterr().err == "shardc-run: error: internal error: KeyError: 'x' (please report; SHARDC_DEBUG=1 shows the traceback)\n"


# ---------------------------------------------------------------------------------------
# shardc-verify's tolerance
# ---------------------------------------------------------------------------------------

MATMUL_64 = """shard.grid @grid(shape = 64)
func.func @f(%a: tensor<32x4096xf32>, %b: tensor<4096x32xf32>, %c: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %sk = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %sk2 = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %a0 = shard.shard %a to %sk : tensor<32x4096xf32>
  %b0 = shard.shard %b to %sk2 : tensor<4096x32xf32>
  %c0 = shard.shard %c to %r : tensor<32x32xf32>
  %m = linalg.matmul ins(%a0, %b0 : tensor<32x4096xf32>, tensor<4096x32xf32>) outs(%c0 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %m0 = shard.shard %m to %r : tensor<32x32xf32>
  return %m0 : tensor<32x32xf32>
}
"""


def test_reduction_length_is_the_contraction() -> None:
    from shardc.tools.cli import parse_module
    from shardc.tools.verification import reduction_length

    assert reduction_length(parse_module(MATMUL_64, "m.mlir")) == 4096
    assert reduction_length(parse_module(ADD, "a.mlir")) == 1


def test_correct_64_rank_matmul_matches_and_a_too_tight_tolerance_says_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The K=4096 reduction split over 64 ranks sums in another order than one device:
    the default tolerance accepts it; asking for exact equality reports a mismatch that
    says it is at rounding level."""
    from shardc.tools.verification import verify

    monkeypatch.setenv("SHARDC_CACHE", "0")
    report = verify(MATMUL_64, seed=1, name="m.mlir")
    assert report.status == "ok", report.message
    exact = verify(MATMUL_64, seed=1, rtol=0.0, atol=0.0, name="m.mlir")
    assert exact.status == "mismatch"
    summary = exact.summary()
    assert "at rounding level" in summary and "with n = 4096" in summary, summary


def test_default_tolerance_scales_with_magnitude_and_reduction_and_still_catches_bugs() -> None:
    from shardc.tools.verification import ROUNDING_FACTOR, compare_result

    rng = np.random.default_rng(0)
    want = (rng.standard_normal((16, 16)) * 1000).astype(np.float32)
    eps = float(np.finfo(np.float32).eps)
    bound = ROUNDING_FACTOR * eps * np.sqrt(4096) * float(np.abs(want).max())
    near = want.copy()
    near[0, 0] += np.float32(bound * 0.5)
    assert compare_result(0, "r", "l", want, near, reduction=4096).ok
    assert not compare_result(0, "r", "l", want, near, reduction=1).ok  # no long reduction: 64x tighter
    far = want.copy()
    far[3, 4] += np.float32(bound * 4)  # beyond rounding: a bug
    check = compare_result(0, "r", "l", want, far, reduction=4096)
    assert not check.ok and check.worst == (3, 4) and not check.at_rounding_level
    assert "rounding" not in check.describe()
    exact = compare_result(0, "r", "l", want, near, rtol=0.0, atol=0.0, reduction=4096)
    assert exact.at_rounding_level and "at rounding level" in exact.describe()


def test_verify_help_states_the_rule_and_the_cli_accepts_the_default(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), SHARDC_CACHE="0")
    r = subprocess.run([sys.executable, "-m", "shardc.tools.verify", "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "8 * eps * sqrt(n) * max|want|" in text and "longest reduction" in text
