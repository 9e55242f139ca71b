"""What is wrong with the input, for the plain exceptions that bad input (not a compiler
bug) raises from parser, verifier, pass or runtime code: xDSL's integer constant out of
range for its type, Python's literal of thousands of digits, nesting deeper than the
recursion limit, numpy's buffer too large to allocate. The standard library only, so the
parser, the verifier and the tools all ask it without importing one another.
"""

from __future__ import annotations

import re

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
