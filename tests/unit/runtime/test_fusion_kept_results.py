"""Fusion of a producer whose result has other users after the consumer
(`shardc.runtime.codegen.fusion`): the fused generic yields that value as an extra result, so
an AdamW update (m', v' both returned and read by p') is one pass; a use before the
consumer, or a consumer that reads the value through a broadcast, keeps them apart."""

import numpy as np
from test_fusion import EXP, SQUARE, T23, T3, generic, generics, module

from shardc.runtime import compile_module
from shardc.runtime.codegen.fusion import fuse_elementwise

ADD = "    %r = arith.addf %a0, %a1 : f32\n    linalg.yield %r : f32"
MUL2 = "    %r = arith.mulf %a0, %a1 : f32\n    linalg.yield %r : f32"
MOMENT = "    %h = arith.constant 0.9 : f32\n    %s = arith.mulf %a1, %h : f32\n    %r = arith.addf %s, %a0 : f32\n    linalg.yield %r : f32"
SECOND = "    %q = arith.mulf %a0, %a0 : f32\n    %r = arith.addf %q, %a1 : f32\n    linalg.yield %r : f32"
UPDATE = "    %s = math.sqrt %a2 : f32\n    %d = arith.divf %a1, %s : f32\n    %r = arith.subf %a0, %d : f32\n    linalg.yield %r : f32"

SHARED = f"""func.func @f(%x: {T23}) -> ({T23}, {T23}) {{
{generic("a", [("%x", T23, "i, j")], T23, "i, j", EXP)}
{generic("b", [("%a", T23, "i, j")], T23, "i, j", SQUARE)}
  return %a, %b : {T23}, {T23}
}}
"""

# %a is read by %u before its consumer %b: the fused op would come too late for %u.
USED_BEFORE = f"""func.func @f(%x: {T23}) -> ({T23}, {T23}) {{
{generic("a", [("%x", T23, "i, j")], T23, "i, j", EXP)}
{generic("u", [("%a", T23, "i, j")], T23, "i, j", SQUARE)}
{generic("b", [("%a", T23, "i, j"), ("%u", T23, "i, j")], T23, "i, j", ADD)}
  return %u, %b : {T23}, {T23}
}}
"""

# The consumer broadcasts %a (a 1-d value over 2-d loops): yielding it would need a
# 1-d result out of 2-d loops.
BROADCAST = f"""func.func @f(%x: {T3}, %y: {T23}) -> ({T3}, {T23}) {{
{generic("a", [("%x", T3, "j")], T3, "j", EXP)}
{generic("b", [("%a", T3, "j"), ("%y", T23, "i, j")], T23, "i, j", MUL2)}
  return %a, %b : {T3}, {T23}
}}
"""

ADAM_LIKE = f"""func.func @f(%g: {T23}, %m: {T23}, %v: {T23}, %p: {T23}) -> ({T23}, {T23}, {T23}) {{
{generic("m1", [("%g", T23, "i, j"), ("%m", T23, "i, j")], T23, "i, j", MOMENT)}
{generic("v1", [("%g", T23, "i, j"), ("%v", T23, "i, j")], T23, "i, j", SECOND)}
{generic("p1", [("%p", T23, "i, j"), ("%m1", T23, "i, j"), ("%v1", T23, "i, j")], T23, "i, j", UPDATE)}
  return %p1, %m1, %v1 : {T23}, {T23}, {T23}
}}
"""


def test_a_value_with_a_later_user_is_yielded_by_the_fused_op(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    m = module(SHARED)
    assert fuse_elementwise(m) == 1
    (g,) = generics(m)
    assert len(g.results) == 2
    a, b = compile_module(module(SHARED))["f"](x)
    np.testing.assert_allclose(a, np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(b, np.exp(x) ** 2, rtol=1e-6)


def test_adam_like_update_is_one_generic(rng):
    g, mo, v, p = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(4))
    v = np.abs(v)
    m = module(ADAM_LIKE)
    assert fuse_elementwise(m) == 2
    (op,) = generics(m)
    assert len(op.results) == 3
    got = compile_module(module(ADAM_LIKE))["f"](g, mo, v, p)
    ref = compile_module(module(ADAM_LIKE), fuse=False)["f"](g, mo, v, p)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    m1, v1 = mo * np.float32(0.9) + g, g * g + v
    np.testing.assert_allclose(got[0], p - m1 / np.sqrt(v1), rtol=1e-5)


def test_uses_before_the_consumer_or_broadcast_reads_do_not_fuse(rng):
    for text in (USED_BEFORE, BROADCAST):
        m = module(text)
        n = len(generics(m))
        fused = fuse_elementwise(m)
        # USED_BEFORE: %a may still fuse into %u (its first consumer), never into %b
        assert len(generics(m)) == n - fused and all(len(op.results) <= 2 for op in generics(m))
    m = module(BROADCAST)
    assert fuse_elementwise(m) == 0
    x, y = rng.standard_normal(3).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    a, b = compile_module(module(BROADCAST))["f"](x, y)
    np.testing.assert_allclose(b, np.exp(x) * y, rtol=1e-6)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    u, b = compile_module(module(USED_BEFORE))["f"](x)
    np.testing.assert_allclose(u, np.exp(x) ** 2, rtol=1e-6)
    np.testing.assert_allclose(b, np.exp(x) + np.exp(x) ** 2, rtol=1e-6)
