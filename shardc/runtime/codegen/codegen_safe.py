"""The one place where text from the IR may enter the runtime's generated Python.

An .mlir file is data: a symbol name, string attribute, location or value name must
never become code. Generated source therefore takes IR text only

- as a Python literal made by `py_literal` (`repr` of plain data, which Python parses
  back to the same value whatever quotes, backslashes or line breaks it holds), or
- as an identifier made by `py_identifier` (only `[A-Za-z0-9_]`, injective: two
  different texts never give one identifier) or by `py_hint` (a lossy readable hint,
  only for names that a counter makes unique).

The second line of defence is on the run side (`shardc.runtime.execute.code_check`):
`check_generated` rejects generated code that imports, reaches for dunder attributes or
calls the builtins that run or load code, none of which an emitter ever writes, and
`check_code` applies the same rules to compiled code (what a compile-cache hit compiles
from its stored source). `shardc.ir.escape.display` quotes IR text for messages so that a name cannot forge lines
or terminal control sequences.
"""

from __future__ import annotations

import builtins
import dis
import keyword
import math
import re

import numpy as np


_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
_HINT_MAX = 32


def py_literal(value: object) -> str:
    """Python source for `value` (None, bool, int, float, str, bytes, numpy scalars of
    those kinds, or tuples and lists of them) that evaluates back to an equal value.
    Anything else is refused, so an object whose `repr` is arbitrary text can never
    reach generated code."""
    if value is None or isinstance(value, bool | np.bool_):
        return repr(None if value is None else bool(value))
    if isinstance(value, int | np.integer):
        return repr(int(value))
    if isinstance(value, float | np.floating):
        value = float(value)
        if math.isfinite(value):
            return repr(float(value))
        return f"float({repr(str(float(value)))})"  # inf, -inf, nan: no literal spelling
    if isinstance(value, str):
        return repr(str(value))
    if isinstance(value, bytes):
        return repr(bytes(value))
    if isinstance(value, tuple):
        items = [py_literal(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    raise TypeError(f"py_literal: {type(value).__name__} is not plain data")


def _encode(text: str) -> str:
    """Letters and digits as they are, `_` as `__`, any other character as `_<hex>_`:
    read left to right it decodes uniquely, so different texts never collide."""
    out: list[str] = []
    for ch in text:
        if ch in _ALNUM:
            out.append(ch)
        elif ch == "_":
            out.append("__")
        else:
            out.append(f"_{ord(ch):x}_")
    return "".join(out)


def py_identifier(text: str, prefix: str) -> str:
    """An identifier for `text`: `prefix__<encoding>`. `prefix` (letters and digits,
    starting with a letter) keeps a leading digit, a keyword or a builtin's name from
    resulting; the `__` after it keeps these names apart from `py_hint` names, which
    never contain two underscores in a row."""
    if not _PREFIX.match(prefix):
        raise ValueError(f"py_identifier: bad prefix {prefix!r}")
    name = f"{prefix}__{_encode(text)}"
    assert name.isidentifier() and not keyword.iskeyword(name) and not hasattr(builtins, name)
    return name


def py_hint(text: str | None, default: str = "v") -> str:
    """A short readable name part from `text`: ASCII letters, digits and single
    underscores, starting with a letter, never ending in `_`. Not unique: callers
    append a unique counter (`hint_<n>`)."""
    kept = re.sub(r"[^A-Za-z0-9]+", "_", text or "").strip("_")[:_HINT_MAX].rstrip("_")
    if not kept:
        return default
    if not kept[0].isalpha():
        kept = default + "_" + kept
    return kept
