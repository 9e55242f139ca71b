"""The func/tensor/scf/linalg overlays and MLIR-style affine expressions: builders,
xDSL's classes left untouched, and expressions built as MLIR builds them."""

import warnings

import pytest
from xdsl.dialects import affine as xaffine
from xdsl.dialects import func as xfunc
from xdsl.dialects.builtin import IndexType, ModuleOp, TensorType, f32
from xdsl.ir import Block
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.dialects import affine, func, linalg, scf, tensor
from shardc.dialects.affine import MLIRAffineParsing
from shardc.ir.printer import module_to_string


class _Parser(MLIRAffineParsing, Parser):
    pass


def _roundtrip(text: str) -> str:
    module = _Parser(make_context(allow_unregistered=True), text).parse_module()
    module.verify()
    return module_to_string(module)


@pytest.mark.parametrize(
    ("expr", "printed"),
    [
        ("(d0 + d1) * 4", "(d0 + d1) * 4"),
        ("s0 + d0", "d0 + s0"),
        ("d0 + 2 + d1", "d0 + d1 + 2"),
        ("d0 * 3 + d0", "d0 * 4"),
        ("d0 - (d0 floordiv 4) * 4", "d0 mod 4"),
        ("(d0 + 4) floordiv 2", "d0 floordiv 2 + 2"),
        ("(d0 * 4 + 3) mod 4", "3"),
        ("d0 floordiv 2 floordiv 3", "(d0 floordiv 2) floordiv 3"),
        ("-(d0 + d1)", "-(d0 + d1)"),
    ],
)
def test_affine_exprs_as_mlir_builds_them(expr: str, printed: str) -> None:
    text = f'"test.op"() {{m = affine_map<(d0, d1)[s0] -> ({expr})>}} : () -> ()'
    assert f"-> ({printed})>" in _roundtrip(text).splitlines()[0]


def test_affine_load_subscripts_are_dims() -> None:
    text = """func.func @f(%m: memref<4xf32>, %i: index, %n: index) {
  %0 = affine.load %m[%i + symbol(%n)] : memref<4xf32>
  return
}"""
    module = Parser(make_context(), text).parse_module()
    load = next(op for op in module.walk() if isinstance(op, affine.LoadOp))
    assert (load.map.data.num_dims, load.map.data.num_symbols) == (1, 1)
    assert isinstance(load, xaffine.LoadOp)


def test_overlay_classes_subclass_xdsl() -> None:
    assert issubclass(func.FuncOp, xfunc.FuncOp)
    assert issubclass(affine.IfOp, xaffine.IfOp)
    assert "func.call_indirect" not in {op.name for op in xfunc.Func.operations}  # xDSL untouched


def test_builders() -> None:
    block = Block(arg_types=[TensorType(f32, [4]), IndexType()])
    gen = tensor.GenerateOp(TensorType(f32, [4, -1]), [block.args[1]])
    assert len(gen.body.block.args) == 2
    rank = tensor.RankOp(block.args[0])
    assert isinstance(rank.result.type, IndexType)
    assert scf.InParallelOp().region.blocks.first is not None
    mm = linalg.BatchMatmulOp([block.args[0], block.args[0]], [block.args[0]])
    assert [r.type for r in mm.results] == [TensorType(f32, [4])]


def test_parsing_emits_no_deprecation_warning() -> None:
    text = """func.func @f(%m: memref<4xf32>, %i: index) {
  affine.for %k = 0 to 4 {
    %0 = affine.load %m[%k] : memref<4xf32>
    affine.store %0, %m[%k + 1] : memref<4xf32>
  }
  %1:2 = affine.delinearize_index %i into (2, 2) : index, index
  return
}"""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        module = Parser(make_context(), text).parse_module()
        assert isinstance(module, ModuleOp)
        module_to_string(module)


def test_xdsl_built_declaration_prints_as_mlir() -> None:
    """Passes that build xDSL's own func.FuncOp still print without `-> ()`."""
    module = ModuleOp([xfunc.FuncOp.external("a", [], [])])
    assert "func.func private @a()\n" in module_to_string(module)
