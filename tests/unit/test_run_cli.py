"""shardc-run: simulated ranks in-process, mpiexec in subprocesses; scatter of sharded
arguments and gather of sharded results; one-line errors for bad command lines/inputs."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from shardc.passes import all_passes
from shardc.tools.run import main

HERE = Path(__file__).resolve().parent
STUB = HERE / "runtime" / "stub_partition.py"
MPIEXEC = shutil.which("mpiexec")


@pytest.fixture(autouse=True)
def stub_partition_pass(monkeypatch):
    """`test-stub-partition` (runtime/stub_partition.py) in the pass table for this module's
    tests only. Registered for the whole session it would be a foreign pass in the
    in-process shardc-opt cache identity (`opt_cache._foreign_part`) of every later test,
    which a fresh shardc-opt process does not share (test_opt_cache's subprocess test)."""
    from shardc import passes

    monkeypatch.syspath_prepend(str(STUB.parent))
    monkeypatch.setitem(passes.PASSES, "test-stub-partition", "stub_partition:StubPartitionPass")


def sharded_prog(grid: str, sharding: str, shape=(10, 6)) -> str:
    t = f"tensor<{shape[0]}x{shape[1]}xf32>"
    return f"""shard.grid @g(shape = {grid})
func.func @f(%x: {t}, %y: {t}) -> {t} {{
  %s = shard.sharding @g split_axes = {sharding} : !shard.sharding
  %x1 = shard.shard %x to %s : {t}
  %y1 = shard.shard %y to %s annotate_for_users : {t}
  %z = arith.mulf %x1, %y1 : {t}
  %z1 = shard.shard %z to %s : {t}
  return %z1 : {t}
}}
"""


PARTITIONED = """shard.grid @g(shape = 2)
func.func @f(%x: tensor<3xf64>, %s: f64) -> (tensor<3xf64>, tensor<6xf64>) {
  %a = shard.all_reduce %x on @g grid_axes = [0] : tensor<3xf64> -> tensor<3xf64>
  %b = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<3xf64> -> tensor<6xf64>
  %c = tensor.splat %s : tensor<3xf64>
  %d = arith.mulf %a, %c : tensor<3xf64>
  return %d, %b : tensor<3xf64>, tensor<6xf64>
}
"""


@pytest.fixture
def files(tmp_path):
    def write(name, content):
        p = tmp_path / name
        if isinstance(content, str):
            p.write_text(content)
        else:
            np.save(p, content)
        return str(p)

    return write


X = np.arange(60, dtype=np.float32).reshape(10, 6)
Y = np.linspace(-1, 1, 60, dtype=np.float32).reshape(10, 6)


@pytest.mark.parametrize(
    "grid,sharding",
    [
        ("4", "[[0]]"),
        ("3", "[[], [0]]"),
        ("2x2", "[[0], [1]]"),
        ("2x2", "[[1, 0]]"),
        ("4", "[[0]] sharded_dims_offsets = [0, 1, 5, 6, 10]"),
        ("4", "[[0]] halo_sizes = [1, 2]"),
        ("2x2", "[[0], [1]] halo_sizes = [1, 0, 2, 1]"),
        ("?", "[[0]]"),
    ],
)
def test_sharded_arguments_scattered_and_results_gathered(files, tmp_path, capsys, grid, sharding):
    prog = files("p.mlir", sharded_prog(grid, sharding))
    n = 3 if grid == "3" else 4
    out = tmp_path / "out"
    rc = main([prog, "--simulate", str(n), "--input", f"x={files('x.npy', X)}", "--input", f"y={files('y.npy', Y)}", "--pipeline", "test-stub-partition", "--output", str(out)])
    assert rc == 0, capsys.readouterr().err
    np.testing.assert_array_equal(np.load(out / "result0.npy"), X * Y)


def test_random_inputs_are_global_and_reproducible(files, tmp_path):
    prog = files("p.mlir", sharded_prog("4", "[[0]]", (8, 2)))
    outs = []
    for n, sub in ((4, "a"), (4, "b")):
        assert main([prog, "--simulate", str(n), "--input", "x=random:seed=3", "--input", "y=ones", "--pipeline", "test-stub-partition", "--output", str(tmp_path / sub)]) == 0
        outs.append(np.load(tmp_path / sub / "result0.npy"))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], np.random.default_rng(3).standard_normal((8, 2)).astype(np.float32))


def test_partitioned_program_replicated_and_per_rank_inputs(files, tmp_path, capsys):
    prog = files("p.mlir", PARTITIONED)
    for r in range(2):
        files(f"x{r}.npy", np.full(3, r + 1.0))
    out = tmp_path / "out"
    rc = main([prog, "--simulate", "2", "--input", f"x={tmp_path}/x{{rank}}.npy", "--input", "s=2.5", "--output", str(out)])
    assert rc == 0, capsys.readouterr().err
    for r in range(2):
        np.testing.assert_array_equal(np.load(out / f"result0.rank{r}.npy"), np.full(3, 7.5))
        np.testing.assert_array_equal(np.load(out / f"result1.rank{r}.npy"), [1, 1, 1, 2, 2, 2])


def test_print_results_timing_and_emit_python(files, tmp_path, capsys):
    prog = files("p.mlir", PARTITIONED)
    py = tmp_path / "gen.py"
    assert main([prog, "--simulate", "2", "--input", "x=ones", "--input", "s=1", "--timing", "--emit-python", str(py)]) == 0
    out = capsys.readouterr().out
    assert "shardc-run: rank 1: run" in out and "compile" in out
    assert "result0.rank1: 3 f64 [2, 2, 2]" in out
    assert "def fn__f(" in py.read_text()


def test_success_output_and_quiet(files, tmp_path, capsys):
    """One line per result written; a summary of each result without --output;
    nothing with --quiet."""
    prog = files("p.mlir", PARTITIONED)
    base = [prog, "--simulate", "2", "--input", "x=ones", "--input", "s=1"]
    assert main([*base, "--output", str(tmp_path / "o")]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"wrote {tmp_path / 'o'}/{name}.rank{r}.npy: {t}"
        for name, t in (("result0", "3 f64"), ("result1", "6 f64")) for r in range(2)
    ]
    assert main(base) == 0
    assert capsys.readouterr().out.splitlines() == [
        "result0.rank0: 3 f64 [2, 2, 2]", "result0.rank1: 3 f64 [2, 2, 2]",
        "result1.rank0: 6 f64 [1, 1, 1, 1, 1, 1]", "result1.rank1: 6 f64 [1, 1, 1, 1, 1, 1]",
    ]
    for extra in ([], ["--output", str(tmp_path / "q")]):
        assert main([*base, "--quiet", *extra]) == 0
        assert capsys.readouterr().out == ""
    assert (tmp_path / "q" / "result1.rank1.npy").exists()


@pytest.mark.parametrize(
    "value, want",
    [
        (np.float32(1.5), "f32 1.5"),
        (np.int64(-3), "i64 -3"),
        (np.arange(6, dtype=np.int32).reshape(2, 3), "2x3 i32 [[0, 1, 2], [3, 4, 5]]"),
        (np.array([True, False]), "2 i1 [ True, False]"),
        (np.arange(20, dtype=np.float64).reshape(4, 5) / 4, "4x5 f64  min 0  max 4.75  mean 2.375  [0, 0.25, 0.5, 0.75, ...]"),
        (np.arange(12, dtype=np.uint8).reshape(3, 4), "3x4 ui8  min 0  max 11  mean 5.5  [0, 1, 2, 3, ...]"),
        (np.arange(10) % 3 == 0, "10 i1  true 4 of 10  [True, False, False, True, ...]"),
        (np.zeros((0, 3), np.float32), "0x3 f32 []"),
    ],
)
def test_result_summary(value, want):
    from shardc.tools.run import summary

    assert summary(value) == want


def test_default_pipeline_needs_a_partition_pass(files, capsys, monkeypatch):
    from shardc import passes

    monkeypatch.delitem(passes.PASSES, "shard-partition", raising=False)
    prog = files("p.mlir", sharded_prog("4", "[[0]]"))
    assert main([prog, "--simulate", "4", "--input", "x=ones", "--input", "y=ones"]) == 1
    assert capsys.readouterr().err.strip() == "shardc-run: error: the program has sharding annotations but shardc-opt has no 'shard-partition' pass to partition it (give --pipeline)"


MATMUL = """shard.grid @g(shape = 4)
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %sw = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %r = shard.sharding @g split_axes = [[]] : !shard.sharding
  %x1 = shard.shard %x to %s : tensor<4x8xf32>
  %x2 = shard.shard %x1 to %s annotate_for_users : tensor<4x8xf32>
  %w1 = shard.shard %w to %sw : tensor<8x3xf32>
  %w2 = shard.shard %w1 to %sw annotate_for_users : tensor<8x3xf32>
  %e = tensor.empty() : tensor<4x3xf32>
  %c = arith.constant 0.0 : f32
  %z = linalg.fill ins(%c : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %m = linalg.matmul ins(%x2, %w2 : tensor<4x8xf32>, tensor<8x3xf32>) outs(%z : tensor<4x3xf32>) -> tensor<4x3xf32>
  %m1 = shard.shard %m to %r : tensor<4x3xf32>
  %m2 = shard.shard %m1 to %r annotate_for_users : tensor<4x3xf32>
  return %m2 : tensor<4x3xf32>
}
"""

ADD2D = """shard.grid @g(shape = 2x2)
func.func @f(%x: tensor<8x6xf32>, %y: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %x1 = shard.shard %x to %s : tensor<8x6xf32>
  %x2 = shard.shard %x1 to %s annotate_for_users : tensor<8x6xf32>
  %y1 = shard.shard %y to %s : tensor<8x6xf32>
  %y2 = shard.shard %y1 to %s annotate_for_users : tensor<8x6xf32>
  %z = tosa.add %x2, %y2 : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %z1 = shard.shard %z to %s : tensor<8x6xf32>
  %z2 = shard.shard %z1 to %s annotate_for_users : tensor<8x6xf32>
  return %z2 : tensor<8x6xf32>
}
"""


@pytest.mark.skipif("shard-partition" not in all_passes(), reason="shard-partition is not registered")
def test_default_pipeline_partitions_and_runs_collectives(files, tmp_path, capsys):
    prog = files("m.mlir", MATMUL)
    a = np.arange(32, dtype=np.float32).reshape(4, 8) / 7
    w = np.linspace(-2, 2, 24, dtype=np.float32).reshape(8, 3)
    py = tmp_path / "gen.py"
    rc = main([prog, "--simulate", "4", "--input", f"x={files('a.npy', a)}", "--input", f"w={files('w.npy', w)}", "--output", str(tmp_path / "o"), "--emit-python", str(py)])
    assert rc == 0, capsys.readouterr().err
    assert "all_reduce" in py.read_text()  # the partitioned program, not the global one
    np.testing.assert_allclose(np.load(tmp_path / "o" / "result0.npy"), a @ w, rtol=1e-5)
    prog = files("a.mlir", ADD2D)
    rc = main([prog, "--simulate", "4", "--input", "x=random:seed=1", "--input", "y=random:seed=2", "--output", str(tmp_path / "o2")])
    assert rc == 0, capsys.readouterr().err
    rng1, rng2 = np.random.default_rng(1), np.random.default_rng(2)
    want = rng1.standard_normal((8, 6)).astype(np.float32) + rng2.standard_normal((8, 6)).astype(np.float32)
    np.testing.assert_array_equal(np.load(tmp_path / "o2" / "result0.npy"), want)


ERRORS = [
    (["--input", "x=X", "--input", "s=1", "--entry", "g"], "no function @g in the program (functions: @f)"),
    (["--input", "x=X"], "missing --input for %s (a float64 scalar)"),
    (["--input", "x=X", "--input", "s=1", "--input", "t=1"], "--input t: @f has no such argument (arguments: %x, %s)"),
    (["--input", "x=WRONGSHAPE", "--input", "s=1"], "input %x: expected shape (3,) of float64, got shape (4,)"),
    (["--input", "x=WRONGTYPE", "--input", "s=1"], "input %x: expected shape (3,) of float64, got elements of int32"),
    (["--input", "x=/nonexistent/x.npy", "--input", "s=1"], "input %x: no such file '/nonexistent/x.npy'"),
    (["--input", "x=NOTNPY", "--input", "s=1"], "is not a .npy file (numpy.save writes one)"),
    (["--input", "x=bogus", "--input", "s=1"], "input %x: bad input spec 'bogus'"),
    (["--input", "xbogus", "--input", "s=1"], "bad --input 'xbogus': expected NAME=SPEC"),
    (["--input", "x=random:sed=1", "--input", "s=1"], "input %x: unknown random option(s) sed (seed, low, high)"),
    (["--input", "x=X", "--input", "s=X"], "input %s: expected a scalar, got an array of shape (3,)"),
    (["--input", "x=X", "--input", "s=1", "--bogus"], "unrecognized arguments: --bogus"),
    (["--input", "x=X", "--input", "s=1", "--pipeline", "nosuchpass"], "'nosuchpass' does not refer to a registered pass"),
    (["--input", "x=X", "--input", "s=1", "--simulate", "3"], "grid of shape 2 has 2 devices but the world has 3 ranks"),
    (["--input", "x=random:seed=-1", "--input", "s=1"], "input %x: the random seed must not be negative, got -1"),
    (["--input", "x=random:low=5,high=1", "--input", "s=1"], "input %x: random bounds need finite low < high, got low=5, high=1"),
    (["--input", "x=random:low=nan", "--input", "s=1"], "input %x: random bounds need finite low < high"),
    (["--input", "x=X", "--input", "s=random:low=2"], "input %s: random bounds need finite low < high, got low=2, high=1"),
]


@pytest.mark.parametrize("extra,message", ERRORS)
def test_errors_are_one_line(files, capsys, extra, message):
    prog = files("p.mlir", PARTITIONED)
    subst = {"X": files("x.npy", np.ones(3)), "WRONGSHAPE": files("w.npy", np.ones(4)), "WRONGTYPE": files("t.npy", np.ones(3, np.int32)), "NOTNPY": files("n.npy", "not an npy file")}
    extra = [next((e.replace(k, v) for k, v in subst.items() if e.endswith("=" + k)), e) for e in extra]
    if "--simulate" not in extra:
        extra = [*extra, "--simulate", "2"]
    rc = main([prog, *extra])
    err = capsys.readouterr().err
    assert rc == 1
    assert message in err, err
    assert "Traceback" not in err
    if "world has 3 ranks" not in message:
        assert len(err.strip().splitlines()) == 1, err


def test_unreadable_program_and_parse_error(files, capsys):
    assert main(["/nonexistent.mlir"]) == 1
    assert capsys.readouterr().err.strip() == "shardc-run: error: cannot read '/nonexistent.mlir': No such file or directory"
    prog = files("bad.mlir", "func.func @f( {\n")
    assert main([prog]) == 1
    err = capsys.readouterr().err
    assert "bad.mlir:1:" in err and "error:" in err and "Traceback" not in err


def test_failing_rank_reported(files, capsys):
    prog = files("p.mlir", PARTITIONED.replace("%d = arith.mulf %a, %c : tensor<3xf64>", "%d = arith.mulf %a, %c : tensor<3xf64>\n  %i = arith.constant 7 : index\n  %e = tensor.extract %b[%i] : tensor<6xf64>"))
    assert main([prog, "--simulate", "2", "--input", "x=ones", "--input", "s=1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("shardc-run: rank ") and "IndexError" in err


# --- under mpiexec ------------------------------------------------------------------------


def mpirun(n, args, timeout=120):
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(STUB), *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("n,grid,sharding", [(2, "2", "[[0]] halo_sizes = [2, 1]"), (4, "2x2", "[[1], [0]]"), (4, "4", "[[0]] sharded_dims_offsets = [0, 4, 5, 5, 10]")])
def test_mpiexec_scatter_gather(files, tmp_path, n, grid, sharding):
    prog = files("p.mlir", sharded_prog(grid, sharding))
    p = mpirun(n, [prog, "--input", f"x={files('x.npy', X)}", "--input", f"y={files('y.npy', Y)}", "--pipeline", "test-stub-partition", "--output", str(tmp_path / "o"), "--timing"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("shardc-run: rank ") == n
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "result0.npy"), X * Y)


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.skipif("shard-partition" not in all_passes(), reason="shard-partition is not registered")
def test_mpiexec_default_pipeline(files, tmp_path):
    prog = files("m.mlir", MATMUL)
    a = np.arange(32, dtype=np.float32).reshape(4, 8) / 7
    w = np.linspace(-2, 2, 24, dtype=np.float32).reshape(8, 3)
    p = mpirun(4, [prog, "--input", f"x={files('a.npy', a)}", "--input", f"w={files('w.npy', w)}", "--output", str(tmp_path / "o")])
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o" / "result0.npy"), a @ w, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.mpi
def test_mpiexec_partitioned_program(files, tmp_path):
    prog = files("p.mlir", PARTITIONED)
    p = mpirun(2, [prog, "--input", "x=random:seed=1", "--input", "s=2", "--output", str(tmp_path / "o")])
    assert p.returncode == 0, p.stderr
    x = np.random.default_rng(1).standard_normal(3)
    np.testing.assert_allclose(np.load(tmp_path / "o" / "result0.rank1.npy"), 4 * x)


@pytest.mark.mpi
def test_mpiexec_bad_input_one_line(files, tmp_path):
    prog = files("p.mlir", PARTITIONED)
    p = mpirun(2, [prog, "--input", f"x={files('w.npy', np.ones(4))}", "--input", "s=2"])
    assert p.returncode != 0
    assert p.stderr.strip().splitlines() == ["shardc-run: error: input %x: expected shape (3,) of float64, got shape (4,)"]


@pytest.mark.slow
@pytest.mark.mpi
def test_mpiexec_missing_per_rank_file(files, tmp_path):
    prog = files("p.mlir", PARTITIONED)
    files("x0.npy", np.ones(3))
    p = mpirun(2, [prog, "--input", f"x={tmp_path}/x{{rank}}.npy", "--input", "s=2"])
    assert p.returncode != 0
    assert p.stderr.strip().splitlines() == [f"shardc-run: error: input %x: no such file '{tmp_path}/x1.npy'"]


@pytest.mark.mpi
def test_mpiexec_raising_rank_ends_the_job(files):
    prog = files("p.mlir", PARTITIONED.replace("%d = arith.mulf %a, %c : tensor<3xf64>", "%d = arith.mulf %a, %c : tensor<3xf64>\n  %i = arith.constant 7 : index\n  %e = tensor.extract %b[%i] : tensor<6xf64>"))
    t0 = time.monotonic()
    p = mpirun(2, [prog, "--input", "x=ones", "--input", "s=1"], timeout=60)
    assert p.returncode != 0
    assert "IndexError: index 7 is out of bounds" in p.stderr
    assert time.monotonic() - t0 < 30


LOWERED = "sharding-propagation,shard-partition,canonicalize,cse,convert-shard-to-mpi,canonicalize"


@pytest.mark.skipif("convert-shard-to-mpi" not in all_passes(), reason="convert-shard-to-mpi is not registered")
def test_lowered_to_mpi_runs_on_simulated_ranks(files, tmp_path, capsys):
    prog = files("m.mlir", MATMUL)
    a = np.arange(32, dtype=np.float32).reshape(4, 8) / 7
    w = np.linspace(-2, 2, 24, dtype=np.float32).reshape(8, 3)
    py = tmp_path / "gen.py"
    rc = main([prog, "--simulate", "4", "--input", f"x={files('a.npy', a)}", "--input", f"w={files('w.npy', w)}", "--pipeline", LOWERED, "--output", str(tmp_path / "o"), "--emit-python", str(py)])
    assert rc == 0, capsys.readouterr().err
    assert ".allreduce(" in py.read_text()  # mpi dialect ops, not shard collectives
    np.testing.assert_allclose(np.load(tmp_path / "o" / "result0.npy"), a @ w, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.skipif("convert-shard-to-mpi" not in all_passes(), reason="convert-shard-to-mpi is not registered")
def test_mpiexec_lowered_to_mpi(files, tmp_path):
    prog = files("m.mlir", MATMUL)
    a = np.arange(32, dtype=np.float32).reshape(4, 8) / 7
    w = np.linspace(-2, 2, 24, dtype=np.float32).reshape(8, 3)
    p = mpirun(4, [prog, "--input", f"x={files('a.npy', a)}", "--input", f"w={files('w.npy', w)}", "--pipeline", LOWERED, "--output", str(tmp_path / "o")])
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o" / "result0.npy"), a @ w, rtol=1e-5)


# --- a program lowered by shard-to-mpi-pipeline ------------------------------------------

ROOT = HERE.parent.parent


def mlp_files(files):
    rng = np.random.default_rng(7)
    v = {
        "x": rng.standard_normal((16, 32)).astype(np.float32),
        "w1": rng.standard_normal((32, 64)).astype(np.float32),
        "w2": rng.standard_normal((64, 32)).astype(np.float32),
    }
    paths = {k: files(f"{k}.npy", a) for k, a in v.items()}
    return v, paths, np.maximum(v["x"] @ v["w1"], 0) @ v["w2"]


def lower_mlp(tmp_path) -> Path:
    from shardc.tools.opt import main as opt_main

    lowered = tmp_path / "lowered.mlir"
    try:
        rc = opt_main([str(ROOT / "examples/mlp.mlir"), "--shard-to-mpi-pipeline", "-o", str(lowered)])
    except SystemExit as e:
        rc = e.code
    assert rc in (0, None) and "shardc.sharding" in lowered.read_text()
    return lowered


@pytest.mark.skipif("convert-shard-to-mpi" not in all_passes(), reason="convert-shard-to-mpi is not registered")
def test_lowered_file_takes_and_gives_global_arrays(files, tmp_path, capsys):
    """`shardc-opt --shard-to-mpi-pipeline` then shardc-run: the recorded shardings
    scatter the global weights and gather the result, as for the annotated program."""
    v, paths, want = mlp_files(files)
    lowered = lower_mlp(tmp_path)
    py = tmp_path / "gen.py"
    # the printed lowered program names its arguments %arg0, %arg1, %arg2
    inputs = [f"--input=arg{k}={paths[n]}" for k, n in enumerate(("x", "w1", "w2"))]
    assert main([str(lowered), "--simulate", "4", *inputs, "--output", str(tmp_path / "low"), "--emit-python", str(py)]) == 0, capsys.readouterr().err
    assert f"wrote {tmp_path / 'low'}/result0.npy: 16x32 f32" in capsys.readouterr().out
    source = py.read_text()
    assert ".allreduce(" in source and "all_reduce" not in source  # run as lowered: no pipeline
    got = np.load(tmp_path / "low" / "result0.npy")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    named = [f"--input={n}={paths[n]}" for n in ("x", "w1", "w2")]
    assert main([str(ROOT / "examples/mlp.mlir"), "--simulate", "4", *named, "--output", str(tmp_path / "ann")]) == 0
    np.testing.assert_allclose(got, np.load(tmp_path / "ann" / "result0.npy"), rtol=1e-6, atol=1e-5)
    # the global shapes are what the lowered file's inputs are checked against
    wrong = [inputs[0], f"--input=arg1={files('w1l.npy', v['w1'][:, :16])}", inputs[2]]
    assert main([str(lowered), "--simulate", "4", *wrong]) == 1
    assert "input %w1: expected shape (32, 64) of float32, got shape (32, 16)" in capsys.readouterr().err
    # the source names are recorded too (shardc.name), so the lowered file takes them
    assert main([str(lowered), "--simulate", "4", *named, "--output", str(tmp_path / "byname")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "byname" / "result0.npy"), got, rtol=0, atol=0)


@pytest.mark.skipif("convert-shard-to-mpi" not in all_passes(), reason="convert-shard-to-mpi is not registered")
def test_pipeline_option_lowers_inside_shardc_run(files, tmp_path, capsys):
    _, paths, want = mlp_files(files)
    named = [f"--input={n}={paths[n]}" for n in ("x", "w1", "w2")]
    assert main([str(ROOT / "examples/mlp.mlir"), "--simulate", "4", "--pipeline", "shard-to-mpi-pipeline", *named, "--output", str(tmp_path / "o"), "-q"]) == 0
    assert capsys.readouterr().out == ""
    np.testing.assert_allclose(np.load(tmp_path / "o" / "result0.npy"), want, rtol=1e-4, atol=1e-4)


INT_PROG = """func.func @f(%x: tensor<5xi32>) -> tensor<5xi32> {
  return %x : tensor<5xi32>
}
"""


def test_random_integer_bounds(files, tmp_path, capsys):
    prog = files("i.mlir", INT_PROG)
    assert main([prog, "--input", "x=random:low=-2.5,high=0.5", "--output", str(tmp_path / "o")]) == 0
    got = np.load(tmp_path / "o" / "result0.npy")
    assert got.dtype == np.int32 and set(got.tolist()) <= {-2, -1, 0}
    assert main([prog, "--input", "x=random:low=0.2,high=0.7"]) == 1
    assert capsys.readouterr().err.strip() == "shardc-run: error: input %x: no int32 values in [0.2, 0.7)"


TOSA_SPLIT = """shard.grid @g(shape = 2)
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %a to %s : tensor<4xf32>
  %1 = tosa.add %0, %0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


@pytest.mark.skipif("shard-partition" not in all_passes(), reason="shard-partition is not registered")
def test_result_sharding_found_by_propagation_is_gathered(files, tmp_path, capsys):
    """The result has no annotation of its own: propagation gives it the argument's
    split, and shardc-run must gather it by that sharding, not return rank 0's piece."""
    prog = files("t.mlir", TOSA_SPLIT)
    x = np.arange(4, dtype=np.float32)
    rc = main([prog, "--simulate", "2", "--input", f"a={files('x.npy', x)}", "--output", str(tmp_path / "o")])
    assert rc == 0, capsys.readouterr().err
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "result0.npy"), 2 * x)


def test_local_piece_of_an_unsharded_result_is_an_error(files, capsys):
    """A lowered program whose result records a global type but no sharding: a rank's
    piece of another shape is refused, not printed as the result."""
    split = "{grid = @g, halo_sizes = array<i64>, sharded_dims_offsets = array<i64>, split_axes = [array<i16: 0>]}"
    prog = files("l.mlir", f"""shard.grid @g(shape = 2)
func.func @f(%a: tensor<2xf32> {{shardc.global_type = tensor<4xf32>, shardc.sharding = {split}}}) -> (tensor<2xf32> {{shardc.global_type = tensor<4xf32>}}) {{
  return %a : tensor<2xf32>
}}
""")
    assert main([prog, "--simulate", "2", "--input", "a=zeros"]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "shardc-run: error: result0: expected shape (4,) of float32, but rank 0 returned shape (2,) "
        "and no sharding is recorded to put the pieces together"
    ]


PROPAGATED_RESULT = """
shard.grid @grid(shape = 2)
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x8xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %n = tosa.negate %xs, %zp, %zp : (tensor<4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}
"""


def test_lowered_result_sharded_by_propagation_is_gathered(files, tmp_path, capsys):
    """The result has no annotation of its own: the pipeline records the sharding that
    propagation gives it, so shardc-run gathers the whole result."""
    from shardc.tools.opt import main as opt_main

    lowered = tmp_path / "low.mlir"
    try:
        opt_main([files("p.mlir", PROPAGATED_RESULT), "--shard-to-mpi-pipeline", "-o", str(lowered)])
    except SystemExit as e:
        assert e.code in (0, None)
    assert lowered.read_text().count("shardc.sharding") == 2
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    assert main([str(lowered), "--simulate", "2", "--input", f"x={files('x.npy', x)}", "--output", str(tmp_path / "o")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "result0.npy"), -x)
