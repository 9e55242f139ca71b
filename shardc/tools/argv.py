"""mlir-opt command lines for shardc-opt.

MLIR lit tests call mlir-opt with LLVM-style options: one or two dashes alike, values
after `=` or as the next word, registered passes as flags (`--canonicalize`,
`-sharding-propagation=traversal=forward`) or as a textual pipeline
(`--pass-pipeline="builtin.module(func.func(a,b{opt=v}),c)"`). This module parses such
a command line against the pass table (`shardc.passes`) into `OptArgs`, with each pass
instantiated from its typed dataclass options. Reading the flags (`scan_argv`) imports
nothing beyond the standard library's start-up set: shardc-opt's result cache does it
before anything else.

Textual pipelines and pass options are read by `shardc.passes.pipeline_text` (passes
that run a nested pipeline read them too); pipeline anchors (`builtin.module(...)`,
`func.func(...)`, `any(...)`) are flattened.

Every problem is a `UsageError`: one line, naming the flag, pass or option and the
valid choices, in mlir-opt's wording where it has one.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from shardc.passes.pipeline_text import (
    FALSE_WORDS,
    TOOL,
    TRUE_WORDS,
    PassSpec,
    PassTable,
    UsageError,
    describe_type,
    instantiate,
    parse_options,
    parse_pipeline,
    pass_options,
    with_pipelines,
)

if TYPE_CHECKING:
    from collections.abc import Sequence


class ExitRequest(Exception):
    """`--help` or `--version`: print `text` to stdout and exit 0."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


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

def _parse_bool(text: str, what: str) -> bool:
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise UsageError(
        f"{TOOL}: for the --{what} option: '{text}' is invalid value for boolean argument! Try 0 or 1"
    )


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------

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
# --help / --version
# --------------------------------------------------------------------------------------


def write_output_file(path: str, text: str) -> None:
    """`-o FILE`: UsageError when it cannot be written."""
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"{TOOL}: cannot open output file '{path}': {exc.strerror}") from None


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
            lines.append(f"      {option}=<{describe_type(tp)}>{default}")
    return "\n".join(lines) + "\n"


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(_show(v) for v in value)  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def write_help_table() -> None:
    """Rewrite `shardc.tools.help_table.PASS_HELP` from the registry (every pass loaded)."""
    import re
    from pathlib import Path

    from shardc.passes import all_passes
    from shardc.tools import help_table

    path = Path(help_table.__file__)
    text = path.read_text()
    body = registry_pass_help(all_passes()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    new = re.sub(r'PASS_HELP = """\\\n.*?"""\n', lambda _: f'PASS_HELP = """\\\n{body}"""\n', text, count=1, flags=re.S)
    path.write_text(new)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--write-help-table"]:
        sys.exit("usage: python -m shardc.tools.argv --write-help-table")
    write_help_table()
