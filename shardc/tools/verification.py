"""Proof by execution that a sharding pipeline is correct.

`verify(program)` runs an annotated program twice on the same random inputs: as written,
on one device (every `shard.shard` is then the identity), and in its partitioned form
(`--stage partitioned`: sharding-propagation, shard-partition, shard-simplify,
canonicalize, cse) and/or its MPI-lowered form (`--stage lowered`: the same plus
convert-shard-to-mpi, canonicalize) on N simulated ranks or under mpiexec. Global inputs
are cut into each rank's piece by the argument shardings, and each rank's results are
put back together by the result shardings (read from the module just before
shard-partition runs, when propagation has settled them); then every result is compared
with the unsharded one. A result without a sharding is replicated: every rank's copy is
compared.

Outcomes (`VerifyReport.status`): "ok"; "mismatch" (a result differs: its index, name,
source location, max abs/rel error); "rejected" (a diagnostic from the parser, verifier or
a pass: the program or pipeline is refused cleanly); "crash" (a pass, the compiler or a
rank raised a Python exception: a bug).

Tolerance. A floating-point element matches when |got - want| <= atol + rtol * |want|.
Sharding changes the order of additions (a reduction split over N ranks is N partial sums
and an all-reduce), so a correct program differs from the reference by rounding, which
grows with the values' magnitude and the reduction's length. The default `atol` is

    atol = max(1e-5, ROUNDING_FACTOR * eps * sqrt(n) * max|want|)        (ROUNDING_FACTOR = 8)

with eps the result's machine epsilon, n the longest reduction in the program (the
product of an op's reduction loop extents, from its ShardingInterface; 1 without one)
and max|want| the largest magnitude of the result; `rtol` defaults to 1e-4. An explicit
`atol` replaces the rule. A mismatch within the rule's bound (an explicit tolerance
tighter than rounding) is reported as being at rounding level.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from shardc.ir import diagnostics
from shardc.ir.diagnostics import DiagnosticEngine
from shardc.tools.cli import Reported, UserError, apply_passes, parse_module, pipeline_passes

Stage = Literal["partitioned", "lowered", "all"]
Status = Literal["ok", "mismatch", "rejected", "crash"]

ROUNDING_FACTOR = 8
"""How many times eps * sqrt(n) * max|want| the default tolerance allows."""
DEFAULT_RTOL = 1e-4
MIN_ATOL = 1e-5

PARTITION_PIPELINE = ("sharding-propagation", "shard-partition", "shard-simplify", "canonicalize", "cse")
LOWERING_PIPELINE = ("convert-shard-to-mpi", "canonicalize")


VerifyError = UserError
"""A usage problem (no such entry, a dynamic shape, a grid that does not fit): one line."""


# =========================================================================================
# Reports
# =========================================================================================


@dataclass
class ResultCheck:
    """One result of the entry function compared with its unsharded value."""

    index: int
    name: str
    location: str
    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    worst: tuple[int, ...] | None = None
    """Index of the worst element (global coordinates)."""
    detail: str = ""
    """Why it failed beyond values: a shape, a dtype, a rank whose replica differs."""
    rounding: float = 0.0
    """eps * sqrt(n) * max|want|: the scale of rounding differences (0: exact types)."""
    reduction: int = 1
    """n: the longest reduction in the program."""

    @property
    def at_rounding_level(self) -> bool:
        """A mismatch that the default tolerance would accept: rounding, not a bug."""
        return not self.ok and not self.detail and 0 < self.max_abs <= ROUNDING_FACTOR * self.rounding

    def describe(self) -> str:
        head = f"result #{self.index} ({self.name}) at {self.location}"
        if self.detail:
            return f"{head}: {self.detail}"
        at = f" at index {list(self.worst)}" if self.worst is not None else ""
        text = f"{head}: max abs error {self.max_abs:.3g}, max rel error {self.max_rel:.3g}{at}"
        if self.at_rounding_level:
            text += (
                f" (at rounding level: {self.max_abs / self.rounding:.2g} x eps*sqrt(n)*max|want| with n = {self.reduction};"
                f" the default tolerance allows {ROUNDING_FACTOR} x)"
            )
        return text


@dataclass
class StageReport:
    stage: str
    pipeline: str
    results: list[ResultCheck] = field(default_factory=list[ResultCheck])

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def first_mismatch(self) -> ResultCheck | None:
        return next((r for r in self.results if not r.ok), None)


@dataclass
class VerifyReport:
    status: Status
    entry: str = ""
    ranks: int = 0
    stages: list[StageReport] = field(default_factory=list[StageReport])
    message: str = ""
    """The diagnostic text (rejected, crash), or the first mismatch."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def first_mismatch(self) -> tuple[StageReport, ResultCheck] | None:
        for stage in self.stages:
            bad = stage.first_mismatch()
            if bad is not None:
                return stage, bad
        return None

    def summary(self) -> str:
        if self.status == "ok":
            n = len(self.stages[0].results) if self.stages else 0
            which = ", ".join(s.stage for s in self.stages)
            return f"OK: {n} result{'s' if n != 1 else ''} match ({which}, {self.ranks} rank{'s' if self.ranks != 1 else ''})"
        if self.status == "mismatch":
            found = self.first_mismatch()
            assert found is not None
            stage, check = found
            return f"MISMATCH ({stage.stage}, {self.ranks} ranks): {check.describe()}"
        return self.message.rstrip("\n")


# =========================================================================================
# Parsing, pipelines, capture of diagnostics
# =========================================================================================


@contextlib.contextmanager
def _capture(name: str, text: str | None):
    """Diagnostics go to a string (the report's message), with the source for carets."""
    from shardc.ir.locations import SourceFile

    engine = DiagnosticEngine(stream=io.StringIO())
    if text is not None:
        engine.add_source(SourceFile(name, text))
    with diagnostics.engine_scope(engine):
        yield engine


def _engine_text(engine: DiagnosticEngine) -> str:
    assert isinstance(engine.stream, io.StringIO)
    return engine.stream.getvalue()


def _passes(pipeline: str | Sequence[str | ModulePass]) -> list[Any]:
    """Pass objects from a pipeline text (a bare list or `builtin.module(...)`), or from
    a list of pass names and pass objects."""
    if isinstance(pipeline, str):
        return pipeline_passes(pipeline)
    return [q for p in pipeline for q in ([p] if isinstance(p, ModulePass) else pipeline_passes(p))]


def _compile(module: ModuleOp, name: str) -> Any:
    from xdsl.utils.exceptions import DiagnosticException

    from shardc.ir.verifier import report_crash
    from shardc.runtime import compile_module

    try:
        return compile_module(module, name)
    except DiagnosticException as e:
        text = str(e)
        diagnostics.emit(None, diagnostics.Severity.ERROR, text if text.startswith("runtime: ") else f"runtime: {text}")
        raise Reported() from None
    except Exception as e:  # noqa: BLE001
        report_crash(module, "the runtime compiler", e)
        raise Reported("crash") from None


# =========================================================================================
# The program's boundary: entry, shardings, inputs
# =========================================================================================


def _boundary(module: ModuleOp, entry: str) -> Any:
    """shardc-run's Program skeleton (argument and result shardings) of `entry`."""
    from shardc.tools.run import Program, boundaries, entry_function

    args, results, _ = boundaries(module, entry_function(module, entry))
    return Program(module, entry, args, results, sharded=True)


def _result_locations(f: func.FuncOp) -> list[tuple[str, str]]:
    """(name, location) of each returned value, looking through `shard.shard`s."""
    from shardc.dialects.shard import ShardOp

    block = f.body.blocks.first
    assert block is not None
    ret = block.last_op
    if not isinstance(ret, func.ReturnOp):
        return []
    out: list[tuple[str, str]] = []
    for i, value in enumerate(ret.arguments):
        v: SSAValue = value
        while isinstance(v.owner, ShardOp):
            v = v.owner.src
        owner = v.owner
        if isinstance(owner, Operation):
            name = f"%{v.name_hint}" if v.name_hint else f"result{i}"
            out.append((f"{name} = {owner.name}", _loc_text(owner)))
        else:
            out.append((f"%{v.name_hint}" if v.name_hint else f"argument #{getattr(v, 'index', '?')}", _loc_text(ret)))
    return out


def _loc_text(op: Operation) -> str:
    from xdsl.dialects.builtin import FileLineColLoc

    from shardc.ir.escape import display

    loc = op.location
    if isinstance(loc, FileLineColLoc):  # a file name from the IR: shown escaped
        return f"{display(loc.filename.data)}:{loc.line.data}:{loc.column.data}"
    text = diagnostics.format_location(loc)
    return "unknown location" if text == "unknown" else f"loc({display(text)})"


def _grid_size(module: ModuleOp) -> int:
    """The number of devices of the module's largest static grid."""
    from shardc.dialects.shard import GridOp

    sizes: list[int] = []
    for op in module.walk():
        if isinstance(op, GridOp):
            shape = op.shape_tuple
            if any(d is None or d < 0 for d in shape):
                raise VerifyError(f"grid @{op.sym_name.data} has dynamic dimensions: give the number of ranks (--simulate N)")
            sizes.append(math.prod(shape))
            if sizes[-1] == 0:
                raise VerifyError(f"grid @{op.sym_name.data} has no devices (a dimension of size 0)")
    return max(sizes, default=1)


def random_inputs(prog: Any, seed: int) -> list[Any]:
    """One global random value per entry argument, of its type (normal floats, small
    integers, booleans); deterministic in `seed`."""
    from shardc.tools.run import RANDOM_SCRATCH, np_type, random_input, allocating

    out = []
    for k, b in enumerate(prog.args):
        dtype, shape = np_type(b.type)
        what = f"input {b.label}"
        out.append(allocating(lambda: random_input({"seed": str(seed * 7919 + k)}, dtype, shape, what), shape, dtype, what, RANDOM_SCRATCH))
    return out


# =========================================================================================
# Running
# =========================================================================================


def _local_inputs(prog: Any, inputs: Sequence[Any], rank: int, world: int) -> list[Any]:
    """Rank `rank`'s pieces of the global `inputs`."""
    from shardc.runtime.execute.comm import CommError
    from shardc.tools.run import InputSpec, local_inputs

    specs = [InputSpec(b.label, (lambda v: lambda r: v)(v)) for b, v in zip(prog.args, inputs)]
    try:
        return local_inputs(prog, specs, rank, world)
    except CommError as e:
        raise VerifyError(str(e)) from None


def _call(compiled: Any, prog: Any, local: Sequence[Any]) -> tuple[Any, ...]:
    from shardc.tools.run import as_results

    return as_results(compiled.call(prog.entry, *local), len(prog.results))


def _run_ranks(compiled: Any, prog: Any, inputs: Sequence[Any], world: int) -> list[tuple[Any, ...]]:
    """Every rank's local results, on `world` simulated ranks."""
    from shardc.runtime.execute.comm import RankFailed, run_simulated

    per_rank = [_local_inputs(prog, inputs, r, world) for r in range(world)]
    try:
        return run_simulated(world, lambda *a: _call(compiled, prog, a), per_rank_args=per_rank)
    except RankFailed as e:
        diagnostics.emit(None, diagnostics.Severity.ERROR, f"runtime: {e}")
        raise Reported("crash") from None


def _unsharded(prog: Any) -> Any:
    """The same boundary, every value whole (one device)."""
    from shardc.tools.run import Boundary, Program

    strip = lambda bs: [Boundary(b.label, b.type, None) for b in bs]  # noqa: E731
    return Program(prog.module, prog.entry, strip(prog.args), strip(prog.results), sharded=False)


# =========================================================================================
# Comparing
# =========================================================================================


def compare_result(
    index: int,
    name: str,
    location: str,
    want: Any,
    got: Any,
    rtol: float = DEFAULT_RTOL,
    atol: float | None = None,
    reduction: int = 1,
) -> ResultCheck:
    """`got` matches `want` when shapes and dtypes agree and, elementwise,
    |got - want| <= atol + rtol * |want| (integers and booleans: equal); `atol` None is
    the module docstring's rule for a program whose longest reduction is `reduction`."""
    check = ResultCheck(index, name, location, ok=True, reduction=max(1, reduction))
    w, g = np.asarray(want), np.asarray(got)
    if w.shape != g.shape:
        check.ok, check.detail = False, f"shape {tuple(g.shape)} instead of {tuple(w.shape)}"
        return check
    if w.dtype != g.dtype:
        check.ok, check.detail = False, f"elements of {g.dtype} instead of {w.dtype}"
        return check
    if w.size == 0:
        return check
    with np.errstate(all="ignore"):
        return _compare_values(check, w, g, rtol, atol)


def _compare_values(check: ResultCheck, w: np.ndarray, g: np.ndarray, rtol: float, atol: float | None) -> ResultCheck:
    if w.dtype.kind in "fc":
        finite = np.abs(w[np.isfinite(w)])
        magnitude = float(finite.max()) if finite.size else 0.0
        check.rounding = float(np.finfo(w.dtype).eps) * math.sqrt(check.reduction) * magnitude
        if atol is None:
            atol = max(MIN_ATOL, ROUNDING_FACTOR * check.rounding)
        wf, gf = w.astype(np.float64), g.astype(np.float64)
        both_nan = np.isnan(wf) & np.isnan(gf)
        same_inf = np.isinf(wf) & (wf == gf)
        diff = np.where(both_nan | same_inf, 0.0, np.abs(gf - wf))
        diff = np.where(np.isnan(diff), np.inf, diff)
        bad = diff > atol + rtol * np.abs(np.where(np.isfinite(wf), wf, 0.0))
        rel = np.where(diff == 0, 0.0, diff / np.abs(wf))
    else:
        wi, gi = w.astype(np.float64), g.astype(np.float64)
        diff = np.abs(gi - wi)
        bad = w != g
        rel = np.where(diff == 0, 0.0, diff / np.abs(wi))
    check.max_abs = float(diff.max())
    check.max_rel = float(np.nan_to_num(rel, nan=np.inf).max())
    if bad.any():
        check.ok = False
        flat = int(np.argmax(np.where(bad, diff, -1.0)))
        check.worst = tuple(int(i) for i in np.unravel_index(flat, w.shape))
    return check


def _compare_stage(
    stage: StageReport,
    prog: Any,
    reference: Sequence[Any],
    per_rank: Sequence[Sequence[Any]],
    world: int,
    names: Sequence[tuple[str, str]],
    rtol: float,
    atol: float | None,
    reduction: int = 1,
) -> None:
    from shardc.runtime.execute.comm import CommError
    from shardc.tools.run import grid_of

    for i, (b, want) in enumerate(zip(prog.results, reference)):
        name, loc = names[i] if i < len(names) else (b.label, "unknown location")
        if b.sharding is not None:
            try:
                got = b.sharding.assemble([np.asarray(r[i]) for r in per_rank], grid_of(b.sharding, world))
            except (CommError, ValueError) as e:
                stage.results.append(ResultCheck(i, name, loc, ok=False, detail=f"cannot assemble the pieces: {e}"))
                continue
            stage.results.append(compare_result(i, name, loc, want, got, rtol, atol, reduction))
            continue
        # Replicated: every rank holds the whole value.
        check = compare_result(i, name, loc, want, per_rank[0][i], rtol, atol, reduction)
        for r in range(1, len(per_rank)):
            if not check.ok:
                break
            other = compare_result(i, name, loc, want, per_rank[r][i], rtol, atol, reduction)
            if not other.ok:
                other.detail = other.detail or (
                    f"replicated, but rank {r} differs: max abs error {other.max_abs:.3g}, "
                    f"max rel error {other.max_rel:.3g} at index {list(other.worst or ())}"
                )
                check = other
        stage.results.append(check)


# =========================================================================================
# The API
# =========================================================================================


@dataclass
class _Setup:
    module: ModuleOp
    entry: str
    prog: Any
    inputs: list[Any]
    names: list[tuple[str, str]]
    reduction: int = 1
    """The longest reduction in the program as written (for the default tolerance)."""


def _setup(module_or_text: ModuleOp | str, entry: str | None, seed: int, inputs: Sequence[Any] | Mapping[str, Any] | None, name: str) -> _Setup:
    from shardc.tools.run import entry_function

    if isinstance(module_or_text, str):
        module = parse_module(module_or_text, name)
    else:
        module = module_or_text.clone()
    f = entry_function(module, entry)
    prog = _boundary(module, f.sym_name.data)
    if isinstance(inputs, Mapping):
        inputs = _inputs_by_name(prog, inputs)
    values = list(inputs) if inputs is not None else random_inputs(prog, seed)
    if len(values) != len(prog.args):
        raise VerifyError(f"@{prog.entry} takes {len(prog.args)} arguments, {len(values)} inputs given")
    return _Setup(module, prog.entry, prog, values, _result_locations(f), reduction_length(module))


def reduction_length(module: ModuleOp) -> int:
    """The longest reduction of the program: over its ops with a ShardingInterface, the
    largest product of the extents of an op's reduction loops (1 when none)."""
    from xdsl.dialects.builtin import ShapedType
    from xdsl.ir.affine import AffineDimExpr

    from shardc.interfaces.sharding import get_sharding_interface, indexing_maps, loop_iterator_types

    longest = 1
    for op in module.walk():
        impl = get_sharding_interface(op)
        if impl is None:
            continue
        try:
            kinds = loop_iterator_types(impl, op)
            maps = indexing_maps(impl, op)
        except Exception:  # noqa: BLE001 - an op the interface refuses: no length known
            continue
        values = [*op.operands, *op.results][: len(maps)]
        extents: dict[int, int] = {}
        for value, m in zip(values, maps):
            if not isinstance(value.type, ShapedType):
                continue
            for dim, expr in zip(value.type.get_shape(), m.results):
                if isinstance(expr, AffineDimExpr) and dim > 0:
                    extents[expr.position] = dim
        reduced = [extents.get(i, 1) for i, k in enumerate(kinds) if "reduction" in str(k).lower()]
        longest = max(longest, math.prod(reduced))
    return longest


def _inputs_by_name(prog: Any, inputs: Mapping[str, Any]) -> list[Any]:
    """Arguments in order from a mapping keyed by argument name, `argN` or index (as
    `shardc-run --inputs` takes them); shapes and dtypes checked."""
    from shardc.tools.run import check_input, np_type, positional_inputs

    values: list[Any] = []
    names: set[str] = set()
    keys_of = [[b.label.lstrip("%"), str(k), f"arg{k}"] for k, b in enumerate(prog.args)]
    positional = positional_inputs(inputs, keys_of, None, "shardc-verify")
    if positional is not None:  # an archive by another tool's names: in order
        inputs = {keys_of[k][0]: inputs[n] for k, n in enumerate(positional[: len(keys_of)])}
    for k, b in enumerate(prog.args):
        keys = keys_of[k]
        names.update(keys)
        key = next((x for x in keys if x in inputs), None)
        if key is None:
            raise VerifyError(f"no input for {b.label} (give one of {', '.join(keys)})")
        dtype, shape = np_type(b.type)
        values.append(check_input(inputs[key], dtype, shape, f"input {b.label}"))
    extra = sorted(set(inputs) - names)
    if extra:
        raise VerifyError(f"input '{extra[0]}': @{prog.entry} has no such argument")
    return values


def _reference(setup: _Setup, name: str) -> tuple[Any, ...]:
    """The results of the program as written, on one device."""
    compiled = _compile(setup.module, name)
    return _run_ranks(compiled, _unsharded(setup.prog), setup.inputs, 1)[0]


def _stages(stage: Stage) -> list[str]:
    if stage == "all":
        return ["partitioned", "lowered"]
    if stage not in ("partitioned", "lowered"):
        raise VerifyError(f"unknown stage '{stage}' (partitioned, lowered or all)")
    return [stage]


def _pipelines(pipeline: str | Sequence[str | ModulePass] | None) -> tuple[list[Any], list[Any]]:
    base = _passes(PARTITION_PIPELINE if pipeline is None else pipeline)
    return base, _passes(LOWERING_PIPELINE)


def _stage_programs(
    setup: _Setup, stages: Sequence[str], partition: Sequence[Any], lowering: Sequence[Any], name: str
) -> Iterator[tuple[StageReport, Any, Any]]:
    """For each stage asked for, in order: its (empty) report, the compiled program and
    the boundary to scatter and gather by (as `shardc.tools.run.transform` finds it).
    Lazy: the lowering runs only once the partitioned stage has been used."""
    from shardc.tools.run import Program, transform

    module = setup.module.clone()
    args, results, _ = transform(module, setup.entry, partition, (setup.prog.args, setup.prog.results, False))
    prog = Program(module, setup.entry, args, results, sharded=True)
    if "partitioned" in stages:
        yield StageReport("partitioned", _joined(partition)), _compile(module, name), prog
    if "lowered" in stages:
        apply_passes(module, lowering)
        yield StageReport("lowered", _joined([*partition, *lowering])), _compile(module, name), prog


def _joined(passes: Sequence[Any]) -> str:
    return ",".join(p.name for p in passes)


def _settle(report: VerifyReport) -> VerifyReport:
    """Mark a report whose stages all ran as a mismatch where a result differs."""
    if report.status == "ok" and any(not s.ok for s in report.stages):
        report.status = "mismatch"
        report.message = report.summary()
    return report


def verify(
    module_or_text: ModuleOp | str,
    entry: str | None = None,
    ranks: int | None = None,
    pipeline: str | Sequence[str | ModulePass] | None = None,
    stage: Stage = "partitioned",
    seed: int = 0,
    rtol: float = DEFAULT_RTOL,
    atol: float | None = None,
    inputs: Sequence[Any] | Mapping[str, Any] | None = None,
    name: str = "<input>",
) -> VerifyReport:
    """Run the program unsharded and partitioned (and/or lowered) on `ranks` simulated
    ranks (default: the size of its grid) and compare every result. Diagnostics and
    crashes are reported in the result, never raised; usage errors raise VerifyError."""
    text = module_or_text if isinstance(module_or_text, str) else None
    report = VerifyReport("ok")
    with _capture(name, text) as engine:
        try:
            stages = _stages(stage)
            partition, lowering = _pipelines(pipeline)
            setup = _setup(module_or_text, entry, seed, inputs, name)
            report.entry = setup.entry
            world = report.ranks = ranks if ranks is not None else _grid_size(setup.module)
            reference = _reference(setup, name)
            for rep, compiled, prog in _stage_programs(setup, stages, partition, lowering, name):
                per_rank = _run_ranks(compiled, prog, setup.inputs, world)
                _compare_stage(rep, prog, reference, per_rank, world, setup.names, rtol, atol, setup.reduction)
                report.stages.append(rep)
        except Reported as e:
            report.status = e.status
            report.message = _engine_text(engine) or f"{e.status} (no diagnostic)"
    return _settle(report)


# =========================================================================================
# Under mpiexec
# =========================================================================================


def verify_mpi(
    module_or_text: ModuleOp | str,
    entry: str | None = None,
    pipeline: str | Sequence[str | ModulePass] | None = None,
    stage: Stage = "partitioned",
    seed: int = 0,
    rtol: float = DEFAULT_RTOL,
    atol: float | None = None,
    name: str = "<input>",
    inputs: Sequence[Any] | Mapping[str, Any] | None = None,
) -> VerifyReport:
    """`verify` with one MPI process per rank (run under mpiexec): every rank transforms
    the program and runs its part; rank 0 runs the reference and compares. Every rank
    returns the same report (usage errors come back as status "rejected")."""
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, abort_on_error, use_comm
    from shardc.runtime.execute.kernels import agreement

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    agreement.agree(world)
    text = module_or_text if isinstance(module_or_text, str) else None
    report = VerifyReport("ok", ranks=size)
    compiled_stages: list[tuple[StageReport, Any, Any]] = []
    setup: _Setup | None = None
    reference: tuple[Any, ...] = ()
    with _capture(name, text) as engine:
        try:
            stages = _stages(stage)
            partition, lowering = _pipelines(pipeline)
            setup = _setup(module_or_text, entry, seed, inputs, name)
            report.entry = setup.entry
            if rank == 0:
                reference = _reference(setup, name)
            compiled_stages = list(_stage_programs(setup, stages, partition, lowering, name))
        except Reported as e:
            report.status = e.status
            report.message = _engine_text(engine) or f"{e.status} (no diagnostic)"
        except VerifyError as e:
            report.status = "rejected"
            report.message = f"error: {e}"
    statuses = world.allgather(report.status)
    if any(s != "ok" for s in statuses):
        first = next(r for r, s in enumerate(statuses) if s != "ok")
        return world.bcast(report if rank == first else None, root=first)
    assert setup is not None
    for rep, compiled, prog in compiled_stages:
        try:
            local = _local_inputs(prog, setup.inputs, rank, size)
        except VerifyError as e:
            report.status, report.message = "rejected", f"error: {e}"
            break
        with abort_on_error(world), use_comm(MPIComm(world)), np.errstate(all="ignore"):
            world.Barrier()
            values = _call(compiled, prog, local)
        gathered = world.gather(values, root=0)
        if rank == 0:
            assert gathered is not None
            _compare_stage(rep, prog, reference, gathered, size, setup.names, rtol, atol, setup.reduction)
        report.stages.append(rep)
    return world.bcast(_settle(report) if rank == 0 else None, root=0)
