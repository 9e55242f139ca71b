"""A compile cache that someone else wrote runs none of their code (issue 32, item 2).

Whoever can write the cache directory (a cache restored by CI, copied from another
machine, a shared home) can recompute every checksum an entry holds: entries and numba's
index and data files are sealed with an HMAC under a key kept outside the cache
(`shardc.cache_dir.cache_key`), so a forged file is a warning and a rebuild. A FIFO, a
symlink to /dev/zero or an oversized file in an entry's place is too (no hang, no
unbounded read). Generated code's namespace holds no module, no loader of pickles and no
way to call C, even for an entry sealed with the right key (`codegen_safe`)."""

from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from shardc import cache_dir as cache_dirs
from shardc.runtime.codegen import cache
from shardc.runtime.codegen.cache import DiskCache, Entry, compile_cached, make_key, parse_lowered
from shardc.runtime.execute.code_check import UnsafeCodeError, check_code, generated_namespace

ROOT = Path(__file__).resolve().parents[3]

PROGRAM = """func.func @f(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = arith.mulf %a, %a : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
"""


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """An empty cache directory and a key of the test's own (beside the cache, not in it)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(d))
    monkeypatch.setenv("SHARDC_CACHE_KEY", str(tmp_path / "config" / "cache.key"))
    monkeypatch.delenv("SHARDC_CACHE", raising=False)
    cache._WARNED.clear()  # pyright: ignore[reportPrivateUsage]
    return d


def _compile(built: list[int]):
    key = make_key("tamper-test", text=PROGRAM)

    def build():
        built.append(1)
        return parse_lowered(PROGRAM), {}

    return key, compile_cached(key, build, "tamper")


def _payload(tmp_path: Path) -> tuple[Path, Path]:
    """A pickle that creates `canary` when it is loaded, and that canary's path."""
    canary = tmp_path / "canary"

    class Plant:
        def __reduce__(self):
            return (open, (str(canary), "w"))

    evil = tmp_path / "evil.npy"
    evil.write_bytes(pickle.dumps(Plant()))
    return evil, canary


def _forge(key: str, path: Path, evil: Path) -> Entry:
    """The entry at `path` with `@f` replaced by a function loading the pickle `evil`
    (the issue's payload: `_np.load(..., allow_pickle=True)`), every sha256 recomputed."""
    entry = Entry.decode(DiskCache.default().unsealed(path), key)
    pyname = entry.functions["f"]
    entry.source = f"def {pyname}(a):\n    return _np.load({str(evil)!r}, allow_pickle=True)\n"
    return entry


def test_key_lives_outside_the_cache_and_is_private(own_cache, tmp_path):
    _compile([])
    key_file = Path(cache_dirs.key_path())
    assert key_file.exists() and own_cache not in key_file.parents
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    (path,) = own_cache.rglob("*.entry")
    assert key_file.read_text().strip() not in path.read_bytes().decode("latin-1")


def test_forged_entry_with_recomputed_hashes_is_rebuilt_and_runs_nothing(own_cache, tmp_path, capsys):
    built: list[int] = []
    key, first = _compile(built)
    (path,) = own_cache.rglob("*.entry")
    evil, canary = _payload(tmp_path)
    forged = _forge(key, path, evil)
    path.write_bytes(forged.encode())  # every checksum fits; no seal
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    _, again = _compile(built)
    assert built == [1, 1] and again.source == "compiled"
    np.testing.assert_array_equal(again.compiled.call("f", a), a * a)
    assert not canary.exists()
    err = capsys.readouterr().err.splitlines()
    assert err == [f"shardc: warning: compile cache: ignoring corrupt entry {path} (not sealed by this user's shardc); rebuilding it"]
    # sealed under another key (another machine's or user's): the same
    forged_data = forged.encode()
    path.write_bytes(b"shardc-sealed-entry\n" + cache_dirs.seal(os.urandom(32), path.name, forged_data) + forged_data)
    _, third = _compile(built)
    assert built == [1, 1, 1] and not canary.exists()
    assert "its authentication tag does not verify" in capsys.readouterr().err


def test_forged_entry_sealed_with_the_right_key_still_cannot_load_pickles(own_cache, tmp_path, capsys):
    """The layer below the seal: a forger who also has the key finds no `_np.load`
    (check_code refuses the name; the namespace has no such function either)."""
    built: list[int] = []
    key, _ = _compile(built)
    (path,) = own_cache.rglob("*.entry")
    evil, canary = _payload(tmp_path)
    DiskCache.default().write(path, _forge(key, path, evil).encode())
    _, again = _compile(built)
    assert again.source == "cache"  # it verifies: each function is checked when first called
    with pytest.raises(cache.CorruptEntry, match="generated code uses 'load'"):
        again.compiled.call("f", np.ones((4, 4), np.float32))
    assert not canary.exists()
    # past check_code, the namespace has no loader either
    fn = types.FunctionType(compile(f"def f():\n    return _np.load({str(evil)!r}, allow_pickle=True)\n", "<t>", "exec").co_consts[0], generated_namespace())
    with pytest.raises(AttributeError):
        fn()
    assert not canary.exists()


def test_generated_namespace_holds_no_module(own_cache):
    _, first = _compile([])
    _, hit = _compile([])
    assert hit.source == "cache"
    a = np.ones((4, 4), np.float32)
    for compiled in (first.compiled, hit.compiled):
        compiled.call("f", a)
        fn = compiled.functions["f"]
        namespace = fn.__globals__
        assert not [k for k, v in namespace.items() if isinstance(v, types.ModuleType)]
        np_ = namespace["_np"]
        assert not isinstance(np_, types.ModuleType)
        for name in ("load", "fromfile", "ctypeslib", "lib", "memmap", "frombuffer"):
            assert not hasattr(np_, name), name
        assert np_.multiply is np.multiply and np_.full is np.full  # what emitters call, bound by name
        builtins = namespace["__builtins__"]
        for name in ("__import__", "open", "eval", "exec", "compile", "getattr"):
            assert name not in builtins, name


@pytest.mark.parametrize(
    "source",
    [
        "def f(x):\n    return x.ctypes\n",
        "def f(x):\n    return x.ctypes._ctypes\n",
        "def f(x):\n    return _np.load('p', allow_pickle=True)\n",
        "def f(x):\n    return x.dumps()\n",
        "def f(x):\n    return x._private\n",
    ],
)
def test_check_code_refuses_ways_to_c_and_pickles(source):
    with pytest.raises(UnsafeCodeError):
        check_code(compile(source, "<t>", "exec"))


def test_check_code_accepts_bound_globals():
    check_code(compile("def f(x):\n    return _k_3(_p1__w_12, _np.multiply(x, x))\n", "<t>", "exec"))
    assert set(generated_namespace()) == {"_np", "__builtins__"}


# --- entries that are not regular files: in a child process, under a timeout -------------

_CHILD = r"""
import sys
import numpy as np
from shardc.runtime.codegen.cache import compile_cached, make_key, parse_lowered
text = open(sys.argv[1]).read()
built = []
def build():
    built.append(1)
    return parse_lowered(text), {}
c = compile_cached(make_key("tamper-test", text=text), build, "tamper")
a = np.full((4, 4), 3, np.float32)
print(c.source, len(built), float(c.compiled.call("f", a).sum()))
"""


def _child(own_cache: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    prog = tmp_path / "p.mlir"
    prog.write_text(PROGRAM)
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-c", _CHILD, str(prog)], capture_output=True, text=True, env=full, timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "symlink", "oversized"])
def test_entry_that_is_not_a_small_regular_file_is_a_warning_and_a_rebuild(kind, own_cache, tmp_path):
    first = _child(own_cache, tmp_path)
    assert first.returncode == 0 and first.stdout.split() == ["compiled", "1", "144.0"], first.stderr
    (path,) = own_cache.rglob("*.entry")
    env: dict[str, str] = {}
    if kind == "oversized":
        env["SHARDC_CACHE_MAX_BYTES"] = str(path.stat().st_size - 1)
    else:
        real = path.read_bytes()
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dev-zero":
            path.symlink_to("/dev/zero")
        else:  # a symlink to a valid sealed entry elsewhere: still not read through
            target = tmp_path / "elsewhere.entry"
            target.write_bytes(real)
            path.symlink_to(target)
    got = _child(own_cache, tmp_path, **env)  # a hang would be a TimeoutExpired here
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["compiled", "1", "144.0"]
    (line,) = got.stderr.splitlines()
    reason = {"fifo": "not a regular file", "dev-zero": "a symbolic link", "symlink": "a symbolic link", "oversized": "-byte limit"}[kind]
    assert line.startswith(f"shardc: warning: compile cache: ignoring {path}: ") and reason in line and line.endswith("; rebuilding it"), line
    if kind == "oversized":
        return
    again = _child(own_cache, tmp_path)  # the rebuild replaced it with a sealed regular file
    assert path.is_file() and not path.is_symlink()
    assert again.stdout.split() == ["cache", "0", "144.0"], again.stderr


def test_key_that_others_may_read_turns_caching_off(own_cache, tmp_path, capsys):
    key_file = Path(cache_dirs.key_path())
    key_file.parent.mkdir(mode=0o700)
    key_file.write_text(os.urandom(32).hex() + "\n")
    key_file.chmod(0o644)
    cache_dirs._KEYS.clear()  # pyright: ignore[reportPrivateUsage]
    built: list[int] = []
    _compile(built)
    _compile(built)
    assert built == [1, 1] and not list(own_cache.rglob("*.entry"))
    assert f"the cache key {key_file} may be read or written by others (mode 644); not caching" in capsys.readouterr().err


# --- numba's cache ------------------------------------------------------------------------

_KERNEL_CHILD = r"""
import sys
import numpy as np
from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.codegen.kernels import fused
from shardc.runtime.execute.kernels import fused_run
t = "tensor<64x1024xf32>"
text = f'''
func.func @f(%x: {t}) -> {t} {{
  %e = tensor.empty() : {t}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}} ins(%x : {t}) outs(%e : {t}) {{
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    %s = arith.addf %m, %a : f32
    linalg.yield %s : f32
  }} -> {t}
  return %r : {t}
}}
'''
x = np.linspace(-1, 1, 64 * 1024, dtype=np.float32).reshape(64, 1024)
r = compile_text(text).call("f", x)
assert np.array_equal(r, x * x + x)
(kernel,) = fused_run._COMPILED.values()
print(sum(kernel.stats.cache_hits.values()), sum(kernel.stats.cache_misses.values()))
"""


def _kernel_child(cache_root: Path, key_file: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SHARDC_KERNELS", "SHARDC_CACHE")}
    env.update(SHARDC_CACHE_DIR=str(cache_root), SHARDC_CACHE_KEY=str(key_file), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", _KERNEL_CHILD], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_replaced_numba_index_runs_nothing(tmp_path):
    pytest.importorskip("numba")
    root, key_file = tmp_path / "cache", tmp_path / "config" / "cache.key"
    cold = _kernel_child(root, key_file)
    assert cold.returncode == 0 and cold.stdout.split() == ["0", "1"], cold.stderr
    warm = _kernel_child(root, key_file)
    assert warm.stdout.split() == ["1", "0"], warm.stderr  # sealed files load
    import numba

    index = [p for p in (root / "kernels" / "__pycache__").glob("*.nbi") if p.name.startswith("k_")]
    assert index
    canary = tmp_path / "canary"
    plant = b"".join([pickle.dumps(numba.__version__), b"cbuiltins\nopen\n(" + pickle.dumps(str(canary))[2:-1] + b"S'w'\ntR."])
    assert pickle.loads(plant[len(pickle.dumps(numba.__version__)) :]) and canary.exists()  # the plant is live
    canary.unlink()
    for p in index:
        p.write_bytes(plant)  # what numba's own cache would unpickle
    data = list((root / "kernels" / "__pycache__").glob("k_*.nbc"))
    for p in data:
        p.write_bytes(plant[len(pickle.dumps(numba.__version__)) :])
    got = _kernel_child(root, key_file)
    assert got.returncode == 0, got.stderr
    assert not canary.exists()
    assert got.stdout.split() == ["0", "1"]  # recompiled
    assert any(line.startswith("shardc: warning: kernel cache: ignoring ") and "not sealed by this user's shardc" in line for line in got.stderr.splitlines()), got.stderr
    again = _kernel_child(root, key_file)
    assert again.stdout.split() == ["1", "0"] and not canary.exists(), again.stderr
