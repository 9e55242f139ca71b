"""A one-op elementwise body written over a donated input (ZeRO's gradient accumulation,
`acc + reduce_scatter(dW)`) runs as one ufunc call into that input
(`kernels.fused.InplaceUfunc`): the caller's own array comes back, its bits those of
the out-of-place sum, and every case the rule does not cover keeps the numpy path."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.context import make_context
from shardc.ir.fast_parser import FastParser
from shardc.runtime.codegen.compile import compile_module
from shardc.runtime.codegen.kernels.fused import InplaceUfunc, build_kernel

RNG = np.random.default_rng(5)


def text(op: str = "arith.addf", order: str = "%a, %b", shape: str = "6x40", b_shape: str | None = None, b_map: str | None = None, elem: str = "f32") -> str:
    b_shape = b_shape or shape
    ident = "affine_map<(d0, d1) -> (d0, d1)>"
    return f"""
func.func @f(%acc: tensor<{shape}x{elem}>, %x: tensor<{b_shape}x{elem}>) -> tensor<{shape}x{elem}> {{
  %e = tensor.empty() : tensor<{shape}x{elem}>
  %r = linalg.generic {{indexing_maps = [{ident}, {b_map or ident}, {ident}], iterator_types = ["parallel", "parallel"]}}
      ins(%acc, %x : tensor<{shape}x{elem}>, tensor<{b_shape}x{elem}>) outs(%e : tensor<{shape}x{elem}>) {{
  ^bb0(%a: {elem}, %b: {elem}, %o: {elem}):
    %s = {op} {order} : {elem}
    linalg.yield %s : {elem}
  }} -> tensor<{shape}x{elem}>
  return %r : tensor<{shape}x{elem}>
}}
"""


def compiled(src: str, donate: bool = True):
    module = FastParser(make_context(), src).parse_module()
    return compile_module(module, "t", donate={"f": {0: 0}} if donate else None)


def kernels(cm) -> list[object]:
    ns = cm["f"].__globals__
    return [v.fused for v in ns.values() if getattr(v, "fused", None) is not None]


@pytest.mark.slow
@pytest.mark.parametrize("op,ref", [("arith.addf", np.add), ("arith.subf", np.subtract), ("arith.mulf", np.multiply), ("arith.divf", np.divide)])
@pytest.mark.parametrize("order", ["%a, %b", "%b, %a"])
def test_written_into_the_donated_input(op, ref, order):
    cm = compiled(text(op, order))
    assert cm.donated("f") == {0: 0}
    (k,) = kernels(cm)
    assert isinstance(k, InplaceUfunc) and k.ufunc is ref
    acc, x = RNG.standard_normal((6, 40)).astype(np.float32), RNG.standard_normal((6, 40)).astype(np.float32)
    want = ref(acc, x) if order == "%a, %b" else ref(x, acc)
    got = cm.call("f", acc, x)
    assert got is acc  # no fresh result, no copy
    assert got.tobytes() == want.tobytes()


def test_broadcast_operand():
    """An operand read along fewer loops (a per-row vector) broadcasts into the target."""
    cm = compiled(text(b_shape="6", b_map="affine_map<(d0, d1) -> (d0)>").replace("tensor<6xf32>", "tensor<6xf32>"))
    acc, x = RNG.standard_normal((6, 40)).astype(np.float32), RNG.standard_normal(6).astype(np.float32)
    want = acc + x[:, None]
    got = cm.call("f", acc, x)
    assert got is acc and got.tobytes() == want.tobytes()


def test_not_donated_keeps_numpy_path():
    cm = compiled(text(), donate=False)
    assert not any(isinstance(k, InplaceUfunc) for k in kernels(cm))
    acc, x = np.ones((6, 40), np.float32), np.full((6, 40), 2, np.float32)
    got = cm.call("f", acc, x)
    assert got is not acc and (acc == 1).all() and (got == 3).all()


def test_falls_back_when_operands_differ():
    """A target that does not span the iteration space, or an operand of another dtype:
    None, so run_structured takes the numpy path (and copies into the donated input)."""
    cm = compiled(text())
    (k,) = kernels(cm)
    acc = np.zeros((6, 40), np.float32)
    assert k([acc, np.ones((6, 40), np.float64), None], (6, 40)) is None
    assert k([np.zeros((1, 40), np.float32), np.ones((6, 40), np.float32), None], (6, 40)) is None
    ro = np.zeros((6, 40), np.float32)
    ro.flags.writeable = False
    assert k([ro, np.ones((6, 40), np.float32), None], (6, 40)) is None
    assert k([acc, np.ones((6, 40), np.float32), None], (6, 40)) == [acc] and (acc == 1).all()


def test_overlapping_operand():
    """The other operand a shifted view of the target: numpy buffers it, the result is
    the out-of-place one."""
    cm = compiled(text())
    (k,) = kernels(cm)
    base = RNG.standard_normal((7, 40)).astype(np.float32)
    acc, x = base[1:], base[:-1]
    want = acc + x
    assert k([acc, x, None], (6, 40)) == [acc]
    assert acc.tobytes() == want.tobytes()


def test_only_lone_binary_ops():
    """Two ops, a constant operand, an integer body: not this kernel."""
    module = FastParser(make_context(), text()).parse_module()
    from xdsl.dialects.linalg.ops import GenericOp

    (g,) = [op for op in module.walk() if isinstance(op, GenericOp)]
    block = g.body.block
    shaped = [True, True, True]
    assert isinstance(build_kernel(block, 2, [block.last_op.operands[0]], shaped, 2, {0: 0}), InplaceUfunc)
    assert build_kernel(block, 2, [block.last_op.operands[0]], shaped, 2, {0: 1}) is not None  # either input may be the target
    assert not isinstance(build_kernel(block, 2, [block.last_op.operands[0]], [True, False, True], 2, {0: 1}), InplaceUfunc)  # a scalar target
    two = compiled(text().replace("%s = arith.addf %a, %b : f32", "%t = arith.addf %a, %b : f32\n    %s = arith.mulf %t, %b : f32"))
    assert not any(isinstance(k, InplaceUfunc) for k in kernels(two))
    ints = compiled(text("arith.addi", elem="i32"))
    assert not any(isinstance(k, InplaceUfunc) for k in kernels(ints))
