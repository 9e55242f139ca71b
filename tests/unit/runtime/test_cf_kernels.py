"""cf kernels: cf.assert, and cf.br / cf.cond_br through the dispatch loop that
`kernels.cf.compile_function` builds for functions of several blocks."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.runtime import compile_module, compile_text
from shardc.runtime.codegen import compile as rt_compile
from shardc.runtime.codegen.builder import CompileError, ModuleCodegen
from shardc.runtime.codegen.compile import RuntimeExecutionError
from shardc.runtime.codegen.kernels import _MODULES, cf as cf_kernels  # pyright: ignore[reportPrivateUsage]

ASSERT = """
func.func @f(%x: index) -> index {
  %c3 = arith.constant 3 : index
  %ok = arith.cmpi slt, %x, %c3 : index
  cf.assert %ok, "x must be below 3"
  return %x : index
}"""


def test_cf_is_in_the_kernel_list() -> None:
    assert "cf" in _MODULES


def test_assert_passes_and_fails() -> None:
    cm = compile_text(ASSERT)
    assert cm.call("f", 2) == 2
    with pytest.raises(RuntimeExecutionError, match="assertion failed: x must be below 3"):
        cm.call("f", 5)


# A loop and a diamond: sum of 0..n-1 (block arguments carried around the back edge),
# then |sum - 10| through cond_br to two blocks that join.
LOOP = """
func.func @f(%n: i64, %v: tensor<3xf64>) -> (i64, tensor<3xf64>) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c10 = arith.constant 10 : i64
  cf.br ^head(%c0, %c0, %v : i64, i64, tensor<3xf64>)
^head(%i: i64, %acc: i64, %t: tensor<3xf64>):
  %more = arith.cmpi slt, %i, %n : i64
  cf.cond_br %more, ^body, ^exit
^body:
  %acc1 = arith.addi %acc, %i : i64
  %i1 = arith.addi %i, %c1 : i64
  %t1 = arith.addf %t, %t : tensor<3xf64>
  cf.br ^head(%i1, %acc1, %t1 : i64, i64, tensor<3xf64>)
^exit:
  %d = arith.subi %acc, %c10 : i64
  %neg = arith.cmpi slt, %d, %c0 : i64
  cf.cond_br %neg, ^flip(%d : i64), ^join(%d : i64)
^flip(%x: i64):
  %y = arith.subi %c0, %x : i64
  cf.br ^join(%y : i64)
^join(%r: i64):
  return %r, %t : i64, tensor<3xf64>
}"""

# Block arguments are assigned all at once: a swap through a back edge.
SWAP = """
func.func @f(%a: i64, %b: i64, %n: index) -> (i64, i64) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  cf.br ^loop(%a, %b, %c0 : i64, i64, index)
^loop(%x: i64, %y: i64, %k: index):
  %go = arith.cmpi slt, %k, %n : index
  %k1 = arith.addi %k, %c1 : index
  cf.cond_br %go, ^loop(%y, %x, %k1 : i64, i64, index), ^done
^done:
  return %x, %y : i64, i64
}"""


def _compile_blocks(text: str):
    """Compile through kernels.cf.compile_function, as compile.py does once it hands
    multi-block functions over."""
    module = Parser(make_context(), text).parse_module()
    original = rt_compile._compile_function  # pyright: ignore[reportPrivateUsage]
    rt_compile._compile_function = cf_kernels.compile_function  # type: ignore[assignment]
    try:
        return compile_module(module, "blocks.mlir")
    finally:
        rt_compile._compile_function = original  # type: ignore[assignment]


@pytest.mark.parametrize("n, want", [(0, 10), (3, 7), (5, 0), (7, 11)])
def test_loop_and_diamond(n: int, want: int) -> None:
    v = np.array([1.0, -2.0, 0.5])
    r, t = _compile_blocks(LOOP).call("f", n, v)
    assert r == want
    np.testing.assert_array_equal(t, v * 2.0**n)


@pytest.mark.parametrize("n, want", [(0, (1, 2)), (1, (2, 1)), (4, (1, 2)), (5, (2, 1))])
def test_block_arguments_are_a_parallel_copy(n: int, want: tuple[int, int]) -> None:
    assert _compile_blocks(SWAP).call("f", 1, 2, n) == want


def test_single_block_functions_compile_the_same() -> None:
    assert _compile_blocks(ASSERT).call("f", 1) == 1


def test_switch_is_a_compile_error_naming_it() -> None:
    text = """
func.func @f(%x: i32) -> i32 {
  cf.switch %x : i32, [default: ^a, 1: ^b]
^a:
  return %x : i32
^b:
  return %x : i32
}"""
    with pytest.raises(CompileError, match="'cf.switch'"):
        _compile_blocks(text)


def test_branch_outside_a_function_body_is_a_compile_error() -> None:
    module = Parser(make_context(), LOOP).parse_module()
    f = next(op for op in module.walk() if op.name == "func.func")
    br = next(op for op in f.walk() if op.name == "cf.br")
    g = rt_compile.FunctionBuilder(ModuleCodegen(module))
    with pytest.raises(CompileError, match="'cf.br'.*branches are only supported between the blocks of a function body"):
        g.emit_op(br)


def test_multi_block_functions_through_compile_module() -> None:
    r, _ = compile_text(LOOP).call("f", 3, np.zeros(3))
    assert r == 7
