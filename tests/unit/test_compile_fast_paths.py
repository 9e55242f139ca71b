"""Fast paths of the compiler that must not change what it does: the collector paused
while parsing, the printer's remembered tensor-type text, CSE's chained scopes."""

from __future__ import annotations

import gc
from io import StringIO

import pytest
from xdsl.utils.exceptions import ParseError

from shardc.context import make_context
from shardc.ir import printer as printer_module
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import print_module

TYPES = """
func.func @f(%a: tensor<?x4xf32>, %b: tensor<f32>, %c: tensor<2xi1>, %d: tensor<3xindex>,
             %e: tensor<2x3xbf16>, %f: tensor<4xcomplex<f32>>, %g: tensor<8xsi8>,
             %h: tensor<2xf64, "enc">) -> tensor<?x4xf32> {
  return %a : tensor<?x4xf32>
}
"""


def _print(text: str) -> str:
    module = LocatingParser(make_context(), text, "t.mlir").parse_module()
    out = StringIO()
    print_module(module, out)
    return out.getvalue()


def test_parsing_leaves_the_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    _print(TYPES)
    assert gc.isenabled()
    with pytest.raises(ParseError):
        LocatingParser(make_context(), "func.func @f( {", "bad.mlir").parse_module()
    assert gc.isenabled()
    gc.disable()
    try:
        _print(TYPES)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_remembered_tensor_types_print_as_mlir_opt_does() -> None:
    printer_module._TYPE_TEXT.clear()  # pyright: ignore[reportPrivateUsage]
    first = _print(TYPES)
    assert printer_module._TYPE_TEXT  # pyright: ignore[reportPrivateUsage]
    second = _print(TYPES)  # now from the table
    assert first == second
    for spelled in (
        "%arg0: tensor<?x4xf32>", "%arg1: tensor<f32>", "%arg2: tensor<2xi1>",
        "%arg3: tensor<3xindex>", "%arg4: tensor<2x3xbf16>", "%arg5: tensor<4xcomplex<f32>>",
        "%arg6: tensor<8xsi8>", '%arg7: tensor<2xf64, "enc">',
    ):
        assert spelled in first, spelled
    remembered = {str(t) for t, _ in printer_module._TYPE_TEXT.values()}  # pyright: ignore[reportPrivateUsage]
    assert not any("complex" in t or "enc" in t for t in remembered), "only plain tensors"


def test_cse_scopes_see_outer_ops_and_keep_inner_ones_inside() -> None:
    """An op in a nested region is replaced by an equal op outside; two equal ops in
    sibling regions both stay (neither dominates the other)."""
    from shardc.passes.cse import CSEPass

    text = """
func.func @f(%c: i1, %x: i32) -> (i32, i32) {
  %a = arith.addi %x, %x : i32
  %r = scf.if %c -> (i32) {
    %b = arith.addi %x, %x : i32
    %m = arith.muli %b, %x : i32
    scf.yield %m : i32
  } else {
    %m2 = arith.muli %x, %x : i32
    scf.yield %m2 : i32
  }
  %s = scf.if %c -> (i32) {
    %n = arith.muli %a, %x : i32
    scf.yield %n : i32
  } else {
    %n2 = arith.muli %x, %x : i32
    scf.yield %n2 : i32
  }
  return %r, %s : i32, i32
}
"""
    ctx = make_context()
    module = LocatingParser(ctx, text, "cse.mlir").parse_module()
    CSEPass().apply(ctx, module)
    out = StringIO()
    print_module(module, out)
    printed = out.getvalue()
    assert printed.count("arith.addi") == 1, printed
    assert printed.count("arith.muli %arg1, %arg1") == 2, printed
    assert printed.count("arith.muli %0, %arg1") == 2, printed
