"""shardc-opt as a user runs it: exit codes and the exact lines it prints."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from shardc.tools.argv import UsageError, parse_argv, parse_pipeline
from shardc.passes import all_passes

GOOD = "func.func @f(%a: i32) -> i32 {\n  return %a : i32\n}\n"
BAD_TYPE = "func.func @f(%a: i32) -> i32 {\n  %0 = arith.addi %a, %a : i64\n  return %a : i32\n}\n"


def write(tmp_path: Path, text: str, name: str = "in.mlir") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# -- subprocess: what the shell sees -------------------------------------------------------


def test_good_input_exit_0(opt, tmp_path: Path):
    result = opt(write(tmp_path, GOOD), "-cse")
    assert result.returncode == 0
    assert "func.func @f" in result.stdout
    assert result.stderr == ""


def test_parse_error_is_one_located_diagnostic(opt, tmp_path: Path):
    path = write(tmp_path, BAD_TYPE)
    result = opt(path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{path}:2:19: error: use of value '%a' expects different type than prior uses: 'i64' vs 'i32'",
        "  %0 = arith.addi %a, %a : i64",
        "                  ^",
        f"{path}:1:14: note: prior use here",
        "func.func @f(%a: i32) -> i32 {",
        "             ^",
    ]


def test_stdin_is_named_stdin(opt):
    result = opt(stdin="func.func @f() {\n  retur\n}\n")
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == (
        "<stdin>:2:3: error: custom op 'retur' is unknown (tried 'func.retur' as well)"
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--bogus-flag"], "shardc-opt: Unknown command line argument '--bogus-flag'.  Try: 'shardc-opt --help'"),
        (
            ["--pass-pipeline=builtin.module(nope)"],
            "shardc-opt: 'nope' does not refer to a registered pass or pass pipeline; registered passes: ",
        ),
        (
            ["--inline=frobnicate=1"],
            "shardc-opt: <Pass-Options-Parser>: no such option frobnicate for pass 'inline' "
            "(valid options: default-pipeline, max-iterations)",
        ),
        (
            ["-inline=max-iterations=lots"],
            "shardc-opt: for the --max-iterations option of pass 'inline': 'lots' value invalid for integer argument!",
        ),
        (
            ["--allow-unregistered-dialect=maybe"],
            "shardc-opt: for the --allow-unregistered-dialect option: 'maybe' is invalid value for boolean argument! Try 0 or 1",
        ),
        (["--cse", "--pass-pipeline=builtin.module(cse)"], "shardc-opt: '-pass-pipeline' option can't be used with individual pass options"),
    ],
)
def test_command_line_errors(opt, tmp_path: Path, args: list[str], line: str):
    result = opt(write(tmp_path, GOOD), *args)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[0].startswith(line)
    assert "Traceback" not in result.stderr


def test_missing_input(opt, tmp_path: Path):
    missing = str(tmp_path / "nope.mlir")
    result = opt(missing)
    assert result.returncode == 1
    assert result.stderr == f"shardc-opt: cannot open input file '{missing}': No such file or directory\n"


@pytest.mark.slow
def test_verify_diagnostics_exit_codes(opt, tmp_path: Path):
    met = "func.func @f() {\n  // expected-error @+1 {{custom op 'retur' is unknown}}\n  retur\n}\n"
    result = opt(write(tmp_path, met), "-verify-diagnostics")
    assert (result.returncode, result.stderr) == (0, "")

    unmet = "func.func @f() {\n  // expected-error @+1 {{something else}}\n  return\n}\n"
    path = write(tmp_path, unmet, "unmet.mlir")
    result = opt(path, "--verify-diagnostics")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f'{path}:2:6: error: expected error "something else" was not produced',
        "  // expected-error @+1 {{something else}}",
        "     ^~~~~~~~~~~~~~",
    ]

    unexpected = write(tmp_path, BAD_TYPE, "unexpected.mlir")
    result = opt(unexpected, "--verify-diagnostics")
    assert result.returncode == 1
    assert result.stderr.splitlines()[0].startswith(f"{unexpected}:2:19: error: unexpected error: use of value")


@pytest.mark.slow
def test_output_file_written_only_on_success(opt, tmp_path: Path):
    out = tmp_path / "out.mlir"
    assert opt(write(tmp_path, GOOD), "-o", str(out)).returncode == 0
    assert "func.func @f" in out.read_text()
    out2 = tmp_path / "out2.mlir"
    assert opt(write(tmp_path, BAD_TYPE, "bad.mlir"), f"-o={out2}").returncode == 1
    assert not out2.exists()


def test_version_and_help(opt):
    version = opt("--version")
    assert version.returncode == 0 and version.stdout.startswith("shardc-opt ")
    help_ = opt("-help")
    assert help_.returncode == 0 and "--inline" in help_.stdout


# -- in process: the parts that need no subprocess ----------------------------------------


def run_main(*args: str) -> tuple[int, str, str]:
    from shardc.tools.opt import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_internal_error_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from shardc.tools import opt as opt_mod

    def boom(self: object) -> int:
        raise RuntimeError("kaput")

    monkeypatch.setattr(opt_mod.ShardcOptMain, "run", boom)
    monkeypatch.delenv("SHARDC_DEBUG", raising=False)
    code, out, err = run_main(write(tmp_path, GOOD))
    assert code == 1
    assert err == "shardc-opt: internal error: RuntimeError: kaput (please report)\n"
    monkeypatch.setenv("SHARDC_DEBUG", "1")
    code, out, err = run_main(write(tmp_path, GOOD))
    assert code == 1 and "Traceback" in err


def test_split_input_file_output_and_exit(tmp_path: Path):
    text = GOOD + "\n// -----\n\n" + BAD_TYPE + "\n// -----\n" + GOOD.replace("@f", "@g")
    path = write(tmp_path, text)
    code, out, err = run_main(path, "-split-input-file")
    assert code == 1
    assert out.count("// -----\n") == 2
    assert "func.func @f" in out and "func.func @g" in out
    # lines of the whole file, not of the chunk
    assert err.startswith(f"{path}:8:19: error: use of value")


def test_near_miss_split_marker_warns(tmp_path: Path):
    path = write(tmp_path, GOOD + "// ----\n" + GOOD.replace("@f", "@g"))
    code, out, err = run_main(path, "--split-input-file")
    assert code == 0
    assert err.startswith(f"{path}:4:7: warning: near miss with file split marker")


# -- the argv translation ------------------------------------------------------------------


def test_pipeline_anchors_are_flattened():
    specs = parse_pipeline("builtin.module(func.func(a, b{x=1 y=\"p q\"}), any(c{}), d)")
    assert [(s.name, s.options) for s in specs] == [
        ("a", []),
        ("b", [("x", "1"), ("y", "p q")]),
        ("c", []),
        ("d", []),
    ]


def test_pass_options_are_typed():
    args = parse_argv(["--inline=max-iterations=0x10 default-pipeline=cse", "-cse"], all_passes())
    inline, cse = args.passes
    assert (inline.max_iterations, inline.default_pipeline, cse.name) == (16, "cse", "cse")


def test_option_conversion_rules():
    from typing import Literal

    from shardc.passes.pipeline_text import convert_option as convert
    assert convert("forward-backward", Literal["forward", "forward-backward"], "t", "p") == "forward-backward"
    assert convert("a,b", tuple[str, ...], "t", "p") == ("a", "b")
    assert convert("1,2", tuple[int, ...], "t", "p") == (1, 2)
    assert convert(None, bool, "t", "p") is True
    assert convert("0", bool, "t", "p") is False
    assert convert("3", int | None, "t", "p") == 3
    with pytest.raises(UsageError, match=r"Cannot find option named 'up'! \(choose from: forward, backward\)"):
        convert("up", Literal["forward", "backward"], "traversal", "sharding-propagation")
    with pytest.raises(UsageError, match="requires a value"):
        convert(None, int, "n", "p")


def test_no_abbreviations():
    with pytest.raises(UsageError, match="Unknown command line argument '--split-input'"):
        parse_argv(["--split-input"], all_passes())
