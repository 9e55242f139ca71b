"""`--verify-diagnostics`: check emitted diagnostics against `expected-*` comments, with
MLIR's rules (SourceMgrDiagnosticVerifierHandler):

    // expected-error {{substring}}          on this line
    // expected-warning @+2 {{...}}          N lines below (@-N: above)
    // expected-note @above {{...}}          the last line that is not a designator
    // expected-remark @below {{...}}        the next line that is not a designator
    // expected-error @unknown {{...}}       a diagnostic without a file location
    // expected-error-re {{a {{[0-9]+}} b}}  literal text with `{{regex}}` blocks

Plain expectations match by substring, `-re` ones by regex search. A diagnostic that
matches nothing is reported as `unexpected <kind>: ...`; an expectation that nothing
matched as `expected <kind> "..." was not produced`; each sets the status to failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from io import StringIO

from xdsl.ir import Attribute

from shardc.ir.diagnostics import Diagnostic, DiagnosticEngine, Severity
from shardc.ir.locations import SourceFile, find_file_loc

_DESIGNATOR = re.compile(
    r"expected-(error|note|remark|warning)(-re)? *(@([+-][0-9]+|above|below|unknown))? *\{\{(.*)\}\}$"
)


@dataclass
class Expected:
    kind: Severity
    line: int
    """1-based line the diagnostic must be reported on (0: unknown location)."""
    filename: str
    pos: tuple[int, int]
    """Line and column of the `expected-` text, where failures are reported."""
    text: str
    regex: re.Pattern[str] | None = None
    matched: bool = False

    def match(self, message: str) -> bool:
        if self.regex is not None:
            return self.regex.search(message) is not None
        return self.text in message


def _compile(text: str) -> re.Pattern[str] | str:
    """The regex of an `-re` expectation, or an error message."""
    parts: list[str] = []
    rest = text
    while rest:
        start = rest.find("{{")
        if start == -1:
            parts.append(re.escape(rest))
            break
        parts.append(re.escape(rest[:start]))
        rest = rest[start + 2 :]
        end = rest.find("}}")
        if end == -1:
            return "found start of regex with no end '}}'"
        block = rest[:end]
        try:
            re.compile(block)
        except re.error as exc:
            return f"invalid regex: {exc}"
        parts.append(f"({block})")
        rest = rest[end + 2 :]
    return re.compile("".join(parts))


@dataclass
class DiagnosticVerifier:
    """The engine handler for `--verify-diagnostics`."""

    engine: DiagnosticEngine
    only_expected: bool = False
    expected: dict[str, list[Expected]] = field(default_factory=dict[str, list[Expected]])
    unknown: list[Expected] = field(default_factory=list[Expected])
    ok: bool = True

    def __post_init__(self) -> None:
        for source in self.engine.sources.values():
            self.scan(source)
        self.engine.handler = self.process

    def scan(self, source: SourceFile) -> None:
        found = self.expected.setdefault(source.name, [])
        lines = source.text.split("\n")
        last_plain = 0
        for_next: list[Expected] = []
        for index, raw in enumerate(lines):
            m = _DESIGNATOR.search(raw.rstrip())
            if m is None:
                for exp in for_next:
                    exp.line = index + 1
                for_next.clear()
                last_plain = index
                continue
            exp = Expected(
                Severity(m.group(1)), index + 1, source.name, (index + 1, m.start() + 1), m.group(5)
            )
            if m.group(2):
                compiled = _compile(exp.text)
                if isinstance(compiled, str):
                    self._fail_at(exp, compiled)
                    continue
                exp.regex = compiled
            where = m.group(4)
            if where is None:
                found.append(exp)
            elif where[0] in "+-":
                exp.line += int(where) if where[0] == "-" else int(where[1:])
                found.append(exp)
            elif where == "unknown":
                exp.line = 0
                self.unknown.append(exp)
            elif where == "above":
                exp.line = last_plain + 1
                found.append(exp)
            else:  # below: the next line that is not a designator (or the last line)
                exp.line = len(lines)
                for_next.append(exp)
                found.append(exp)

    # -- checking --------------------------------------------------------------------

    def process(self, diag: Diagnostic) -> None:
        self._process_one(diag.location, diag.message, diag.severity)
        for note in diag.notes:
            self._process_one(note.location, note.message, note.severity)

    def _process_one(self, loc: Attribute, message: str, kind: Severity) -> None:
        file_loc = find_file_loc(loc)
        if file_loc is not None:
            candidates = self.expected.get(file_loc.filename.data, [])
            line = file_loc.line.data
        else:
            candidates = self.unknown
            line = None
        near_miss: Expected | None = None
        for exp in candidates:
            if line is not None and exp.line != line:
                continue
            if exp.match(message):
                if exp.kind is kind:
                    exp.matched = True
                    return
                near_miss = exp
        if self.only_expected:
            return
        self.ok = False
        if near_miss is not None:
            self._fail_at(
                near_miss,
                f"'{kind}' diagnostic emitted when expecting a '{near_miss.kind}'",
                length=0,
            )
        else:
            self.engine.write(
                self.engine.render(Diagnostic(Severity.ERROR, f"unexpected {kind}: {message}", loc))
            )

    def _fail_at(self, exp: Expected, message: str, length: int | None = None) -> None:
        self.ok = False
        out = StringIO()
        self.engine.print_message(
            out,
            exp.filename,
            *exp.pos,
            Severity.ERROR,
            message,
            length=len(exp.text) if length is None else length,
        )
        self.engine.write(out.getvalue())

    def verify(self) -> bool:
        """Report every expectation that was not met; True when all is as expected."""
        for exps in self.expected.values():
            for exp in exps:
                if not exp.matched:
                    self._fail_at(exp, f'expected {exp.kind} "{exp.text}" was not produced')
        for exp in self.unknown:
            if not exp.matched:
                self._fail_at(exp, f'expected {exp.kind} "{exp.text}" was not produced')
        self.expected.clear()
        self.unknown.clear()
        return self.ok
