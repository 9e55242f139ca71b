"""shardc-opt imports only what a command needs: start-up is paid on every lit RUN line.

Each check runs in a fresh interpreter and lists which heavy modules got imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported_after(code: str, modules: list[str]) -> list[str]:
    probe = f"""
import io, json, sys, contextlib
with contextlib.redirect_stdout(io.StringIO()):
{chr(10).join('    ' + line for line in code.strip().splitlines())}
print(json.dumps([m for m in {modules!r} if m in sys.modules]))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_parsing_and_printing_import_no_numpy_and_no_affine_dialect() -> None:
    code = """
from shardc.tools.opt import main
rc = main(["examples/mlp.mlir", "--sharding-propagation", "--shard-partition", "-o", "/dev/null"])
assert rc == 0, rc
"""
    heavy = ["numpy", "shardc.dialects.affine", "shardc.runtime.codegen.compile", "shardc.lowering.shard_to_mpi"]
    assert _imported_after(code, heavy) == []


def test_command_line_parsing_imports_no_pass() -> None:
    """The pipeline table is read for every command line; it must not load a pass."""
    code = """
from shardc.passes import all_passes
from shardc.tools.argv import parse_argv
opts = parse_argv(["x.mlir", "--canonicalize", "--shard-to-mpi-pipeline"], all_passes())
"""
    heavy = ["shardc.passes.sharding_propagation", "shardc.passes.partition", "shardc.interfaces.sharding", "numpy"]
    assert _imported_after(code, heavy) == []


def test_every_dialect_still_loads_by_name() -> None:
    """The lazy context knows every dialect shardc and xDSL register, and loading each
    by name gives shardc's overlay where there is one."""
    from xdsl.dialects import get_all_dialects

    from shardc.context import make_context
    from shardc.dialects import shardc_dialects

    ctx = make_context()
    names = set(get_all_dialects()) | set(shardc_dialects())
    assert {"shard", "mpi", "linalg", "tensor", "affine", "tosa", "func", "arith"} <= names
    for name in sorted(names):
        dialect = ctx.get_optional_dialect(name)
        assert dialect is not None, name
        assert dialect.name == name
    ours = {name: factory() for name, factory in shardc_dialects().items()}
    for name, dialect in ours.items():
        assert ctx.get_optional_dialect(name) is dialect, name
    assert ctx.get_op("shard.all_reduce").__module__ == "shardc.dialects.shard"
    assert ctx.get_op("affine.delinearize_index").__module__ == "shardc.dialects.affine"


def test_affine_parser_still_reexported_by_the_dialect() -> None:
    from shardc.dialects import affine
    from shardc.ir import affine_parser

    assert affine.MLIRAffineParsing is affine_parser.MLIRAffineParsing
    assert affine.MLIRAffineParser is affine_parser.MLIRAffineParser
