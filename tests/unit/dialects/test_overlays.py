"""The overlay dialects (tosa, affine, memref, dlti): their verifier messages through
parse+verify, their Python builders and helpers, and that xDSL itself stays untouched."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.dialects import affine as xaffine
from xdsl.dialects import arith, func
from xdsl.dialects import memref as xmemref
from xdsl.dialects import tosa as xtosa
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    IndexType,
    IntegerAttr,
    ModuleOp,
    TensorType,
    f32,
    i1,
)
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, ParseError

from shardc.context import make_context
from shardc.dialects import affine, dlti, memref, tosa
from shardc.dialects.overlays import extend_dialect, overlay_dialects

ROOT = Path(__file__).resolve().parents[3]
INVALID_FILES = [
    ROOT / "tests/filecheck/dialects" / d / "ops_invalid.mlir"
    for d in ("tosa", "affine", "memref", "dlti")
]


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


# ---------------------------------------------------------------------------------------
# Verifier messages: every chunk of our ops_invalid.mlir files fails with its message.
# ---------------------------------------------------------------------------------------

_EXPECTED = re.compile(r"expected-error\s*@[+-]?\d*\s*\{\{(.*)\}\}")


def _invalid_chunks() -> list[pytest.param]:
    params: list[pytest.param] = []
    for path in INVALID_FILES:
        for index, chunk in enumerate(path.read_text().split("// -----")):
            expected = _EXPECTED.findall(chunk)
            if expected:
                params.append(pytest.param(chunk, expected[0], id=f"{path.parent.name}-{index}"))
    return params


@pytest.mark.parametrize(("chunk", "message"), _invalid_chunks())
def test_invalid_chunk_reports_mlir_message(chunk: str, message: str):
    with pytest.raises((DiagnosticException, ParseError)) as info:
        parse(chunk)
    assert message in str(info.value)


def test_every_invalid_file_has_chunks():
    ids = [p.id or "" for p in _invalid_chunks()]
    for path in INVALID_FILES:
        assert sum(i.startswith(path.parent.name + "-") for i in ids) >= 2, path


# ---------------------------------------------------------------------------------------
# xDSL is left untouched
# ---------------------------------------------------------------------------------------

_XDSL_TOSA = """\
%a = "test.op"() : () -> tensor<1x2x3xf32>
%s = "test.op"() : () -> tensor<1xi8>
%m = tosa.mul %a, %a, %s : (tensor<1x2x3xf32>, tensor<1x2x3xf32>, tensor<1xi8>) -> tensor<1x2x3xf32>
%c = tosa.clamp %a {min_val = 0.0 : f32, max_val = 1.0 : f32} : (tensor<1x2x3xf32>) -> tensor<1x2x3xf32>
"""


def test_xdsl_dialect_objects_are_unchanged():
    for name, factory in overlay_dialects().items():
        ours = factory()
        assert ours.name == name
    assert "tosa.negate" not in {op.name for op in xtosa.TOSA.operations}
    assert xtosa.TOSA.operations is not tosa.TOSA.operations
    assert xtosa.AddOp in list(xtosa.TOSA.operations)
    assert xmemref.CopyOp in list(xmemref.MemRef.operations)
    assert "affine.delinearize_index" not in {op.name for op in xaffine.Affine.operations}
    assert not hasattr(xtosa, "NegateOp") or xtosa.NegateOp is not tosa.NegateOp


def test_xdsl_opt_in_process_after_importing_shardc(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """xDSL's own driver, run in this process after every overlay was loaded, still
    prints with xDSL's classes and still lacks our ops."""
    make_context()
    for factory in overlay_dialects().values():
        factory()
    from xdsl.xdsl_opt_main import xDSLOptMain

    source = tmp_path / "in.mlir"
    source.write_text(_XDSL_TOSA)
    xDSLOptMain(args=[str(source), "--allow-unregistered-dialect"]).run()
    out = capsys.readouterr().out
    assert "tosa.mul %" in out
    assert "#tosa.nan_mode<PROPAGATE>" not in out  # xDSL elides its default as before

    bad = tmp_path / "neg.mlir"
    bad.write_text(
        '%a = "test.op"() : () -> tensor<3xf32>\n'
        "%b = tosa.abs %a : (tensor<3xf32>) -> tensor<3xf32>\n"
    )
    with pytest.raises(Exception, match="tosa.abs"):
        xDSLOptMain(args=[str(bad), "--allow-unregistered-dialect"]).run()


@pytest.mark.slow
def test_xdsl_opt_binary_still_works(tmp_path: Path):
    source = tmp_path / "in.mlir"
    source.write_text(_XDSL_TOSA)
    script = (
        "import shardc.context, shardc.dialects.tosa, shardc.dialects.memref, "
        "shardc.dialects.affine, shardc.dialects.dlti\n"
        "from xdsl.tools.xdsl_opt import main\n"
        "import sys\n"
        f"sys.argv = ['xdsl-opt', {str(source)!r}, '--allow-unregistered-dialect']\n"
        "main()\n"
    )
    after = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    plain = subprocess.run(
        ["xdsl-opt", str(source), "--allow-unregistered-dialect"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plain.returncode == 0, plain.stderr
    assert after.returncode == 0, after.stderr
    assert after.stdout == plain.stdout


def test_extend_dialect_replaces_by_name():
    ext = extend_dialect(xmemref.MemRef, [memref.CopyOp])
    copies = [op for op in ext.operations if op.name == "memref.copy"]
    assert copies == [memref.CopyOp]
    assert len(list(ext.operations)) == len(list(xmemref.MemRef.operations))


def test_replacements_are_xdsl_subclasses():
    assert issubclass(memref.CopyOp, xmemref.CopyOp)
    assert issubclass(memref.CastOp, xmemref.CastOp)
    assert issubclass(tosa.MatMulOp, xtosa.MatMulOp)
    assert issubclass(tosa.AddOp, xtosa.AddOp)
    assert issubclass(affine.MinOp, xaffine.MinOp)


def test_context_uses_overlay_classes():
    ctx = make_context()
    assert ctx.get_op("memref.copy") is memref.CopyOp
    assert ctx.get_op("tosa.negate") is tosa.NegateOp
    assert ctx.get_op("affine.linearize_index") is affine.LinearizeIndexOp
    assert ctx.get_optional_attr("dlti.map") is dlti.MapAttr


# ---------------------------------------------------------------------------------------
# tosa
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shapes", "expected"),
    [
        ([(2, 1), (1, 3)], (2, 3)),
        ([(4, 1), (3,)], (4, 3)),
        ([(DYNAMIC_INDEX, 3), (2, 1)], (2, 3)),
        ([(DYNAMIC_INDEX,), (DYNAMIC_INDEX,)], (DYNAMIC_INDEX,)),
        ([(2, 3), (3, 3)], None),
    ],
)
def test_broadcast_shapes(shapes: list[tuple[int, ...]], expected: tuple[int, ...] | None):
    assert tosa.broadcast_shapes(shapes) == expected


def test_tosa_builders_verify():
    block = Block(arg_types=[TensorType(f32, [2, 3]), TensorType(f32, [1, 3]), TensorType(i1, [2, 3])])
    x, y, c = block.args
    shape = tosa.ConstShapeOp([3, 2])
    ops = [
        tosa.ExpOp(x),
        tosa.MaximumOp(x, y, TensorType(f32, [2, 3])),
        tosa.SelectOp(c, x, y, TensorType(f32, [2, 3])),
        shape,
        tosa.ReshapeOp(x, shape, TensorType(f32, [3, 2])),
        tosa.TransposeOp(x, [1, 0], TensorType(f32, [3, 2])),
    ]
    block.add_ops(ops)
    for op in ops:
        op.verify()
    assert shape.get_shape() == (3, 2)
    assert ops[1].nan_mode == tosa.NanModeAttr(tosa.NanMode.PROPAGATE)


def test_tosa_nan_mode_materialized_and_elided():
    module = parse(
        "func.func @f(%a: tensor<3xf32>) {\n"
        "  %0 = tosa.maximum %a, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>\n"
        "  %1 = tosa.maximum %a, %a {nan_mode = IGNORE} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>\n"
        "  return\n}\n"
    )
    ops = [op for op in module.walk() if isinstance(op, tosa.MaximumOp)]
    assert [op.nan_mode.data for op in ops] == [tosa.NanMode.PROPAGATE, tosa.NanMode.IGNORE]  # pyright: ignore


def test_tosa_bad_nan_mode_is_a_diagnostic():
    with pytest.raises(ParseError, match="PROPAGATE, IGNORE"):
        parse(
            "func.func @f(%a: tensor<3xf32>) {\n"
            "  %0 = tosa.minimum %a, %a {nan_mode = SOMETIMES} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>\n"
            "  return\n}\n"
        )


# ---------------------------------------------------------------------------------------
# affine
# ---------------------------------------------------------------------------------------


def _const(value: int) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(value, IndexType()), IndexType())


def _folded(values: list[object]) -> list[int]:
    return [v.value.data for v in values]  # pyright: ignore


def test_delinearize_fold():
    c = _const(61)
    bounded = affine.DelinearizeIndexOp(c, [5, 7, 3])
    unbounded = affine.DelinearizeIndexOp(c, [7, 3], unbounded_outer=True)
    Block(ops=[c, bounded, unbounded])
    assert _folded(list(bounded.fold() or [])) == [2, 6, 1]
    assert _folded(list(unbounded.fold() or [])) == [2, 6, 1]


def test_delinearize_fold_dynamic_basis_is_none():
    block = Block(arg_types=[IndexType(), IndexType()])
    op = affine.DelinearizeIndexOp(block.args[0], [block.args[1], 4])
    block.add_op(op)
    op.verify()
    assert op.fold() is None
    assert op.static_basis.get_values() == (DYNAMIC_INDEX, 4)


def test_linearize_fold_and_disjoint():
    a, b = _const(2), _const(5)
    op = affine.LinearizeIndexOp([a, b], [3, 7], disjoint=True)
    Block(ops=[a, b, op])
    op.verify()
    assert op.is_disjoint()
    assert _folded(list(op.fold() or [])) == [19]


def test_affine_constants_materialize_as_arith():
    (iface,) = [i for i in affine.Affine._interfaces]  # pyright: ignore[reportPrivateUsage]
    op = iface.materialize_constant(IntegerAttr(3, IndexType()), IndexType())
    assert isinstance(op, arith.ConstantOp)


# ---------------------------------------------------------------------------------------
# memref
# ---------------------------------------------------------------------------------------


def test_memref_cast_compatibility():
    from xdsl.dialects.builtin import MemRefType, StridedLayoutAttr, UnrankedMemRefType

    static = MemRefType(f32, [4, 8])
    assert memref.cast_compatible(static, MemRefType(f32, [DYNAMIC_INDEX, 8]))
    assert memref.cast_compatible(static, UnrankedMemRefType.from_type(f32))
    assert memref.cast_compatible(
        static, MemRefType(f32, [4, 8], StridedLayoutAttr([8, 1], None))
    )
    assert not memref.cast_compatible(
        static, MemRefType(f32, [4, 8], StridedLayoutAttr([8, 2], 0))
    )
    assert not memref.cast_compatible(static, MemRefType(f32, [32]))


def test_memref_reassociation_prints_bare():
    module = parse(
        "func.func @f(%a: memref<2x3xf32>) {\n"
        "  %0 = memref.collapse_shape %a [[0, 1]] : memref<2x3xf32> into memref<6xf32>\n"
        "  return\n}\n"
    )
    from io import StringIO

    from xdsl.printer import Printer

    out = StringIO()
    Printer(stream=out).print_op(module)
    assert "memref.collapse_shape %a [[0, 1]] :" in out.getvalue()


# ---------------------------------------------------------------------------------------
# dlti
# ---------------------------------------------------------------------------------------


def test_module_rank():
    module = parse(
        'module attributes {dlti.map = #dlti.map<"MPI:comm_world-rank" = 2 : i32, '
        '"MPI:comm_world-size" = 4 : i32>} {\n'
        "  func.func @f() {\n    return\n  }\n}\n"
    )
    assert dlti.module_rank(module) == 2
    assert dlti.module_size(module) == 4
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    assert dlti.module_rank(fn) == 2  # found on the enclosing module


def test_module_rank_absent_and_dl_entry_form():
    assert dlti.module_rank(parse("module {\n}\n")) is None
    module = parse(
        'module attributes {dlti.dl_spec = #dlti.dl_spec<#dlti.dl_entry<"MPI:comm_world-rank", 7 : i32>>} {\n}\n'
    )
    assert dlti.module_rank(module) == 7


def test_module_rank_not_an_integer_is_a_diagnostic():
    module = parse('module attributes {dlti.map = #dlti.map<"MPI:comm_world-rank" = "one">} {\n}\n')
    with pytest.raises(DiagnosticException, match="expected an integer"):
        dlti.module_rank(module)


def test_module_with_region_builds():
    # A module built in Python carries the attribute too.
    module = ModuleOp(Region(Block()))
    module.attributes["dlti.map"] = dlti.MapAttr({"MPI:comm_world-rank": IntegerAttr(1, 32)})
    assert dlti.module_rank(module) == 1
