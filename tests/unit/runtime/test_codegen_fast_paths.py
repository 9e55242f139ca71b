"""Fast paths of the cold compile's code generation (issue #16), each checked against
the generic path it replaces: a structured op's inputs and outputs read from its
segment sizes once (`structured.ins_outs`), a kernel dtype's name remembered
(`kernels.fused._name`), the generated module checked once compiled (`check_code`)
instead of walking every function's syntax tree, and arith's binary ops printed
straight from the op instead of through xDSL's declarative format."""

from __future__ import annotations

import io

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import DenseArrayBase, i32

from shardc.context import make_context
from shardc.ir import printer as shardc_printer
from shardc.ir.fast_parser import FastParser
from shardc.ir.printer import module_to_string
from shardc.runtime.codegen import compile as rt_compile
from shardc.runtime.codegen.builder import CompileError
from shardc.runtime.codegen.compile import compile_module
from shardc.runtime.codegen.kernels import fused
from shardc.ir.segments import ins_outs

MODULE = """
func.func @f(%a: tensor<8x4xf32>, %b: tensor<4x3xf32>, %c: tensor<8x3xf32>, %i: tensor<8xi32>) -> (tensor<8x3xf32>, tensor<8x3xf32>, tensor<8xi32>) {
  %e = tensor.empty() : tensor<8x3xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x3xf32>) outs(%c : tensor<8x3xf32>) -> tensor<8x3xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%m, %c : tensor<8x3xf32>, tensor<8x3xf32>) outs(%e : tensor<8x3xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %q = arith.addf %p, %x fastmath<fast> : f32
    %r = arith.maximumf %q, %y {tag = 1 : i64} : f32
    %t = arith.divf %r, %y : f32
    linalg.yield %t : f32
  } -> tensor<8x3xf32>
  %ei = tensor.empty() : tensor<8xi32>
  %j = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%i : tensor<8xi32>) outs(%ei : tensor<8xi32>) {
  ^bb0(%x: i32, %o: i32):
    %u = arith.andi %x, %x : i32
    %v = arith.maxsi %u, %x : i32
    %w = arith.xori %v, %u : i32
    linalg.yield %w : i32
  } -> tensor<8xi32>
  return %m, %s, %j : tensor<8x3xf32>, tensor<8x3xf32>, tensor<8xi32>
}
"""


def _parse(text: str = MODULE):
    return FastParser(make_context(), text).parse_module()


def _structured_ops(module):
    return [op for op in module.walk() if op.name in ("linalg.generic", "linalg.matmul")]


def test_ins_outs_is_what_irdl_reads():
    ops = _structured_ops(_parse())
    assert len(ops) == 3
    for op in ops:
        assert ins_outs(op) == (tuple(op.inputs), tuple(op.outputs)), op.name
        assert ins_outs(op) == (tuple(op.inputs), tuple(op.outputs))  # the remembered sizes too


def test_ins_outs_follows_a_replaced_segment_attribute():
    """The sizes are remembered per attribute object: a new one is decoded afresh."""
    op = _structured_ops(_parse())[1]  # the float generic: 2 inputs, 1 output
    assert [len(x) for x in ins_outs(op)] == [2, 1]
    op.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, [1, 2])
    assert [len(x) for x in ins_outs(op)] == [1, 2]
    assert ins_outs(op) == (tuple(op.inputs), tuple(op.outputs))


def test_dtype_names_are_numpy_s():
    for dt in (np.dtype(np.float32), np.dtype(">f4"), np.dtype(np.int64), np.dtype(bool), np.dtype(np.float16)):
        assert fused._name(dt) == dt.name  # pyright: ignore[reportPrivateUsage]
        assert fused._name(dt) == dt.name  # pyright: ignore[reportPrivateUsage]


def test_the_compiled_module_is_checked_before_it_runs(tmp_path, monkeypatch):
    """Generated code that calls a forbidden builtin is refused as an internal error,
    and nothing of it runs (the check is on the compiled code, before `exec`)."""
    target = tmp_path / "written"
    monkeypatch.setattr(rt_compile, "docstring", lambda f: f"    open({str(target)!r}, 'w')")
    with pytest.raises(CompileError, match="an emitter let IR text into the generated code"):
        compile_module(_parse())
    assert not target.exists()


def test_the_prelude_is_checked_too(monkeypatch):
    orig = rt_compile.ModuleCodegen.__init__

    def init(self, *a, **k):
        orig(self, *a, **k)
        self.prelude.append("__import__('os')")

    monkeypatch.setattr(rt_compile.ModuleCodegen, "__init__", init)
    with pytest.raises(CompileError, match="__import__"):
        compile_module(_parse())


def test_generated_code_still_runs():
    cm = compile_module(_parse())
    a = np.arange(32, dtype=np.float32).reshape(8, 4) / 7
    b = np.arange(12, dtype=np.float32).reshape(4, 3) / 5 + 1
    c = np.ones((8, 3), np.float32)
    i = np.arange(8, dtype=np.int32)
    m, s, j = cm.call("f", a, b, c, i)
    want_m = a @ b + c
    np.testing.assert_allclose(m, want_m, rtol=1e-6)
    np.testing.assert_allclose(s, np.maximum(want_m * c + want_m, c) / c, rtol=1e-6)
    np.testing.assert_array_equal(j, np.zeros(8, np.int32))


def _print_generic_way(module) -> str:
    """The module printed with the arith binary fast printers taken out of the table."""
    saved = {k: v for k, v in shardc_printer._OP_PRINTERS.items() if isinstance(k, str) and k.startswith("arith.")}  # pyright: ignore[reportPrivateUsage]
    try:
        for k in saved:
            del shardc_printer._OP_PRINTERS[k]  # pyright: ignore[reportPrivateUsage]
        shardc_printer._LOOKUP_CACHE.clear()  # pyright: ignore[reportPrivateUsage]
        return module_to_string(module)
    finally:
        shardc_printer._OP_PRINTERS.update(saved)  # pyright: ignore[reportPrivateUsage]
        shardc_printer._LOOKUP_CACHE.clear()  # pyright: ignore[reportPrivateUsage]


def test_arith_binary_ops_print_as_through_the_declarative_format():
    module = _parse()
    fast = module_to_string(module)
    assert fast == _print_generic_way(module)
    for line in ("%5 = arith.mulf %in, %in_0 : f32", "%6 = arith.addf %5, %in fastmath<fast> : f32", "%7 = arith.maximumf %6, %in_0 {tag = 1 : i64} : f32", "%8 = arith.divf %7, %in_0 : f32", "%5 = arith.andi %in, %in : i32", "%7 = arith.xori %6, %5 : i32"):
        assert f"      {line}\n" in fast, line


def test_plain_binary_ops_do_not_use_the_declarative_format(monkeypatch):
    """The plain ones print without the op's own printer; the ones with flags or
    attributes still go through it (and print as before)."""
    module = _parse()
    calls: list[str] = []
    for cls in (arith.MulfOp, arith.AddfOp, arith.MaximumfOp, arith.DivfOp, arith.AndIOp, arith.MaxSIOp, arith.XOrIOp):
        orig = cls.print

        def counted(self, printer, orig=orig):
            calls.append(self.name)
            return orig(self, printer)

        monkeypatch.setattr(cls, "print", counted)
    out = io.StringIO()
    shardc_printer.print_module(module, out)
    assert sorted(calls) == ["arith.addf", "arith.maximumf"]
