"""`shardc-opt`: a drop-in for mlir-opt on the shard dialect, on xDSL's parser, passes
and context (not its opt main, whose argparse front and entry-points scan cost start-up).

What it gives:
- mlir-opt command lines (`shardc.tools.argv`): pass flags, `--pass-pipeline`, one-dash
  long flags, typed pass options;
- file locations on every parsed op (`shardc.ir.locations`), MLIR-style diagnostics on
  stderr (`shardc.ir.diagnostics`), verification op by op (`shardc.ir.verifier`);
- `--split-input-file` and `--verify-diagnostics` with MLIR's semantics;
- no Python traceback for any input: exit code 0 or 1 with a diagnostic;
- start-up paid for what a command uses: this module imports no xDSL; the dialects load
  by name as the parser meets them, a pass when the command line names it, `--help`
  reads a static table, interface models and op formats load with their first op; run
  as a command, results come from a cache (`shardc.tools.opt_cache`) when the input,
  the command line and the compiler are the same as before, the cyclic collector stays
  off and the process ends without the interpreter's teardown (`exit_now`); a command
  that compiles compiles each dataclass method text of xDSL's classes once and loads
  xDSL's math dialect on first use (`shardc.tools.fast_start`).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from shardc.passes import all_passes
from shardc.tools.argv import TOOL, ExitRequest, OptArgs, UsageError, parse_argv, write_output_file

if TYPE_CHECKING:
    from collections.abc import Sequence

    from xdsl.dialects.builtin import ModuleOp
    from xdsl.passes import ModulePass

    from shardc.ir.diagnostics import DiagnosticEngine
    from shardc.tools.opt_cache import Recording


class Chunk:
    """One `--split-input-file` piece of the input."""

    __slots__ = ("text", "start", "module_loc")

    def __init__(self, text: str, start: int, module_loc: tuple[int, int]):
        self.text = text
        self.start = start
        """Offset of the chunk in the whole input."""
        self.module_loc = module_loc
        """Line and column MLIR gives the implicit module of this chunk."""


class ShardcOptMain:
    """One shardc-opt invocation: the command line read (passes instantiated), a lazy
    context, and `run` over the input."""

    def __init__(self, args: Sequence[str] | None = None, data: bytes | None = None):
        self.input_data = data
        """The input's bytes when the caller read them already (else `run` reads them)."""
        argv = list(sys.argv[1:] if args is None else args)
        self.opt_args: OptArgs = parse_argv(argv, all_passes())  # before xDSL: --help, usage errors
        from shardc.context import make_context

        self.ctx = make_context(allow_unregistered=self.opt_args.allow_unregistered_dialect)
        self.passes: list[ModulePass] = list(self.opt_args.passes)
        self.file_output: str | None = None
        """What `-o FILE` received (None when writing to stdout or on failure)."""

    def output_resulting_program(self, prog: ModuleOp) -> str:
        from io import StringIO

        from shardc.ir.printer import print_module

        output = StringIO()
        print_module(prog, output, generic=self.opt_args.print_op_generic, debuginfo=self.opt_args.print_debuginfo)
        return output.getvalue()

    # -- the driver ----------------------------------------------------------------------

    def run(self) -> int:
        """Process the input; return the exit code (0 or 1)."""
        from shardc.ir import diagnostics
        from shardc.ir.diagnostics import DiagnosticEngine
        from shardc.ir.locations import SourceFile

        opts = self.opt_args
        name, text = _read_input(opts.input_file, self.input_data)
        engine = DiagnosticEngine(stream=sys.stderr, print_op_on_diagnostic=not opts.verify_diagnostics)
        engine.add_source(SourceFile(name, text))
        checker = None
        if opts.verify_diagnostics:
            from shardc.ir.verify_diagnostics import DiagnosticVerifier

            checker = DiagnosticVerifier(engine, only_expected=opts.verify_only_expected)
        self.engine = engine
        to_stdout = opts.output_file is None or opts.output_file == "-"
        pieces: list[str] = []
        ok = True
        with diagnostics.engine_scope(engine):
            if opts.split_input_file:
                chunks = split_input(text, name, engine, opts.split_marker)
            else:
                chunks = [Chunk(text, 0, (0, 0))]
            for index, chunk in enumerate(chunks):
                out = self.process_chunk(chunk, name, text)
                ok = ok and out is not None
                piece = out or ""
                if opts.split_input_file and piece and not piece.endswith("\n\n"):
                    piece += "\n"
                if index > 0:
                    piece = opts.split_marker + "\n" + piece
                pieces.append(piece)
                if to_stdout:
                    sys.stdout.write(piece)
            if checker is not None:
                ok = checker.verify()
        if to_stdout:
            sys.stdout.flush()
        elif ok:
            assert opts.output_file is not None
            self.file_output = "".join(pieces)
            write_output_file(opts.output_file, self.file_output)
        return 0 if ok else 1

    def process_chunk(self, chunk: Chunk, name: str, whole: str) -> str | None:
        """Parse, verify, run the passes and print one chunk; None if it failed."""
        opts = self.opt_args
        module = self.parse_chunk_text(chunk, name, whole)
        if module is None:
            return None
        from shardc.ir.verifier import report_crash, verify

        if not opts.disable_verify and not verify(module):
            return None
        for pass_ in self.passes:
            if opts.print_ir_before_all:
                self._dump("Before", pass_, module)
            if not self._apply(pass_, module):
                return None
            if opts.print_ir_after_all:
                self._dump("After", pass_, module)
            if opts.verify_each and not opts.disable_verify and not verify(module):
                return None
        try:
            return self.output_resulting_program(module)
        except Exception as exc:  # noqa: BLE001 - a printer bug must not end in a traceback
            report_crash(module, "the printer", exc)
            return None

    def parse_chunk_text(self, chunk: Chunk, name: str, whole: str) -> ModuleOp | None:
        from shardc.ir.parsing import parse_program

        # Pad the chunk so that offsets in it are offsets of the whole input: locations
        # and diagnostics then name the lines of the file, as mlir-opt reports them.
        line_start = whole.rfind("\n", 0, chunk.start) + 1
        padding = "\n" * whole.count("\n", 0, chunk.start) + " " * (chunk.start - line_start)
        return parse_program(
            self.ctx, padding + chunk.text, name, module_loc=chunk.module_loc, implicit_module=not self.opt_args.no_implicit_module
        )

    def _apply(self, pass_: ModulePass, module: ModuleOp) -> bool:
        from xdsl.utils.exceptions import DiagnosticException

        from shardc.ir import diagnostics
        from shardc.ir.diagnostics import DiagnosticError, Severity
        from shardc.ir.verifier import report_crash

        try:
            pass_.apply(self.ctx, module)
            return True
        except DiagnosticError as exc:
            diagnostics.report_exception(exc)
        except DiagnosticException as exc:
            diagnostics.emit(None, Severity.ERROR, str(exc) or f"pass '{pass_.name}' failed")
        except Exception as exc:  # noqa: BLE001 - pass bugs become diagnostics
            report_crash(module, f"pass '{pass_.name}'", exc)
        return False

    def _dump(self, when: str, pass_: ModulePass, module: ModuleOp) -> None:
        header = f"// -----// IR Dump {when} {type(pass_).__name__} ({pass_.name}) //----- //\n"
        try:
            body = self.output_resulting_program(module)
        except Exception as exc:  # noqa: BLE001
            body = f"<cannot print: {exc}>\n"
        sys.stderr.write(header + body + "\n")


def _read_input(path: str, data: bytes | None = None) -> tuple[str, str]:
    """The buffer name mlir-opt would use, and the decoded contents (of `data` when
    given: the caller read the input already)."""
    if data is not None:
        return ("<stdin>" if path == "-" else path), data.decode("utf-8", errors="replace")
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
            return "<stdin>", data.decode("utf-8", errors="replace")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise UsageError(f"{TOOL}: cannot open input file '{path}': {exc.strerror}") from None
    return path, data.decode("utf-8", errors="replace")


def split_input(text: str, name: str, engine: DiagnosticEngine, marker: str = "// -----") -> list[Chunk]:
    """Split on `marker` as mlir-opt 22 does, warning about near misses (the marker
    short of its last two characters, as in `// ----`, or a marker ending the input)."""
    probe = marker[:-2]
    tail = marker[-2:]
    from io import StringIO

    from shardc.ir.diagnostics import Severity

    source = engine.sources[name]
    raw = text.split(probe)
    chunks: list[Chunk] = []
    start = 0
    end = len(raw[0])
    for piece in raw[1:]:
        piece_start = end + len(probe)
        if piece.startswith(tail) and len(piece) > len(tail) and piece[len(tail)] != "0":
            chunks.append(Chunk(text[start:end], start, (0, 0)))
            start = piece_start + len(tail)
        else:
            out = StringIO()
            engine.print_message(out, name, *source.line_col(piece_start), Severity.WARNING, "near miss with file split marker")
            engine.write(out.getvalue())
        end = piece_start + len(piece)
    chunks.append(Chunk(text[start:end], start, (0, 0)))
    for chunk in chunks[1:]:
        chunk.module_loc = source.line_col(chunk.start)
    return chunks


def main(argv: Sequence[str] | None = None, *, cache: bool | None = None) -> int:
    """Run shardc-opt; return its exit code; never raises. `cache` (default: only when
    run as a command, `argv` None) answers from and fills the result cache. Run as a
    command, the process ends here (`exit_now`): the interpreter's teardown is skipped."""
    command = argv is None
    if command:
        # A one-shot process, as mlir-opt has no collector: reference counting frees what
        # a run drops, and the collections the imports' allocations trigger scanned
        # xDSL's op classes again and again. (Peak memory of the shard-to-mpi pipeline on
        # a 4,000-op program: 81 MB either way; CPU about 7% less.)
        import gc

        gc.disable()
    args = list(sys.argv[1:] if command else argv)
    if cache is None:
        cache = command
    run = run_command if command else run_main
    if cache:
        from shardc.cache_dir import enabled

        cache = enabled()  # SHARDC_CACHE=0: the cache's module (json, hashing) is not imported
    if cache:
        from shardc.tools.opt_cache import cached_main

        code = cached_main(args, run)
    else:
        code = run(args)
    if command:
        exit_now(code)
    return code


def exit_now(code: int) -> int:
    """End the process with `code` once the atexit handlers ran and stdout and stderr
    are flushed, without the interpreter's teardown: freeing every module's objects one
    by one and a last full collection cost a one-function run about 50 ms (a sixth of it),
    and nothing of shardc-opt's needs them (the output and cache files are closed when
    written). Returns (for the caller's normal exit) when that is not safe: other threads
    still running, or a flush failing (a closed pipe, reported as Python reports it)."""
    import atexit

    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return code
    atexit._run_exitfuncs()  # pyright: ignore[reportPrivateUsage] - what exit runs first
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - leave it to the interpreter's exit
        return code
    os._exit(code)


def run_command(args: list[str], data: bytes | None = None, recording: Recording | None = None) -> int:
    """`run_main` in a process that is only this command: xDSL's classes are defined with
    each dataclass method text compiled once and its math dialect loaded on first use
    (`shardc.tools.fast_start`; library calls of `main` leave them as they are)."""
    from shardc.tools import fast_start

    fast_start.install()
    return run_main(args, data, recording)


def run_main(args: list[str], data: bytes | None = None, recording: Recording | None = None) -> int:
    """One invocation on `args` (the input's bytes in `data` when already read); a
    `recording` learns, once the run ended normally, what a cached answer must repeat."""
    try:
        driver = ShardcOptMain(args=args, data=data)
        code = driver.run()
        if recording is not None:
            recording.finished(code, driver.file_output, bool(driver.engine.crashes))
        return code
    except ExitRequest as request:
        sys.stdout.write(request.text)
        return 0
    except UsageError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    except SystemExit as exc:
        return 0 if exc.code in (0, None) else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        from shardc.ir.escape import display
        from shardc.ir.input_problems import input_problem

        problem = input_problem(exc)  # an input too large or too deep: its problem, not a bug
        if problem is not None:
            sys.stderr.write(f"{TOOL}: error: {problem}\n")
        else:
            sys.stderr.write(f"{TOOL}: internal error: {display(f'{type(exc).__name__}: {exc}')} (please report)\n")
        if os.environ.get("SHARDC_DEBUG"):
            import traceback

            traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
