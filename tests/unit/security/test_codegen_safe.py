"""shardc.runtime.codegen.codegen_safe: the literals, identifiers and checks that keep IR text
from becoming generated code; and the other places IR text could reach (result file
names, messages, loaded arrays)."""

from __future__ import annotations

import ast
import builtins
import keyword
import random

import numpy as np
import pytest

from shardc.ir.escape import display
from shardc.runtime.codegen.codegen_safe import py_hint, py_identifier, py_literal
from shardc.runtime.execute.code_check import UnsafeCodeError, check_code, check_generated

NASTY = [
    "", "_", "__", "a", "a_", "_a", "a__b", "a-b", "a.b", "a b", "a_b", "a_2d_b", "a__2d__b",
    '"""', "'''", "\\", "\n", "\r\n", "\x00", "\u2028", "\u2029", "\x85", "\x1b[0m", "λ", "ﬁ", "fi",
    "import", "lambda", "None", "True", "if", "_np", "__import__", "print", "0", "1abc", "9_",
    "x" * 2000, "{}", "%s", "#", ")", "\ud800",
]


def _random_strings(n: int) -> list[str]:
    rng = random.Random(19)
    alphabet = "ab_-. 0\n\"'\\\x00\u2028λﬁ"
    return [''.join(rng.choice(alphabet) for _ in range(rng.randrange(0, 7))) for _ in range(n)]


@pytest.mark.parametrize("value", [*NASTY, 0, -7, 2**70, 1.5, -0.0, float("inf"), float("-inf"), True, None, b"\x00\"'", ("a", (1, 2.5)), [1, "x"], (), (3,)])
def test_py_literal_reads_back_to_the_same_value(value):
    text = py_literal(value)
    assert "\n" not in text and "\r" not in text and "\u2028" not in text
    got = eval(compile(ast.Expression(ast.parse(text, mode="eval").body), "<literal>", "eval"), {"__builtins__": {"float": float}})  # noqa: S307
    assert got == value and type(got) is type(value)
    if isinstance(value, float):
        assert str(got) == str(value)  # -0.0 keeps its sign


def test_py_literal_nan_and_numpy_scalars():
    assert py_literal(float("nan")) == "float('nan')"
    assert py_literal(np.int64(3)) == "3" and py_literal(np.float32(0.5)) == "0.5" and py_literal(np.bool_(True)) == "True"


@pytest.mark.parametrize("value", [object(), {"a": 1}, {1}, np.zeros(2), type("X", (), {"__repr__": lambda self: "__import__('os')"})()])
def test_py_literal_refuses_what_is_not_plain_data(value):
    with pytest.raises(TypeError):
        py_literal(value)


def test_py_identifier_is_injective_and_never_a_keyword_or_builtin():
    texts = list(dict.fromkeys([*NASTY, *_random_strings(3000)]))
    seen: dict[str, str] = {}
    for t in texts:
        name = py_identifier(t, "fn")
        assert name.isidentifier() and name.isascii() and not keyword.iskeyword(name) and not keyword.issoftkeyword(name)
        assert not hasattr(builtins, name) and not name[0].isdigit()
        assert all(c.isalnum() or c == "_" for c in name)
        assert seen.setdefault(name, t) == t, f"{t!r} and {seen[name]!r} collide as {name}"
    assert py_identifier("main", "fn") == "fn__main"


def test_py_identifier_names_never_meet_hint_names():
    """Function names (`prefix__...`) and fresh names (`hint_<n>`) live apart: a hint
    never contains `__`, whatever the text."""
    for t in [*NASTY, *_random_strings(500)]:
        h = py_hint(t)
        assert h.isidentifier() and h.isascii() and "__" not in h and not h.endswith("_") and h[0].isalpha()
        assert len(h) <= 40 and not keyword.iskeyword(f"{h}_0")


@pytest.mark.parametrize("prefix", ["", "_fn", "1x", "a-b", "a_b"])
def test_py_identifier_prefix_is_checked(prefix):
    with pytest.raises(ValueError):
        py_identifier("x", prefix)


def test_display_escapes_what_a_terminal_would_interpret():
    assert display("plain name") == "plain name"
    for s in ["a\nb", "a\rb", "\x1b[31m", "\x00", "a\u2028b", "\x85", "\t"]:
        d = display(s)
        assert d.isprintable() and len(d.splitlines()) <= 1
    assert display("a\nb") == "a\\0Ab"  # MLIR's escape: a backslash and the byte in hex
    assert display("\x1b[2K") == "\\1B[2K"
    assert display("a\rb\nc", keep_newlines=True) == "a\\0Db\nc"


HOSTILE = [
    "import os",
    "from os import system",
    "def f():\n    global x\n    x = 1",
    "x = __import__('os')",
    "eval('1')",
    "exec('1')",
    "open('f')",
    "getattr(x, 'y')",
    "x = ().__class__.__bases__",
    "class C: pass",
    "breakpoint()",
]


@pytest.mark.parametrize("code", HOSTILE)
def test_check_generated_refuses_what_no_emitter_writes(code):
    with pytest.raises(UnsafeCodeError):
        check_generated(ast.parse(code))


@pytest.mark.parametrize(
    "code",
    HOSTILE
    + [
        "def f(help):\n    pass",
        "f = lambda: x.__dict__",
        "def f():\n    a = 1\n    def g():\n        nonlocal a\n        a = 2\n    return g",
    ],
)
def test_check_code_refuses_the_same_in_compiled_code(code):
    """A cache hit checks code objects, not source: everything the source check refuses,
    and what only shows in the compiled form (a builtin's name as a parameter, a dunder
    attribute in a nested code object, a closure cell)."""
    with pytest.raises(UnsafeCodeError):
        check_code(compile(code, "<test>", "exec"))


def test_check_generated_accepts_the_runtime_s_code():
    from shardc.runtime import compile_text

    cm = compile_text("""func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}""")
    check_generated(ast.parse(cm.source))
    np.testing.assert_array_equal(cm.call("f", [1, 2, 3, 4]), [1, 4, 9, 16])


def test_functions_whose_names_differ_in_dropped_characters_stay_apart():
    """`@a-b`, `@a.b`, `@a_b`, `@"a b"`: four functions, four Python names."""
    from shardc.runtime import compile_text

    names = ["a-b", "a.b", "a_b", "a b", "a_2d_b"]
    funcs = "\n".join(
        f'func.func @"{n}"() -> i64 {{\n  %c = arith.constant {k} : i64\n  return %c : i64\n}}' for k, n in enumerate(names)
    )
    cm = compile_text(funcs)
    assert [cm.call(n) for n in names] == list(range(len(names)))
    defs = {line.split("(")[0] for line in cm.source.splitlines() if line.startswith("def fn__")}
    assert len(defs) == len(names)


def test_emitter_that_lets_ir_text_in_is_caught(monkeypatch):
    """The second line of defence: an emitter bug that pastes IR text into the source
    ends in a CompileError (a diagnostic), not in running it."""
    from xdsl.dialects import arith

    from shardc.runtime import compile_text
    from shardc.runtime.codegen.builder import _BY_CLASS, CompileError  # pyright: ignore[reportPrivateUsage]

    def leaky(op, g):
        g.emit("__import__('os')")
        g.assign(op, "0")

    monkeypatch.setitem(_BY_CLASS, arith.ConstantOp, leaky)
    with pytest.raises(CompileError, match="__import__"):
        compile_text("func.func @f() -> i64 {\n  %c = arith.constant 1 : i64\n  return %c : i64\n}")


# --- the other sinks: file names, messages, loaded data ------------------------------


def test_result_file_names_come_from_positions(tmp_path):
    from shardc.tools.run import write_outputs

    write_outputs([("result0", np.ones(2), True), ("result1.rank3", np.zeros(1), False)], str(tmp_path), quiet=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result0.npy", "result1.rank3.npy"]
    with pytest.raises(AssertionError):
        write_outputs([("../escape", np.ones(1), True)], str(tmp_path), quiet=True)
    assert not (tmp_path.parent / "escape.npy").exists()


def test_pickled_npy_input_is_refused(tmp_path, capsys):
    """--input reads .npy without pickle: an object array (which would unpickle, and so
    run code) is a one-line error."""
    from shardc.tools.run import main

    evil = tmp_path / "evil.npy"
    np.save(evil, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    prog = tmp_path / "p.mlir"
    prog.write_text("func.func @f(%a: tensor<1xf32>) -> tensor<1xf32> {\n  return %a : tensor<1xf32>\n}\n")
    assert main([str(prog), "--input", f"a={evil}"]) == 1
    err = capsys.readouterr().err
    assert "cannot read" in err and "pickle" in err.lower() and len(err.strip().splitlines()) == 1


def test_user_error_messages_are_one_line(capsys):
    from shardc.tools.cli import UserError, run_tool

    def body() -> int:
        raise UserError("no function @x\ny\x1b[2J in the program")

    assert run_tool("shardc-run", body) == 1
    err = capsys.readouterr().err
    assert err == "shardc-run: error: no function @x\\0Ay\\1B[2J in the program\n"


@pytest.mark.slow
def test_no_pickle_or_eval_in_the_package():
    """No module of shardc unpickles, or evals text: loading data stays data."""
    from pathlib import Path

    import shardc

    root = Path(shardc.__file__).parent
    # numba's on-disk cache is pickles by numba's design: numba_cache.py unpickles only the
    # bytes whose HMAC it has just verified (checked below), nothing else in shardc does
    sealed_reader = root / "runtime" / "execute" / "kernels" / "numba_cache.py"
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        if path == sealed_reader:
            _assert_unpickles_only_verified_bytes(tree)
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not any(m.split(".")[0] in ("pickle", "marshal", "shelve", "dill", "cloudpickle") for m in mods), path
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "eval":
                pytest.fail(f"{path}: eval")
            if isinstance(node, ast.keyword) and node.arg == "allow_pickle":
                assert isinstance(node.value, ast.Constant) and node.value.value is False, f"{path}: allow_pickle={ast.unparse(node.value)}"


def _assert_unpickles_only_verified_bytes(tree: ast.AST) -> None:
    """Every function of numba_cache.py that calls pickle.load(s) reads its bytes through
    `self._read` (which returns only bytes whose seal verifies), and nothing else there
    evals or loads."""
    loaders = 0
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or any(isinstance(n, ast.ClassDef) for n in ast.walk(fn)):
            continue  # the methods themselves, not the function defining their class
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
        if any(c.func.attr in ("load", "loads") and isinstance(c.func.value, ast.Name) and c.func.value.id == "pickle" for c in calls):  # type: ignore[attr-defined]
            loaders += 1
            assert any(c.func.attr == "_read" for c in calls), f"{fn.name} unpickles bytes it did not verify"  # type: ignore[attr-defined]
    assert loaders == 2  # the index and the data files


@pytest.mark.parametrize("name", ["../../outside.safetensors", "/etc/passwd", "rank-00000.safetensors/../../x", "model.pkl"])
def test_checkpoint_manifest_cannot_point_outside_its_directory(tmp_path, name):
    """A checkpoint is data too: the files its manifest names are its own rank files."""
    import json

    from shardc.training.checkpoint import FORMAT, MANIFEST, CheckpointError, open_checkpoint

    manifest = {"format": FORMAT, "step": 1, "world": 1, "grid": {}, "model": {}, "training": {}, "fingerprint": "",
                "progress": {}, "files": {name: 8}, "arrays": {"w": {"pieces": [{"file": name}]}}, "meta": {}}
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="not one of its rank files|is corrupt"):
        open_checkpoint(tmp_path)


def test_location_file_names_cannot_forge_diagnostics(tmp_path, capsys):
    """A loc() file name holding a line break and a fake diagnostic stays on its line."""
    from shardc.tools.opt import main

    prog = tmp_path / "d.mlir"
    prog.write_text(
        "shard.grid @g(shape = 2)\nfunc.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        '  %s = shard.sharding @nope split_axes = [[0]] : !shard.sharding loc("x\\0Afake.mlir:1:1: error: forged\\0A":3:4)\n'
        "  %x = shard.shard %a to %s : tensor<4xf32>\n  return %x : tensor<4xf32>\n}\n"
    )
    assert main([str(prog)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("x\\0Afake.mlir:1:1: error: forged\\0A:3:4: ") for line in lines), lines
