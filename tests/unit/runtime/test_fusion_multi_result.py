"""Fusion of a producer with several results (`shardc.runtime.codegen.fusion`): a fused op that
kept a value for later users fuses on into its consumer, each result with other users
yielded again, so a chain whose every link is saved for the backward pass (GELU's
pre-activation, its square, its tanh) becomes one op; results equal the unfused run.
A consumer reading two of the producer's results is handled too; a later user placed
before the consumer keeps them apart."""

import numpy as np
from test_fusion import EXP, SQUARE, T3, T23, generic, generics, module

from shardc.runtime import compile_module
from shardc.runtime.codegen.fusion import fuse_elementwise

ADD = "    %r = arith.addf %a0, %a1 : f32\n    linalg.yield %r : f32"
BIAS = "    %r = arith.addf %a0, %a1 : f32\n    linalg.yield %r : f32"
TANH = "    %r = math.tanh %a0 : f32\n    linalg.yield %r : f32"
HALF = "    %c5 = arith.constant 0.5 : f32\n    %r = arith.mulf %a0, %c5 : f32\n    %s = arith.addf %r, %a1 : f32\n    linalg.yield %s : f32"

# h = x + b (broadcast), q = h*h, t = tanh(q), g = t*0.5 + h; h, q, t are returned
# too (as an autodiff keeps them): after the first fusion {h, q} is a two-result op,
# which must still fuse into t, and {h, q, t} into g.
SAVED_CHAIN = f"""func.func @f(%x: {T23}, %b: {T3}) -> ({T23}, {T23}, {T23}, {T23}) {{
{generic("h", [("%x", T23, "i, j"), ("%b", T3, "j")], T23, "i, j", BIAS)}
{generic("q", [("%h", T23, "i, j")], T23, "i, j", SQUARE)}
{generic("t", [("%q", T23, "i, j")], T23, "i, j", TANH)}
{generic("g", [("%t", T23, "i, j"), ("%h", T23, "i, j")], T23, "i, j", HALF)}
  return %g, %h, %q, %t : {T23}, {T23}, {T23}, {T23}
}}
"""


def saved_reference(x, b):
    h = x + b
    q = h * h
    t = np.tanh(q)
    return t * np.float32(0.5) + h, h, q, t


def test_a_chain_of_saved_values_is_one_op(rng):
    m = module(SAVED_CHAIN)
    assert fuse_elementwise(m) == 3
    (op,) = generics(m)
    m.verify()
    assert len(op.results) == 4  # g, and h, q, t for their other users (the return)
    x, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    fused = compile_module(m, fuse=False)["f"](x, b)
    plain = compile_module(module(SAVED_CHAIN), fuse=False)["f"](x, b)
    for got, ref, want in zip(fused, plain, saved_reference(x, b)):
        np.testing.assert_allclose(got, ref, rtol=1e-6)
        np.testing.assert_allclose(got, want, rtol=1e-5)


# p yields two results (after fusing %a into %p); the consumer %c reads both.
BOTH_READ = f"""func.func @f(%x: {T23}) -> ({T23}, {T23}) {{
{generic("a", [("%x", T23, "i, j")], T23, "i, j", EXP)}
{generic("p", [("%a", T23, "i, j")], T23, "i, j", SQUARE)}
{generic("c", [("%p", T23, "i, j"), ("%a", T23, "i, j")], T23, "i, j", ADD)}
  return %c, %a : {T23}, {T23}
}}
"""


def test_consumer_reading_two_of_its_results(rng):
    m = module(BOTH_READ)
    assert fuse_elementwise(m) == 2
    (op,) = generics(m)
    m.verify()
    x = rng.standard_normal((2, 3)).astype(np.float32)
    c, a = compile_module(m, fuse=False)["f"](x)
    np.testing.assert_allclose(a, np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(c, np.exp(x) ** 2 + np.exp(x), rtol=1e-6)


# After {h, q} fuse, %u reads %h before %t does: {h, q} must stay apart from %t.
USED_BEFORE = f"""func.func @f(%x: {T23}, %b: {T3}) -> ({T23}, {T23}, {T23}) {{
{generic("h", [("%x", T23, "i, j"), ("%b", T3, "j")], T23, "i, j", BIAS)}
{generic("q", [("%h", T23, "i, j")], T23, "i, j", SQUARE)}
{generic("u", [("%h", T23, "i, j")], T23, "i, j", EXP)}
{generic("t", [("%q", T23, "i, j"), ("%u", T23, "i, j")], T23, "i, j", ADD)}
  return %t, %h, %q : {T23}, {T23}, {T23}
}}
"""


def test_a_use_before_the_consumer_keeps_a_multi_result_producer_apart(rng):
    m = module(USED_BEFORE)
    fuse_elementwise(m)
    m.verify()
    x, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    t, h, q = compile_module(m, fuse=False)["f"](x, b)
    hh = x + b
    np.testing.assert_allclose(t, hh * hh + np.exp(hh), rtol=1e-6)
    np.testing.assert_allclose(h, hh, rtol=1e-6)
    np.testing.assert_allclose(q, hh * hh, rtol=1e-6)
    # every op still dominates its uses (verify), and none reads a value defined later
    ops = generics(m)
    for k, op in enumerate(ops):
        for v in op.inputs:
            assert not (isinstance(v.owner, type(op)) and ops.index(v.owner) > k)
