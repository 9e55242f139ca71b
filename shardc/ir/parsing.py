"""Parsing a program with every problem reported as a located diagnostic: the one parse
path of every tool (`shardc-opt`, `-run`, `-verify`, `-view`, `-train`'s programs).

Input the user controls gets a diagnostic saying what is wrong with the input, never
"internal error ... please report": besides the parser's own errors, xDSL and Python
raise plain exceptions for some inputs (an integer constant out of range for its type,
a literal of thousands of digits, nesting deeper than Python's recursion limit, a
buffer too large to allocate), and those are recognized by
`shardc.ir.input_problems.input_problem`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shardc.ir.input_problems import input_problem

if TYPE_CHECKING:
    from xdsl.context import Context
    from xdsl.dialects.builtin import FileLineColLoc, ModuleOp
    from xdsl.utils.exceptions import ParseError
    from xdsl.utils.lexer import Span

    from shardc.ir.diagnostics import Diagnostic
    from shardc.ir.locations import LocatingParser

def _span_loc(name: str, span: Span) -> FileLineColLoc:
    from shardc.ir.locations import file_loc

    where = span.get_location()
    return file_loc(name, where.line, where.col)


def parse_diagnostic(name: str, exc: ParseError) -> Diagnostic:
    """The diagnostic of a ParseError, its notes at their spans."""
    from xdsl.utils.exceptions import MultipleSpansParseError

    from shardc.ir.diagnostics import Diagnostic, Severity

    diag = Diagnostic(Severity.ERROR, exc.msg, _span_loc(name, exc.span))
    if isinstance(exc, MultipleSpansParseError):
        for span, message in exc.refs:
            text = message or (exc.ref_text or "see").rstrip(":")
            diag.attach_note(text, _span_loc(name, span))
    return diag


def _where(parser: LocatingParser | None, exc: BaseException) -> FileLineColLoc | None:
    """Where a parse stopped: for a bad value, the op holding it (the parser is past the
    literal by then); else the token the parser was at."""
    if parser is None:
        return None
    starts = parser.op_name_starts
    if starts and not isinstance(exc, RecursionError | MemoryError):
        return parser.loc_at(starts[-1])
    return parser.loc_at(parser.current_offset)


def parse_program(
    ctx: Context,
    text: str,
    name: str,
    *,
    module_loc: tuple[int, int] = (0, 0),
    implicit_module: bool = True,
) -> ModuleOp | None:
    """The parsed module, or None once its problem is reported to the current
    diagnostic engine (located in `name`; a compiler bug as an internal error)."""
    from xdsl.utils.exceptions import DiagnosticException, ParseError

    from shardc.ir import diagnostics
    from shardc.ir.diagnostics import DiagnosticError, Severity
    from shardc.ir.locations import LocatingParser
    from shardc.ir.verifier import report_crash

    parser: LocatingParser | None = None
    try:
        parser = LocatingParser(ctx, text, name, module_loc=module_loc)
        return parser.parse_module(implicit_module)
    except ParseError as exc:
        diagnostics.current_engine().emit(parse_diagnostic(name, exc))
    except DiagnosticError as exc:
        diagnostics.report_exception(exc)
    except Exception as exc:  # noqa: BLE001 - dialect parser bugs become diagnostics
        where = _where(parser, exc)
        if isinstance(exc, DiagnosticException):
            diagnostics.emit(where, Severity.ERROR, str(exc))
        elif (problem := input_problem(exc)) is not None:
            diagnostics.emit(where, Severity.ERROR, problem)
        else:
            report_crash(where, "the parser", exc)
    return None
