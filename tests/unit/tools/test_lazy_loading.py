"""Cold start-up of `shardc-opt` (issue #16): a run loads the dialects, interface models
and passes its file and command line use, and nothing else; dialects still load by name
to the same ops; op formats compile on first use to the same programs; a command ends
without the interpreter's teardown, after its atexit handlers and flushes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MLP = str(ROOT / "examples" / "mlp.mlir")


def _fresh(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, **(env or {})},
    )


# -- what a one-function run imports ----------------------------------------------------

_AS_COMMAND = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
from shardc.tools.opt import main
sys.exit(main())
"""


def _dialect_modules(names: list[str], package: str) -> set[str]:
    """The dialect modules of `package` loaded (its helpers, `utils`, left out)."""
    prefix = package + "."
    tops = {n[len(prefix):].split(".")[0] for n in names if n.startswith(prefix)}
    return tops - {"utils"}


def test_one_function_propagation_imports_only_the_dialects_it_uses(tmp_path: Path) -> None:
    listing = tmp_path / "modules.json"
    out = tmp_path / "out.mlir"
    done = _fresh(_AS_COMMAND, str(listing), MLP, "--sharding-propagation", "-o", str(out), env={"SHARDC_CACHE": "0"})
    assert done.returncode == 0, done.stderr
    assert "shard.shard" in out.read_text()
    names: list[str] = json.loads(listing.read_text())  # the atexit handler ran
    # mlp.mlir holds builtin, func, arith, tensor, linalg and shard ops; xDSL's linalg
    # module imports its math dialect itself.
    assert _dialect_modules(names, "xdsl.dialects") == {"builtin", "func", "arith", "tensor", "linalg", "math"}
    assert _dialect_modules(names, "shardc.dialects") <= {"shard", "func", "arith", "tensor", "linalg", "linalg_conv", "overlays", "lazy_format"}
    assert {"affine", "memref", "scf", "cf", "tosa", "mpi", "vector", "tm_tensor"}.isdisjoint(_dialect_modules(names, "shardc.dialects"))
    # interface models load per dialect: none for tosa or tm_tensor here
    models = {n.split(".")[2] for n in names if n.startswith("shardc.interfaces.")}
    assert models == {"sharding", "linalg", "conv", "tensor", "arith"}
    # the pass the command named (and what it imports), no other; pipeline_text is the
    # grammar the command line is read with, not a pass
    assert [n for n in names if n.startswith("shardc.passes.") and n.count(".") == 2 and n.split(".")[2] not in ("sharding_propagation", "gc_pause", "options", "pipeline_text")] == []


# -- every dialect still loads by name, to the same ops ----------------------------------

_DIALECT_TABLE = """
import json, sys
from xdsl.dialects import get_all_dialects
from shardc.context import make_context
from shardc.dialects import shardc_dialects

names = sorted(set(get_all_dialects()) | set(shardc_dialects()))
if sys.argv[1] == "eager":
    # what registering every dialect eagerly gives: each factory called up front
    factories = {**get_all_dialects(), **shardc_dialects()}
    dialects = {name: factories[name]() for name in names}
else:
    ctx = make_context()
    dialects = {name: ctx.get_optional_dialect(name) for name in names}
    for name, dialect in dialects.items():
        for op in dialect.operations:
            assert ctx.get_op(op.name) is op, op.name
table = {
    name: {
        "name": d.name,
        "ops": sorted(f"{op.name}={op.__module__}.{op.__qualname__}" for op in d.operations),
        "attrs": sorted(f"{a.name}={a.__module__}.{a.__qualname__}" for a in d.attributes),
    }
    for name, d in dialects.items()
}
print(json.dumps(table))
"""


@pytest.mark.slow
def test_every_dialect_loads_by_name_to_the_ops_of_an_eager_load() -> None:
    lazy, eager = (_fresh(_DIALECT_TABLE, how) for how in ("lazy", "eager"))
    assert lazy.returncode == 0, lazy.stderr
    assert eager.returncode == 0, eager.stderr
    by_name, eagerly = json.loads(lazy.stdout), json.loads(eager.stdout)
    assert by_name == eagerly
    assert {"shard", "mpi", "linalg", "tensor", "affine", "tosa", "func", "arith", "tm_tensor", "vector"} <= set(by_name)
    assert all(entry["name"] == name for name, entry in by_name.items())
    assert "shard.all_reduce=shardc.dialects.shard.AllReduceOp" in by_name["shard"]["ops"]


# -- assembly formats compiled on first use ----------------------------------------------


def test_every_lazy_format_compiles_and_prints_as_an_eager_definition() -> None:
    from xdsl.irdl.declarative_assembly_format import FormatProgram

    from shardc.dialects.lazy_format import compile_format
    from shardc.dialects.mpi import MPI
    from shardc.dialects.shard import Shard

    lazy = [op for dialect in (Shard, MPI) for op in dialect.operations if op.assembly_format is not None]
    assert len(lazy) >= 35
    for op in lazy:
        program = compile_format(op)  # type: ignore[arg-type]
        assert compile_format(op) is program  # type: ignore[arg-type]
        eager = FormatProgram.from_str(op.assembly_format, op.get_irdl_definition())  # type: ignore[union-attr, arg-type]
        assert repr(program) == repr(eager), op.name


def test_lazy_format_parses_prints_and_reports_like_xdsl() -> None:
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin, IndexType
    from xdsl.ir import Dialect
    from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, result_def
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import PyRDLOpDefinitionError

    from shardc.dialects.lazy_format import compile_format, lazy_format_op_definition

    def make(decorator: Callable[[type[IRDLOperation]], type[IRDLOperation]], name: str, fmt: str) -> type[IRDLOperation]:
        class Op(IRDLOperation):
            x = operand_def(IndexType)
            r = result_def(IndexType)

        Op.name = name
        Op.assembly_format = fmt
        return decorator(Op)

    fmt = "$x `by` attr-dict `:` type($r)"
    lazy_op, eager_op = make(lazy_format_op_definition, "t.lazy", fmt), make(irdl_op_definition, "t.eager", fmt)
    assert "_shardc_format_program" not in lazy_op.__dict__  # nothing compiled yet
    ctx = Context(allow_unregistered=True)
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Dialect("t", [lazy_op, eager_op]))
    src = '"test"() ({\n^bb0(%a: index):\n  %0 = t.OP %a by {k = 1 : i64} : index\n}) : () -> ()'
    printed = {}
    for op in ("lazy", "eager"):
        module = Parser(ctx, src.replace("OP", op)).parse_op()
        printed[op] = str(module).replace("t.lazy", "t.X").replace("t.eager", "t.X")
    assert printed["lazy"] == printed["eager"]
    assert "t.X %a by {k = 1 : i64} : index" in printed["lazy"]
    # a bad format: refused on first use, with xDSL's error
    bad = make(lazy_format_op_definition, "t.bad", "$nope attr-dict")
    with pytest.raises(PyRDLOpDefinitionError, match="assembly format"):
        compile_format(bad)
    with pytest.raises(PyRDLOpDefinitionError):
        make(irdl_op_definition, "t.bad2", "$nope attr-dict")


# -- interface models per dialect --------------------------------------------------------

_MODELS_PROBE = """
import sys
from xdsl.dialects import linalg, tensor, tosa
from xdsl.dialects.builtin import TensorType, f32
from shardc.interfaces.sharding import get_sharding_interface
empty = tensor.EmptyOp([], TensorType(f32, [4]))
assert get_sharding_interface(empty) is not None
loaded = lambda: sorted(n for n in sys.modules if n.startswith("shardc.interfaces."))
print(loaded())
x = empty.results[0]
add = tosa.AddOp(operands=[x, x], result_types=[x.type])
impl = get_sharding_interface(add)
print(type(impl).__name__, loaded())
"""


@pytest.mark.slow
def test_interface_models_load_with_the_first_op_of_their_dialect() -> None:
    done = _fresh(_MODELS_PROBE)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    # tensor.pad / insert_slice's model is the conv module's (halos), built on linalg's
    assert first == "['shardc.interfaces.conv', 'shardc.interfaces.linalg', 'shardc.interfaces.sharding', 'shardc.interfaces.tensor']"
    assert second == "ElementwiseShardingInterface ['shardc.interfaces.conv', 'shardc.interfaces.linalg', 'shardc.interfaces.sharding', 'shardc.interfaces.tensor', 'shardc.interfaces.tosa']"


# -- the command's exit ------------------------------------------------------------------


def test_exit_now_runs_atexit_flushes_and_skips_teardown(monkeypatch: pytest.MonkeyPatch) -> None:
    import atexit

    from shardc.tools import opt

    calls: list[object] = []
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: calls.append("atexit"))
    monkeypatch.setattr(os, "_exit", lambda code: calls.append(("exit", code)))
    # a one-shot command's main thread alone (earlier tests in this process may have
    # left idle worker threads behind, which exit_now rightly refuses to cut short)
    real_count = threading.active_count
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    opt.exit_now(3)
    assert calls == ["atexit", ("exit", 3)]
    # another thread still running: the interpreter's own exit (which joins it)
    monkeypatch.setattr(threading, "active_count", lambda: max(2, real_count()))
    calls.clear()
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        assert opt.exit_now(1) == 1
    finally:
        release.set()
        worker.join()
    assert calls == []


@pytest.mark.slow
def test_command_exit_code_and_output_survive_the_fast_exit(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f() {\n  %0 = arith.constant 1 : i32 : i32\n  return\n}\n")
    done = _fresh("from shardc.tools.opt import main; main()", str(bad), env={"SHARDC_CACHE": "0"})
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"{bad}:2:")
    done = _fresh("from shardc.tools.opt import main; main(); print('unreached')", MLP, "--sharding-propagation", env={"SHARDC_CACHE": "0"})
    assert done.returncode == 0 and done.stderr == ""
    # all of it, as a plain call (which returns and exits normally) prints it
    plain = _fresh("import sys; from shardc.tools.opt import main; sys.exit(main(sys.argv[1:]))", MLP, "--sharding-propagation")
    assert plain.returncode == 0 and "shard.shard" in plain.stdout
    assert done.stdout == plain.stdout
