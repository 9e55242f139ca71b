"""The sharded training step as the ranks run it: the step module compiled through the
shard pipeline, its lowered form executed on every rank over a Comm.

Nothing here writes a collective. `build_step_module` puts shard annotations at the
layout boundaries (storage, compute, update); the pipeline

    sharding-propagation{traversal=forward-backward}, shard-partition, shard-simplify,
    canonicalize, cse, convert-shard-to-mpi, forward-send-copies, canonicalize

derives and lowers the communication; the runtime compiles the `mpi.*` program to Python
over numpy, and each rank calls it on its local pieces. Propagation runs forward first:
the batch split enters with the tokens and the TP splits with the parameters, so they
reach the activations before the backward sweep meets the (replicated) gradient
layouts coming back from the function's results; the backward sweep then annotates what
the forward one could not see yet (the `tensor.empty`/`linalg.fill` inits that precede
their users).

`StepProgram` is the compiled program with each state array's layout; `RankState` the
local state of one rank (parameters in storage layout, gradient accumulator and AdamW
moments in update layout) and its step/eval calls. Global <-> local pieces follow MLIR's
layout rule: a dimension split over mesh axes `(a, b)` is cut into |a|*|b| pieces, the
piece of a device being its coordinates on (a, b) linearised row-major.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from shardc.training.axis import ParamLayouts, PartitionSpec, ShardingPlan, ShardingPolicy, StateBytes, resolve
from shardc.training.gpt import GPTConfig, InitialParams, ParamSpec, param_specs
from shardc.training.mesh import MESH_AXES, Grid
from shardc.training.optimizer import AdamWConfig, step_donation
from shardc.training.pipeline import Stage, lower_step, step_pipeline

if TYPE_CHECKING:  # IR is built and inspected where it is needed: a compile-cache hit imports no xDSL
    from xdsl.dialects.builtin import ModuleOp


# ---------------------------------------------------------------------------------------
# Global <-> local pieces
# ---------------------------------------------------------------------------------------


def _piece(axes: tuple[str, ...] | None, grid: Grid, coords: tuple[int, int]) -> tuple[int, int]:
    """(index, count) of a device's piece of a dimension split over `axes`."""
    index, count = 0, 1
    for a in axes or ():
        size = grid.axis_size(a)
        index = index * size + coords[Grid.axis_index(a)]
        count *= size
    return index, count


def local_slices(shape: Sequence[int], spec: PartitionSpec, grid: Grid, rank: int) -> tuple[slice, ...]:
    coords = grid.coords(rank)
    out = []
    for n, axes in zip(shape, spec):
        k, count = _piece(axes, grid, coords)
        step = n // count
        out.append(slice(k * step, (k + 1) * step))
    return tuple(out) + tuple(slice(None) for _ in range(len(shape) - len(spec)))


def local_part(x: np.ndarray, spec: PartitionSpec, grid: Grid, rank: int) -> np.ndarray:
    """The piece of the global array `x` that `rank` holds in layout `spec`, C-contiguous,
    with `x`'s rank (a 0-d array stays 0-d: `np.ascontiguousarray` would make it (1,))."""
    return np.require(x[local_slices(x.shape, spec, grid, rank)], requirements="C")


def assemble(parts: Sequence[np.ndarray], shape: Sequence[int], spec: PartitionSpec, grid: Grid) -> np.ndarray:
    """The global array from every rank's piece (replicas agree; any one is taken)."""
    out = np.empty(tuple(shape), dtype=parts[0].dtype)
    for rank, part in enumerate(parts):
        out[local_slices(shape, spec, grid, rank)] = part
    return out


# ---------------------------------------------------------------------------------------
# The compiled program
# ---------------------------------------------------------------------------------------


@dataclass
class StepProgram:
    """`@train_step`, `@adamw_step` and `@loss` for one grid and policy, lowered to mpi and
    compiled; `batch` is the global microbatch (per-device batch x data replicas)."""

    model: GPTConfig
    batch: int
    grid: Grid
    policy: ShardingPolicy
    plan: ShardingPlan
    dtype: str
    opt: AdamWConfig
    ir: ModuleOp | Callable[[], ModuleOp]
    """The lowered module, or (loaded from the compile cache) how to parse it: see `module`."""
    compiled: object
    stages: list[Stage]
    collectives: dict[str, Counter[str]]
    """Per function, the communication ops of the lowered program (mpi.*)."""
    shard_collectives: dict[str, Counter[str]]
    """Per function, the shard collectives before lowering, keyed with their grid axes."""
    specs: list[ParamSpec] = field(default_factory=list)
    layouts: list[ParamLayouts] = field(default_factory=list)
    compile_seconds: float = 0.0
    cached: str = "compiled"
    """Where the program came from: "compiled", "cache" (this rank's disk) or "broadcast"
    (rank 0's compile or cache entry, over MPI)."""

    @property
    def module(self) -> ModuleOp:
        """The lowered module (parsed from the cache entry on first use after a hit)."""
        if callable(self.ir):  # a ModuleOp is not callable
            self.ir = self.ir()
        return self.ir

    @staticmethod
    def build(
        model: GPTConfig,
        batch: int,
        grid: Grid,
        policy: ShardingPolicy,
        plan: ShardingPlan,
        dtype: str = "float32",
        opt: AdamWConfig | None = None,
        keep_text: bool = False,
        world: object = None,
        precision: str = "f32",
        grad_reduce: str = "f32",
    ) -> StepProgram:
        """Check the whole state against the grid (before anything is allocated), build
        the annotated step module, run the pipeline and compile the lowered program,
        through the compile cache (`shardc.runtime.codegen.cache`; `keep_text` compiles afresh to
        keep every stage's text). Under MPI pass `world` (the communicator): rank 0
        loads, or on a miss the ranks compile the step's parts at once
        (`shardc.training.split_compile`); every rank takes rank 0's result."""
        from shardc.runtime.codegen.cache import compile_cached, make_key

        opt = opt or AdamWConfig()
        t0 = time.perf_counter()
        donate = step_donation(len(param_specs(model)))
        built: list[Stage] = []
        # several ranks split the first compile (rank 0 decides: stage texts need the whole module)
        if world is not None and world.Get_size() > 1 and not world.bcast(keep_text, root=0):  # type: ignore[attr-defined]
            from shardc.training.split_compile import compile_parted

            got = compile_parted(model, batch, grid, policy, plan, dtype, opt, donate, world, precision, grad_reduce)
        else:
            passes = step_pipeline(precision, grad_reduce)
            key = make_key("gpt-step", model=model, batch=batch, grid=grid, policy=policy, plan=plan, dtype=dtype, opt=opt, pipeline=passes, fuse=True, donate=donate)

            def build() -> tuple[ModuleOp, dict[str, object]]:
                from shardc.training.step import Sharded, build_step_module  # a hit builds no IR

                module = build_step_module(model, batch, dtype, opt, Sharded(grid, plan, policy))
                stages, meta = lower_step(module, keep_text, passes)
                built.extend(stages)
                return module, meta

            got = compile_cached(key, build, "train_step", world=world, read=not keep_text, donate=donate, consume=True)
        stages = built or [Stage(name, seconds) for name, seconds in got.meta["stages"]]
        specs = param_specs(model)
        prog = StepProgram(
            model, batch, grid, policy, plan, dtype, opt, got.module, got.compiled, stages,
            _counters(got.meta["collectives"]), _counters(got.meta["shard_collectives"]), specs, [resolve(s.axes, plan, policy, s.path) for s in specs],
        )
        prog.compile_seconds = time.perf_counter() - t0
        prog.cached = got.source
        prog.check_signature()
        return prog

    def check_signature(self) -> None:
        """The lowered functions take exactly the local shapes the layouts give."""
        rank0 = 0
        expect = [self.local_shape(s.shape, lay.storage, rank0) for s, lay in zip(self.specs, self.layouts)]
        got = [shape for dt, shape in self.compiled.arg_specs("train_step")[: len(self.specs)] if dt is not None]  # type: ignore[attr-defined]
        assert got == expect, f"lowered @train_step takes {got}, the storage layouts give {expect}"

    def local_shape(self, shape: Sequence[int], spec: PartitionSpec, rank: int) -> tuple[int, ...]:
        return tuple(s.stop - s.start if s.stop is not None else n for s, n in zip(local_slices(shape, spec, self.grid, rank), shape))

    @property
    def data_spec(self) -> PartitionSpec:
        return PartitionSpec("batch", None)

    def call(self, name: str, *args: object) -> object:
        return self.compiled.call(name, *args)  # type: ignore[attr-defined]

    def stage_texts(self) -> list[tuple[str, str]]:
        """(file name, text) per stage, numbered in pipeline order; a name is only its
        number and the pass's name, letters, digits and `-` (it stays inside --emit-ir)."""
        import re

        out = []
        for i, st in enumerate(self.stages):
            slug = re.sub(r"[^A-Za-z0-9-]+", "_", st.name.split("{")[0]).strip("_-") or "stage"
            out.append((f"{i:02d}-{slug}.mlir", st.text or ""))
        return out


# ---------------------------------------------------------------------------------------
# One rank's state and steps
# ---------------------------------------------------------------------------------------


class RankState:
    """The local training state of one rank and the calls of the compiled program.

    It alone holds its arrays between steps, so it donates them (`step_donation`): the
    parameters and moments are updated in place by `@adamw_step` where the layouts
    allow, the gradient accumulator is one set of buffers that `@train_step` adds into.
    Whoever reads them between steps (a checkpoint, the evaluation, `local_params`)
    must be done (or copy) before the next `train_step`."""

    _acc: list[np.ndarray] | None = None  # the gradient accumulator of the last step

    def __init__(self, program: StepProgram, rank: int, params: Mapping[str, np.ndarray], comm: Any = None):
        """`params` global, by path: `init_params`' result makes only this rank's pieces;
        of other mappings only the pieces are copied (then cast). With `comm` (every
        rank of the grid constructing its state at once, as a training job does), the
        ranks holding the same large piece each make a share of its rows and gather the
        rest (`SHARE_MIN` elements up; under ZeRO every rank used to make all 85 M GPT
        parameters at n_layer 12). The numbers are the same: `init_params` makes any
        slice alone."""
        self.p = program
        self.rank = rank
        dt = np.dtype(program.dtype)
        self.params = [_storage_piece(params, s, lay, program.grid, rank, dt, comm) for s, lay in zip(program.specs, program.layouts)]
        # `np.zeros`: pages mapped lazily, faulted in by the first step's in-place update.
        # Writing them here (np.full) made the state 2-3 s slower under load and the
        # first step no faster by as much (bench/compile_startup.py, paired): not done.
        self.mu = [np.zeros(program.local_shape(s.shape, lay.update, rank), dt) for s, lay in zip(program.specs, program.layouts)]
        self.nu = [np.zeros(m.shape, m.dtype) for m in self.mu]  # not zeros_like: it writes the zeros
        self.vocab_ids = np.arange(program.model.vocab_size, dtype=np.int32)
        self.step = 0

    def _data(self, x: np.ndarray) -> np.ndarray:
        return local_part(np.asarray(x, dtype=np.int32), self.p.data_spec, self.p.grid, self.rank)

    def train_step(self, microbatches: Sequence[tuple[np.ndarray, np.ndarray]], lr: float) -> float:
        """Accumulate gradients over the global microbatches (each rank reads its piece),
        then update; returns the mean loss of the microbatches."""
        p = self.p
        acc = self._zeroed_accumulator()
        losses = []
        for tokens, targets in microbatches:
            loss, *acc = p.call("train_step", *self.params, *acc, self._data(tokens), self._data(targets), self.vocab_ids)  # type: ignore[misc]
            losses.append(float(loss))
        self.step += 1
        n = len(p.specs)
        # Parameters and moments are donated (`adamw_donation`): where the compiler could
        # honour it the results are these same arrays, updated in place; this state is
        # their only holder between steps (checkpoints and eval read them, then let go).
        out = p.call("adamw_step", *self.params, *acc, *self.mu, *self.nu, lr, self.step, 1.0 / len(microbatches))
        self._acc = acc  # the same buffers where @train_step could write them in place
        self.params, self.mu, self.nu = list(out[:n]), list(out[n : 2 * n]), list(out[2 * n :])  # type: ignore[index]
        return float(np.mean(losses))

    def _zeroed_accumulator(self) -> list[np.ndarray]:
        """The gradient accumulator, zeroed: the buffers of the last step (donated to
        `@train_step`, which adds each microbatch's gradients into them) or new ones."""
        acc = self._acc
        if acc is None or not self.p.compiled.donated("train_step"):  # type: ignore[attr-defined]
            dt = np.dtype(self.p.dtype)
            return [np.zeros(self.p.local_shape(s.shape, lay.grads, self.rank), dt) for s, lay in zip(self.p.specs, self.p.layouts)]
        for a in acc:
            a.fill(0)
        return acc

    def eval_loss(self, tokens: np.ndarray, targets: np.ndarray) -> float:
        """The loss of one held-out global batch under the compute layouts; no update."""
        return float(self.p.call("loss", *self.params, self._data(tokens), self._data(targets), self.vocab_ids))  # type: ignore[arg-type]

    def persistent_bytes(self) -> StateBytes:
        """Bytes this rank keeps between steps, measured on its arrays (the gradient
        accumulator by the shape the step gives it)."""
        p = self.p
        itemsize = np.dtype(p.dtype).itemsize
        grads = sum(int(np.prod(p.local_shape(s.shape, lay.grads, self.rank))) for s, lay in zip(p.specs, p.layouts)) * itemsize
        return StateBytes(
            sum(int(np.asarray(a).nbytes) for a in self.params), grads,
            sum(int(np.asarray(a).nbytes) for a in [*self.mu, *self.nu]),
        )

    def local_params(self) -> list[np.ndarray]:
        """Copies of this rank's parameters: the state's own arrays change in place."""
        return [np.array(a) for a in self.params]

    @classmethod
    def from_local(
        cls, program: StepProgram, rank: int, params: Sequence[np.ndarray], mu: Sequence[np.ndarray], nu: Sequence[np.ndarray], step: int, own: bool = False
    ) -> RankState:
        """A rank's state from its local pieces (a checkpoint loaded onto this grid), with
        no global array built. The state updates its arrays in place, so it copies them,
        unless `own`: the caller hands them over and keeps no other reference."""
        state = cls.__new__(cls)
        state.p, state.rank, state.step = program, rank, step
        take = list if own else (lambda xs: [np.array(x) for x in xs])
        state.params, state.mu, state.nu = take(params), take(mu), take(nu)
        state.vocab_ids = np.arange(program.model.vocab_size, dtype=np.int32)
        return state


SHARE_MIN = 1 << 20
"""Replicated pieces of this many elements and more are made in shares (`RankState`):
below it a collective costs about what making the piece does."""


def _storage_piece(
    params: Mapping[str, np.ndarray], spec: ParamSpec, lay: ParamLayouts, grid: Grid, rank: int, dt: np.dtype, comm: Any = None
) -> np.ndarray:
    index = local_slices(spec.shape, lay.storage, grid, rank)
    if not isinstance(params, InitialParams):
        return np.array(np.asarray(params[spec.path])[index], dtype=dt, order="C")
    replicas = _replica_axes(lay.storage, grid)
    n = math.prod(grid.shape[a] for a in replicas)
    spans = [range(*sl.indices(d)) for sl, d in zip(index, spec.shape)]
    if comm is None or n == 1 or not spans or math.prod(map(len, spans)) < SHARE_MIN or len(spans[0]) % n:
        return params.piece(spec.path, index, dt)
    # The same decision on every rank (shapes, layouts, grid): the collectives match.
    k = _group_index(grid, replicas, rank)
    share = len(spans[0]) // n
    start = spans[0].start + k * share
    mine = params.piece(spec.path, (slice(start, start + share), *index[1:]), dt)
    return comm.all_gather(mine, grid.shape, replicas, 0)


def _replica_axes(storage: PartitionSpec, grid: Grid) -> tuple[int, ...]:
    """The grid axes (of more than one rank) a layout does not split: its replicas."""
    used = {a for axes in storage if axes for a in axes}
    return tuple(Grid.axis_index(a) for a in MESH_AXES if a not in used and grid.axis_size(a) > 1)


def _group_index(grid: Grid, axes: tuple[int, ...], rank: int) -> int:
    coords = grid.coords(rank)
    k = 0
    for a in axes:
        k = k * grid.shape[a] + coords[a]
    return k


def _counters(table: dict[str, dict[str, int]]) -> dict[str, Counter[str]]:
    return {fn: Counter(counts) for fn, counts in table.items()}


def gather_params(program: StepProgram, per_rank: Sequence[Sequence[np.ndarray]]) -> dict[str, np.ndarray]:
    """Global parameters from every rank's local storage pieces."""
    return {
        s.path: assemble([r[i] for r in per_rank], s.shape, lay.storage, program.grid)
        for i, (s, lay) in enumerate(zip(program.specs, program.layouts))
    }


__all__ = [
    "RankState",
    "StepProgram",
    "assemble",
    "gather_params",
    "local_part",
]
