"""Hostile inputs through every tool, each run as a user runs it (a subprocess): exit 1,
one line or an MLIR-style located diagnostic, no Python traceback, no "please report"
for input the user controls, and nothing a terminal would interpret (escape, carriage
return) in what is printed.

The inputs (issue #32's list, and those found trying more):
  IR:     an integer constant out of range for its type; a literal of 100,000 digits;
          regions nested 300 deep; an attribute nested 300 deep; regions nested 110 deep
          (parsed, but past what the generated Python allows); a source line holding
          escape sequences; cf.assert and symbol names holding them.
  inputs: `--input a=random` on an array of 400 TB; a dimension beyond numpy's index
          range; 70 dimensions (numpy allows 64); a truncated .npz; a text file as
          --inputs or as a .npy; arrays of Python objects (never unpickled); a
          directory; `--input zz=zeros` naming no argument; an --input given twice
          or under two names of one argument; a scalar outside its integer type;
          a grid of 0 devices (shardc-verify ran 0 ranks into an IndexError).
  train:  a BPE vocabulary of 10^11 (tokenizers panics in Rust); a parameter past the
          initialiser's 2**32 elements; a --torch-model that is not a .py file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

TOOLS = {
    "shardc-opt": "shardc.tools.opt",
    "shardc-run": "shardc.tools.run",
    "shardc-verify": "shardc.tools.verify",
    "shardc-view": "shardc.tools.view",
    "shardc-train": "shardc.tools.train",
}

LOCATED = re.compile(r"^[^\n]+:\d+:\d+: error: ")


def run_tool(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """The tool as a command, on this tree, without the compile cache."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), SHARDC_CACHE="0", SHARDC_DEBUG="")
    return subprocess.run(
        [sys.executable, "-m", TOOLS[tool], *args], capture_output=True, cwd=cwd, env=env, timeout=300
    )


def assert_clean_failure(r: subprocess.CompletedProcess[bytes], tool: str, *, located: bool | None = None) -> str:
    """Exit 1; stderr a located diagnostic or one `tool: error:` line; no traceback,
    no "please report", no raw control character. Returns stderr."""
    err = r.stderr.decode("utf-8", errors="replace")
    assert r.returncode == 1, (r.returncode, err)
    assert "Traceback" not in err, err
    assert "please report" not in err, err
    for stream in (r.stdout, r.stderr):
        assert b"\x1b" not in stream and b"\r" not in stream, stream
    if located is None:
        located = bool(LOCATED.match(err)) and not err.startswith(f"{tool}: ")
    if located:
        assert LOCATED.match(err), err
    else:
        assert err.startswith(f"{tool}: error: ") and err.count("\n") == 1, err
    return err


# ---------------------------------------------------------------------------------------
# Programs
# ---------------------------------------------------------------------------------------


def _nested_regions(n: int) -> str:
    return "func.func @main(%a: i1) {\n" + "scf.if %a {\n" * n + "}\n" * n + "return\n}\n"


BAD_PROGRAMS = {
    "out_of_range": (
        "func.func @main() -> tensor<4xi32> {\n  %c = arith.constant dense<1099511627776> : tensor<4xi32>\n"
        "  return %c : tensor<4xi32>\n}\n",
        r"p\.mlir:2:8: error: integer constant out of range for type i32: 1099511627776 is outside \[-2147483648, 4294967296\)$",
    ),
    "long_literal": (
        "func.func @main() -> tensor<4xi32> {\n  %c = arith.constant dense<" + "9" * 100_000 + "> : tensor<4xi32>\n"
        "  return %c : tensor<4xi32>\n}\n",
        r"p\.mlir:2:8: error: integer literal too long: 100000 digits \(at most 4300\)$",
    ),
    # where Python's recursion limit stops the parser depends on its stack: the line
    "deep_regions": (_nested_regions(300), r"p\.mlir:\d+:\d+: error: the program is nested too deeply"),
    "deep_attribute": (
        "func.func @main() attributes {x = " + "[" * 300 + "]" * 300 + "} {\n  return\n}\n",
        r"p\.mlir:1:\d+: error: the program is nested too deeply",
    ),
    "escapes_in_source": ("func.func @main() {\n  foo.bar \x1b[2K\r ok\n}\n", r"p\.mlir:2:11: error: Unexpected character: \\1B$"),
}


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["shardc-opt", "shardc-run", "shardc-verify", "shardc-view"])
@pytest.mark.parametrize("case", sorted(BAD_PROGRAMS))
def test_bad_program_is_a_located_diagnostic(tmp_path: Path, tool: str, case: str) -> None:
    text, expected = BAD_PROGRAMS[case]
    (tmp_path / "p.mlir").write_bytes(text.encode())
    err = assert_clean_failure(run_tool(tool, "p.mlir", cwd=tmp_path), tool, located=True)
    assert re.match(expected, err.split("\n", 1)[0]), err


def test_source_line_is_shown_escaped_with_the_caret_under_its_character(tmp_path: Path) -> None:
    (tmp_path / "p.mlir").write_bytes(BAD_PROGRAMS["escapes_in_source"][0].encode())
    for tool in ("shardc-opt", "shardc-run"):
        err = assert_clean_failure(run_tool(tool, "p.mlir", cwd=tmp_path), tool, located=True)
        lines = err.splitlines()
        assert lines[1] == "  foo.bar \\1B[2K\\0D ok"  # the whole line, as shardc-opt reads it
        assert lines[2] == " " * 10 + "^"


def test_nesting_past_the_generated_pythons_limit_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "p.mlir").write_text(_nested_regions(110))
    err = assert_clean_failure(run_tool("shardc-run", "p.mlir", "--input", "a=1", cwd=tmp_path), "shardc-run")
    assert "nested too deeply to compile" in err
    r = run_tool("shardc-verify", "p.mlir", cwd=tmp_path)  # the compile's diagnostic, unlocated
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err and "please report" not in err, err
    assert err == "<unknown>:0: error: runtime: the program is nested too deeply to compile (too many levels of indentation): the generated Python allows about 100 nested regions\n"


# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------

VECTOR = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n"


def _identity(shape: str) -> str:
    return f"func.func @main(%a: tensor<{shape}xf32>) -> tensor<{shape}xf32> {{\n  return %a : tensor<{shape}xf32>\n}}\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "vec.mlir").write_text(VECTOR)
    (tmp_path / "huge.mlir").write_text(_identity("10000000x10000000"))  # 400 TB
    (tmp_path / "dimbig.mlir").write_text(_identity("99999999999999999999"))
    (tmp_path / "dim70.mlir").write_text(_identity("x".join(["1"] * 70)))
    (tmp_path / "text.txt").write_text("a,b\n1,2\n")
    np.savez(tmp_path / "good.npz", a=np.ones(4, np.float32))
    data = (tmp_path / "good.npz").read_bytes()
    (tmp_path / "truncated.npz").write_bytes(data[: len(data) // 2])
    np.save(tmp_path / "objects.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "objects.npz", a=np.array([{"x": 1}], dtype=object))
    (tmp_path / "adir").mkdir()
    (tmp_path / "scalar.mlir").write_text("func.func @main(%s: i32) -> i32 {\n  return %s : i32\n}\n")
    (tmp_path / "nodevices.mlir").write_text(
        "shard.grid @grid(shape = 0)\nfunc.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %s = shard.sharding @grid split_axes = [[]] : !shard.sharding\n"
        "  %a0 = shard.shard %a to %s : tensor<4xf32>\n  return %a0 : tensor<4xf32>\n}\n"
    )
    return tmp_path


RUN_INPUTS = [
    (["huge.mlir", "--input", "a=random"], r"input %a: 10000000x10000000 float32 is 372529\.0 GiB \(1117587\.1 GiB while it is made\), more than this machine's [0-9.]+ [GM]iB of memory$"),
    (["huge.mlir", "--input", "a=zeros"], r"input %a: 10000000x10000000 float32 is 372529\.0 GiB, more than"),
    (["dimbig.mlir", "--input", "a=ones"], r"beyond what numpy can allocate \(99999999999999999999 elements\)"),
    (["dim70.mlir", "--input", "a=zeros"], r"numpy cannot make an array of this shape \(.*64.*70\)"),
    (["vec.mlir", "--inputs", "truncated.npz"], r"--inputs: 'truncated.npz' is a damaged or truncated \.npz file"),
    (["vec.mlir", "--inputs", "text.txt"], r"--inputs: 'text.txt' is not a \.npz file"),
    (["vec.mlir", "--inputs", "objects.npz"], r"holds Python objects, which are not loaded"),
    (["vec.mlir", "--inputs", "adir"], r"'adir' is a directory"),
    (["vec.mlir", "--input", "a=text.txt"], r"input %a: 'text.txt' is not a \.npy file"),
    (["vec.mlir", "--input", "a=objects.npy"], r"holds Python objects, which are not loaded"),
    (["vec.mlir", "--input", "a=zeros", "--input", "zz=zeros"], r"--input zz: @main has no such argument \(arguments: %a\)"),
    (["vec.mlir", "--input", "a=zeros", "--input", "a=ones"], r"--input a is given twice"),
    (["scalar.mlir", "--input", "s=99999999999999999999"], r"input %s: 99999999999999999999 is out of range for int32"),
    (["scalar.mlir", "--input", "s=1e999"], r"input %s: inf is out of range for int32"),
    (["vec.mlir", "--input", "a=zeros", "--input", "0=ones"], r"--input a and --input 0 both name %a \(argument #0\): give one"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args, message", RUN_INPUTS, ids=[" ".join(a) for a, _ in RUN_INPUTS])
def test_bad_run_input_is_one_line(files: Path, args: list[str], message: str) -> None:
    err = assert_clean_failure(run_tool("shardc-run", *args, cwd=files), "shardc-run", located=False)
    assert re.search(message, err), err
    assert "allow_pickle" not in err


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["huge.mlir"], r"input %a: 10000000x10000000 float32 is 372529\.0 GiB \("),
        (["dimbig.mlir"], r"beyond what numpy can allocate"),
        (["vec.mlir", "--inputs", "truncated.npz"], r"damaged or truncated \.npz file"),
        (["vec.mlir", "--inputs", "text.txt"], r"is not a \.npz file"),
        (["nodevices.mlir"], r"grid @grid has no devices \(a dimension of size 0\)"),
    ],
)
def test_bad_verify_input_is_one_line(files: Path, args: list[str], message: str) -> None:
    err = assert_clean_failure(run_tool("shardc-verify", *args, cwd=files), "shardc-verify", located=False)
    assert re.search(message, err), err


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["--tokenizer", "bpe", "--vocab-size", "99999999999"], "--vocab-size must be at most 16777216"),
        (["--n-embd", "1000000"], "the model is too large: its largest parameter has 4000000000000 elements"),
        (["--torch-model", "text.txt:make"], "text.txt is not a Python source file"),
    ],
)
def test_bad_train_input_is_one_line(files: Path, args: list[str], message: str) -> None:
    r = run_tool("shardc-train", "--steps", "1", "--simulate", "1", "--quiet", "--out", "out", *args, cwd=files)
    err = assert_clean_failure(r, "shardc-train", located=False)
    assert message in err, err


# ---------------------------------------------------------------------------------------
# Strings from the IR reach no terminal raw
# ---------------------------------------------------------------------------------------

FORGED_ASSERT = 'func.func @main(%a: i1) {\n  cf.assert %a, "bad\\0D\\1B[2Kok"\n  return\n}\n'

ESCAPED_NAMES = """shard.grid @"g\\1B[2Kx"(shape = 2)
func.func @"f\\0Dok"(%a: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @"g\\1B[2Kx" split_axes = [[0]] : !shard.sharding
  %b = shard.shard %a to %s : tensor<4xf32>
  return %b : tensor<4xf32>
}
"""


@pytest.mark.slow
@pytest.mark.parametrize("tool, args", [("shardc-run", ["--input", "a=0"]), ("shardc-verify", [])])
def test_assert_message_cannot_erase_the_error_line(tmp_path: Path, tool: str, args: list[str]) -> None:
    (tmp_path / "p.mlir").write_text(FORGED_ASSERT)
    r = run_tool(tool, "p.mlir", *args, cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err, err
    assert b"\x1b" not in r.stdout + r.stderr and b"\r" not in r.stdout + r.stderr
    assert "assertion failed: bad\\0D\\1B[2Kok" in err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_assert_message_under_mpiexec_is_escaped(tmp_path: Path) -> None:
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec is not on PATH")
    (tmp_path / "p.mlir").write_text(FORGED_ASSERT)
    env = dict(os.environ, PYTHONPATH=str(ROOT), SHARDC_CACHE="0", PYTHONUNBUFFERED="1")
    r = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, "-m", "shardc.tools.run", "p.mlir", "--input", "a=0"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )
    assert r.returncode != 0
    assert "\x1b" not in r.stdout + r.stderr and "\r" not in r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert "assertion failed: bad\\0D\\1B[2Kok" in r.stderr


def test_names_from_the_ir_are_escaped_in_view_and_run(tmp_path: Path) -> None:
    (tmp_path / "p.mlir").write_text(ESCAPED_NAMES)
    r = run_tool("shardc-view", "p.mlir", "--color", "never", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert b"\x1b" not in r.stdout and b"\r" not in r.stdout
    assert "grid @g\\1B[2Kx" in r.stdout.decode() and "@f\\0Dok:" in r.stdout.decode()
    err = assert_clean_failure(run_tool("shardc-run", "p.mlir", "--entry", "nope", cwd=tmp_path), "shardc-run", located=False)
    assert "(functions: @f\\0Dok)" in err


def test_display_escapes_the_way_mlir_does() -> None:
    from shardc.ir.escape import display

    assert display("bad\r\x1b[2Kok") == "bad\\0D\\1B[2Kok"
    assert display("a\u202eb") == "a\\E2\\80\\AEb"  # a bidirectional override: its UTF-8 bytes
    assert display("x\ny\rz", keep_newlines=True) == "x\ny\\0Dz"
    assert display("π = 3.14") == "π = 3.14"
