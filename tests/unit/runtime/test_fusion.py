"""Elementwise fusion before code generation (`shardc.runtime.codegen.fusion`): which chains
fuse, that maps compose (transposes, broadcasts), that results equal the unfused run,
and that the caller's module is left as it was."""

import numpy as np
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.ir.printer import module_to_string
from shardc.runtime import compile_module
from shardc.runtime.codegen.fusion import fuse_elementwise


def generic(name: str, ins: list[tuple[str, str, str]], out_type: str, dims: str, body: str, iters: str = "") -> str:
    """`%name = linalg.generic` over loops `dims`; ins: (value, type, map results);
    the output is a fresh tensor.empty read through the identity map."""
    n = len(dims.split(","))
    iters = iters or ", ".join(['"parallel"'] * n)
    maps = [f"affine_map<({dims}) -> ({m})>" for _, _, m in ins] + [f"affine_map<({dims}) -> ({dims})>"]
    args = ", ".join(f"%a{i}: f32" for i in range(len(ins))) + ", %o: f32"
    return f"""  %{name}_init = tensor.empty() : {out_type}
  %{name} = linalg.generic {{indexing_maps = [{", ".join(maps)}], iterator_types = [{iters}]}} ins({", ".join(v for v, _, _ in ins)} : {", ".join(t for _, t, _ in ins)}) outs(%{name}_init : {out_type}) {{
  ^bb0({args}):
{body}
  }} -> {out_type}
"""


def module(text: str):
    return Parser(make_context(), text).parse_module()


def generics(m) -> list[GenericOp]:
    return [op for op in m.walk() if isinstance(op, GenericOp)]


T23, T32, T3 = "tensor<2x3xf32>", "tensor<3x2xf32>", "tensor<3xf32>"
EXP = "    %r = math.exp %a0 : f32\n    linalg.yield %r : f32"
SQUARE = "    %r = arith.mulf %a0, %a0 : f32\n    linalg.yield %r : f32"
MUL = "    %r = arith.mulf %a0, %a1 : f32\n    linalg.yield %r : f32"
ADD = "    %r = arith.addf %a0, %a1 : f32\n    linalg.yield %r : f32"
PLUS_COLUMN = "    %i = linalg.index 1 : index\n    %c = arith.index_cast %i : index to i32\n    %f = arith.sitofp %c : i32 to f32\n    %r = arith.addf %a0, %f : f32\n    linalg.yield %r : f32"

CHAIN = f"""func.func @f(%x: {T23}, %y: {T32}, %v: {T3}) -> {T32} {{
{generic("a", [("%x", T23, "i, j")], T23, "i, j", EXP)}
{generic("s", [("%v", T3, "j")], T3, "j", SQUARE)}
{generic("b", [("%a", T23, "j, i"), ("%y", T32, "i, j")], T32, "i, j", MUL)}
{generic("c", [("%b", T32, "i, j"), ("%s", T3, "i")], T32, "i, j", ADD)}
  return %c : {T32}
}}
"""


def chain_reference(x, y, v):
    return np.exp(x).T * y + (v * v)[:, None]


def test_a_chain_fuses_into_one_generic_with_composed_maps(rng):
    m = module(CHAIN)
    assert fuse_elementwise(m) == 3
    (op,) = generics(m)
    m.verify()
    # The producers' inputs come in through composed maps: x transposed, v broadcast.
    text = module_to_string(m)
    assert "math.exp" in text and text.count("arith.mulf") == 2
    x, y, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (3, 2), (3,)))
    got = compile_module(module(CHAIN), fuse=False)["f"](x, y, v)
    fused = compile_module(m, fuse=False)["f"](x, y, v)
    np.testing.assert_allclose(fused, chain_reference(x, y, v), rtol=1e-6)
    np.testing.assert_allclose(got, chain_reference(x, y, v), rtol=1e-6)


def test_compile_fuses_a_copy_and_leaves_the_module(rng):
    m = module(CHAIN)
    before = module_to_string(m)
    cm = compile_module(m)
    assert module_to_string(m) == before
    x, y, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (3, 2), (3,)))
    np.testing.assert_allclose(cm["f"](x, y, v), chain_reference(x, y, v), rtol=1e-6)
    # One structured-op call runs the whole chain; unfused, one per generic.
    assert cm.python_source().count("_run_structured") == 1
    assert compile_module(m, fuse=False).python_source().count("_run_structured") == before.count("linalg.generic") == 4


SHARED = f"""func.func @f(%x: {T23}) -> ({T23}, {T23}) {{
{generic("a", [("%x", T23, "i, j")], T23, "i, j", EXP)}
{generic("b", [("%a", T23, "i, j")], T23, "i, j", SQUARE)}
  return %a, %b : {T23}, {T23}
}}
"""

INDEXED = f"""func.func @f(%x: {T23}) -> {T23} {{
{generic("a", [("%x", T23, "i, j")], T23, "i, j", PLUS_COLUMN)}
{generic("b", [("%a", T23, "j, i")], T32, "i, j", SQUARE)}
  return %b : {T32}
}}
""".replace(f"-> {T23} {{", f"-> {T32} {{").replace(f"return %b : {T23}", f"return %b : {T32}")

REDUCED = f"""func.func @f(%x: {T23}) -> {T3} {{
{generic("a", [("%x", T23, "i, j")], T23, "i, j", EXP)}
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : {T3}
  %i = linalg.fill ins(%z : f32) outs(%e : {T3}) -> {T3}
  %s = linalg.generic {{indexing_maps = [affine_map<(j, i) -> (i, j)>, affine_map<(j, i) -> (j)>], iterator_types = ["parallel", "reduction"]}} ins(%a : {T23}) outs(%i : {T3}) {{
  ^bb0(%a0: f32, %o: f32):
    %r = arith.addf %o, %a0 : f32
    linalg.yield %r : f32
  }} -> {T3}
  return %s : {T3}
}}
"""


def test_what_does_not_fuse(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    # One reading linalg.index, and a reduction consumer (a producer with another use
    # fuses, yielded by the fused op as well: test_fusion_kept_results.py).
    for text, kept, ref in (
        (INDEXED, 2, lambda: ((x + np.arange(3)) ** 2).T),
        (REDUCED, 2, lambda: np.exp(x).sum(0)),
    ):
        m = module(text)
        assert fuse_elementwise(m) == 0
        assert len(generics(m)) == kept
        got = compile_module(module(text))["f"](x)
        for g, r in zip(got if isinstance(got, tuple) else (got,), ref() if isinstance(ref(), tuple) else (ref(),)):
            np.testing.assert_allclose(g, r, rtol=1e-5)



T33 = "tensor<3x3xf32>"
SUB = "    %r = arith.subf %a0, %a1 : f32\n    linalg.yield %r : f32"
SQUARED_DIFF = f"""func.func @f(%x: {T33}, %m: {T3}) -> ({T33}, {T33}) {{
{generic("d", [("%x", T33, "i, j"), ("%m", T3, "j")], T33, "i, j", SUB)}
{generic("q", [("%d", T33, "i, j"), ("%d", T33, "i, j")], T33, "i, j", MUL)}
{generic("e", [("%x", T33, "i, j")], T33, "i, j", EXP)}
{generic("t", [("%e", T33, "i, j"), ("%e", T33, "j, i")], T33, "i, j", MUL)}
  return %q, %t : {T33}, {T33}
}}
"""


def test_a_value_read_twice_through_one_map_fuses_once(rng):
    """torch-mlir's variance squares with `mulf %in, %in_0` of one value in two operand
    slots: the producer fuses and is computed once; read through two different maps
    (e times its transpose) it does not fuse."""
    m = module(SQUARED_DIFF)
    assert fuse_elementwise(m) == 1
    ops = generics(m)
    assert len(ops) == 3 and len(ops[0].inputs) == 2 and len(ops[0].body.block.args) == 3
    m.verify()
    x, v = rng.standard_normal((3, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    q, t = compile_module(m, fuse=False)["f"](x, v)
    np.testing.assert_allclose(q, (x - v) ** 2, rtol=1e-6)
    np.testing.assert_allclose(t, np.exp(x) * np.exp(x).T, rtol=1e-6)
