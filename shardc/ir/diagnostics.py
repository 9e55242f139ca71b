"""MLIR-style diagnostics: located errors, warnings, remarks and notes, rendered the way
mlir-opt renders them (`file:line:col: error: message`, the source line, a caret).

Passes report through this module rather than by printing:

    from shardc.ir import diagnostics
    diagnostics.emit(op, "remark", "sharding option chosen")      # reported, pass goes on
    raise diagnostics.error(op, "'shard.shard' op cannot partition")  # pass fails

Every diagnostic goes to the active `DiagnosticEngine` (shardc-opt installs one per run,
and `--verify-diagnostics` swaps its handler for the expectation checker). Outside a
tool, a default engine prints to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from io import StringIO
from typing import IO, NoReturn

from xdsl.dialects.builtin import (
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    LocationAttr,
    NameLoc,
    NoneAttr,
    UnknownLoc,
)
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import DiagnosticException

from shardc.ir.locations import SourceFile, find_file_loc


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"
    REMARK = "remark"


@dataclass
class Diagnostic:
    """One diagnostic with its notes; `op` (when known) lets the engine show the op."""

    severity: Severity
    message: str
    location: Attribute
    notes: list[Diagnostic] = field(default_factory=list["Diagnostic"])
    op: Operation | None = field(default=None, repr=False)

    def attach_note(self, message: str, location: Attribute | None = None) -> Diagnostic:
        note = Diagnostic(Severity.NOTE, message, self.location if location is None else location)
        self.notes.append(note)
        return note


class DiagnosticError(DiagnosticException):
    """Raised to abort the parse, verifier or pass with a located diagnostic."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------


def format_location(loc: Attribute) -> str:
    """A location in MLIR's `loc(...)` body syntax, for diagnostics without a file."""
    match loc:
        case FileLineColLoc():
            return f'"{loc.filename.data}":{loc.line.data}:{loc.column.data}'
        case NameLoc():
            inner = "" if isinstance(loc.location, NoneAttr) else f"({format_location(loc.location)})"
            return f'"{loc.desc.data}"{inner}'
        case CallSiteLoc():
            return f"callsite({format_location(loc.callee)} at {format_location(loc.caller)})"
        case FusedLoc():
            inner = ", ".join(format_location(x) for x in loc.locations.data)  # pyright: ignore
            return f"fused[{inner}]"
        case _:
            return "unknown"


def _expand_tabs(line: str, col: int) -> tuple[str, int]:
    """The line with tabs expanded to stops of 8, and where column `col` lands."""
    parts: list[str] = []
    width = 0
    new_col = None
    for i, ch in enumerate(line):
        if i == col - 1:
            new_col = width + 1
        piece = " " * (8 - width % 8) if ch == "\t" else ch
        parts.append(piece)
        width += len(piece)
    if new_col is None:
        new_col = width + max(col - len(line), 1)
    return "".join(parts), new_col


@dataclass
class DiagnosticEngine:
    """Routes diagnostics to a handler (default: render to `stream`) and keeps the
    source buffers needed to show source lines."""

    stream: IO[str] | None = None
    print_op_on_diagnostic: bool = True
    sources: dict[str, SourceFile] = field(default_factory=dict[str, SourceFile])
    handler: Callable[[Diagnostic], None] | None = None
    error_count: int = 0
    crashes: list[str] = field(default_factory=list[str])
    """Python exceptions from dialect or pass code that were turned into diagnostics."""

    def add_source(self, source: SourceFile) -> None:
        self.sources[source.name] = source

    def emit(self, diag: Diagnostic) -> None:
        if diag.severity is Severity.ERROR:
            self.error_count += 1
        if self.print_op_on_diagnostic and diag.op is not None and diag.severity is not Severity.NOTE:
            if (text := op_text(diag.op)) is not None:
                # MLIR attaches this note when the diagnostic is created: it comes first.
                sep = "\n" if "\n" in text else ""
                note = Diagnostic(Severity.NOTE, f"see current operation: {sep}{text}", diag.op.location)
                diag.notes.insert(0, note)
            diag.op = None
        if self.handler is not None:
            self.handler(diag)
        else:
            self.write(self.render(diag))

    def write(self, text: str) -> None:
        """Write rendered diagnostics; characters a terminal would interpret (from the IR:
        a string attribute, a source line, a file name) are escaped on the way."""
        from shardc.ir.escape import display

        stream = self.stream if self.stream is not None else sys.stderr
        stream.write(display(text, keep_newlines=True))
        stream.flush()

    # -- rendering -------------------------------------------------------------------

    def render(self, diag: Diagnostic) -> str:
        out = StringIO()
        previous = self._render_one(out, diag.location, diag.severity, diag.message, True)
        for note in diag.notes:
            show = previous is None or note.location != previous
            previous = self._render_one(out, note.location, note.severity, note.message, show)
        return out.getvalue()

    def _render_one(
        self, out: StringIO, loc: Attribute, severity: Severity, message: str, show_line: bool
    ) -> Attribute | None:
        if isinstance(loc, CallSiteLoc):
            self._render_one(out, loc.callee, severity, message, show_line)
            self._render_one(out, loc.caller, Severity.NOTE, "called from", True)
            return loc.caller
        file_loc = find_file_loc(loc)
        if file_loc is None:
            prefix = "" if isinstance(loc, UnknownLoc) else f"loc({format_location(loc)}): "
            out.write(f"<unknown>:0: {severity}: {prefix}{message}\n")
            return loc
        self.print_message(
            out,
            file_loc.filename.data,
            file_loc.line.data,
            file_loc.column.data,
            severity,
            message,
            show_line=show_line,
        )
        return loc

    def print_message(
        self,
        out: IO[str],
        filename: str,
        line: int,
        col: int,
        severity: Severity | str,
        message: str,
        *,
        length: int = 0,
        show_line: bool = True,
    ) -> None:
        """llvm::SourceMgr::PrintMessage: header, then the source line and a caret
        (with `~` under the next `length - 1` characters)."""
        from shardc.ir.escape import display  # a file name from a loc(): escaped

        out.write(f"{display(filename)}:{line}:{col}: {severity}: {message}\n")
        source = self.sources.get(filename)
        if not show_line or source is None or line == 0 or col == 0:
            return
        text = source.line_text(line)
        if text is None:
            return
        expanded, caret_col = _expand_tabs(text, col)
        # The caret stays under its character when what precedes it is escaped.
        caret_col = len(display(expanded[: caret_col - 1])) + 1
        out.write(f"{display(expanded)}\n")
        out.write(" " * (caret_col - 1) + "^" + "~" * max(length - 1, 0) + "\n")


def op_text(op: Operation, generic: bool = True) -> str | None:
    """The op as MLIR's "see current operation" note shows it: generic form, values
    numbered as in its closest isolated-from-above ancestor (`%5 = "x.y"(%3)`, not
    numbers restarting at the op); None if the printer cannot print it."""
    try:
        from shardc.ir.printer import MLIRPrinter

        stream = StringIO()
        MLIRPrinter(stream=stream, print_generic_format=generic).print_op_in_scope(op)
        return stream.getvalue().rstrip("\n")
    except Exception:
        return None


# --------------------------------------------------------------------------------------
# The active engine and the emission API
# --------------------------------------------------------------------------------------

_engines: list[DiagnosticEngine] = [DiagnosticEngine()]


def current_engine() -> DiagnosticEngine:
    return _engines[-1]


@contextmanager
def engine_scope(engine: DiagnosticEngine) -> Iterator[DiagnosticEngine]:
    """Make `engine` receive every diagnostic emitted inside the block."""
    _engines.append(engine)
    try:
        yield engine
    finally:
        _engines.remove(engine)


def _where(target: Operation | Attribute | None) -> tuple[Attribute, Operation | None]:
    if isinstance(target, Operation):
        return target.location, target
    if target is None:
        return UnknownLoc(), None
    return target, None


def make(
    target: Operation | LocationAttr | Attribute | None,
    severity: Severity | str,
    message: str,
) -> Diagnostic:
    loc, op = _where(target)
    return Diagnostic(Severity(severity), message, loc, op=op)


def emit(
    target: Operation | LocationAttr | Attribute | None,
    severity: Severity | str,
    message: str,
    *,
    notes: tuple[tuple[str, Attribute | None], ...] = (),
) -> Diagnostic:
    """Report a diagnostic at an op (or a location) now; errors do not stop anything by
    themselves: raise `error(...)` to fail."""
    diag = make(target, severity, message)
    for text, loc in notes:
        diag.attach_note(text, loc)
    current_engine().emit(diag)
    return diag


def emit_remark(target: Operation | Attribute | None, message: str) -> Diagnostic:
    return emit(target, Severity.REMARK, message)


def emit_warning(target: Operation | Attribute | None, message: str) -> Diagnostic:
    return emit(target, Severity.WARNING, message)


def error(target: Operation | Attribute | None, message: str) -> DiagnosticError:
    """An error to raise: `raise error(op, "...")`; reported once, where it is caught."""
    return DiagnosticError(make(target, Severity.ERROR, message))


def op_error(op: Operation, message: str) -> DiagnosticError:
    """Like MLIR's `op->emitOpError(...)`: the message gets the `'name' op ` prefix."""
    return error(op, f"'{op.name}' op {message}")


def fail(target: Operation | Attribute | None, message: str) -> NoReturn:
    raise error(target, message)


def one_line(diag: Diagnostic) -> str:
    """`file:line:col: error: message` (with `'op.name' op` known from the location
    alone): the first line of the diagnostic as rendered, without source or notes."""
    engine = DiagnosticEngine(print_op_on_diagnostic=False)
    diag.op = None
    return engine.render(Diagnostic(diag.severity, diag.message, diag.location)).split("\n", 1)[0]


def report_exception(exc: DiagnosticError) -> None:
    """Emit the diagnostic carried by a raised `DiagnosticError`."""
    current_engine().emit(exc.diagnostic)
