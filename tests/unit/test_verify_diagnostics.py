"""The diagnostics engine, the emission API for passes, and --verify-diagnostics."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from shardc.context import make_context
from shardc.ir import diagnostics
from shardc.ir.diagnostics import DiagnosticEngine, Severity
from shardc.ir.locations import LocatingParser, SourceFile
from shardc.ir.verify_diagnostics import DiagnosticVerifier

SOURCE = """\
func.func @a() {
  return
}
func.func @b() {
  return
}
"""


def parse(text: str, name: str = "t.mlir") -> ModuleOp:
    return LocatingParser(make_context(), text, name).parse_module()


def engine_for(text: str, name: str = "t.mlir") -> tuple[DiagnosticEngine, io.StringIO]:
    stream = io.StringIO()
    engine = DiagnosticEngine(stream=stream, print_op_on_diagnostic=False)
    engine.add_source(SourceFile(name, text))
    return engine, stream


def test_ops_and_block_arguments_get_file_locations():
    module = parse("func.func @f(%x: i32) -> i32 {\n  %0 = arith.addi %x, %x : i32\n  return %0 : i32\n}\n")
    f = next(iter(module.ops))
    assert str(f.location) == 'loc("t.mlir":1:1)'
    add, ret = list(f.body.block.ops)
    assert str(add.location) == 'loc("t.mlir":2:8)'  # the op name, not the result
    assert str(ret.location) == 'loc("t.mlir":3:3)'
    assert str(f.body.block.args[0].location) == 'loc("t.mlir":1:14)'
    assert str(module.location) == 'loc("t.mlir":0:0)'


def test_emit_renders_like_mlir_opt():
    engine, stream = engine_for(SOURCE)
    module = parse(SOURCE)
    ret = list(module.walk())[-1]
    with diagnostics.engine_scope(engine):
        diagnostics.emit(ret, "remark", "chosen sharding")
        diagnostics.emit(ret.location, Severity.WARNING, "no op here", notes=(("see there", None),))
        diagnostics.emit(None, "error", "nowhere")
    assert stream.getvalue().splitlines() == [
        "t.mlir:5:3: remark: chosen sharding",
        "  return",
        "  ^",
        "t.mlir:5:3: warning: no op here",
        "  return",
        "  ^",
        "t.mlir:5:3: note: see there",
        "<unknown>:0: error: nowhere",
    ]


def test_see_current_operation_note_comes_first():
    engine, stream = engine_for(SOURCE)
    engine.print_op_on_diagnostic = True
    ret = list(parse(SOURCE).walk())[-1]
    with diagnostics.engine_scope(engine):
        diag = diagnostics.make(ret, "error", "bad")
        diag.attach_note("more")
        engine.emit(diag)
    lines = stream.getvalue().splitlines()
    assert lines[3] == 't.mlir:5:3: note: see current operation: "func.return"() : () -> ()'
    assert lines[4] == "t.mlir:5:3: note: more"


def check(text: str, emit: list[tuple[int, str, str]]) -> tuple[bool, str]:
    """Run the verifier over `text` with diagnostics (line, kind, message) emitted."""
    engine, stream = engine_for(text)
    verifier = DiagnosticVerifier(engine)
    with diagnostics.engine_scope(engine):
        for line, kind, message in emit:
            loc = "unknown" if line == 0 else None
            from shardc.ir.locations import file_loc

            where = None if loc else file_loc("t.mlir", line, 1)
            diagnostics.emit(where, kind, message)
    ok = verifier.verify()
    return ok, stream.getvalue()


def test_designators():
    text = "\n".join(
        [
            "op1",  # 1
            "// expected-remark @above {{one}}",  # 2 -> 1
            "// expected-remark @below {{three}}",  # 3 -> 5 (skips the designator on 4)
            "// expected-warning @+3 {{seven}}",  # 4 -> 7
            "op5",  # 5
            "op6 // expected-error {{six}}",  # 6
            "op7",  # 7
            "// expected-note @-7 {{zero-based? no: line 1}}",  # 8 -> 1
            "// expected-error @unknown {{somewhere}}",  # 9
            "// expected-error-re {{value {{[0-9]+}} of {{.*}}}}",  # 10
        ]
    )
    ok, out = check(
        text,
        [
            (1, "remark", "the one"),
            (5, "remark", "three!"),
            (7, "warning", "seven"),
            (6, "error", "six"),
            (1, "note", "zero-based? no: line 1"),
            (0, "error", "it is somewhere"),
            (10, "error", "value 42 of many"),
        ],
    )
    assert ok, out
    assert out == ""


def test_mismatches_are_reported():
    text = "op1 // expected-error {{wanted}}\nop2 // expected-warning {{kind}}\n"
    ok, out = check(text, [(1, "error", "something else"), (2, "error", "kind")])
    assert not ok
    assert out.splitlines() == [
        "t.mlir:1:1: error: unexpected error: something else",
        "op1 // expected-error {{wanted}}",
        "^",
        "t.mlir:2:8: error: 'error' diagnostic emitted when expecting a 'warning'",
        "op2 // expected-warning {{kind}}",
        "       ^",
        't.mlir:1:8: error: expected error "wanted" was not produced',
        "op1 // expected-error {{wanted}}",
        "       ^~~~~~",
        't.mlir:2:8: error: expected warning "kind" was not produced',
        "op2 // expected-warning {{kind}}",
        "       ^~~~",
    ]


def test_only_expected_ignores_extra_diagnostics():
    engine, stream = engine_for("x // expected-error {{a}}\n")
    verifier = DiagnosticVerifier(engine, only_expected=True)
    with diagnostics.engine_scope(engine):
        diagnostics.emit(None, "error", "extra")
        from shardc.ir.locations import file_loc

        diagnostics.emit(file_loc("t.mlir", 1, 1), "error", "a")
    assert verifier.verify()
    assert stream.getvalue() == ""


# -- end to end: a pass that reports through the API, checked by --verify-diagnostics -----


@dataclass(frozen=True)
class RemarkEveryReturn(ModulePass):
    """Remarks on each func.return; fails on a function named @fail."""

    name = "test-remark-returns"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        failing = None
        for inner in op.walk():
            if isinstance(inner, func.ReturnOp):
                diagnostics.emit_remark(inner, "a return")
            if isinstance(inner, func.FuncOp) and inner.sym_name.data == "fail":
                failing = inner
        if failing is not None:
            raise diagnostics.op_error(failing, "cannot handle this function")


PASS_INPUT = """\
func.func @ok() {
  return // expected-remark {{a return}}
}

// -----

// expected-error @+1 {{'func.func' op cannot handle this function}}
func.func @fail() {
  // expected-remark @+1 {{a return}}
  return
}
"""


def run_main(*args: str) -> tuple[int, str, str]:
    from shardc.tools.opt import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def with_test_pass(monkeypatch: pytest.MonkeyPatch):
    from shardc.tools import opt as opt_mod

    table = dict(opt_mod.all_passes())
    table[RemarkEveryReturn.name] = lambda: RemarkEveryReturn
    monkeypatch.setattr(opt_mod, "all_passes", lambda: table)


def test_pass_diagnostics_verified(with_test_pass: None, tmp_path: Path):
    path = tmp_path / "p.mlir"
    path.write_text(PASS_INPUT)
    code, out, err = run_main(str(path), "-split-input-file", "-verify-diagnostics", "-test-remark-returns")
    assert (code, err) == (0, "")
    assert "func.func @ok" in out and "@fail" not in out

    code, out, err = run_main(str(path), "-split-input-file", "--test-remark-returns")
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == f"{path}:2:3: remark: a return"
    assert f"{path}:8:1: error: 'func.func' op cannot handle this function" in lines
    assert any(line.startswith(f"{path}:8:1: note: see current operation:") for line in lines)
