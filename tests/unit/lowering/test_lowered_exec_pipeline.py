"""`shard-to-mpi-pipeline` end to end: named on the command line and in textual
pipelines, options forwarded, the MLP example lowered and executed on simulated ranks
against the unsharded result, and the recorded boundary shardings read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.passes import all_passes
from shardc.passes.pipelines import ShardToMPIPipelinePass, boundary_shardings
from shardc.runtime import compile_module
from shardc.runtime.execute.comm import delinearize, run_simulated
from shardc.runtime.execute.sharding import RuntimeSharding
from shardc.testing.oracle import find_mlir_opt, run_mlir_opt
from shardc.tools.argv import UsageError, instantiate, parse_argv, parse_pipeline
from shardc.tools.run import main as shardc_run

ROOT = Path(__file__).resolve().parents[3]
MLP = ROOT / "examples" / "mlp.mlir"


def lowered_mlp(**options):
    ctx = make_context()
    module = LocatingParser(ctx, MLP.read_text(), str(MLP)).parse_module()
    ShardToMPIPipelinePass(**options).apply(ctx, module)
    module.verify()
    return module


def mlp_values():
    rng = np.random.default_rng(3)
    return (
        rng.standard_normal((16, 32)).astype(np.float32),
        rng.standard_normal((32, 64)).astype(np.float32),
        rng.standard_normal((64, 32)).astype(np.float32),
    )


def reference(x, w1, w2):
    return np.maximum(x @ w1, 0) @ w2


def test_pipeline_is_a_flag_and_a_pipeline_element() -> None:
    args = parse_argv(["--shard-to-mpi-pipeline=traversal=forward"], all_passes())
    assert isinstance(args.passes[0], ShardToMPIPipelinePass)
    assert args.passes[0].traversal == "forward"
    (p,) = [instantiate(s, all_passes()) for s in parse_pipeline("builtin.module(shard-to-mpi-pipeline{keep-shardings=false})")]
    assert p.keep_shardings is False
    stages = [s.name for s in p.stages()]
    assert stages == ["sharding-propagation", "shard-partition", "shard-simplify", "canonicalize", "cse", "convert-shard-to-mpi", "forward-send-copies", "canonicalize"]
    assert p.stages()[0].traversal == "backward-forward"
    with pytest.raises(UsageError, match="Cannot find option named 'sideways'"):
        parse_argv(["--shard-to-mpi-pipeline=traversal=sideways"], all_passes())


def test_mlp_lowers_to_mpi_only() -> None:
    names = {op.name for op in lowered_mlp().walk()}
    assert {n for n in names if n.startswith("shard.")} == {"shard.grid"}
    assert "mpi.allreduce" in names


def test_lowered_mlp_on_scattered_global_inputs_equals_unsharded() -> None:
    """What shardc-run does with a lowered program: cut the global inputs by the
    recorded shardings, run every rank, put the results back together."""
    module = lowered_mlp()
    entry = next(op for op in module.walk() if getattr(op, "sym_name", None) is not None and op.name == "func.func")
    recorded = boundary_shardings(module, entry, RuntimeSharding)
    assert recorded is not None
    args, results = recorded
    assert [str(t) for t, _ in args] == ["tensor<16x32xf32>", "tensor<32x64xf32>", "tensor<64x32xf32>"]
    # recorded after propagation: x is annotated too (replicated)
    assert args[0][1].split_axes == ((),) and args[1][1].split_axes == ((), (0,)) and args[2][1].split_axes == ((0,), ())
    values = mlp_values()
    grid = (4,)
    per_rank = [
        tuple(v if s is None else np.ascontiguousarray(s.local_part(v, grid, delinearize(r, grid))) for v, (_, s) in zip(values, args))
        for r in range(4)
    ]
    cm = compile_module(module, "lowered.mlir")
    outs = run_simulated(4, lambda *a: cm.call("mlp", *a), per_rank_args=per_rank)
    (_, out_sharding), = results
    got = out_sharding.assemble([np.asarray(o) for o in outs], grid)
    np.testing.assert_allclose(got, reference(*values), rtol=1e-4, atol=1e-4)


def test_keep_shardings_false_records_nothing() -> None:
    module = lowered_mlp(keep_shardings=False)
    entry = next(op for op in module.walk() if op.name == "func.func")
    assert boundary_shardings(module, entry, RuntimeSharding) is None


def test_shardc_run_pipeline_option(tmp_path: Path, capsys) -> None:
    """`shardc-run --pipeline shard-to-mpi-pipeline` on the global program: inputs are
    global arrays, the lowered program runs on simulated ranks."""
    for name, v in zip(("x", "w1", "w2"), mlp_values()):
        np.save(tmp_path / f"{name}.npy", v)
    rc = shardc_run([str(MLP), "--entry", "mlp", "--simulate", "4", "--pipeline", "shard-to-mpi-pipeline",
                     *[f"--input={n}={tmp_path / n}.npy" for n in ("x", "w1", "w2")], "--output", str(tmp_path / "out")])
    assert rc == 0, capsys.readouterr().err
    np.testing.assert_allclose(np.load(tmp_path / "out/result0.npy"), reference(*mlp_values()), rtol=1e-4, atol=1e-4)


@pytest.mark.oracle
@pytest.mark.skipif(find_mlir_opt() is None, reason="mlir-opt not found")
def test_mlir_opt_reads_the_lowered_mlp(tmp_path: Path) -> None:
    from shardc.ir.printer import module_to_string

    result = run_mlir_opt("-", stdin=module_to_string(lowered_mlp()))
    assert result.returncode == 0, result.stderr
