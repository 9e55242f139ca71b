"""The step's compile pipeline: the shard passes that derive and lower its communication
(`PIPELINE`), run pass by pass with each stage's time and text (`run_pipeline`,
`lower_step`), a failing pass as one line (`PipelineError`), and the collectives each
function holds. Apart from `shardc.training.spmd` so that the step's split compile
(`shardc.training.split_compile`) and the whole-module compile share it without
importing each other."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shardc.errors import FailureReport

if TYPE_CHECKING:  # IR is built and inspected where it is needed: a compile-cache hit imports no xDSL
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Operation

PIPELINE: tuple[str, ...] = (
    "sharding-propagation{traversal=forward-backward}",
    "shard-partition",
    "shard-simplify",
    "canonicalize",
    "cse",
    "convert-shard-to-mpi",
    "forward-send-copies",  # the lowering stages reduce_scatter send buffers in copies (trunk's form): sent from the source
    "canonicalize",
)

PRECISIONS = ("f32", "bf16")
"""`--precision`: float32 throughout, or bf16 products (`mixed-precision{compute=bf16}`)."""


GRAD_REDUCE_BF16 = "reduction-precision{type=bf16 grid-axes=0}"
"""`--grad-reduce bf16`: the sums over the grid's batch axis (axis 0: `mesh.Mesh`), the
gradients' reductions, reduce bf16 copies; run after `shard-simplify`, where those
collectives exist (`shardc.passes.reduction_precision`)."""


def step_pipeline(precision: str = "f32", grad_reduce: str = "f32") -> tuple[str, ...]:
    """The step's passes for a precision: `PIPELINE`, after the mixed-precision pass for
    bf16 (before propagation, so the resharding of a parameter's bf16 copy, FSDP's
    all_gather, is what the compiler derives and moves half the bytes); with
    `grad_reduce` "bf16", `GRAD_REDUCE_BF16` after `shard-simplify`."""
    for what, value in (("precision", precision), ("grad_reduce", grad_reduce)):
        if value not in PRECISIONS:
            raise ValueError(f"{what} must be one of {', '.join(PRECISIONS)}, got {value!r}")
    passes = list(PIPELINE)
    if grad_reduce == "bf16":
        passes.insert(passes.index("shard-simplify") + 1, GRAD_REDUCE_BF16)
    if precision == "bf16":
        passes.insert(0, "mixed-precision{compute=bf16}")
    return tuple(passes)


def bf16_units_line(tool: str) -> str | None:
    """The one line `--precision bf16` prints on a CPU without bf16 units (no `amx_bf16`
    or `avx512_bf16` flag; `SHARDC_BF16_UNITS` overrides the check): it runs emulated,
    each bf16 product a float32 product of widened operands, at the cost measured here.
    None where the CPU has them."""
    from shardc.runtime.execute.kernels.bf16_gemm import emulation_cost
    from shardc.runtime.execute.kernels.bf16_run import BF16_UNIT_FLAGS, bf16_units

    if bf16_units():
        return None
    flags = "/".join(BF16_UNIT_FLAGS)
    return (
        f"{tool}: this CPU has no bf16 units (no {flags} flag): --precision bf16 runs emulated, "
        f"each bf16 product widened to float32 ({emulation_cost():.2f}x a float32 product's time, measured now; no speedup over --precision f32)"
    )


def precision_lines(tool: str, precision: str, grad_reduce: str = "f32") -> list[str]:
    """The header lines of a run's precision: none for f32; for bf16 what runs the
    products and, on a CPU without bf16 units, `bf16_units_line`; a line for
    `--grad-reduce bf16`."""
    reduce = ["  grad-reduce bf16: gradients summed over the batch axis as bf16 copies (half the bytes; each rank's partial sum rounded to bf16, the sum in float32 rounded once)"] if grad_reduce == "bf16" else []
    if precision != "bf16":
        return reduce
    from shardc.runtime.execute.kernels.bf16_gemm import describe

    no_units = bf16_units_line(tool)
    return [f"  precision bf16: bf16 products into float32 ({describe()}); float32 masters, reductions, loss and AdamW", *([no_units] if no_units else []), *reduce]


# Collectives as counted per function, at the shard level and after lowering.
SHARD_COLLECTIVES = ("all_gather", "all_reduce", "reduce_scatter", "all_slice", "all_to_all", "broadcast", "gather", "scatter", "send", "recv", "shift", "update_halo")
MPI_COLLECTIVES = ("allreduce", "allgather", "reduce_scatter_block", "send", "recv", "isend", "irecv", "barrier")


class PipelineError(FailureReport):
    """A pass of the pipeline failed on the step module: the message is one line naming
    the pass, the op and its location (`shardc.ir.diagnostics.one_line`)."""


@dataclass
class Stage:
    """One stage of the compiled step: the pass that produced it, its time, its text."""

    name: str
    seconds: float
    text: str | None = None


def run_pipeline(module: ModuleOp, passes: Sequence[str] = PIPELINE, keep_text: bool = False) -> list[Stage]:
    """Run `passes` (mlir-opt pipeline entries) on `module` in place; one Stage each, the
    input first. Texts are kept only when asked (printing the module costs time)."""
    from shardc.context import make_context
    from shardc.ir.printer import module_to_string
    from shardc.passes import all_passes
    from shardc.passes.pipeline_text import instantiate, parse_pipeline

    table = all_passes()
    stages = [Stage("input", 0.0, module_to_string(module) if keep_text else None)]
    ctx = make_context()
    for entry in passes:
        (spec,) = parse_pipeline(f"builtin.module({entry})")
        p = instantiate(spec, table)
        t0 = time.perf_counter()
        try:
            p.apply(ctx, module)
        except Exception as e:  # noqa: BLE001 - a diagnostic of the pass, or a bug in it: one line
            raise PipelineError(pass_failure_line(module, entry, e)) from e
        stages.append(Stage(entry, time.perf_counter() - t0, module_to_string(module) if keep_text else None))
    return stages


def pass_failure_line(module: ModuleOp, entry: str, exc: Exception) -> str:
    """One line for a pass that failed on the step module: its diagnostic (located at
    the op), or for an internal error the op it was processing, where, and the pass."""
    from xdsl.utils.exceptions import DiagnosticException

    from shardc.ir.diagnostics import DiagnosticError, Severity, make, one_line
    from shardc.ir.verifier import crash_text

    if isinstance(exc, DiagnosticError):
        diag = exc.diagnostic
        diag.message = f"{diag.message} (in pass '{entry}')"
    elif isinstance(exc, DiagnosticException):
        diag = make(None, Severity.ERROR, f"pass '{entry}' failed on the step module: {exc}")
    else:
        text, target = crash_text(exc, f"pass '{entry}'", module)
        diag = make(target, Severity.ERROR, f"internal error in pass '{entry}': {text}")
    return one_line(diag)


def count_collectives(module: ModuleOp, by_axes: bool = False) -> dict[str, Counter[str]]:
    """Per function, how many shard.* and mpi.* communication ops it holds; with
    `by_axes`, shard ops are keyed with their grid axes (`shard.all_gather[0]`)."""
    from xdsl.dialects import func

    names = {f"shard.{n}" for n in SHARD_COLLECTIVES} | {f"mpi.{n}" for n in MPI_COLLECTIVES}
    out: dict[str, Counter[str]] = {}
    for f in module.ops:
        if isinstance(f, func.FuncOp):
            out[f.sym_name.data] = Counter(_key(op, by_axes) for op in f.walk() if op.name in names)
    return out


def _key(op: Operation, by_axes: bool) -> str:
    axes = getattr(op, "grid_axes_tuple", None)
    return f"{op.name}[{','.join(map(str, axes))}]" if by_axes and axes is not None else op.name

def lower_step(module: ModuleOp, keep_text: bool = False, passes: Sequence[str] = PIPELINE) -> tuple[list[Stage], dict[str, object]]:
    """Run the step's pipeline (`passes`: `PIPELINE` or a `step_pipeline`) on `module` (in
    place): its stages, and the metadata a cache entry keeps (each stage's seconds, the
    collectives at the shard level, after simplify/canonicalize/cse and before lowering,
    and after lowering)."""
    lower_at = list(passes).index("convert-shard-to-mpi")
    stages = run_pipeline(module, passes[:lower_at], keep_text)
    shard_level = count_collectives(module, by_axes=True)
    stages += run_pipeline(module, passes[lower_at:], keep_text)[1:]
    return stages, {"stages": [[st.name, st.seconds] for st in stages], "shard_collectives": shard_level, "collectives": count_collectives(module)}


__all__ = [
    "GRAD_REDUCE_BF16", "MPI_COLLECTIVES", "PIPELINE", "PRECISIONS", "SHARD_COLLECTIVES", "PipelineError", "Stage", "bf16_units_line", "count_collectives",
    "lower_step", "pass_failure_line", "precision_lines", "run_pipeline", "step_pipeline",
]
