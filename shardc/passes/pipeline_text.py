"""Textual pass pipelines and pass options, as mlir-opt reads them (MLIR's
`PassRegistry.cpp`): `builtin.module(func.func(a, b{x=1}), c)` into pass specs, each
spec into a pass object of the table with its typed dataclass options. shardc-opt's
command line (`shardc.tools.argv`) and passes that run a nested pipeline (`inline`'s
`default-pipeline`) read pipelines here. Our passes are module passes that handle
every function, so pipeline anchors are flattened.

The standard library only (shardc-opt reads its flags with it before importing
anything else); every problem is a `UsageError`: one line, naming the pass or option
and the valid choices, in mlir-opt's wording where it has one.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import dataclasses

TOOL = "shardc-opt"
"""The tool the messages name (mlir-opt's wording, with our name)."""


class UsageError(Exception):
    """A problem with a command line or pipeline text: reported as one line, exit code 1."""


class PassSpec:
    """A pass as named on the command line, before instantiation. (Plain classes here,
    not dataclasses: importing `dataclasses` costs a cached answer a fifth of its time.)"""

    __slots__ = ("name", "options")

    def __init__(self, name: str, options: list[tuple[str, str | None]] | None = None):
        self.name = name
        self.options: list[tuple[str, str | None]] = [] if options is None else options

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PassSpec) and (self.name, self.options) == (other.name, other.options)

    def __repr__(self) -> str:
        return f"PassSpec({self.name!r}, {self.options!r})"


TRUE_WORDS = {"true", "TRUE", "True", "1"}
FALSE_WORDS = {"false", "FALSE", "False", "0"}
"""LLVM's spellings of a boolean option's values."""

PassTable = dict[str, Callable[[], type]]


def with_pipelines(passes: PassTable) -> PassTable:
    """The pass table plus the named pipelines (`shardc.passes.PIPELINES`), which are
    used like passes: as flags and in textual pipelines."""
    from shardc.passes import all_pipelines

    return {**all_pipelines(), **passes}


# --------------------------------------------------------------------------------------
# Textual pass pipelines: anchor(pass{k=v}, nested(pass), ...)
# --------------------------------------------------------------------------------------


class _Scanner:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def name(self) -> str:
        self.skip_ws()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "-_.:$"):
            self.pos += 1
        return self.text[start : self.pos]

    def error(self, message: str) -> UsageError:
        return UsageError(
            f"{TOOL}: MLIR Textual PassPipeline Parser:1:{self.pos + 1}: error: {message}"
        )


def parse_pipeline(text: str) -> list[PassSpec]:
    """Flatten `builtin.module(func.func(a, b{x=1}), c)` into [a, b{x=1}, c]."""
    scanner = _Scanner(text)
    if not scanner.peek():
        return []
    anchor = scanner.name()
    if not anchor or scanner.peek() != "(":
        raise UsageError(
            f"{TOOL}: expected pass pipeline to be wrapped with the anchor operation type, "
            "e.g. 'builtin.module(...)'"
        )
    if anchor not in ("builtin.module", "any"):
        raise UsageError(f"{TOOL}: can't run '{anchor}' pass manager on 'builtin.module' op")
    specs: list[PassSpec] = []
    _parse_nested(scanner, specs)
    if scanner.peek():
        raise scanner.error(f"unexpected '{scanner.peek()}' after the pipeline")
    return specs


def _parse_nested(scanner: _Scanner, specs: list[PassSpec]) -> None:
    """Parse `( element, ... )` at the scanner."""
    scanner.pos += 1  # '('
    if scanner.peek() == ")":
        scanner.pos += 1
        return
    while True:
        name = scanner.name()
        if not name:
            raise scanner.error("expected pass identifier")
        nxt = scanner.peek()
        if nxt == "(":
            _parse_nested(scanner, specs)
        else:
            options = ""
            if nxt == "{":
                options = _braced(scanner)
            specs.append(PassSpec(name, parse_options(options, name)))
        nxt = scanner.peek()
        if nxt == ",":
            scanner.pos += 1
            continue
        if nxt == ")":
            scanner.pos += 1
            return
        raise scanner.error("expected ',' after parsing pipeline" if nxt else "encountered unbalanced parentheses while parsing pipeline")


def _braced(scanner: _Scanner) -> str:
    """The text inside a balanced `{...}` at the scanner (quotes respected)."""
    text = scanner.text
    start = scanner.pos + 1
    depth = 0
    quote = ""
    pos = scanner.pos
    while pos < len(text):
        ch = text[pos]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                scanner.pos = pos + 1
                return text[start:pos]
        pos += 1
    scanner.pos = len(text)
    raise scanner.error("missing closing '}' while processing pass options")


# --------------------------------------------------------------------------------------
# Pass options: `key=value key2="v w" list=a,b flag`
# --------------------------------------------------------------------------------------


def _split_top(text: str, separators: str) -> list[str]:
    """Split at separators outside quotes and braces."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    quote = ""
    for ch in text:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        elif ch in separators and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if len(text) >= 2 and text[0] == "{" and text[-1] == "}":
        return text[1:-1]
    return text


def parse_options(text: str, pass_name: str) -> list[tuple[str, str | None]]:
    """`a=1 b="x y" c` -> [("a", "1"), ("b", "x y"), ("c", None)]."""
    options: list[tuple[str, str | None]] = []
    for item in _split_top(text.strip(), " \t\n"):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not key:
            raise UsageError(f"{TOOL}: <Pass-Options-Parser>: expected an option name in '{item}' for pass '{pass_name}'")
        options.append((key, _unquote(value) if eq else None))
    return options


def pass_options(cls: type) -> dict[str, tuple[dataclasses.Field[Any], Any]]:
    """MLIR option name (kebab-case) -> (field, resolved type) of a pass class."""
    import dataclasses
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to raw ones
        hints = {}
    if not dataclasses.is_dataclass(cls):
        return {}
    return {
        f.name.replace("_", "-"): (f, hints.get(f.name, f.type))
        for f in dataclasses.fields(cls)
        if f.init
    }


def describe_type(tp: Any) -> str:
    """How `--help` names an option's type: its choices, `list of T`, or the type's name."""
    choices = _choices(tp)
    if choices is not None:
        return "|".join(choices)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(describe_type(a) for a in typing.get_args(tp) if a is not type(None))
    if origin is tuple:
        return f"list of {describe_type(typing.get_args(tp)[0])}"
    return getattr(tp, "__name__", str(tp))


def _choices(tp: Any) -> list[str] | None:
    if typing.get_origin(tp) is Literal:
        return [str(a) for a in typing.get_args(tp)]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return [str(m.value) for m in tp]
    return None


def convert_option(text: str | None, tp: Any, option: str, pass_name: str) -> Any:
    """Convert an option value to the field's type, with LLVM's error wording."""
    where = f"{TOOL}: for the --{option} option of pass '{pass_name}'"
    origin = typing.get_origin(tp)
    if tp is bool:
        return True if text is None else _parse_bool_option(text, where)
    if text is None:
        raise UsageError(f"{where}: requires a value!")
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        errors: list[str] = []
        for member in members:
            try:
                return convert_option(text, member, option, pass_name)
            except UsageError as exc:
                errors.append(str(exc))
        raise UsageError(errors[0] if len(errors) == 1 else f"{where}: '{text}' is not a valid {describe_type(tp)}")
    if origin is tuple:
        args = typing.get_args(tp)
        element = args[0] if args else str
        items = [] if text == "" else [_unquote(x.strip()) for x in _split_top(text, ",")]
        return tuple(convert_option(x, element, option, pass_name) for x in items)
    if origin is list:
        element = typing.get_args(tp)[0]
        items = [] if text == "" else [_unquote(x.strip()) for x in _split_top(text, ",")]
        return [convert_option(x, element, option, pass_name) for x in items]
    if (choices := _choices(tp)) is not None:
        if origin is Literal:
            for value in typing.get_args(tp):
                if str(value) == text:
                    return value
        else:
            for member in tp:
                if str(member.value) == text or member.name.lower() == text.lower():
                    return member
        raise UsageError(
            f"{where}: Cannot find option named '{text}'! (choose from: {', '.join(choices)})"
        )
    if tp is int:
        try:
            return int(text, 0)
        except ValueError:
            raise UsageError(f"{where}: '{text}' value invalid for integer argument!") from None
    if tp is float:
        try:
            return float(text)
        except ValueError:
            raise UsageError(f"{where}: '{text}' value invalid for floating point argument!") from None
    if tp is str or tp is Any:
        return text
    raise UsageError(f"{where}: options of type {describe_type(tp)} are not supported on the command line")


def _parse_bool_option(text: str, where: str) -> bool:
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise UsageError(f"{where}: '{text}' is invalid value for boolean argument! Try 0 or 1")


def instantiate(spec: PassSpec, passes: PassTable) -> Any:
    """The pass object for a spec, with typed options; UsageError on any mistake."""
    passes = with_pipelines(passes)
    if spec.name not in passes:
        import difflib

        close = difflib.get_close_matches(spec.name, list(passes), n=1, cutoff=0.8)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise UsageError(
            f"{TOOL}: '{spec.name}' does not refer to a registered pass or pass pipeline{hint}; "
            f"registered passes: {', '.join(sorted(passes))}"
        )
    try:
        cls = passes[spec.name]()
    except Exception as exc:  # noqa: BLE001 - a pass module that fails to import
        raise UsageError(f"{TOOL}: pass '{spec.name}' could not be loaded: {type(exc).__name__}: {exc}") from None
    import dataclasses

    options = pass_options(cls)
    kwargs: dict[str, Any] = {}
    for key, value in spec.options:
        entry = options.get(key) or options.get(key.replace("_", "-"))
        if entry is None:
            valid = ", ".join(options) or "none"
            raise UsageError(
                f"{TOOL}: <Pass-Options-Parser>: no such option {key} for pass '{spec.name}' "
                f"(valid options: {valid})"
            )
        fld, tp = entry
        kwargs[fld.name] = convert_option(value, tp, key.replace("_", "-"), spec.name)
    missing = [
        name
        for name, (fld, _) in options.items()
        if fld.name not in kwargs
        and fld.default is dataclasses.MISSING
        and fld.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise UsageError(f"{TOOL}: pass '{spec.name}' requires option(s): {', '.join(missing)}")
    try:
        return cls(**kwargs)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - a pass's own option checks
        raise UsageError(f"{TOOL}: invalid options for pass '{spec.name}': {exc}") from None
