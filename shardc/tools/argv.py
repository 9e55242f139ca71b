"""mlir-opt command lines for shardc-opt.

MLIR lit tests call mlir-opt with LLVM-style options: one or two dashes alike, values
after `=` or as the next word, registered passes as flags (`--canonicalize`,
`-sharding-propagation=traversal=forward`) or as a textual pipeline
(`--pass-pipeline="builtin.module(func.func(a,b{opt=v}),c)"`). This module parses such
a command line against the pass table (`shardc.passes`) into `OptArgs`, with each pass
instantiated from its typed dataclass options. Reading the flags (`scan_argv`) imports
nothing beyond the standard library's start-up set: shardc-opt's result cache does it
before anything else.

Our passes are module passes that handle every function, so pipeline anchors
(`builtin.module(...)`, `func.func(...)`, `any(...)`) are flattened.

Every problem is a `UsageError`: one line, naming the flag, pass or option and the
valid choices, in mlir-opt's wording where it has one.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import dataclasses
    from collections.abc import Sequence

TOOL = "shardc-opt"


class UsageError(Exception):
    """A command-line problem: reported as one line, exit code 1."""


class ExitRequest(Exception):
    """`--help` or `--version`: print `text` to stdout and exit 0."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


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


class OptArgs:
    """A shardc-opt command line, read."""

    def __init__(self) -> None:
        self.input_file = "-"
        self.output_file: str | None = None
        self.passes: list[Any] = []
        """Instantiated `ModulePass`es, in order (empty after `scan_argv`)."""
        self.pass_specs: list[PassSpec] = []
        self.split_input_file = False
        self.split_marker = "// -----"
        self.verify_diagnostics = False
        self.verify_only_expected = False
        self.allow_unregistered_dialect = False
        self.no_implicit_module = False
        self.print_op_generic = False
        self.print_debuginfo = False
        self.verify_each = True
        self.disable_verify = False
        self.print_ir_after_all = False
        self.print_ir_before_all = False

    def __repr__(self) -> str:
        return f"OptArgs({vars(self)!r})"


# --------------------------------------------------------------------------------------
# The flags shardc-opt knows besides the passes
# --------------------------------------------------------------------------------------

DEFAULT_SPLIT_MARKER = "// -----"

_BOOL_FLAGS: dict[str, str] = {
    # flag name -> OptArgs field
    "allow-unregistered-dialect": "allow_unregistered_dialect",
    "no-implicit-module": "no_implicit_module",
    "mlir-print-op-generic": "print_op_generic",
    "print-op-generic": "print_op_generic",
    "mlir-print-debuginfo": "print_debuginfo",
    "print-debuginfo": "print_debuginfo",
    "verify-each": "verify_each",
    "disable-verify": "disable_verify",
    "mlir-print-ir-after-all": "print_ir_after_all",
    "mlir-print-ir-before-all": "print_ir_before_all",
}

_ACCEPTED_FLAGS = {
    # accepted for compatibility, no effect here
    "mlir-disable-threading",
    "mlir-print-local-scope",
    "mlir-print-assume-verified",
    "mlir-print-value-users",
    "mlir-elide-elementsattrs-if-larger",
    "mlir-elide-resource-strings-if-larger",
    "mlir-print-elementsattrs-with-hex-if-larger",
    "mlir-timing",
    "dump-pass-pipeline",
    "show-dialects",
}
_VALUE_FLAGS = {"o", "pass-pipeline", "p", "mlir-elide-elementsattrs-if-larger"}

_TRUE = {"true", "TRUE", "True", "1"}
_FALSE = {"false", "FALSE", "False", "0"}


def _parse_bool(text: str, what: str) -> bool:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise UsageError(
        f"{TOOL}: for the --{what} option: '{text}' is invalid value for boolean argument! Try 0 or 1"
    )


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------

PassTable = dict[str, Callable[[], type]]


def with_pipelines(passes: PassTable) -> PassTable:
    """The pass table plus the named pipelines (`shardc.passes.PIPELINES`), which are
    used like passes: as flags and in textual pipelines."""
    from shardc.passes import all_pipelines

    return {**all_pipelines(), **passes}


def parse_argv(argv: Sequence[str], passes: PassTable) -> OptArgs:
    """Parse an mlir-opt style command line; raise UsageError or ExitRequest."""
    passes = with_pipelines(passes)
    args = scan_argv(argv, passes)
    args.passes = [instantiate(spec, passes) for spec in args.pass_specs]
    return args


def scan_argv(argv: Sequence[str], passes: PassTable) -> OptArgs:
    """The command line read against the pass names only: every flag and pass spec,
    no pass loaded (`OptArgs.passes` stays empty); UsageError or ExitRequest."""
    args = OptArgs()
    positional: list[str] = []
    pipeline: str | None = None
    pass_flags: list[PassSpec] = []
    words = list(argv)
    i = 0
    only_positional = False
    while i < len(words):
        word = words[i]
        i += 1
        if only_positional or word == "-" or not word.startswith("-"):
            positional.append(word)
            continue
        if word == "--":
            only_positional = True
            continue
        body = word[2:] if word.startswith("--") else word[1:]
        name, eq, value = body.partition("=")
        inline_value = value if eq else None

        def take_value() -> str:
            nonlocal i
            if inline_value is not None:
                return inline_value
            if i >= len(words):
                raise UsageError(f"{TOOL}: for the -{name} option: requires a value!")
            i += 1
            return words[i - 1]

        if name in ("h", "help", "help-hidden", "help-list"):
            raise ExitRequest(help_text())
        if name == "version":
            raise ExitRequest(version_text())
        if name == "o":
            args.output_file = take_value()
        elif name in ("pass-pipeline", "p"):
            if pipeline is not None:
                raise UsageError(f"{TOOL}: for the --pass-pipeline option: may only occur zero or one times!")
            pipeline = take_value()
        elif name == "verify-diagnostics":
            args.verify_diagnostics = True
            if inline_value not in (None, "", "all", "only-expected"):
                raise UsageError(
                    f"{TOOL}: for the --verify-diagnostics option: Cannot find option named "
                    f"'{inline_value}'! (choose from: all, only-expected)"
                )
            args.verify_only_expected = inline_value == "only-expected"
        elif name == "split-input-file":
            # mlir-opt 22: the optional value is the marker to split on.
            args.split_input_file = True
            args.split_marker = inline_value or DEFAULT_SPLIT_MARKER
        elif name in _BOOL_FLAGS:
            setattr(args, _BOOL_FLAGS[name], True if inline_value is None else _parse_bool(inline_value, name))
        elif name in _ACCEPTED_FLAGS:
            if name in _VALUE_FLAGS:
                take_value()
        elif name in passes:
            pass_flags.append(PassSpec(name, parse_options(inline_value or "", name)))
        else:
            raise UsageError(_unknown_flag(word, name, passes))
    if len(positional) > 1:
        raise UsageError(
            f"{TOOL}: Too many positional arguments specified! Can specify at most 1 positional "
            f"arguments: {' '.join(repr(p) for p in positional)}"
        )
    if positional:
        args.input_file = positional[0]
    if pipeline is not None and pass_flags:
        raise UsageError(f"{TOOL}: '-pass-pipeline' option can't be used with individual pass options")
    args.pass_specs = parse_pipeline(pipeline) if pipeline is not None else pass_flags
    return args


def _unknown_flag(word: str, name: str, passes: PassTable) -> str:
    known = [*_BOOL_FLAGS, *_ACCEPTED_FLAGS, "o", "split-input-file", "pass-pipeline", "verify-diagnostics", "version", "help", *passes]
    text = f"{TOOL}: Unknown command line argument '{word}'.  Try: '{TOOL} --help'"
    import difflib

    close = difflib.get_close_matches(name, known, n=1)
    if close:
        text += f"\n{TOOL}: Did you mean '--{close[0]}'?"
    return text


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


def _describe(tp: Any) -> str:
    choices = _choices(tp)
    if choices is not None:
        return "|".join(choices)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_describe(a) for a in typing.get_args(tp) if a is not type(None))
    if origin is tuple:
        return f"list of {_describe(typing.get_args(tp)[0])}"
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
        raise UsageError(errors[0] if len(errors) == 1 else f"{where}: '{text}' is not a valid {_describe(tp)}")
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
    raise UsageError(f"{where}: options of type {_describe(tp)} are not supported on the command line")


def _parse_bool_option(text: str, where: str) -> bool:
    if text in _TRUE:
        return True
    if text in _FALSE:
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


# --------------------------------------------------------------------------------------
# --help / --version
# --------------------------------------------------------------------------------------


def version_text() -> str:
    from importlib.metadata import version

    try:
        shardc_version = version("shardc")
    except Exception:  # noqa: BLE001
        shardc_version = "unknown"
    return f"{TOOL} {shardc_version} (shardc, on xdsl {version('xdsl')})\n"


def help_text() -> str:
    """`--help`: the options, and the passes from the static table
    (`shardc.tools.help_table`, checked against the pass registry by a test), so help
    loads no pass."""
    from shardc.tools.help_table import PASS_HELP

    return "\n".join(_HELP_HEAD) + "\n" + PASS_HELP


_HELP_HEAD = [
    "OVERVIEW: shardc modular optimizer driver (mlir-opt compatible)",
    "",
    f"USAGE: {TOOL} [options] <input file>",
    "",
    "OPTIONS:",
    "  -o <file>                       Output filename (default: stdout)",
    "  --pass-pipeline=<string>        Textual pass pipeline, e.g. 'builtin.module(func.func(cse))'",
    "  --split-input-file[=<marker>]   Split the input on '// -----' and process each chunk",
    "  --verify-diagnostics[=only-expected]  Check diagnostics against expected-* comments",
    "  --allow-unregistered-dialect    Allow operations of unregistered dialects",
    "  --no-implicit-module            Do not wrap the input in an implicit builtin.module",
    "  --mlir-print-op-generic         Print operations in generic form",
    "  --mlir-print-debuginfo          Print locations",
    "  --mlir-print-ir-after-all       Print the IR to stderr after each pass",
    "  --mlir-print-ir-before-all      Print the IR to stderr before each pass",
    "  --verify-each[=false]           Verify the IR after each pass (default: true)",
    "  --version                       Print the version",
    "",
    "Passes (as flags: --<pass>[=\"<options>\"]):",
]


def registry_pass_help(passes: PassTable) -> str:
    """The passes section of `--help` as the registry gives it (every pass loaded):
    what `shardc.tools.help_table.PASS_HELP` must equal."""
    import dataclasses

    passes = with_pipelines(passes)
    lines: list[str] = []
    for name in sorted(passes):
        try:
            cls = passes[name]()
        except Exception:  # noqa: BLE001 - help must not fail on one broken pass
            lines.append(f"  --{name}")
            continue
        doc = (cls.__doc__ or "").strip().splitlines()
        summary = doc[0] if doc and not doc[0].startswith(cls.__name__ + "(") else ""
        lines.append(f"  --{name:<30} {summary}".rstrip())
        for option, (fld, tp) in pass_options(cls).items():
            default = "" if fld.default is dataclasses.MISSING else f" (default: {_show(fld.default)})"
            lines.append(f"      {option}=<{_describe(tp)}>{default}")
    return "\n".join(lines) + "\n"


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(_show(v) for v in value)  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)
