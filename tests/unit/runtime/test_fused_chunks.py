"""A horizontal group's kernel runs over its members `horizontal.CHUNK` at a time (numba's
compile time grows faster than the tuple length: GPT's AdamW group of 74 took 5.5 s):
results stay bitwise those of one call per member, donated arrays are still written in
place, and one compiled signature serves groups of every size."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.runtime.codegen import horizontal  # the run time (what the tests patch) is in horizontal_run
from shardc.runtime.execute import horizontal_run
from shardc.context import make_context
from shardc.ir.fast_parser import FastParser
from shardc.runtime.codegen.compile import compile_module, compile_text
from shardc.runtime.execute.kernels import fused_run

pytestmark = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")

T = "tensor<64xf32>"
# bodies of their own (constants are kernel arguments, so the ops): no other test's
# kernel shares their sources
BODY = "    %c = arith.constant 7.25 : f32\n    %m = arith.mulf %a, %b : f32\n    %r = arith.{op} %m, %c : f32\n    linalg.yield %r : f32"


def _function(name: str, n: int, op: str = "subf") -> str:
    """`n` same-bodied generics over `n` arguments and one scalar."""
    ops = []
    for k in range(n):
        ops.append(
            f"""
  %e{k} = tensor.empty() : {T}
  %r{k} = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}} ins(%x{k}, %s : {T}, f32) outs(%e{k} : {T}) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
{BODY.format(op=op)}
  }} -> {T}"""
        )
    args = ", ".join(f"%x{k}: {T}" for k in range(n))
    return f"""
func.func @{name}({args}, %s: f32) -> ({", ".join([T] * n)}) {{{"".join(ops)}
  return {", ".join(f"%r{k}" for k in range(n))} : {", ".join([T] * n)}
}}
"""


def _group(cm, name: str) -> horizontal.Group:
    (g,) = [v for v in cm.functions[name].__globals__.values() if isinstance(v, horizontal.Group)]
    return g


@pytest.mark.parametrize("n", [3, 4, 11])
def test_chunked_group_is_bitwise_one_call_per_member(monkeypatch, n):
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    monkeypatch.setattr(horizontal_run, "CHUNK", 4)  # 11 members: 3 calls, the last padded with 1 empty member
    text = _function("f", n)
    cm = compile_text(text)
    g = _group(cm, "f")
    assert g.source is not None and len(g.members) == n
    monkeypatch.setattr(horizontal, "GROUP", False)
    plain = compile_text(text)
    xs = [np.random.default_rng(k).standard_normal(64).astype(np.float32) for k in range(n)]
    got = cm.call("f", *xs, np.float32(1.5))
    want = plain.call("f", *xs, np.float32(1.5))
    assert g.calls == 1
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, want))  # type: ignore[union-attr]
    assert all(np.array_equal(a, x * np.float32(1.5) - np.float32(7.25)) for a, x in zip(got, xs))  # type: ignore[arg-type]


def test_donated_members_written_in_place_across_chunks(monkeypatch):
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    monkeypatch.setattr(horizontal_run, "CHUNK", 4)
    module = FastParser(make_context(), _function("g", 9)).parse_module()
    cm = compile_module(module, "g", donate={"g": {k: k for k in range(9)}})
    assert cm.donated("g") == {k: k for k in range(9)}
    g = _group(cm, "g")
    xs = [np.arange(64, dtype=np.float32) + k for k in range(9)]
    want = [x * np.float32(2) - np.float32(7.25) for x in xs]
    got = cm.call("g", *xs, np.float32(2))
    assert g.calls == 1
    assert all(a is x for a, x in zip(got, xs))  # every chunk's members, the padded last one's too
    assert all(np.array_equal(a, w) for a, w in zip(got, want))  # type: ignore[arg-type]


def test_one_signature_serves_every_group_size(monkeypatch):
    """Groups of 3, 8 and 13 members with one body: one kernel, compiled for one tuple
    length (CHUNK), where unchunked it would compile once per group size."""
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    fns = [(f"h{n}", n, compile_text(_function(f"h{n}", n, "divf"))) for n in (3, 8, 13)]
    for name, n, cm in fns:
        cm.call(name, *(np.ones(64, np.float32) for _ in range(n)), np.float32(3))
    groups = [_group(cm, name) for name, _, cm in fns]
    assert all(g.calls == 1 for g in groups)
    (fn,) = {id(g.fn): g.fn for g in groups}.values()  # one dispatcher: one source
    (sig,) = fn.signatures  # type: ignore[attr-defined]
    tuples = [t for t in sig if getattr(t, "count", None) is not None]
    assert tuples and all(t.count == horizontal.CHUNK for t in tuples)
