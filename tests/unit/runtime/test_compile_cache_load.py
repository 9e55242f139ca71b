"""Loading a compile-cache entry: the stored source is compiled (no marshalled code
object: the package never deserialises code), tracebacks quote it, an entry of an
older format is rebuilt with one warning, a Python change misses, and the constant
pool round-trips with the cyclic GC restored after."""

from __future__ import annotations

import gc
import json
import sys
import traceback

import numpy as np
import pytest

from shardc.runtime.codegen import cache
from shardc.runtime.codegen.cache import CachedModule, Entry, compile_cached, make_key, parse_lowered

pytestmark = pytest.mark.usefixtures("_own_cache")  # conftest: an empty cache directory per test

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


def test_hit_compiles_the_stored_source_and_errors_quote_it(_own_cache):
    built: list = []
    _, first = _compile(built)
    _, again = _compile(built)
    assert built == [1] and isinstance(again.compiled, CachedModule)
    np.testing.assert_allclose(again.compiled.call("f", *_inputs()), _reference(), rtol=1e-6)
    with pytest.raises(Exception) as info:
        again.compiled.call("g", np.zeros(4, np.float32))
    frames = traceback.extract_tb(info.value.__traceback__)
    ours = [f for f in frames if f.filename.startswith("<shardc-runtime:") and ":cached:" in f.filename]
    assert ours and all(f.line for f in ours)  # linecache knows the stored source


def test_entry_holds_no_code_object(_own_cache):
    key, _ = _compile()
    (path,) = sorted(_own_cache.rglob("*.entry"))
    data = cache.DiskCache.default().unsealed(path)
    nl = data.index(b"\n", len(_HEAD))
    header = json.loads(data[len(_HEAD) : nl])
    assert set(header) == {"format", "key", "json", "bindings", "sha256", "source_sha256"}
    assert len(data) - nl - 1 == header["json"] + header["bindings"]  # nothing else stored
    assert Entry.decode(data, key).source


def test_entry_of_an_older_format_is_rebuilt_with_one_warning(_own_cache, capsys):
    built: list = []
    _compile(built)
    (path,) = sorted(_own_cache.rglob("*.entry"))
    data = cache.DiskCache.default().unsealed(path)
    nl = data.index(b"\n", len(_HEAD))
    header = json.loads(data[len(_HEAD) : nl])
    header["format"] = cache.FORMAT - 1
    cache.DiskCache.default().write(path, _HEAD + json.dumps(header).encode() + data[nl:])
    capsys.readouterr()
    _, again = _compile(built)
    assert built == [1, 1]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "compile cache" in err[0] and "format" in err[0]
    np.testing.assert_allclose(again.compiled.call("f", *_inputs()), _reference(), rtol=1e-6)


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
