"""Parsing a program with every problem reported as a located diagnostic: the one parse
path of every tool (`shardc-opt`, `-run`, `-verify`, `-view`, `-train`'s programs).

Input the user controls gets a diagnostic saying what is wrong with the input, never
"internal error ... please report": besides the parser's own errors, xDSL and Python
raise plain exceptions for some inputs (an integer constant out of range for its type,
a literal of thousands of digits, nesting deeper than Python's recursion limit, a
buffer too large to allocate), and those are recognized here by `input_problem`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xdsl.context import Context
    from xdsl.dialects.builtin import FileLineColLoc, ModuleOp
    from xdsl.utils.exceptions import ParseError
    from xdsl.utils.lexer import Span

    from shardc.ir.diagnostics import Diagnostic
    from shardc.ir.locations import LocatingParser

#: xDSL's message for an integer that does not fit its type.
_OUT_OF_RANGE = re.compile(
    r"Integer value (-?\d+) is out of range for type (\S+) which supports values in the range (\[.*?\))"
)
#: Python's message for an integer literal over `sys.get_int_max_str_digits()`.
_TOO_MANY_DIGITS = re.compile(r"Exceeds the limit \((\d+) digits\).*?has (\d+) digits")


def input_problem(exc: BaseException) -> str | None:
    """What is wrong with the input, for the exceptions that bad input (not a compiler
    bug) raises from parser, verifier, pass or runtime code, or that caused the given
    exception (a rank's failure wraps it); None for any other exception."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if (problem := _own_problem(cause)) is not None:
            return problem
        cause = cause.__cause__
    return None


def _own_problem(exc: BaseException) -> str | None:
    if isinstance(exc, RecursionError):
        return "the program is nested too deeply (regions, blocks, attributes or calls beyond Python's recursion limit)"
    if isinstance(exc, MemoryError):
        return f"out of memory{_memory_detail(exc)}: too large for this machine"
    if isinstance(exc, ValueError | OverflowError):
        text = str(exc)
        if m := _OUT_OF_RANGE.search(text):
            return f"integer constant out of range for type {m.group(2)}: {m.group(1)} is outside {m.group(3)}"
        if m := _TOO_MANY_DIGITS.search(text):
            return f"integer literal too long: {m.group(2)} digits (at most {m.group(1)})"
        if "Maximum allowed dimension exceeded" in text or "array is too big" in text:
            return "a shape is too large for an array: its size exceeds what numpy can allocate"
    return None


def _memory_detail(exc: BaseException) -> str:
    """numpy's size and shape of the array it could not allocate, when it says."""
    m = re.search(r"allocate ([0-9.]+ [KMGTP]?i?B)(?: for an array with shape (\([0-9, ]*\)))?", str(exc))
    if m is None:
        return ""
    return f" (allocating {m.group(1)}{f' for shape {m.group(2)}' if m.group(2) else ''})"


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
