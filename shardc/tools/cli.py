"""What the command-line tools (`shardc-run`, `shardc-verify`, `shardc-train`) share:
the one-line user error, an argument parser that raises it instead of exiting, and
parsing and transforming a program with every problem reported as a diagnostic."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, Literal

from xdsl.dialects.builtin import ModuleOp

from shardc.errors import FailureReport, ReportedElsewhere
from shardc.ir import diagnostics


class UserError(Exception):
    """A command-line, input or configuration problem: one line, exit code 1."""


class Reported(Exception):
    """A problem whose diagnostic is already emitted: "rejected" for bad IR or a pass
    that refused it, "crash" for a Python exception inside the compiler (a bug)."""

    def __init__(self, status: Literal["rejected", "crash"] = "rejected"):
        super().__init__(status)
        self.status: Literal["rejected", "crash"] = status


class ArgParser(argparse.ArgumentParser):
    """argparse that raises UserError rather than printing usage and exiting 2."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        raise UserError(message)


def run_tool(tool: str, body: Callable[[], int]) -> int:
    """A tool's `main`: `body()`'s exit status; a UserError is one line on stderr and
    status 1, a problem already reported as a diagnostic (or by another rank) status 1,
    a FailureReport its text, ^C status 130; any other exception one line (its input
    problem, or an internal error to report), never a traceback. Everything printed is
    escaped (`shardc.ir.escape`)."""
    from shardc.ir.escape import display

    try:
        return body()
    except UserError as e:
        sys.stderr.write(f"{tool}: error: {display(str(e))}\n")  # one line, IR names escaped
        return 1
    except (Reported, ReportedElsewhere):
        return 1
    except FailureReport as e:
        text = str(e).rstrip("\n")
        prefix = "" if ": error: " in text.split("\n", 1)[0] else f"{tool}: error: "
        sys.stderr.write(prefix + display(text, keep_newlines=True) + "\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - the last line of defence: no traceback reaches a user
        sys.stderr.write(f"{tool}: error: {display(unexpected_error_line(e))}\n")
        if os.environ.get("SHARDC_DEBUG"):
            import traceback

            traceback.print_exc()
        return 1


def unexpected_error_line(exc: BaseException) -> str:
    """One line for an exception no layer turned into a diagnostic: what is wrong with
    the input when bad input explains it (`shardc.ir.input_problems.input_problem`), else an
    internal error to report (SHARDC_DEBUG=1 prints its traceback)."""
    from shardc.ir.input_problems import input_problem

    problem = input_problem(exc)
    if problem is not None:
        return problem
    text = f"{type(exc).__name__}: {exc}".rstrip(": ").replace("\n", " ")
    return f"internal error: {text} (please report; SHARDC_DEBUG=1 shows the traceback)"


def under_mpi() -> bool:
    """Whether this process was started by mpiexec or srun: a launcher's rank variable, or
    an srun step of several tasks (without a PMI plugin it sets no rank variable, and the
    MPI world-size check then says what to fix instead of N ranks training alone)."""
    if any(v in os.environ for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")):
        return True
    tasks = os.environ.get("SLURM_STEP_NUM_TASKS", "")
    return tasks.isdigit() and int(tasks) > 1


def parse_module(text: str, name: str) -> ModuleOp:
    """Parse and verify a program as shardc-opt does (`shardc.ir.parsing`): its
    diagnostics, with the source line, go to the current engine; Reported if any."""
    from shardc.context import make_context
    from shardc.ir.locations import SourceFile
    from shardc.ir.parsing import parse_program
    from shardc.ir.verifier import verify

    diagnostics.current_engine().add_source(SourceFile(name, text))
    module = parse_program(make_context(), text, name)
    if module is None or not verify(module):
        raise Reported()
    return module


def pipeline_passes(text: str) -> list[Any]:
    """The pass objects of a pipeline: `builtin.module(...)` or a bare pass list."""
    from shardc.passes import all_passes
    from shardc.tools.argv import TOOL, UsageError, instantiate, parse_pipeline

    text = text.strip()
    if text and "(" not in text.split(",")[0].split("{")[0]:
        text = f"builtin.module({text})"
    try:
        return [instantiate(spec, all_passes()) for spec in parse_pipeline(text)] if text else []
    except UsageError as e:
        raise UserError(str(e).removeprefix(f"{TOOL}: ")) from None


def apply_passes(module: ModuleOp, passes: Sequence[Any], before: Callable[[Any], None] | None = None) -> None:
    """Run passes, verifying after each; `before(pass)` is called before each one."""
    from xdsl.utils.exceptions import DiagnosticException

    from shardc.context import make_context
    from shardc.ir.diagnostics import DiagnosticError
    from shardc.ir.verifier import report_crash, verify

    ctx = make_context()
    for p in passes:
        if before is not None:
            before(p)
        try:
            p.apply(ctx, module)
        except DiagnosticError as e:
            diagnostics.report_exception(e)
            raise Reported() from None
        except DiagnosticException as e:
            diagnostics.emit(None, diagnostics.Severity.ERROR, str(e))
            raise Reported() from None
        except Exception as e:  # noqa: BLE001 - a pass bug becomes a diagnostic
            report_crash(module, f"pass '{p.name}'", e)
            raise Reported("crash") from None
        crashes = len(diagnostics.current_engine().crashes)
        if not verify(module):
            raise Reported("crash" if len(diagnostics.current_engine().crashes) > crashes else "rejected")
