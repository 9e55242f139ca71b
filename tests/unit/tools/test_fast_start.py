"""`shardc.tools.fast_start`: what a shardc-opt command installs before xDSL is imported
(dataclass code compiled once per text in the process, the math dialect run on first
use) changes no output, patches no xDSL class, keeps nothing on disk, and nothing of
it leaks into shardc used as a library. Each check runs in a fresh interpreter: what it
installs lasts for the rest of a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MLP = str(ROOT / "examples" / "mlp.mlir")

# Ops in their custom forms, math's among them (the dialect a plain run leaves unloaded).
MATH_ARITH = """\
func.func @f(%a: f32, %b: f32, %i: i32, %t: tensor<4xf32>) -> (f32, i32, tensor<4xf32>) {
  %0 = math.exp %a : f32
  %1 = math.sqrt %0 fastmath<fast> : f32
  %2 = arith.subf %1, %b : f32
  %3 = arith.muli %i, %i overflow<nsw> : i32
  %4 = arith.cmpf olt, %2, %b : f32
  %5 = arith.select %4, %2, %b : f32
  %6 = math.tanh %t : tensor<4xf32>
  %7 = arith.index_cast %3 : i32 to index
  return %5, %3, %6 : f32, i32, tensor<4xf32>
}
"""


def _python(code: str, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], input=stdin, capture_output=True, text=True,
        cwd=ROOT, timeout=120, env={**os.environ, **(env or {})},
    )


_COMMAND = "import sys; from shardc.tools.opt import main; sys.exit(main())"
_LIBRARY = "import sys; from shardc.tools.opt import main; sys.exit(main(sys.argv[1:], cache=False))"


@pytest.mark.slow
def test_command_output_equals_the_library_run(tmp_path: Path) -> None:
    """The same text and diagnostics with everything installed (the command) as without
    (main called as a library), on ops of xDSL's that parse and print through formats,
    math's among them (the dialect a plain run leaves unloaded)."""
    src = tmp_path / "ops.mlir"
    src.write_text(MATH_ARITH + "\n// -----\nfunc.func @g(%a: i32) {\n  %0 = arith.addi %a : i32\n  return\n}\n")
    outputs = []
    for args in ([str(src), "--split-input-file"], [str(src), "--split-input-file", "--mlir-print-op-generic"], [MLP, "--sharding-propagation", "--shard-partition"]):
        plain = _python(_LIBRARY, *args)
        outputs.append(plain)
        fast = _python(_COMMAND, *args, env={"SHARDC_CACHE": "0"})
        assert (fast.returncode, fast.stdout, fast.stderr) == (plain.returncode, plain.stdout, plain.stderr), args
    assert "math.sqrt %0 fastmath<fast> : f32" in outputs[0].stdout
    assert "error: Expected ','" in outputs[0].stderr  # the second chunk's, from arith.addi's format
    assert '"math.sqrt"(%0) <{fastmath = #arith.fastmath<fast>}>' in outputs[1].stdout
    assert "shard.all_reduce" in outputs[2].stdout


_PROBE = """
import json, sys
from shardc.tools.opt import run_command
assert "dataclasses" not in sys.modules  # as in shardc-opt: run_command's install patches it on import
rc = run_command(sys.argv[1:])
import dataclasses
import xdsl.irdl.declarative_assembly_format as daf
from xdsl.dialects import arith
from shardc.tools import fast_start
cache = fast_start._installed
print(json.dumps({
    "rc": rc,
    "exec_installed": dataclasses.__dict__.get("exec") == cache.exec,
    "formats": sorted(type(c.cell_contents).__name__ for c in arith.AddiOp.parse.__func__.__closure__),
    "from_str": daf.FormatProgram.__dict__["from_str"].__func__.__module__,
    "math": type(sys.modules.get("xdsl.dialects.math")).__name__,
    "hooks": [type(f).__module__ for f in sys.meta_path if type(f).__module__.startswith("shardc")],
    "codes": len(cache.codes), "compiled": cache.compiled,
}))
"""


def _probe(*args: str, env: dict[str, str]) -> dict[str, object]:
    done = _python(_PROBE, *args, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_command_reuses_code_in_process_only_and_patches_no_xdsl_class(tmp_path: Path) -> None:
    """Each distinct dataclass text compiled once, nothing written under the cache (no
    code is kept across processes), math loaded lazily, and xDSL's formats xDSL's own."""
    env = {"SHARDC_CACHE": "1", "SHARDC_CACHE_DIR": str(tmp_path / "c")}
    got = _probe(MLP, "--sharding-propagation", "--shard-partition", "-o", os.devnull, env=env)
    assert got["rc"] == 0 and got["exec_installed"]
    assert got["compiled"] == got["codes"] > 300  # every distinct text, once
    assert got["math"] == "_LazyModule"  # never needed by this run
    assert got["formats"] == ["FormatProgram"]  # compiled by xDSL at class definition, as ever
    assert got["from_str"] == "xdsl.irdl.declarative_assembly_format"
    assert got["hooks"] == []  # the finder left once both modules were met
    assert not (tmp_path / "c").exists()  # (the result cache is main's, around run_command)
    done = _python(_COMMAND, MLP, "--sharding-propagation", "-o", os.devnull, env=env)
    assert done.returncode == 0, done.stderr
    written = {p.relative_to(tmp_path / "c").parts[0] for p in (tmp_path / "c").rglob("*") if p.is_file()}
    assert written and all(part.startswith("opt-") for part in written), written  # result entries only


def test_math_loads_on_first_use_as_xdsls_module() -> None:
    """The lazily loaded math dialect is xDSL's module, complete on first attribute use."""
    code = """
import sys
from shardc.tools import fast_start
fast_start.install()
import xdsl.dialects.linalg
math = sys.modules["xdsl.dialects.math"]
before = type(math).__name__
ops = sorted(op.name for op in math.Math.operations)
print(before, type(math).__name__, len(ops), "math.exp" in ops, math.ExpOp.__module__)
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    before, after, n, has_exp, module = done.stdout.split()
    assert (before, after, has_exp, module) == ("_LazyModule", "module", "True", "xdsl.dialects.math")
    assert int(n) > 30


def test_reused_code_makes_the_same_methods() -> None:
    """Dataclasses defined with the code cache have the methods `exec` of the text makes:
    equal code objects, file names and behaviour; a repeated text compiles once."""
    code = """
import dataclasses, json
def define():
    @dataclasses.dataclass(frozen=True)
    class P:
        x: int
        y: tuple = dataclasses.field(default_factory=tuple)
    @dataclasses.dataclass(order=True, kw_only=True)
    class Q:
        a: str = "a"
        b: float = 1.0
    return P, Q
def methods(classes):
    out = {}
    for cls in classes:
        for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__lt__"):
            fn = cls.__dict__.get(name)
            if fn is not None and hasattr(fn, "__code__"):
                out[cls.__name__ + "." + name] = fn.__code__
    return out
plain = methods(define())
from shardc.tools import fast_start
cache = fast_start.CodeCache()
dataclasses.exec = cache.exec
first = methods(define())
compiled = cache.compiled
second = methods(define())
P, Q = define()
p = P(1)
try:
    p.x = 2
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
print(json.dumps({
    "same": sorted(plain) == sorted(first) == sorted(second) and all(plain[k] == first[k] == second[k] for k in plain),
    "files": [sorted((k, c.co_filename) for k, c in d.items()) for d in (plain, first)],
    "compiled": compiled, "again": cache.compiled - compiled, "codes": len(cache.codes),
    "behaviour": [repr(p), p == P(1, ()), hash(p) == hash(P(1)), frozen, Q(a="a") < Q(a="b"), repr(Q())],
}))
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["same"] and got["files"][0] == got["files"][1]
    assert ["P.__init__", "<string>"] in got["files"][1]  # (__repr__ is wrapped in dataclasses.py)
    assert got["compiled"] > 0 and got["again"] == 0 and got["codes"] == got["compiled"]
    assert got["behaviour"] == ["define.<locals>.P(x=1, y=())", True, True, True, True, "define.<locals>.Q(a='a', b=1.0)"]


@pytest.mark.slow
def test_library_use_leaves_xdsl_and_dataclasses_alone() -> None:
    code = """
import dataclasses, sys
from shardc.tools.opt import main
assert main([sys.argv[1], "--sharding-propagation", "-o", "/dev/null"], cache=False) == 0
import xdsl.irdl.declarative_assembly_format as daf
print("exec" in dataclasses.__dict__, daf.FormatProgram.__dict__["from_str"].__func__.__module__, type(sys.modules["xdsl.dialects.math"]).__name__)
"""
    done = _python(code, MLP)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "xdsl.irdl.declarative_assembly_format", "module"]


def test_help_imports_neither_dataclasses_nor_xdsl() -> None:
    """`--help` stays a static table: what `install` patches is patched on import."""
    code = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write(json.dumps(sorted(m for m in sys.modules if m in ("dataclasses", "inspect") or m.startswith("xdsl")))))
from shardc.tools.opt import main
sys.exit(main())
"""
    done = _python(code, "--help", env={"SHARDC_CACHE": "0"})
    assert done.returncode == 0 and "--sharding-propagation" in done.stdout
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []
