"""An .mlir file is data, never code: hostile strings in every string-bearing position
of valid programs, through shardc-opt, shardc-run --simulate 2, shardc-verify and the
lowered pipeline.

Each hostile string carries a payload that, if it ever ran as Python, would read the
environment variable SHARDC_HOSTILE_CANARY and create the file it names; the canary
file must never appear. The only outcomes allowed are the correct result or a
diagnostic (exit 1, an `error:` line, no traceback, no internal error). The tools run
in-process (`main(argv)`) to stay within the CI budget (about 15 s of CPU).
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from shardc.tools import opt as opt_tool
from shardc.tools import run as run_tool
from shardc.tools import verify as verify_tool

ENV = "SHARDC_HOSTILE_CANARY"
SYSTEM = "__import__('os').system('touch \"$" + ENV + "\"')"
OPEN = "open(__import__('os').environ['" + ENV + "'], 'w').write('ran')"

HOSTILE: list[str] = [
    # the report of issue #19: a triple quote closes the docstring, the next line runs
    "x\"\"\"\n    import os; os.system('touch \"$" + ENV + "\"')\n    \"\"\"",
    "x'''\n    " + OPEN + "\n    '''",
    'x"\n' + SYSTEM + '\n"',
    "x'\n" + OPEN + "\n'",
    "\\\"\"\"\n" + SYSTEM + "  # \\",
    "x\\\n" + OPEN,
    "a\x00b" + SYSTEM,
    "a\u2028" + OPEN + "\u2029b",
    "x\r" + SYSTEM + "\x85\x0c\x0b\x1b[31mred",
    "\t;" + OPEN + ";#",
    "{" + SYSTEM + "}%s%(x)s{0}",
    "import", "lambda", "None", "__import__", "_np", "print", "class", "exec", "__builtins__",
    "0abc", "1", "fn__x", "x_2d_", "x__2d__",
    "λ", "ﬁ",
    "a" * 3000 + OPEN,
]
"""Quotes of every kind, triple quotes, backslashes, line breaks of every kind, NUL,
format directives, Python keywords and builtins, a leading digit, names that look like
the sanitiser's own encodings, non-ASCII (ﬁ normalises to fi in Python identifiers),
and a very long name."""

SUFFIXES = ("-", ".", " ")
"""Characters the identifier sanitiser drops: names differing only in them must stay
different functions and globals."""


def mlir_str(s: str) -> str:
    """`s` as an MLIR string literal body: printable text as it is; `"`, `\\` and the
    bytes of every other character as `\\XX`."""
    out = []
    for ch in s:
        if ch.isprintable() and ch not in '"\\':
            out.append(ch)
        else:
            out.extend(f"\\{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    return "".join(out)


def q(s: str) -> str:
    return '"' + mlir_str(s) + '"'


# --- programs: each valid, with the hostile string in many positions ------------------


def plain_program(s: str) -> str:
    """Symbol names (four functions whose names differ only in dropped characters),
    string attributes, a cf.assert message."""
    f0, f1, f2, f3 = (q(s + x) for x in ("", *SUFFIXES))
    return f"""
func.func private @{f0}(%x: tensor<4xf32>) -> tensor<4xf32> attributes {{note = {q(s)}}} {{
  %c = arith.constant dense<2.0> : tensor<4xf32>
  %y = arith.mulf %x, %c {{tag = {q(s)}}} : tensor<4xf32>
  return %y : tensor<4xf32>
}}
func.func private @{f1}(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %c = arith.constant dense<1.0> : tensor<4xf32>
  %y = arith.addf %x, %c : tensor<4xf32>
  return %y : tensor<4xf32>
}}
func.func private @{f2}(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %c = arith.constant dense<3.0> : tensor<4xf32>
  %y = arith.mulf %x, %c : tensor<4xf32>
  return %y : tensor<4xf32>
}}
func.func private @{f3}(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %c = arith.constant dense<-4.0> : tensor<4xf32>
  %y = arith.addf %x, %c : tensor<4xf32>
  return %y : tensor<4xf32>
}}
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {{
  %t = arith.constant true
  cf.assert %t, {q(s)}
  %0 = func.call @{f0}(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = func.call @{f1}(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = func.call @{f2}(%1) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = func.call @{f3}(%2) : (tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}}
"""


PLAIN_RESULT = np.full(4, (1.0 * 2 + 1) * 3 - 4, np.float32)  # on ones


def located_program(s: str) -> str:
    """Locations of every kind naming the string: file, name, call site, fused."""
    return f"""
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {{
  %c = arith.constant dense<2.0> : tensor<4xf32> loc({q(s)}:1:2)
  %y = arith.mulf %a, %c : tensor<4xf32> loc({q(s)})
  %z = arith.addf %y, %a : tensor<4xf32> loc(callsite({q(s)} at {q(s)}:3:4))
  return %z : tensor<4xf32> loc(fused[{q(s)}:5:6, {q(s)}])
}} loc({q(s)}:0:0)
"""


def sharded_program(s: str) -> str:
    """A grid named by the string; the argument and result split over it."""
    g = "@" + q(s)
    return f"""
shard.grid {g}(shape = 2)
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {{
  %s = shard.sharding {g} split_axes = [[0]] : !shard.sharding
  %x = shard.shard %a to %s : tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.add ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %t = shard.shard %y to %s : tensor<4xf32>
  return %t : tensor<4xf32>
}}
"""


def recorded_program(s: str) -> str:
    """A lowered program's boundary as shard-to-mpi-pipeline records it: the argument's
    source name (`shardc.name`) and its grid are the string."""
    sharding = f"{{grid = @{q(s)}, halo_sizes = array<i64>, sharded_dims_offsets = array<i64>, split_axes = [array<i16: 0>]}}"
    return f"""
shard.grid @{q(s)}(shape = 2)
func.func @main(%arg0: tensor<2xf32> {{shardc.global_type = tensor<4xf32>, shardc.name = {q(s)}, shardc.sharding = {sharding}}}) -> (tensor<2xf32> {{shardc.global_type = tensor<4xf32>, shardc.sharding = {sharding}}}) {{
  %0 = arith.addf %arg0, %arg0 : tensor<2xf32>
  return %0 : tensor<2xf32>
}}
"""


def global_program(s: str) -> str:
    """memref.globals named by the string and by it plus a dropped character."""
    return f"""
memref.global "private" constant @{q(s)} : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
memref.global "private" constant @{q(s + "-")} : memref<4xf32> = dense<[5.0, 6.0, 7.0, 8.0]>
func.func @main() -> (memref<4xf32>, memref<4xf32>) {{
  %a = memref.get_global @{q(s)} : memref<4xf32>
  %b = memref.get_global @{q(s + "-")} : memref<4xf32>
  return %a, %b : memref<4xf32>, memref<4xf32>
}}
"""


def unknown_op_program(s: str) -> str:
    """An op whose name is the string: never registered, so a diagnostic."""
    return f"""
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = {q(s)}(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}
"""


# --- running the tools ---------------------------------------------------------------


@pytest.fixture
def canary(tmp_path, monkeypatch):
    path = tmp_path / "canary"
    monkeypatch.setenv(ENV, str(path))
    yield path
    assert not path.exists(), "a payload from the IR ran"


def call(tool: Callable[[Sequence[str]], int], argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = tool(argv)
    return rc, out.getvalue(), err.getvalue()


def check_outcome(rc: int, out: str, err: str, what: str) -> bool:
    """True for success (exit 0); a failure must be a clean diagnostic."""
    assert "Traceback" not in err + out, f"{what}: traceback\n{err}"
    assert "internal error" not in err, f"{what}: internal error\n{err}"
    if rc == 0:
        return True
    assert rc == 1, f"{what}: exit {rc}"
    assert re.search(r"(^|: )error: ", err, re.M), f"{what}: exit 1 without a diagnostic\n{err}"
    return False


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def results(out_dir: Path) -> dict[str, np.ndarray]:
    files = sorted(out_dir.iterdir())
    assert all(re.fullmatch(r"result\d+(\.rank\d+)?\.npy", f.name) for f in files), files
    return {f.stem: np.load(f, allow_pickle=False) for f in files}


def run_ok(tmp_path: Path, prog: str, extra: list[str], what: str) -> dict[str, np.ndarray] | None:
    out_dir = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
    rc, out, err = call(run_tool.main, [prog, "--output", str(out_dir), "-q", *extra])
    if not check_outcome(rc, out, err, what):
        return None
    return results(out_dir)


def test_issue_19_report_gives_its_result_and_runs_nothing(tmp_path, canary):
    """The program from the issue, verbatim but for the canary: its result, nothing run,
    and the generated Python carries the name only as a literal."""
    prog = write(tmp_path, "prog.mlir", f"""func.func @{q(HOSTILE[0])}(%a: tensor<4xf32>) -> tensor<4xf32> {{
  return %a : tensor<4xf32>
}}
""")
    py = tmp_path / "gen.py"
    rc, out, err = call(run_tool.main, [prog, "--input", "a=ones", "--emit-python", str(py)])
    assert (rc, err) == (0, "") and out == "result0: 4 f32 [1, 1, 1, 1]\n"
    tree = ast.parse(py.read_text())
    (fn,) = tree.body  # one function: its docstring and its return, nothing else
    assert isinstance(fn, ast.FunctionDef) and ast.get_docstring(fn, clean=False) == "@" + HOSTILE[0]
    assert [type(x) for x in fn.body] == [ast.Expr, ast.Return]


def accepted(tmp_path: Path, prog: str, what: str) -> bool:
    """shardc-opt takes the program (each is valid MLIR), and what it prints, in the
    custom and the generic form, reads back."""
    rc, out, err = call(opt_tool.main, [prog, "--mlir-print-debuginfo", "--canonicalize", "--cse"])
    assert check_outcome(rc, out, err, f"{what}: shardc-opt"), f"{what}: a valid program was refused\n{err}"
    reparses(tmp_path, out, [], what)
    rc, out, err = call(opt_tool.main, [prog, "--mlir-print-op-generic", "--mlir-print-debuginfo"])
    assert check_outcome(rc, out, err, f"{what}: shardc-opt --mlir-print-op-generic")
    reparses(tmp_path, out, [], what)
    return True


def reparses(tmp_path: Path, printed: str, flags: list[str], what: str) -> None:
    """What shardc-opt printed reads back: IR text was printed escaped, not raw."""
    again = write(tmp_path, "again.mlir", printed)
    assert check_outcome(*call(opt_tool.main, [again, *flags]), f"{what}: reparse"), f"{what}: printed IR does not parse"


def expect_runs(tmp_path: Path, prog: str, ok: bool, runs: list[tuple[list[str], dict[str, object]]], what: str) -> None:
    """Each run gives `want` (result name -> values) when shardc-opt accepted the
    program, else a diagnostic: a program the compiler takes must run correctly."""
    for argv, want in runs:
        got = run_ok(tmp_path, prog, argv, f"{what}: shardc-run {argv}")
        assert (got is not None) == ok, f"{what}: shardc-run {argv} {'failed' if ok else 'ran'} where shardc-opt {'accepted' if ok else 'refused'}"
        for name, values in want.items() if got is not None else ():
            np.testing.assert_array_equal(got[name], values)


TWO = np.full(4, 2.0, np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("k", range(len(HOSTILE)))
def test_hostile_strings(tmp_path, canary, k):
    s = HOSTILE[k]
    what = f"hostile string #{k} {s[:40]!r}"

    # Symbols and string attributes: 1 and 2 ranks.
    prog = write(tmp_path, "plain.mlir", plain_program(s))
    ok = accepted(tmp_path, prog, what)
    expect_runs(tmp_path, prog, ok, [(["--input", "a=ones"], {"result0": PLAIN_RESULT}), (["--simulate", "2", "--input", "a=ones"], {"result0.rank1": PLAIN_RESULT})], what)

    # Locations.
    prog = write(tmp_path, "located.mlir", located_program(s))
    ok = accepted(tmp_path, prog, what)
    expect_runs(tmp_path, prog, ok, [(["--input", "a=ones"], {"result0": np.full(4, 3.0, np.float32)})], what)

    # A grid named by the string: partitioned, lowered in shardc-run, verified, and
    # lowered by shardc-opt, whose printed output runs.
    prog = write(tmp_path, "sharded.mlir", sharded_program(s))
    ok = accepted(tmp_path, prog, what)
    runs = [(["--simulate", "2", *p, "--input", "a=ones"], {"result0": TWO}) for p in ([], ["--pipeline", "shard-to-mpi-pipeline"])]
    expect_runs(tmp_path, prog, ok, runs, what)
    rc, out, err = call(verify_tool.main, [prog, "--simulate", "2", "--stage", "all"])
    assert check_outcome(rc, out, err, f"{what}: shardc-verify") == ok
    assert not ok or out.startswith("OK: 1 result match"), out
    low = str(tmp_path / "lowered.mlir")
    rc, out, err = call(opt_tool.main, [prog, "--shard-to-mpi-pipeline", "-o", low])
    if check_outcome(rc, out, err, f"{what}: shardc-opt --shard-to-mpi-pipeline"):
        expect_runs(tmp_path, low, True, [(["--simulate", "2", "--input", "arg0=ones"], {"result0": TWO})], f"{what} lowered")

    # Recorded argument names and grids of a lowered program; the name in a message.
    prog = write(tmp_path, "recorded.mlir", recorded_program(s))
    ok = accepted(tmp_path, prog, what)
    expect_runs(tmp_path, prog, ok, [(["--simulate", "2", "--input", "0=ones"], {"result0": TWO})], what)
    if ok:
        rc, out, err = call(run_tool.main, [prog, "--simulate", "2"])
        assert rc == 1 and not check_outcome(rc, out, err, f"{what}: missing input")
        assert len(err.splitlines()) == 1 and "missing --input" in err, err

    # memref.global symbols.
    prog = write(tmp_path, "global.mlir", global_program(s))
    ok = accepted(tmp_path, prog, what)
    expect_runs(tmp_path, prog, ok, [([], {"result0": [1, 2, 3, 4], "result1": [5, 6, 7, 8]})], what)

    # An op named by the string: a diagnostic from each tool.
    prog = write(tmp_path, "unknown.mlir", unknown_op_program(s))
    for tool, argv in ((opt_tool.main, []), (run_tool.main, ["--input", "a=ones"]), (verify_tool.main, ["--simulate", "2"])):
        rc, out, err = call(tool, [prog, *argv])
        assert not check_outcome(rc, out, err, f"{what}: unknown op")
    rc, out, err = call(opt_tool.main, [prog, "--allow-unregistered-dialect"])
    if check_outcome(rc, out, err, f"{what}: unknown op allowed"):
        reparses(tmp_path, out, ["--allow-unregistered-dialect"], what)


def test_unknown_op_name_is_escaped_in_runtime_errors(canary):
    """An unregistered op (allowed by the context) that reaches the runtime: a one-line
    CompileError with the name escaped."""
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import ParseError

    from shardc.context import make_context
    from shardc.runtime import compile_module
    from shardc.runtime.codegen.builder import CompileError

    ctx = make_context()
    ctx.allow_unregistered = True
    compiled = 0
    for s in HOSTILE:
        try:
            module = Parser(ctx, unknown_op_program(s)).parse_module()
        except ParseError:  # xDSL takes no op name with non-ASCII escapes
            continue
        compiled += 1
        with pytest.raises(CompileError) as e:
            compile_module(module)
        msg = str(e.value)
        assert "\n" not in msg and "\r" not in msg and "\u2028" not in msg and "\x00" not in msg
        assert "not supported" in msg
    assert compiled >= len(HOSTILE) - 4


def test_env_canary_is_live(canary):
    """The canary works: the payload, when run as Python, does create the file."""
    exec(compile(OPEN, "<canary>", "exec"))  # noqa: S102 - the test's own payload
    assert canary.exists()
    canary.unlink()
