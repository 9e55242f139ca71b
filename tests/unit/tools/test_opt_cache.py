"""shardc-opt's result cache (`shardc.tools.opt_cache`): a hit repeats the run it
recorded byte for byte (stdout and stderr in their order, `-o FILE`, the exit code);
anything else misses. In process: `main(args, cache=True)` is what the command runs."""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path

import pytest

import shardc
from shardc.tools import opt as opt_mod
from shardc.tools import opt_cache

GOOD = "func.func @f(%a: i32) -> i32 {\n  %0 = arith.addi %a, %a : i32\n  %1 = arith.addi %a, %a : i32\n  return %1 : i32\n}\n"
# a good chunk, then a bad one: stdout and stderr both written, exit 1
SPLIT = GOOD + "// -----\n" + "func.func @g(%a: i32) -> i32 {\n  %0 = arith.addi %a, %a : i64\n  return %a : i32\n}\n"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(where))
    monkeypatch.setenv("SHARDC_CACHE", "1")
    monkeypatch.delenv("SHARDC_CACHE_DEBUG", raising=False)
    return where


def run(*args: str, stdin: bytes | None = None) -> tuple[int, str, str, str]:
    """(exit code, stdout, stderr, both in the order written) of one cached main()."""
    out, err, both = io.StringIO(), io.StringIO(), io.StringIO()

    class Stream:
        def __init__(self, own: io.StringIO):
            self.own = own

        def write(self, text: str) -> int:
            self.own.write(text)
            return both.write(text)

        def flush(self) -> None:
            pass

    saved = sys.stdout, sys.stderr, sys.stdin
    sys.stdout, sys.stderr = Stream(out), Stream(err)  # type: ignore[assignment]
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        code = opt_mod.main(list(args), cache=True)
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved
    return code, out.getvalue(), err.getvalue(), both.getvalue()


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.glob("opt-*/*") if not p.name.startswith("."))


@pytest.fixture
def no_driver(monkeypatch: pytest.MonkeyPatch):
    """Make any real run fail loudly: what still answers is the cache."""

    def boom(self: object) -> int:
        raise AssertionError("the driver ran")

    return lambda: monkeypatch.setattr(opt_mod.ShardcOptMain, "run", boom)


def test_hit_repeats_stdout_stderr_order_and_exit_code(cache: Path, tmp_path: Path, no_driver) -> None:
    path = tmp_path / "in.mlir"
    path.write_text(SPLIT)
    first = run(str(path), "--split-input-file", "--cse")
    assert first[0] == 1 and "func.func @f" in first[1] and "error: use of value '%a'" in first[2]
    assert len(entries(cache)) == 1
    no_driver()
    assert run(str(path), "--split-input-file", "--cse") == first


def test_hit_writes_the_output_file(cache: Path, tmp_path: Path, no_driver) -> None:
    path, out = tmp_path / "in.mlir", tmp_path / "d" / "out.mlir"
    path.write_text(GOOD)
    out.parent.mkdir()
    assert run(str(path), "--cse", "-o", str(out)) == (0, "", "", "")
    written = out.read_text()
    assert written.count("arith.addi") == 1
    out.unlink()
    no_driver()
    assert run(str(path), "--cse", "-o", str(out)) == (0, "", "", "")
    assert out.read_text() == written
    # the file cannot be written now: the one line a cold run gives, exit 1
    out.unlink()
    out.parent.rmdir()
    out.parent.write_text("")
    code, _, err, _ = run(str(path), "--cse", "-o", str(out))
    assert (code, err) == (1, f"shardc-opt: cannot open output file '{out}': Not a directory\n")


def test_other_input_or_flags_miss(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "in.mlir"
    path.write_text(GOOD)
    run(str(path), "--cse")
    run(str(path), "--canonicalize")
    path.write_text(GOOD.replace("@f", "@h"))
    code, out, _, _ = run(str(path), "--cse")
    assert code == 0 and "@h" in out
    assert len(entries(cache)) == 3


def test_stdin_is_keyed_by_its_bytes(cache: Path) -> None:
    a = run("--cse", stdin=GOOD.encode())
    b = run("--cse", stdin=GOOD.replace("@f", "@k").encode())
    assert a[0] == b[0] == 0 and "@f" in a[1] and "@k" in b[1]
    assert run("--cse", stdin=GOOD.encode()) == a


def test_corrupt_entry_is_ignored_with_one_warning_and_rewritten(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "in.mlir"
    path.write_text(GOOD)
    first = run(str(path), "--cse")
    [entry] = entries(cache)
    for damage in (lambda raw: raw[: len(raw) // 2], lambda raw: raw.replace(b"func.func", b"func.funk"), lambda raw: b"garbage"):
        entry.write_bytes(damage(entry.read_bytes()))
        code, out, err, _ = run(str(path), "--cse")
        assert (code, out) == first[:2]
        assert err.startswith("shardc: warning: opt cache: ignoring ") and err.count("\n") == 1
        assert run(str(path), "--cse") == first  # rewritten: a clean hit again


def test_entry_of_another_key_is_refused(cache: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.mlir", tmp_path / "b.mlir"
    a.write_text(GOOD)
    b.write_text(GOOD.replace("@f", "@b"))
    first = run(str(a), "--cse")
    run(str(b), "--cse")
    [ea] = [e for e in entries(cache) if b"@b" not in e.read_bytes()]
    [eb] = [e for e in entries(cache) if b"@b" in e.read_bytes()]
    ea.write_bytes(eb.read_bytes())  # a valid entry, filed under the wrong key
    code, out, err, _ = run(str(a), "--cse")
    assert (code, out) == first[:2]
    assert err == f"shardc: warning: opt cache: ignoring {ea}: key mismatch\n"


def test_compiler_identity_change_misses(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "in.mlir"
    path.write_text(GOOD)
    first = run(str(path), "--cse")
    monkeypatch.setattr(opt_cache, "_IDENTITY", "0" * 64)
    calls: list[int] = []
    real = opt_mod.ShardcOptMain.run

    def counting(self: opt_mod.ShardcOptMain) -> int:
        calls.append(1)
        return real(self)

    monkeypatch.setattr(opt_mod.ShardcOptMain, "run", counting)
    assert run(str(path), "--cse") == first and calls == [1]
    assert len({p.parent for p in entries(cache)}) == 2


def test_identity_hashes_every_source_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "shardc"
    (fake / "tools").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "tools" / "x.py").write_text("A = 1\n")
    monkeypatch.setattr(shardc, "__file__", str(fake / "__init__.py"))

    def identity() -> str:
        monkeypatch.setattr(opt_cache, "_IDENTITY", None)
        return opt_cache.compiler_identity()

    one = identity()
    assert identity() == one
    (fake / "tools" / "x.py").write_text("A = 2\n")
    two = identity()
    (fake / "tools" / "y.py").write_text("")
    three = identity()
    (fake / "tools" / "notes.txt").write_text("not source")
    assert len({one, two, three}) == 3 and identity() == three


def test_crashes_and_internal_errors_are_not_cached(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from shardc.passes.cse import CSEPass

    path = tmp_path / "in.mlir"
    path.write_text(GOOD)

    def explode(self: object, ctx: object, op: object) -> None:
        raise RuntimeError("pass bug")

    monkeypatch.setattr(CSEPass, "apply", explode)
    code, _, err, _ = run(str(path), "--cse")
    assert code == 1 and "internal error in pass 'cse'" in err
    assert entries(cache) == []
    monkeypatch.setattr(opt_mod.ShardcOptMain, "run", lambda self: 1 / 0)
    code, _, err, _ = run(str(path), "--canonicalize")
    assert code == 1 and "internal error: ZeroDivisionError" in err
    assert entries(cache) == []


def test_off_and_unsafe_directories_run_uncached(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "in.mlir"
    path.write_text(GOOD)
    monkeypatch.setenv("SHARDC_CACHE", "0")
    assert run(str(path), "--cse")[0] == 0
    assert not cache.exists()
    monkeypatch.setenv("SHARDC_CACHE", "1")
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o777)
    code, out, err, _ = run(str(path), "--cse")
    assert code == 0 and "func.func @f" in out
    assert err == f"shardc: warning: opt cache: {cache} is writable by group or others (mode 777); not caching\n"
    assert entries(cache) == []


def test_help_version_and_usage_errors_are_not_looked_up(cache: Path) -> None:
    assert run("--help")[0] == 0
    assert run("--no-such-flag")[0] == 1
    assert not cache.exists()


def test_stale_identities_are_pruned(cache: Path, tmp_path: Path) -> None:
    old, recent = cache / "opt-old", cache / "opt-recent"
    for d in (old, recent):
        d.mkdir(parents=True)
        (d / "entry").write_text("x")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    path = tmp_path / "in.mlir"
    path.write_text(GOOD)
    run(str(path), "--cse")
    assert not old.exists() and recent.exists() and len(entries(cache)) == 2


def test_identity_follows_xdsl_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    (site / "xdsl").mkdir(parents=True)
    (site / "xdsl" / "__init__.py").write_text("")
    (site / "xdsl-9.9.dist-info").mkdir()
    (site / "xdsl-9.9.dist-info" / "RECORD").write_text("xdsl/__init__.py,sha256=abc,0\n")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])

    def identity() -> str:
        monkeypatch.setattr(opt_cache, "_IDENTITY", None)
        return opt_cache.compiler_identity()

    one = identity()
    (site / "xdsl-9.9.dist-info" / "RECORD").write_text("xdsl/__init__.py,sha256=abd,0\n")
    two = identity()
    (site / "xdsl" / "ir.py").write_text("edited in place")
    three = identity()
    assert len({one, two, three}) == 3


def test_identity_follows_a_foreign_pass_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from shardc import passes

    (tmp_path / "my_plugin_pass.py").write_text("class P: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(passes.PASSES, "my-plugin", "my_plugin_pass:P")

    def identity() -> str:
        monkeypatch.setattr(opt_cache, "_IDENTITY", None)
        return opt_cache.compiler_identity()

    one = identity()
    (tmp_path / "my_plugin_pass.py").write_text("class P: x = 1\n")
    assert identity() != one
    monkeypatch.setitem(passes.PASSES, "my-plugin", "no_such_module_anywhere:P")
    assert identity() != identity()  # unreadable: never the same twice


def test_forged_entry_with_a_recomputed_hash_is_refused(cache: Path, tmp_path: Path) -> None:
    """Whoever can write the cache but has not this user's key (outside the cache) cannot
    make shardc-opt print what they like: the tag is keyed."""
    path = tmp_path / "in.mlir"
    path.write_text(GOOD)
    first = run(str(path), "--cse")
    [entry] = entries(cache)
    raw = entry.read_bytes()
    magic = raw[: raw.index(b"\n") + 1]
    header, _, body = raw[len(magic) :].partition(b"\n")
    key = header.split(b" ")[0]
    forged = body.replace(b"@f", b"@forged")
    assert forged != body
    unkeyed = opt_cache.blake2b(key + b"\0" + forged, digest_size=32).hexdigest().encode()
    entry.write_bytes(magic + key + b" " + unkeyed + b"\n" + forged)
    code, out, err, _ = run(str(path), "--cse")
    assert (code, out) == first[:2] and "@forged" not in out
    assert err == f"shardc: warning: opt cache: ignoring {entry}: its authentication tag does not verify: not written by this user's shardc with this key\n"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_entry_that_is_not_a_regular_file_is_refused_without_blocking(cache: Path, tmp_path: Path, kind: str) -> None:
    import subprocess

    path = tmp_path / "in.mlir"
    path.write_text(GOOD)
    root = Path(shardc.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "SHARDC_CACHE_DIR": str(cache)}

    def opt_process() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "shardc.tools.opt", str(path), "--cse"], capture_output=True, text=True, env=env, timeout=60)

    # The entry is written by a process like the one that reads it: this process's compiler
    # identity can differ (a test module that registers a foreign pass, as test_run_cli's
    # stub partition does, changes it), and the reader would then look in another directory.
    first = opt_process()
    [entry] = entries(cache)
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)
    else:
        entry.symlink_to("/dev/zero")
    done = opt_process()
    assert (done.returncode, done.stdout) == (first.returncode, first.stdout)
    reason = "not a regular file" if kind == "fifo" else "a symbolic link, not a regular file"
    assert done.stderr == f"shardc: warning: opt cache: ignoring {entry}: {reason}\n"


def test_in_process_identity_equals_a_fresh_process() -> None:
    """The tests above that run shardc-opt in a subprocess need the same identity in and
    out of process: a test module that leaves a pass of its own in the pass table (a
    foreign pass, hashed into the identity) for the rest of the session breaks that."""
    import subprocess

    root = Path(shardc.__file__).resolve().parents[1]
    code = "from shardc.tools.opt_cache import compiler_identity; print(compiler_identity())"
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.strip() == opt_cache.compiler_identity()
