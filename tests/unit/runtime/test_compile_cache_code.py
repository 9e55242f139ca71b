"""The compile cache stores the code object of the generated source (marshalled, with the
bytecode magic number) so a hit skips `compile()`; a blob that does not load, or one of
another interpreter, falls back to compiling the stored source; a Python change misses.
Also: the faster constant pool still round-trips, with the cyclic GC restored after."""

from __future__ import annotations

import gc
import hashlib
import json
import marshal
import sys
import traceback

import numpy as np
import pytest

from shardc.runtime import cache
from shardc.runtime.cache import CachedModule, Entry, compile_cached, make_key, parse_lowered

PROGRAM = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %s: f32) -> tensor<4x3xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  %t = tensor.splat %s : tensor<4x3xf32>
  %r = arith.mulf %m, %t : tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}
func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.constant 0 : index
  %x = tensor.extract %a[%c] : tensor<4xf32>
  %i = arith.constant 7 : index
  %y = tensor.extract %a[%i] : tensor<4xf32>
  %s = tensor.splat %y : tensor<4xf32>
  return %s : tensor<4xf32>
}
"""

_HEAD = b"shardc-compile-cache\n"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(d))
    monkeypatch.delenv("SHARDC_CACHE", raising=False)
    cache._WARNED.clear()  # pyright: ignore[reportPrivateUsage]
    yield d


def _compile(counter: list | None = None):
    key = make_key("test-code-object", text=PROGRAM)

    def build():
        if counter is not None:
            counter.append(1)
        return parse_lowered(PROGRAM), {}

    return key, compile_cached(key, build, "test")


def _inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32), 2.5


def _rewrite(path, **changes):
    """Rewrite the entry at `path` with header fields and/or the code blob replaced,
    its checksum made consistent again (as a writer with a bug would leave it)."""
    data = path.read_bytes()
    nl = data.index(b"\n", len(_HEAD))
    header = json.loads(data[len(_HEAD) : nl])
    payload = data[nl + 1 :]
    keep = header["json"] + header["bindings"]
    code = changes.pop("code", payload[keep:])
    payload = payload[:keep] + code
    header.update(code=len(code), sha256=hashlib.sha256(payload).hexdigest(), **changes)
    path.write_bytes(_HEAD + json.dumps(header).encode() + b"\n" + payload)


def test_hit_runs_the_stored_code_object(_own_cache):
    built: list = []
    key, first = _compile(built)
    (path,) = sorted(_own_cache.rglob("*.entry"))
    entry = Entry.decode(path.read_bytes(), key)
    assert entry.code and entry.code_magic == cache.PY_MAGIC
    code = marshal.loads(entry.code)
    assert code.co_filename == f"<shardc-runtime:cached:{key[:12]}>"
    _, again = _compile(built)
    assert built == [1] and again.source == "cache"
    cm = again.compiled
    assert isinstance(cm, CachedModule) and cm.code_from == "code"
    np.testing.assert_array_equal(cm.call("f", *_inputs()), first.compiled.call("f", *_inputs()))


def test_runtime_errors_still_quote_the_generated_source(_own_cache):
    _compile()
    _, again = _compile()
    assert again.compiled.code_from == "code"  # type: ignore[attr-defined]
    with pytest.raises(Exception) as info:
        again.compiled.call("g", np.zeros(4, np.float32))
    frames = traceback.extract_tb(info.value.__traceback__)
    ours = [f for f in frames if f.filename.startswith("<shardc-runtime:cached:")]
    assert ours and all(f.line for f in ours)  # linecache knows the stored source


def test_code_blob_that_does_not_load_falls_back_to_the_source_with_one_warning(_own_cache, capsys):
    built: list = []
    _compile(built)
    (path,) = sorted(_own_cache.rglob("*.entry"))
    _rewrite(path, code=b"\xe3 this is not marshal data")
    for _ in range(2):
        _, again = _compile(built)
        assert again.source == "cache" and built == [1]  # no rebuild: the source is compiled
        assert again.compiled.code_from == "source"  # type: ignore[attr-defined]
        np.testing.assert_allclose(again.compiled.call("f", *_inputs()), _reference(), rtol=1e-6)
    err = capsys.readouterr().err
    assert err.count("does not load; compiling its source") == 1, err


def test_marshalled_non_code_is_refused(_own_cache, capsys):
    _compile()
    (path,) = sorted(_own_cache.rglob("*.entry"))
    _rewrite(path, code=marshal.dumps(("not", "code")))
    _, again = _compile()
    assert again.compiled.code_from == "source"  # type: ignore[attr-defined]
    assert "does not load" in capsys.readouterr().err


def test_flipped_code_byte_fails_the_entry_checksum(_own_cache, capsys):
    built: list = []
    _compile(built)
    (path,) = sorted(_own_cache.rglob("*.entry"))
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF  # the last bytes are the code blob's
    path.write_bytes(bytes(data))
    _, again = _compile(built)
    assert built == [1, 1] and again.source == "compiled"
    assert "checksum mismatch" in capsys.readouterr().err


def test_code_of_another_interpreter_is_not_used(_own_cache, capsys):
    _compile()
    (path,) = sorted(_own_cache.rglob("*.entry"))
    _rewrite(path, code_magic="00000d0a")
    _, again = _compile()
    assert again.source == "cache" and again.compiled.code_from == "source"  # type: ignore[attr-defined]
    assert capsys.readouterr().err == ""  # not damage: no warning


def test_python_version_change_misses(monkeypatch):
    cache.compiler_identity.cache_clear()
    key = make_key("test-code-object", text=PROGRAM)
    cache.compiler_identity.cache_clear()
    monkeypatch.setattr(sys, "version", sys.version + " (another build)")
    try:
        assert make_key("test-code-object", text=PROGRAM) != key
    finally:
        monkeypatch.undo()
        cache.compiler_identity.cache_clear()


def test_bytecode_magic_change_misses(monkeypatch):
    cache.compiler_identity.cache_clear()
    key = make_key("test-code-object", text=PROGRAM)
    cache.compiler_identity.cache_clear()
    monkeypatch.setattr(cache.importlib.util, "MAGIC_NUMBER", b"\x00\x00\r\n")
    try:
        assert make_key("test-code-object", text=PROGRAM) != key
    finally:
        monkeypatch.undo()
        cache.compiler_identity.cache_clear()


def test_entry_without_code_compiles_the_source(_own_cache):
    key, first = _compile()
    (path,) = sorted(_own_cache.rglob("*.entry"))
    _rewrite(path, code=b"")
    entry = Entry.decode(path.read_bytes(), key)
    assert entry.code == b"" and entry.load_code() is None
    _, again = _compile()
    assert again.compiled.code_from == "source"  # type: ignore[attr-defined]


def test_loading_restores_the_garbage_collector(_own_cache):
    _compile()
    assert gc.isenabled()
    _compile()
    assert gc.isenabled()
    gc.disable()
    try:
        _compile()
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()


def test_constant_pool_round_trips_shared_and_nested_values():
    shared = np.arange(6, dtype=np.float32).reshape(2, 3)
    inner = (1, "a", None, True)
    pool = {
        "a": [shared, shared, inner, (inner, [inner])],
        "b": {"k": (1.5, float("inf"), -0.0), 3: frozenset({1, 2}), "s": {4}},
        "c": (np.float32(2.5), np.dtype("int16"), np.add, np.add.reduce, slice(1, None, 2), b"\x00\x01", 1 + 2j),
        "d": [[], (), {}],
    }
    back = cache.load_bindings(cache.dump_bindings(pool))
    a = back["a"]
    assert a[0] is a[1] and np.array_equal(a[0], shared) and a[2] == inner and a[3] == (inner, [inner])
    assert back["b"] == {"k": (1.5, float("inf"), -0.0), 3: frozenset({1, 2}), "s": {4}}
    c = back["c"]
    assert c[0] == np.float32(2.5) and c[1] == np.dtype("int16") and c[2] is np.add and c[3] == np.add.reduce
    assert c[4:] == (slice(1, None, 2), b"\x00\x01", 1 + 2j)
    assert back["d"] == [[], (), {}]
    assert type(back["a"][3]) is tuple and type(back["a"][3][1]) is list


def _reference():
    a, b, s = _inputs()
    return (a @ b) * np.float32(s)
