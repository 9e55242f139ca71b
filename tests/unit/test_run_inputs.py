"""Arguments from a .npz file (`shardc-run --inputs`) and the Python API behind
shardc-run (`shardc.launch.run_program`): global inputs in, global results out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shardc.launch import ProgramError, run_program
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


def test_npz_named_by_another_tool_is_read_in_order(tmp_path, capsys):
    """torch-mlir's functions take %arg0, %arg1, ...; the committed archive names its
    arrays as PyTorch does (idx, then parameters by FQN) and holds PyTorch's `result`
    last. No name matches, so arguments come in the archive's order and the extra array
    is reported, not taken."""
    data = ROOT / "tests" / "data" / "torch_mlir"
    out = tmp_path / "out"
    rc = main([str(data / "gpt.mlir"), "--simulate", "2", "--inputs", str(data / "gpt.npz"), "--output", str(out), "-q"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "arrays are taken in order; 1 left over (result)" in err
    expected = np.load(data / "gpt.npz")["result"]
    for rank in (0, 1):  # no sharding annotations: every rank computes the whole result
        np.testing.assert_allclose(np.load(out / f"result0.rank{rank}.npy"), expected, rtol=1e-4, atol=1e-4)


def test_verify_reads_such_an_npz_in_order(capsys):
    from shardc.tools.verify import main as verify_main

    data = ROOT / "tests" / "data" / "torch_mlir"
    assert verify_main([str(data / "gpt.mlir"), "--simulate", "2", "--inputs", str(data / "gpt.npz")]) == 0
    captured = capsys.readouterr()
    assert "OK: 1 result match" in captured.out
    assert "shardc-verify: note: --inputs: its array names match no argument" in captured.err


def test_npz_in_order_still_checks_shapes(tmp_path, capsys):
    a = _mlp_inputs()
    np.savez(tmp_path / "args.npz", first=a["x"], second=a["x"], third=a["w2"])
    program = tmp_path / "mlp.mlir"
    program.write_text(MLP)
    assert main([str(program), "--simulate", "2", "--inputs", str(tmp_path / "args.npz"), "-q"]) == 1
    assert "input %w1 (from" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "--inputs: no such file"),
        (b"not an archive", "is not a .npz file (numpy.savez writes one)"),
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


def test_verify_takes_inputs_npz(tmp_path, capsys):
    """shardc-verify --inputs: the given arguments instead of random ones, for programs
    whose inputs must be valid (here token ids indexing a table)."""
    from shardc.tools.verify import main as verify_main

    program = tmp_path / "gather.mlir"
    program.write_text(GATHER)
    table = np.arange(24, dtype=np.float32).reshape(8, 3)
    ids = np.array([[1, 7], [0, 3]], dtype=np.int64)
    np.savez(tmp_path / "args.npz", ids=ids, arg1=table)
    assert verify_main([str(program), "--simulate", "2", "--stage", "all", "--inputs", str(tmp_path / "args.npz")]) == 0
    assert "OK: 1 result match (partitioned, lowered, 2 ranks)" in capsys.readouterr().out
    np.savez(tmp_path / "bad.npz", ids=ids)
    assert verify_main([str(program), "--simulate", "2", "--inputs", str(tmp_path / "bad.npz")]) == 1
    assert "no input for %table" in capsys.readouterr().err


GATHER = """shard.grid @grid(shape = 2)
func.func @f(%ids: tensor<2x2xi64>, %table: tensor<8x3xf32>) -> tensor<2x2x3xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %i = shard.shard %ids to %s : tensor<2x2xi64>
  %e = tensor.empty() : tensor<2x2x3xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%i : tensor<2x2xi64>) outs(%e : tensor<2x2x3xf32>) {
  ^bb0(%in: i64, %out: f32):
    %r = arith.index_cast %in : i64 to index
    %c = linalg.index 2 : index
    %v = tensor.extract %table[%r, %c] : tensor<8x3xf32>
    linalg.yield %v : f32
  } -> tensor<2x2x3xf32>
  return %g : tensor<2x2x3xf32>
}
"""
