"""`irdl_op_definition` with the op's declarative assembly format compiled on first use.

xDSL compiles an op's `assembly_format` into a `FormatProgram` while it defines the
class: about half of what importing shardc's shard dialect costs (21 formats), paid by
every `shardc-opt` process whether or not it parses or prints those ops. Here the class
is defined without it and `parse`/`print` compile the same program from the same op
definition the first time either runs, so what is parsed and printed is unchanged. A
format with a mistake is reported on first use instead of at import; the dialect tests
compile every format (`compile_format`). Every op of shardc's with a format of its own
is defined this way: shard's and mpi's, and the overlays' (arith, func, tensor, memref,
vector, tm_tensor: a one-function file loads four of those modules, whose six formats
cost a quarter of their import and are never used there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation, irdl_op_definition

if TYPE_CHECKING:
    from xdsl.irdl.declarative_assembly_format import FormatProgram
    from xdsl.parser import Parser
    from xdsl.printer import Printer

OpT = TypeVar("OpT", bound=IRDLOperation)

_PROGRAM = "_shardc_format_program"
_OPERATION_PARSE = Operation.parse.__func__  # pyright: ignore[reportFunctionMemberAccess]


def lazy_format_op_definition(cls: type[OpT]) -> type[OpT]:
    """`irdl_op_definition(cls)`, the assembly format (if any) compiled when first needed.
    A class whose `parse` or `print` is not `Operation`'s (its own, or inherited from an
    op with a format of its own) goes to xDSL as it is, which refuses it: the test is
    xDSL's own. (A subclass of such an op takes `Operation`'s back to use a format.)"""
    fmt: str | None = getattr(cls, "assembly_format", None)
    if fmt is None or cls.print is not Operation.print or getattr(cls.parse, "__func__", None) is not _OPERATION_PARSE:
        return irdl_op_definition(cls)
    cls.assembly_format = None
    try:
        cls = irdl_op_definition(cls)
    finally:
        cls.assembly_format = fmt
    cls.get_irdl_definition().assembly_format = fmt

    def parse(op_cls: type[OpT], parser: Parser) -> OpT:
        return compile_format(cls).parse(parser, op_cls)

    def print_(self: IRDLOperation, printer: Printer) -> None:
        compile_format(cls).print(printer, self)

    cls.parse = classmethod(parse)  # type: ignore[method-assign, assignment]
    cls.print = print_  # type: ignore[method-assign, assignment]
    return cls


def compile_format(cls: type[IRDLOperation]) -> FormatProgram:
    """The assembly-format program of an op class defined by `lazy_format_op_definition`
    (compiled once; the error xDSL raises at definition time on a bad format)."""
    program: Any = cls.__dict__.get(_PROGRAM)
    if program is None:
        from xdsl.irdl.declarative_assembly_format import FormatProgram
        from xdsl.utils.exceptions import ParseError, PyRDLOpDefinitionError

        op_def = cls.get_irdl_definition()
        assert op_def.assembly_format is not None, cls
        try:
            program = FormatProgram.from_str(op_def.assembly_format, op_def)
        except ParseError as e:
            raise PyRDLOpDefinitionError("Error during the parsing of the assembly format: ", e.args) from e
        setattr(cls, _PROGRAM, program)
    return program
