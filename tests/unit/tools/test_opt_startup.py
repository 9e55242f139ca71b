"""What a shardc-opt process imports: only what its command needs (start-up is paid on
every lit RUN line). Each check runs the tool as a command in a fresh interpreter and
lists `sys.modules` as the process exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shardc.tools.argv import help_text
from shardc.tools.help_table import PASS_HELP

ROOT = Path(__file__).resolve().parents[3]
MLP = str(ROOT / "examples" / "mlp.mlir")

# Never on shardc-opt's way: the runtime and what only it needs, the trainer, the MPI
# lowering (not named), xDSL's own driver (an argparse front and an entry-points scan).
NEVER = ("numpy", "shardc.runtime", "shardc.training", "shardc.frontends", "shardc.lowering", "mpi4py", "xdsl.xdsl_opt_main", "importlib.metadata", "argparse")

_PROBE = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
from shardc.tools.opt import main
sys.exit(main())
"""


def imported(*args: str, env: dict[str, str] | None = None, tmp: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run shardc-opt ARGS as the command does (`main()`, cache as `env` says); the
    result and the modules loaded when it exits."""
    listing = tmp / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(listing), *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120, env={**os.environ, **(env or {})},
    )
    return done, json.loads(listing.read_text())


def _matching(names: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [n for n in names if any(n == p or n.startswith(p + ".") for p in prefixes)]


def test_compile_imports_no_runtime_no_driver_no_unnamed_pass(tmp_path: Path) -> None:
    done, names = imported(MLP, "--sharding-propagation", "--shard-partition", "-o", str(tmp_path / "out.mlir"), env={"SHARDC_CACHE": "0"}, tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "shard.all_reduce" in (tmp_path / "out.mlir").read_text()
    assert {"shardc.dialects.shard", "shardc.passes.sharding_propagation", "shardc.passes.partition", "xdsl.dialects.builtin"} <= set(names)
    assert _matching(names, NEVER) == []
    # passes the command line did not name stay unloaded
    unnamed = ("shardc.passes.inline", "shardc.passes.test_shard_passes", "shardc.passes.test_resharding", "shardc.passes.pipelines")
    assert _matching(names, unnamed) == []



@pytest.mark.slow
def test_a_run_that_reshards_nothing_imports_no_planner_no_folding_no_result_cache(tmp_path: Path) -> None:
    """The planner (and `fractions`), the greedy driver and folding and, with
    SHARDC_CACHE=0, the result cache's module load when first needed: mlp.mlir's
    propagation and partition reshard and fold nothing."""
    done, names = imported(MLP, "--sharding-propagation", "--shard-partition", "-o", str(tmp_path / "out.mlir"), env={"SHARDC_CACHE": "0"}, tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    later = ("shardc.passes.resharding", "fractions", "decimal", "shardc.passes.greedy", "shardc.passes.folding", "shardc.tools.opt_cache")
    assert _matching(names, later) == []
    # a conflict the planner prices (a value resharded for its user) loads it
    conflict = tmp_path / "conflict.mlir"
    conflict.write_text(
        "shard.grid @grid(shape = 2)\n"
        "func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
        "  %s0 = shard.sharding @grid split_axes = [[0]] : !shard.sharding\n"
        "  %s1 = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding\n"
        "  %a = shard.shard %x to %s0 : tensor<8x8xf32>\n"
        "  %b = shard.shard %a to %s1 annotate_for_users : tensor<8x8xf32>\n"
        "  return %b : tensor<8x8xf32>\n"
        "}\n"
    )
    done, names = imported(str(conflict), "--shard-partition", env={"SHARDC_CACHE": "0"}, tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "shard.all_to_all" in done.stdout and "shardc.passes.resharding" in names


def test_help_and_usage_errors_load_no_pass_and_no_xdsl(tmp_path: Path) -> None:
    done, names = imported("--help", env={"SHARDC_CACHE": "0"}, tmp=tmp_path)
    assert done.returncode == 0 and "--shard-to-mpi-pipeline" in done.stdout
    assert _matching(names, ("xdsl",)) == []
    # no pass: the pipeline grammar (stdlib only) is the one module of the package it reads
    assert [n for n in names if n.startswith("shardc.passes.")] == ["shardc.passes.pipeline_text"]
    done, names = imported(MLP, "--shard-partitio", env={"SHARDC_CACHE": "0"}, tmp=tmp_path)
    assert done.returncode == 1 and "Did you mean '--shard-partition'?" in done.stderr
    assert _matching(names, ("xdsl", "shardc.ir", "shardc.dialects")) == []


def test_cache_hit_imports_no_xdsl(tmp_path: Path) -> None:
    env = {"SHARDC_CACHE_DIR": str(tmp_path / "cache"), "SHARDC_CACHE": "1", "SHARDC_CACHE_DEBUG": "1"}
    args = (MLP, "--sharding-propagation", "--shard-partition")
    first, names = imported(*args, env=env, tmp=tmp_path)
    assert first.returncode == 0 and "xdsl.dialects.builtin" in names
    assert first.stderr.startswith("shardc: opt cache: miss ")
    for _ in range(3):  # a shardc source edited meanwhile (a new identity) misses again
        second, names = imported(*args, env=env, tmp=tmp_path)
        if "hit" in second.stderr:
            break
    assert second.stderr.startswith("shardc: opt cache: hit ")
    assert second.returncode == 0 and second.stdout == first.stdout
    assert _matching(names, ("xdsl", "shardc.ir", "shardc.dialects", "shardc.passes.sharding_propagation", *NEVER)) == []


_REGISTRY = """
import json
from shardc.passes import PASSES, PIPELINES, all_passes, all_pipelines
from shardc.tools.argv import registry_pass_help
loaded = {name: load().name for name, load in {**all_passes(), **all_pipelines()}.items()}
print(json.dumps({"help": registry_pass_help(all_passes()), "loaded": loaded}))
"""


@pytest.mark.slow
def test_static_help_table_is_the_registry() -> None:
    """--help prints the passes from a static table: it must say what the registry says
    (regenerate with `python -m shardc.tools.argv --write-help-table`). The registry is read
    in a fresh interpreter: tests register stand-in passes in this one."""
    fresh = subprocess.run([sys.executable, "-c", _REGISTRY], capture_output=True, text=True, cwd=ROOT, timeout=120, check=True)
    registry = json.loads(fresh.stdout)
    assert PASS_HELP == registry["help"]
    text = help_text()
    for name in registry["loaded"]:
        assert f"  --{name}" in text, name
    # every "module:Class" entry names a pass class of that name (dce: xDSL's, under
    # mlir-opt's name)
    assert {k: v for k, v in registry["loaded"].items() if k != "dce"} == {k: k for k in registry["loaded"] if k != "dce"}


@pytest.mark.slow
def test_the_mpi_pipeline_imports_no_dialect_its_input_never_meets(tmp_path: Path) -> None:
    """The bench's program through `--shard-to-mpi-pipeline`: tosa's folders (and xDSL's
    tosa), all_slice's lowering (and xDSL's cf) stay unloaded; the output holds none
    of their ops."""
    sys.path.insert(0, str(ROOT))
    try:
        from bench.pipeline_compile import program
    finally:
        sys.path.remove(str(ROOT))
    source = tmp_path / "chain.mlir"
    source.write_text(program(200))
    done, names = imported(str(source), "--shard-to-mpi-pipeline", "-o", str(tmp_path / "out.mlir"), env={"SHARDC_CACHE": "0"}, tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "mpi.allreduce" in (tmp_path / "out.mlir").read_text()
    unused = ("xdsl.dialects.tosa", "shardc.passes.canonicalization.tosa", "shardc.lowering.all_slice", "xdsl.dialects.cf")
    assert _matching(names, unused) == []
