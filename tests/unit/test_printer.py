"""The mlir-opt printing rules of `shardc.ir.printer`, checked without mlir-opt."""

from io import StringIO

import pytest
from xdsl.dialects.builtin import ModuleOp, i32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation, irdl_op_definition, var_result_def
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.ir.printer import affine_map_text, module_to_string, print_module
from shardc.testing.normalize import normalize_ssa_names


def roundtrip(text: str, *, generic: bool = False) -> str:
    module = Parser(make_context(allow_unregistered=True), text).parse_module()
    return module_to_string(module, generic=generic)


def body(text: str) -> list[str]:
    """The printed lines, stripped, without the module and aliases."""
    return [ln.strip() for ln in roundtrip(text).splitlines() if ln.strip()]


def test_module_and_default_dialects() -> None:
    out = roundtrip(
        "func.func @f(%a: i32) -> i32 {\n"
        "  %0 = func.call @f(%a) : (i32) -> i32\n"
        "  func.return %0 : i32\n}\n"
    )
    assert out == (
        "module {\n"
        "  func.func @f(%arg0: i32) -> i32 {\n"
        "    %0 = call @f(%arg0) : (i32) -> i32\n"
        "    return %0 : i32\n"
        "  }\n"
        "}\n\n"
    )


def test_builtin_prefix_dropped_only_at_module_level() -> None:
    lines = body(
        "%0 = builtin.unrealized_conversion_cast to i64\n"
        "func.func @f() {\n  %1 = builtin.unrealized_conversion_cast to i64\n  return\n}\n"
    )
    assert "%0 = unrealized_conversion_cast to i64" in lines
    assert "%1 = builtin.unrealized_conversion_cast to i64" in lines


def test_module_name_and_attributes_sorted() -> None:
    out = roundtrip('module @m attributes {z = 1 : i32, a = "x"} {\n}\n')
    assert out.startswith('module @m attributes {a = "x", z = 1 : i32} {')


def test_result_groups_and_uses() -> None:
    lines = body(
        "func.func @f(%a: i64) -> i1 {\n"
        "  %s, %o = arith.addui_extended %a, %a : i64, i1\n"
        "  %r:2 = func.call @g() : () -> (i32, i1)\n"
        "  return %r#1 : i1\n}\n"
        "func.func private @g() -> (i32, i1)\n"
    )
    assert "%sum, %overflow = arith.addui_extended %arg0, %arg0 : i64, i1" in lines
    assert "%0:2 = call @g() : () -> (i32, i1)" in lines
    assert "return %0#1 : i1" in lines


def test_constant_names_and_collisions() -> None:
    lines = body(
        "func.func @f() {\n"
        "  %a = arith.constant 0 : index\n  %b = arith.constant 0 : index\n"
        "  %c = arith.constant -3 : i32\n  %d = arith.constant true\n"
        "  %e = arith.constant false\n  %f = arith.constant 1.0 : f32\n"
        "  %g = arith.constant 2.0 : f32\n  return\n}\n"
    )
    names = [ln.split(" = ")[0] for ln in lines if "arith.constant" in ln]
    # one conflict counter for the whole region: `_0`, then `_1`
    assert names == ["%c0", "%c0_0", "%c-3_i32", "%true", "%false", "%cst", "%cst_1"]


def test_nested_regions_continue_numbering() -> None:
    lines = body(
        "func.func @f(%n: index, %x: f32) -> f32 {\n"
        "  %0 = scf.for %i = %n to %n step %n iter_args(%acc = %x) -> (f32) {\n"
        "    %1 = arith.addf %acc, %acc : f32\n    scf.yield %1 : f32\n  }\n"
        "  %2 = arith.addf %0, %0 : f32\n  return %2 : f32\n}\n"
    )
    assert "%0 = scf.for %arg2 = %arg0 to %arg0 step %arg0 iter_args(%arg3 = %arg1) -> (f32) {" in lines
    assert "%2 = arith.addf %arg3, %arg3 : f32" in lines  # after the parent's %0, %1
    assert "%1 = arith.addf %0, %0 : f32" in lines


def test_linalg_generic_block_args_and_map_aliases() -> None:
    out = roundtrip(
        "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],"
        ' iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%a : tensor<4xf32>) {\n'
        "  ^bb0(%x: f32, %y: f32):\n    linalg.yield %x : f32\n  } -> tensor<4xf32>\n"
        "  return %0 : tensor<4xf32>\n}\n"
    )
    assert out.startswith("#map = affine_map<(d0) -> (d0)>\nmodule {\n")
    assert "indexing_maps = [#map, #map]" in out
    assert "^bb0(%in: f32, %out: f32):" in out


def test_block_labels_and_predecessors() -> None:
    lines = body(
        "func.func @f(%c: i1) {\n  cf.cond_br %c, ^a, ^b\n^a:\n  cf.br ^b\n^b:\n  return\n^dead:\n  return\n}\n"
    )
    assert "cf.cond_br %arg0, ^bb1, ^bb2" in lines
    assert "^bb1:  // pred: ^bb0" in lines
    assert "^bb2:  // 2 preds: ^bb0, ^bb1" in lines
    assert "^bb3:  // no predecessors" in lines


def test_reassociation_and_linalg_spacing() -> None:
    lines = body(
        "func.func @f(%t: tensor<4x8xf32>, %e: tensor<8x4xf32>) {\n"
        "  %0 = tensor.collapse_shape %t [[0, 1]] : tensor<4x8xf32> into tensor<32xf32>\n"
        "  %1 = linalg.transpose ins(%t : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]\n"
        "  return\n}\n"
    )
    assert "%collapsed = tensor.collapse_shape %arg0 [[0, 1]] : tensor<4x8xf32> into tensor<32xf32>" in lines
    assert (
        "%transposed = linalg.transpose ins(%arg0 : tensor<4x8xf32>) outs(%arg1 : tensor<8x4xf32>) "
        "permutation = [1, 0]" in lines
    )


def test_generic_form_has_unique_ids_and_no_hooks() -> None:
    out = roundtrip(
        "func.func @f(%a: i32) {\n  %c = arith.constant 0 : i32\n  return\n}\n"
        "func.func @g(%b: i32) {\n  return\n}\n",
        generic=True,
    )
    # regions are numbered last-first with running counters, as mlir-opt does
    assert "^bb0(%arg1: i32):" in out.split('sym_name = "f"')[1]
    assert "^bb0(%arg0: i32):" in out.split('sym_name = "g"')[1]
    assert '%0 = "arith.constant"() <{value = 0 : i32}> : () -> i32' in out


@irdl_op_definition
class _NamedOp(IRDLOperation):
    """An op naming its results by duck typing, as shard ops do."""

    name = "test.named"
    res = var_result_def()

    def get_asm_result_names(self) -> list[str | None]:
        return ["a", None, "b", "9lives"][: len(self.results)]


def _module_with(*ops: Operation) -> ModuleOp:
    func = FuncOp("f", ((), ()))
    func.body.block.add_ops([*ops, ReturnOp()])
    return ModuleOp([func])


def test_duck_typed_result_names_and_groups() -> None:
    op = _NamedOp.create(result_types=[i32, i32, i32, i32])
    user = _NamedOp.create(operands=list(op.results), result_types=[i32])
    text = module_to_string(_module_with(op, user))
    assert '%a:2, %b, %_9lives = "test.named"() : () -> (i32, i32, i32, i32)' in text
    assert '%a_0 = "test.named"(%a#0, %a#1, %b, %_9lives)' in text


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("(d0, d1)[s0] -> (d0 + s0 - 1, d1 * 2)", "(d0, d1)[s0] -> (d0 + s0 - 1, d1 * 2)"),
        ("(d0, d1) -> (d0 - d1 * 3)", "(d0, d1) -> (d0 - d1 * 3)"),
        ("(d0) -> (-d0 + 8)", "(d0) -> (-d0 + 8)"),
        ("(d0, d1) -> (d0 floordiv 4 + d1 mod 3)", "(d0, d1) -> (d0 floordiv 4 + d1 mod 3)"),
        ("() -> (0)", "() -> (0)"),
    ],
)
def test_affine_map_text(source: str, expected: str) -> None:
    from xdsl.dialects.builtin import AffineMapAttr

    attr = Parser(make_context(), f"affine_map<{source}>").parse_attribute()
    assert isinstance(attr, AffineMapAttr)
    assert affine_map_text(attr.data) == expected


def test_normalize_keeps_strings_and_group_suffixes() -> None:
    text = '%x = "op"() {s = "keep %x ^bb0"} : () -> ()\n%y:2 = op %x\nuse %y#1 ^bb3\n\n'
    assert normalize_ssa_names(text) == (
        '%v0 = "op"() {s = "keep %x ^bb0"} : () -> ()\n%v1:2 = op %v0\nuse %v1#1 ^b0'
    )


def _named(module: ModuleOp, name: str) -> Operation:
    from xdsl.dialects.builtin import UnregisteredOp

    return next(
        op for op in module.walk()
        if (op.op_name.data if isinstance(op, UnregisteredOp) else op.name) == name
    )


def _parsed(text: str) -> ModuleOp:
    from shardc.ir.locations import LocatingParser

    return LocatingParser(make_context(allow_unregistered=True), text, "t.mlir").parse_module()


def test_see_current_operation_numbers_values_as_the_enclosing_function() -> None:
    """mlir-opt's note prints the op with the numbers its closest isolated-from-above
    ancestor gives (`%3 = "x.use"(%arg0, %1)`), not numbers restarting at the op."""
    from shardc.ir.diagnostics import op_text

    module = _parsed(
        "func.func @f(%a: i32) {\n"
        '  %x = "x.def"() : () -> i32\n'
        '  %y:2 = "x.two"() : () -> (i32, i32)\n'
        '  "x.region"() ({\n'
        "  ^bb0(%b: i32):\n"
        '    %u = "x.use"(%a, %y#1, %b) : (i32, i32, i32) -> i32\n'
        '    "x.end"() : () -> ()\n'
        "  }) : () -> ()\n"
        "  return\n"
        "}\n"
    )
    use = _named(module, "x.use")
    assert op_text(use) == '%2 = "x.use"(%arg0, %1#1, %arg1) : (i32, i32, i32) -> i32'
    top = _named(module, "func.func")
    assert op_text(top.clone()).startswith('"func.func"() <{')  # detached: its own scope


def test_see_current_operation_of_a_detached_op() -> None:
    """Values the op's scope does not define print as MLIR prints them."""
    from shardc.ir.diagnostics import op_text

    module = _parsed('%x = "x.def"() : () -> i32\n%u = "x.use"(%x) : (i32) -> i32\n')
    use = _named(module, "x.use")
    assert op_text(use) == '%1 = "x.use"(%0) : (i32) -> i32'
    use.detach()
    assert op_text(use) == '%0 = "x.use"(<<UNKNOWN SSA VALUE>>) : (i32) -> i32'


def test_debuginfo_aliases() -> None:
    """As mlir-opt 22 prints it (numbered func first, then its argument, then the
    nested `c.py` before the callsite that names it)."""
    module = _parsed(
        "func.func @f(%a: i32 loc(\"arg.py\":1:1)) -> i32 {\n"
        '  return %a : i32 loc(callsite("c.py":2:2 at "arg.py":1:1))\n'
        "}\n"
    )
    out = StringIO()
    print_module(module, out, debuginfo=True)
    assert out.getvalue() == (
        '#loc2 = loc("arg.py":1:1)\n'
        "module {\n"
        '  func.func @f(%arg0: i32 loc("arg.py":1:1)) -> i32 {\n'
        "    return %arg0 : i32 loc(#loc4)\n"
        "  } loc(#loc1)\n"
        "} loc(#loc)\n"
        '#loc = loc("t.mlir":0:0)\n'
        '#loc1 = loc("t.mlir":1:1)\n'
        '#loc3 = loc("c.py":2:2)\n'
        "#loc4 = loc(callsite(#loc3 at #loc2))\n\n"
    )
