"""Strings from the IR or a file, made safe to show on a terminal.

Every printer of a diagnostic, a runtime error or a one-line tool error passes what it
prints through `display`: a `cf.assert` message, a symbol name or a source line may hold
a carriage return or an escape sequence that would erase the line it is on and print a
forged one. Characters a terminal would interpret are written the way MLIR escapes
them in strings: a backslash and two upper-case hex digits per UTF-8 byte (`\\1B` for
ESC, `\\0D` for a carriage return), so what is shown is what the file holds.
"""

from __future__ import annotations


def _escape_char(ch: str) -> str:
    return "".join(f"\\{b:02X}" for b in ch.encode("utf-8", errors="surrogatepass"))


def display(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every non-printable character (control characters, line and
    paragraph separators, bidirectional overrides) escaped MLIR-style; with
    `keep_newlines`, `\\n` stays a line break (for multi-line diagnostics)."""
    if text.isprintable():
        return text
    if keep_newlines:
        return "\n".join(display(line) for line in text.split("\n"))
    return "".join(ch if ch.isprintable() else _escape_char(ch) for ch in text)
