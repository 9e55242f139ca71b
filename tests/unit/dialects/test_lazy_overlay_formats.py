"""The overlays' ops with a declarative format (arith, func, tensor, memref, vector,
tm_tensor) compile it on first use, as shard's and mpi's do (issue #16: a run pays only
for the formats of the ops it parses or prints), to the program xDSL builds eagerly;
and `lazy_format_op_definition` decides eager or lazy by xDSL's own test, so a class
xDSL refuses is still refused, and one xDSL accepts is still accepted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

OVERLAY_OPS = {
    "arith.remf", "arith.index_castui", "arith.trunci", "func.constant", "tensor.rank", "tensor.generate",
    "tensor.parallel_insert_slice", "memref.copy", "memref.cast", "memref.collapse_shape",
    "memref.expand_shape", "memref.get_global", "vector.yield", "tm_tensor.yield",
}


def _is_lazy(op: type) -> bool:
    printer = op.__dict__.get("print")
    return getattr(printer, "__qualname__", "").startswith("lazy_format_op_definition")


def test_every_lazy_format_of_every_shardc_dialect_is_xdsls_program() -> None:
    from xdsl.irdl.declarative_assembly_format import FormatProgram

    from shardc.dialects import shardc_dialects
    from shardc.dialects.lazy_format import compile_format

    lazy = {op.name: op for factory in shardc_dialects().values() for op in factory().operations if _is_lazy(op)}
    assert OVERLAY_OPS <= set(lazy)
    assert len(lazy) >= 52
    for name, op in lazy.items():
        program = compile_format(op)  # type: ignore[arg-type]
        eager = FormatProgram.from_str(op.assembly_format, op.get_irdl_definition())  # type: ignore[union-attr, arg-type]
        assert repr(program) == repr(eager), name


_FRESH = """
import json, sys
from xdsl.dialects.builtin import ModuleOp
from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import print_module
from io import StringIO
names = sys.argv[1].split(",")
ctx = make_context()
for d in ("arith", "func", "tensor", "memref", "vector", "tm_tensor"):
    ctx.get_optional_dialect(d)
def compiled():
    return sorted(n for n in names if "_shardc_format_program" in ctx.get_op(n).__dict__)
before = compiled()
module = LocatingParser(ctx, sys.stdin.read(), "<in>").parse_module()
out = StringIO()
print_module(module, out)
print(json.dumps({"before": before, "after": compiled(), "text": out.getvalue()}))
"""

_USES = """\
func.func @f(%t: tensor<4xf32>, %i: i32, %m: memref<4xf32>, %n: memref<?xf32>) -> (index, i16) {
  %0 = tensor.rank %t : tensor<4xf32>
  %1 = arith.trunci %i overflow<nsw> : i32 to i16
  memref.copy %m, %n : memref<4xf32> to memref<?xf32>
  return %0, %1 : index, i16
}
"""


def test_overlay_formats_compile_when_an_op_is_met_and_print_as_before() -> None:
    """Loading the overlays compiles none of their formats; parsing and printing three
    of those ops compiles those three, and the text prints in MLIR's custom form."""
    done = subprocess.run(
        [sys.executable, "-c", _FRESH, ",".join(sorted(OVERLAY_OPS))], input=_USES, capture_output=True,
        text=True, cwd=ROOT, timeout=120, env={**os.environ, "SHARDC_CACHE": "0"},
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["before"] == []
    assert got["after"] == ["arith.trunci", "memref.copy", "tensor.rank"]
    text = got["text"]
    assert "%rank = tensor.rank %arg0 : tensor<4xf32>" in text
    assert "%0 = arith.trunci %arg1 overflow<nsw> : i32 to i16" in text
    assert "memref.copy %arg2, %arg3 : memref<4xf32> to memref<?xf32>" in text


def test_lazy_definition_refuses_and_accepts_what_xdsl_does() -> None:
    """xDSL refuses a format beside a `parse`/`print` other than `Operation`'s, own or
    inherited from an op with a format of its own, and accepts a subclass that takes
    `Operation`'s back; the lazy definition must do the same, and stay lazy only then."""
    from xdsl.dialects.builtin import IndexType
    from xdsl.ir import Operation
    from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, result_def
    from xdsl.utils.exceptions import PyRDLOpDefinitionError

    from shardc.dialects.lazy_format import lazy_format_op_definition

    fmt = "$x attr-dict `:` type($x)"

    @irdl_op_definition
    class Base(IRDLOperation):  # an op with a format: xDSL generates its parse/print
        name = "t.base"
        x = operand_def(IndexType)
        assembly_format = fmt

    def inherits_xdsls_printer() -> type:
        class Op(Base):
            name = "t.sub"
            x = operand_def(IndexType)
            assembly_format = fmt

        return Op

    def takes_operations_back() -> type:
        class Op(Base):
            name = "t.sub2"
            x = operand_def(IndexType)
            assembly_format = fmt
            parse = Operation.__dict__["parse"]
            print = Operation.__dict__["print"]

        return Op

    def own_printer() -> type:
        class Op(IRDLOperation):
            name = "t.own"
            x = operand_def(IndexType)
            assembly_format = fmt

            def print(self, printer: object) -> None:  # type: ignore[override]
                raise AssertionError

        return Op

    for make in (inherits_xdsls_printer, own_printer):
        with pytest.raises(PyRDLOpDefinitionError, match="Cannot define both"):
            irdl_op_definition(make())
        with pytest.raises(PyRDLOpDefinitionError, match="Cannot define both"):
            lazy_format_op_definition(make())
    eager, lazy = irdl_op_definition(takes_operations_back()), lazy_format_op_definition(takes_operations_back())
    assert _is_lazy(lazy) and not _is_lazy(eager)
    assert "_shardc_format_program" not in lazy.__dict__
    assert lazy.get_irdl_definition().assembly_format == eager.get_irdl_definition().assembly_format == fmt
