"""A compile-cache hit compiles each generated function when it is first needed (issue
#16: the training step never needs `@loss`), checks the compiled code before it runs
(`code_check.check_code`), and behaves as the eagerly compiled module: same results,
calls between functions, donation attributes, tracebacks that quote the stored lines."""

from __future__ import annotations

import threading
import traceback

import numpy as np
import pytest

from shardc.runtime.codegen import cache
from shardc.runtime.codegen.cache import CachedModule, CorruptEntry, DiskCache, Entry, compile_cached, make_key, parse_lowered, split_functions
from shardc.runtime.execute.code_check import check_code

pytestmark = pytest.mark.usefixtures("_own_cache")  # conftest: an empty cache directory per test

PROGRAM = """
func.func @double(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @twice(%a: tensor<4xf32>) -> tensor<4xf32> {
  %x = func.call @double(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %y = func.call @double(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @bad(%a: tensor<4xf32>) -> f32 {
  %i = arith.constant 7 : index
  %y = tensor.extract %a[%i] : tensor<4xf32>
  return %y : f32
}
func.func private @ext(tensor<4xf32>) -> tensor<4xf32>
"""


def _compile(built: list | None = None, donate=None):
    key = make_key("test-lazy", text=PROGRAM, donate=repr(donate))

    def build():
        if built is not None:
            built.append(1)
        return parse_lowered(PROGRAM), {}

    return key, compile_cached(key, build, "lazy", donate=donate)


def _compiled(cm: CachedModule) -> set[str]:
    return {sym for sym, py in cm.pynames.items() if py not in cm._pending and sym not in cm.entry.externals}  # pyright: ignore[reportPrivateUsage]


def test_functions_compile_on_first_use_and_match_the_eager_module():
    _, cold = _compile()
    _, warm = _compile()
    cm = warm.compiled
    assert isinstance(cm, CachedModule) and _compiled(cm) == set()
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(cm.call("twice", x), cold.compiled.call("twice", x))
    assert _compiled(cm) == {"twice", "double"}  # @double compiled when @twice called it
    assert sorted(cm.functions) == sorted(cold.compiled.functions)
    with pytest.raises(Exception, match="external function @ext"):
        cm.call("ext", x)
    assert _compiled(cm) == {"twice", "double"}


def test_tracebacks_quote_the_stored_lines():
    _compile()
    _, warm = _compile()
    with pytest.raises(Exception) as info:
        warm.compiled.call("bad", np.zeros(4, np.float32))
    lines = warm.compiled.source.splitlines()
    ours = [f for f in traceback.extract_tb(info.value.__traceback__) if ":cached:" in f.filename]
    assert ours and all(f.line == lines[f.lineno - 1].strip() for f in ours)


def test_donation_attributes_survive_the_lazy_compile():
    donate = {"double": {0: 0}}
    _, cold = _compile(donate=donate)
    _, warm = _compile(donate=donate)
    assert isinstance(warm.compiled, CachedModule)
    assert warm.compiled.donated("double") == cold.compiled.donated("double") == {0: 0}


def test_threads_compile_a_function_once():
    _compile()
    _, warm = _compile()
    cm = warm.compiled
    runs: list[int] = []
    real = cm._run  # pyright: ignore[reportPrivateUsage]

    def counting(line: int, text: str) -> None:
        runs.append(line)
        real(line, text)

    cm._run = counting  # type: ignore[method-assign]  # pyright: ignore[reportPrivateUsage]
    x = np.ones(4, np.float32)
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(cm.call("twice", x))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all((g == 4).all() for g in got)
    assert len(runs) == len(set(runs)) == 2  # @twice and @double, once each


def _forge(path, key: str, source: str) -> None:
    disk = DiskCache.default()
    entry = Entry.decode(disk.unsealed(path), key)
    entry.source = source
    disk.write(path, entry.encode())  # every checksum made to fit, sealed with this user's key


def test_a_forged_function_is_refused_when_it_is_compiled(_own_cache):
    key, _ = _compile()
    (path,) = sorted(_own_cache.rglob("*.entry"))
    source = Entry.decode(DiskCache.default().unsealed(path), key).source
    pieces = split_functions(source)
    _, text = pieces["fn__bad"]
    forged = source.replace(text, text.replace("def fn__bad(", "def fn__bad(x=__import__('os'), *_a, **_k):\n    pass\ndef fn__bad_(", 1))
    _forge(path, key, forged)
    _, warm = _compile()
    cm = warm.compiled
    np.testing.assert_array_equal(cm.call("double", np.ones(4, np.float32)), 2)  # the others still load
    with pytest.raises(CorruptEntry, match="__import__"):
        cm.call("bad", np.zeros(4, np.float32))


def test_split_functions_cuts_at_top_level_defs():
    src = "x = 1\ndef a(p):\n    return p\na.k = 1\ndef b():\n    def inner():\n        pass\n    return a(2)\n"
    pieces = split_functions(src)
    assert pieces[None] == (1, "x = 1\n")
    assert pieces["a"] == (2, "def a(p):\n    return p\na.k = 1\n")
    assert pieces["b"][0] == 5 and "inner" in pieces["b"][1]
    assert "".join(t for _, t in pieces.values()) == src
    with pytest.raises(CorruptEntry):
        split_functions("def a():\n    pass\ndef a():\n    pass\n")


def test_check_code_accepts_the_runtime_s_code():
    _, cold = _compile()
    check_code(compile(cold.compiled.source, "<test>", "exec"))


_MEMREF_JOB = """
import json, sys
import numpy as np
from shardc.runtime.codegen.cache import compile_cached, make_key, parse_lowered
TEXT = '''
func.func @flat(%a: memref<2x3xf32>) -> memref<6xf32> {
  %r = memref.collapse_shape %a [[0, 1]] : memref<2x3xf32> into memref<6xf32>
  return %r : memref<6xf32>
}
'''
got = compile_cached(make_key("test-memref-run", text=TEXT), lambda: (parse_lowered(TEXT), {}), "m")
out = got.compiled.call("flat", np.arange(6, dtype=np.float32).reshape(2, 3))
print(json.dumps({"source": got.source, "out": out.tolist(), "modules": sorted(sys.modules)}))
"""


@pytest.mark.slow
def test_a_hit_loads_the_run_time_part_of_memref_alone(_own_cache):
    """memref's reshape runs from `kernels.memref_run`: a hit imports neither the memref
    emitters nor xDSL's memref dialect."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, SHARDC_CACHE_DIR=str(_own_cache))
    env.pop("SHARDC_CACHE", None)
    runs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", _MEMREF_JOB], capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert (cold["source"], warm["source"]) == ("compiled", "cache") and warm["out"] == cold["out"] == list(range(6))
    assert "shardc.runtime.codegen.kernels.memref" in cold["modules"]  # the check is live
    assert "shardc.runtime.execute.kernels.memref_run" in warm["modules"]
    assert not {"shardc.runtime.codegen.kernels.memref", "xdsl.dialects.memref"} & set(warm["modules"])
