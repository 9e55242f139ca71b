"""Run an annotated program on ranks from Python: global inputs in, global results out.

`run_program` is what `shardc-run` does, as a function: the program (annotated with
global shapes, or lowered by `shard-to-mpi-pipeline`) is transformed by a pipeline
(default: shardc-run's partitioning of a sharded program), compiled once, each rank gets
its piece of every global input by the argument shardings, and the results are put back
together by the result shardings. The whole compile (parse, pipeline, code generation)
goes through the compile cache (`shardc.runtime.codegen.cache`, keyed as `shardc-run` keys it:
text, name, entry, pipeline, ranks), so a hit runs no pass; under `mpiexec` rank 0
compiles or hits and the other ranks take its result. On simulated ranks (`ranks=N`)
every rank is a thread of this process; under `mpiexec` (`ranks=None` in an MPI job)
every process is a rank and every rank gets the global results.

    from shardc.launch import run_program
    (logits,) = run_program(text, {"arg0": idx, "arg1": wte, ...}, ranks=4,
                            pipeline="shard-to-mpi-pipeline")

Problems with the program or the inputs raise `ProgramError` with the diagnostic text.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shardc.errors import FailureReport


class ProgramError(FailureReport):
    """The program was refused, or an input does not fit it: the message is the whole
    report (the diagnostics as shardc-run prints them, or one line)."""


@dataclass
class _Options:
    entry: str | None
    pipeline: str | None
    name: str


def _as_specs(prog: Any, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
    from shardc.tools.run import InputSpec, check_input, np_type

    args = prog.args
    if isinstance(inputs, Mapping):
        values = []
        for k, b in enumerate(args):
            keys = [b.label.lstrip("%"), str(k), f"arg{k}"]
            key = next((x for x in keys if x in inputs), None)
            if key is None:
                raise ProgramError(f"no input for {b.label} (give one of {', '.join(keys)})")
            values.append(inputs[key])
        known = {x for k, b in enumerate(args) for x in (b.label.lstrip("%"), str(k), f"arg{k}")}
        extra = sorted(set(map(str, inputs)) - known)
        if extra:
            raise ProgramError(f"input {extra[0]!r}: @{prog.entry} has no such argument")
    else:
        values = list(inputs)
        if len(values) != len(args):
            raise ProgramError(f"@{prog.entry} takes {len(args)} arguments, {len(values)} inputs given")
    specs = []
    for b, value in zip(args, values):
        dtype, shape = np_type(b.type)
        checked = check_input(np.asarray(value) if shape is not None else value, dtype, shape, f"input {b.label}")
        specs.append(InputSpec(b.label, lambda r, v=checked: v))
    return specs


def _prepare(text: str, opts: _Options, world: Any = None, ranks: int = 1) -> Any:
    import argparse

    from shardc.tools.run import prepare

    return prepare(argparse.Namespace(program=opts.name, entry=opts.entry, pipeline=opts.pipeline, world=world, simulate=ranks), text)


def _results(prog: Any, per_rank: Sequence[Sequence[Any]], world: int) -> list[Any]:
    from shardc.tools.run import assemble

    return [value for _, value, _ in assemble(prog, per_rank, world)]


def run_program(
    program: str,
    inputs: Sequence[Any] | Mapping[str, Any],
    *,
    ranks: int | None = 1,
    pipeline: str | None = None,
    entry: str | None = None,
    name: str = "<program>",
) -> list[Any]:
    """The entry's global results for global `inputs` (a list in argument order, or a
    mapping by argument name, `argN` or index). `ranks=None` runs on the MPI world (call
    it on every rank of an mpiexec job); otherwise on that many simulated ranks."""
    from shardc.ir import diagnostics
    from shardc.ir.locations import SourceFile
    from shardc.tools.cli import Reported, UserError, unexpected_error_line
    from shardc.tools.run import as_results, local_inputs

    opts = _Options(entry, pipeline, name)
    engine = diagnostics.DiagnosticEngine(stream=io.StringIO())
    engine.add_source(SourceFile(name, program))
    with diagnostics.engine_scope(engine):
        try:
            try:
                prog = _prepare(program, opts, _mpi_world() if ranks is None else None, ranks or 1)
            except (UserError, Reported, FailureReport):
                raise
            except Exception as e:  # noqa: BLE001 - a compiler bug: one line, as shardc-run says it
                raise ProgramError(unexpected_error_line(e)) from e
            if ranks is None:
                return _run_mpi(prog, inputs)
            from shardc.runtime.execute.comm import run_simulated

            specs = _as_specs(prog, inputs)
            per_rank = [local_inputs(prog, specs, r, ranks) for r in range(ranks)]
            outs = run_simulated(
                ranks,
                lambda *a: as_results(prog.compiled.call(prog.entry, *a), len(prog.results)),
                per_rank_args=per_rank,
            )
            return _results(prog, outs, ranks)
        except (UserError, Reported) as e:
            text = engine.stream.getvalue().strip()  # type: ignore[attr-defined]
            if isinstance(e, UserError):
                text = "\n".join(filter(None, [text, str(e)]))
            raise ProgramError(text or "the program was refused (no diagnostic was written: please report)") from None


def _mpi_world() -> Any:
    from mpi4py import MPI

    return MPI.COMM_WORLD


def _run_mpi(prog: Any, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, abort_on_error, use_comm
    from shardc.runtime.execute.kernels import agreement
    from shardc.tools.run import as_results, local_inputs

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    agreement.agree(world)
    local = local_inputs(prog, _as_specs(prog, inputs), rank, size)
    with abort_on_error(world), use_comm(MPIComm(world)):
        values = as_results(prog.compiled.call(prog.entry, *local), len(prog.results))
    gathered = world.allgather(values)
    return _results(prog, gathered, size)
