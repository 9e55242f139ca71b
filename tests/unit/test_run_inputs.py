"""Arguments from a .npz file (`shardc-run --inputs`) and the Python API behind
shardc-run (`shardc.runtime.launch.run_program`): global inputs in, global results out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shardc.runtime.launch import ProgramError, run_program
from shardc.tools.run import main

ROOT = Path(__file__).resolve().parents[2]
MLP = (ROOT / "examples" / "mlp.mlir").read_text()


def _mlp_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = {"x": (16, 32), "w1": (32, 64), "w2": (64, 32)}
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def _mlp_reference(a: dict[str, np.ndarray]) -> np.ndarray:
    return np.maximum(a["x"] @ a["w1"], 0) @ a["w2"]


@pytest.mark.parametrize("pipeline", [None, "shard-to-mpi-pipeline"])
def test_run_program_gives_global_results(pipeline):
    a = _mlp_inputs()
    (got,) = run_program(MLP, a, ranks=4, pipeline=pipeline)
    np.testing.assert_allclose(got, _mlp_reference(a), rtol=1e-4, atol=1e-4)


def test_run_program_takes_a_list_and_argn_names():
    a = _mlp_inputs(1)
    (by_list,) = run_program(MLP, [a["x"], a["w1"], a["w2"]], ranks=4)
    (by_index,) = run_program(MLP, {"arg0": a["x"], "1": a["w1"], "w2": a["w2"]}, ranks=4)
    np.testing.assert_array_equal(by_list, by_index)


def test_run_program_errors_are_one_message():
    a = _mlp_inputs()
    with pytest.raises(ProgramError, match="takes 3 arguments, 2 inputs given"):
        run_program(MLP, [a["x"], a["w1"]], ranks=4)
    with pytest.raises(ProgramError, match="no input for %w2"):
        run_program(MLP, {"x": a["x"], "w1": a["w1"]}, ranks=4)
    with pytest.raises(ProgramError, match="'bogus': @mlp has no such argument"):
        run_program(MLP, {**a, "bogus": a["x"]}, ranks=4)
    with pytest.raises(ProgramError, match=r"<program>:1:\d+: error"):
        run_program("func.func @f(", [], ranks=1)


def test_inputs_npz(tmp_path, capsys):
    a = _mlp_inputs(2)
    np.savez(tmp_path / "args.npz", **a)
    program = tmp_path / "mlp.mlir"
    program.write_text(MLP)
    out = tmp_path / "out"
    rc = main([str(program), "--simulate", "4", "--inputs", str(tmp_path / "args.npz"), "--output", str(out), "-q"])
    assert rc == 0
    np.testing.assert_allclose(np.load(out / "result0.npy"), _mlp_reference(a), rtol=1e-4, atol=1e-4)


def test_input_flag_overrides_npz(tmp_path):
    a = _mlp_inputs(3)
    np.savez(tmp_path / "args.npz", **a)
    program = tmp_path / "mlp.mlir"
    program.write_text(MLP)
    out = tmp_path / "out"
    rc = main([str(program), "--simulate", "4", "--inputs", str(tmp_path / "args.npz"), "--input", "x=zeros", "--output", str(out), "-q"])
    assert rc == 0
    np.testing.assert_array_equal(np.load(out / "result0.npy"), np.zeros((16, 32), np.float32))


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "--inputs: no such file"),
        (b"not an archive", "--inputs: cannot read"),
        ("extra", "array 'bogus' names no argument of @mlp"),
        ("shape", "input %w1 (from"),
    ],
)
def test_bad_npz_is_one_line(tmp_path, capsys, content, message):
    program = tmp_path / "mlp.mlir"
    program.write_text(MLP)
    path = tmp_path / "args.npz"
    a = _mlp_inputs()
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "extra":
        np.savez(path, **a, bogus=a["x"])
    elif content == "shape":
        np.savez(path, **{**a, "w1": a["w1"][:3]})
    rc = main([str(program), "--simulate", "4", "--inputs", str(path), "-q"])
    assert rc == 1
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
