"""Sharded training on N ranks: the configuration, the loop one rank runs, and drivers
for simulated ranks (threads of one process) and for MPI (under mpiexec).

    cfg = TrainingConfig(GPTConfig(n_layer=2, n_head=4, n_embd=64), steps=50).shard(tp=2, fsdp=True)
    result = train_simulated(cfg, tokens, world=4)      # or train_mpi(cfg, tokens) on MPI ranks
    result.losses, result.params, result.memory

Every rank reads the same global batches (same seed) and takes its piece along `batch`,
so a run on N ranks sees the examples a single-rank run with the same global batch sees:
their losses and parameters agree to float32 rounding. Batch accounting follows the
design: global batch = per-device batch x data replicas x accumulation steps (the tp
devices of a replica share their examples).

With `checkpoint=CheckpointOptions(dir, every, keep)` the ranks save their pieces of
the state as they train; `resume=dir` continues from the newest complete checkpoint, on
this grid and policy or another (`shardc.training.checkpoint`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from shardc.training.axis import GPT_PLAN, LayoutOverride, ShardingPlan, ShardingPolicy, StateBytes, per_rank_bytes
from shardc.training.checkpoint import (
    BatchStream,
    Checkpoint,
    CheckpointOptions,
    crash_point,
    load_rank,
    model_arrays,
    open_for_resume,
    run_options,
    save_rank,
)
from shardc.training.data import batches
from shardc.training.gpt import GPTConfig, init_params, param_specs
from shardc.training.mesh import Grid, global_batch, make_grid
from shardc.training.optimizer import AdamWConfig
from shardc.training.spmd import RankState, StepProgram, gather_params
from shardc.training.train import TrainConfig

Batch = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class TrainingConfig:
    """What to train and how: the model, batch sizes, schedule, and the sharding policy."""

    model: GPTConfig = field(default_factory=GPTConfig)
    per_device_batch: int = 4
    accum: int = 1
    steps: int = 100
    lr: float = 3e-3
    min_lr: float | None = None  # default lr / 10
    warmup_steps: int = 10
    seed: int = 0
    dtype: str = "float32"  # of the stored state: float32 masters under --precision bf16 too
    opt: AdamWConfig = field(default_factory=AdamWConfig)
    policy: ShardingPolicy = field(default_factory=ShardingPolicy)
    plan: ShardingPlan = GPT_PLAN
    eval_every: int = 0  # 0: evaluate once, after the last step
    eval_batches: int = 2
    precision: str = "f32"  # "bf16": bf16 products (shardc.training.pipeline.step_pipeline); last, as callers build this positionally
    grad_reduce: str = "f32"  # "bf16": gradients' sums over the batch axis reduce bf16 copies (pipeline.GRAD_REDUCE_BF16)

    def shard(self, tp: int | None = None, zero: bool | None = None, fsdp: bool | None = None, overrides: tuple[LayoutOverride, ...] | None = None) -> TrainingConfig:
        """The same configuration under another policy (unnamed choices are kept; fsdp
        turns zero on, as FSDP requires it; `overrides`: per parameter group)."""
        p = self.policy
        fsdp_ = p.fsdp if fsdp is None else fsdp
        zero_ = (p.zero or fsdp_) if zero is None else zero
        more = p.overrides if overrides is None else tuple(overrides)
        return replace(self, policy=ShardingPolicy(p.tp if tp is None else tp, zero_, fsdp_, more))

    def schedule(self) -> TrainConfig:
        """The single-rank trainer's config with this schedule (for lr_at and references)."""
        return TrainConfig(
            self.per_device_batch, self.accum, self.steps, self.lr,
            self.lr / 10 if self.min_lr is None else self.min_lr, self.warmup_steps, self.seed, self.dtype, self.opt,
        )

    def grid(self, world: int, ranks_per_host: int | None = None) -> Grid:
        return make_grid(world, self.policy.tp, ranks_per_host)

    def global_batch(self, grid: Grid) -> int:
        return global_batch(self.per_device_batch, grid, self.accum)

    def microbatch(self, grid: Grid) -> int:
        """Examples of one accumulation microbatch across the grid."""
        return self.per_device_batch * grid.batch


@dataclass
class StepLog:
    step: int
    loss: float
    lr: float
    seconds: float
    tokens_per_s: float
    eval_loss: float | None = None


class StepLogView:
    """The losses of a run's `log`, for the results of the built-in and the torch trainer."""

    log: list[StepLog]

    @property
    def losses(self) -> list[float]:
        return [s.loss for s in self.log]

    @property
    def eval_losses(self) -> list[tuple[int, float]]:
        return [(s.step, s.eval_loss) for s in self.log if s.eval_loss is not None]


@dataclass
class TrainingResult(StepLogView):
    """What rank 0 knows at the end: the log, the global parameters, the accounting."""

    config: TrainingConfig
    grid: Grid
    log: list[StepLog]
    params: dict[str, np.ndarray]
    memory: StateBytes
    compile_seconds: float
    program: StepProgram | None = None

    @property
    def global_batch(self) -> int:
        return self.config.global_batch(self.grid)


OnStep = Callable[[StepLog], None]


class _QuietSteps:
    """One simulated rank's step hook (`simulated_step_hooks`): for the first `quiet`
    steps every rank meets at a barrier before and after rank 0's `on_step`, so that
    rank 0 runs it while the other threads wait there."""

    def __init__(self, on_step: OnStep | None, quiet: int):
        self.on_step, self.quiet = on_step, quiet

    def __call__(self, entry: StepLog) -> None:
        if self.quiet <= 0:
            if self.on_step is not None:
                self.on_step(entry)
            return
        from shardc.runtime.execute.comm import current_comm

        self.quiet -= 1
        comm = current_comm()
        comm.barrier()
        try:
            if self.on_step is not None:
                self.on_step(entry)
        finally:
            comm.barrier()


def simulated_step_hooks(on_step: OnStep | None, world: int) -> list[OnStep | None]:
    """Each simulated rank's step hook: `on_step` on rank 0, nothing on the others, unless
    `on_step` asks for quiet steps (its `quiet_steps`: `--auto`'s memory trace, which
    stops tracemalloc after the second step). Then, for those steps, the other ranks wait
    at a barrier while rank 0 runs it: `tracemalloc.stop()` while another thread
    allocates in numpy (which tracks its buffers without the GIL) crashes CPython 3.11
    (python/cpython#128679, fixed in 3.12.9 and 3.13.2 only): `--simulate --auto`
    died of SIGSEGV in about one run of 40."""
    quiet = int(getattr(on_step, "quiet_steps", 0) or 0) if on_step is not None else 0
    if quiet <= 0 or world == 1:
        return [on_step, *([None] * (world - 1))]
    return [_QuietSteps(on_step if r == 0 else None, quiet) for r in range(world)]


def compile_program(cfg: TrainingConfig, grid: Grid, keep_text: bool = False, world: object = None) -> StepProgram:
    """Check the state, then compile the step for `grid` (raises ShardingValidationError /
    ShardingConfigError before anything is allocated), through the compile cache; under
    MPI (`world`: the communicator) once per job, its parts split between the ranks
    (`shardc.training.split_compile`)."""
    return StepProgram.build(cfg.model, cfg.microbatch(grid), grid, cfg.policy, cfg.plan, cfg.dtype, cfg.opt, keep_text, world, cfg.precision, cfg.grad_reduce)


def memory(cfg: TrainingConfig, grid: Grid) -> StateBytes:
    return per_rank_bytes(param_specs(cfg.model), cfg.plan, cfg.policy, grid, np.dtype(cfg.dtype).itemsize)


def run_rank(
    cfg: TrainingConfig,
    program: StepProgram,
    rank: int,
    train_data: np.ndarray,
    val_data: np.ndarray | None,
    on_step: OnStep | None = None,
    checkpoint: CheckpointOptions | None = None,
    resume: Checkpoint | None = None,
) -> tuple[list[StepLog], list[np.ndarray]]:
    """The training loop of one rank; returns its log and its local parameters. With
    `resume`, it continues from that checkpoint (its log included); with `checkpoint`,
    it saves its pieces of the state when due (collectively with the other ranks)."""
    from shardc.runtime.execute.comm import current_comm

    sched = cfg.schedule()
    micro = program.batch
    it = BatchStream(train_data, micro, cfg.model.block_size, cfg.seed)
    log: list[StepLog] = []
    if resume is None:
        state = RankState(program, rank, init_params(cfg.model, cfg.seed, np.dtype(cfg.dtype).type), comm=current_comm())  # replicas share the work
    else:
        got = load_rank(resume, program, rank)
        state = RankState.from_local(program, rank, got.params, got.mu, got.nu, got.step, own=True)  # loaded for it alone
        it.restore(resume.progress["data"])
        log = [StepLog(**e) for e in resume.progress["history"]]
    tokens_per_step = micro * cfg.accum * cfg.model.block_size
    for step in range(state.step + 1, cfg.steps + 1):
        crash_point(rank, step, "step")
        t0 = time.perf_counter()
        lr = sched.lr_at(step)
        loss = state.train_step([next(it) for _ in range(cfg.accum)], lr)
        dt = time.perf_counter() - t0
        entry = StepLog(step, loss, lr, dt, tokens_per_step / dt if dt > 0 else 0.0)
        due = step == cfg.steps or (cfg.eval_every and step % cfg.eval_every == 0)
        if val_data is not None and due:
            entry.eval_loss = evaluate(cfg, state, val_data)
        log.append(entry)
        if on_step is not None:
            on_step(entry)
        if checkpoint is not None and checkpoint.due(step, cfg.steps):
            save_rank(checkpoint, cfg, state, it, [asdict(e) for e in log], current_comm())
    return log, list(state.params)  # the state ends here: its own arrays, not copies


def evaluate(cfg: TrainingConfig, state: RankState, val_data: np.ndarray) -> float:
    """Mean loss over `eval_batches` held-out batches (the same ones every time)."""
    it = batches(val_data, state.p.batch, cfg.model.block_size, cfg.seed + 1)
    return float(np.mean([state.eval_loss(*next(it)) for _ in range(cfg.eval_batches)]))


def train_simulated(
    cfg: TrainingConfig,
    train_data: np.ndarray,
    world: int,
    val_data: np.ndarray | None = None,
    on_step: OnStep | None = None,
    program: StepProgram | None = None,
    ranks_per_host: int | None = None,
    checkpoint: CheckpointOptions | None = None,
    resume: Checkpoint | str | Path | None = None,
) -> TrainingResult:
    """Train on `world` simulated ranks (threads of this process, SimulatedComm);
    `checkpoint`/`resume` as in `run_rank` (`resume` a checkpoint or a directory of
    them: the newest complete one; CheckpointError before training if it is unusable;
    or a Checkpoint `open_for_resume` already checked)."""
    from shardc.runtime.execute.comm import run_simulated

    grid = cfg.grid(world, ranks_per_host)
    ck = resume if isinstance(resume, Checkpoint) or resume is None else open_for_resume(resume, cfg, checkpoint.meta if checkpoint else None, arrays=model_arrays(cfg.model))
    checkpoint = run_options(checkpoint, ck)
    program = program or compile_program(cfg, grid)
    hooks = simulated_step_hooks(on_step, world)
    outs = run_simulated(
        world,
        lambda r: run_rank(cfg, program, r, train_data, val_data, hooks[r], checkpoint, ck),
        per_rank_args=[(r,) for r in range(world)],
        timeout=3600.0,
    )
    params = gather_params(program, [o[1] for o in outs])
    return TrainingResult(cfg, grid, outs[0][0], params, memory(cfg, grid), program.compile_seconds, program)


def ranks_per_host(world_comm: object) -> int:
    """Ranks sharing this rank's host (MPI's shared-memory split)."""
    from mpi4py import MPI

    local = world_comm.Split_type(MPI.COMM_TYPE_SHARED)  # type: ignore[attr-defined]
    try:
        return int(local.Get_size())
    finally:
        local.Free()


def train_mpi(
    cfg: TrainingConfig,
    train_data: np.ndarray,
    val_data: np.ndarray | None = None,
    on_step: OnStep | None = None,
    program: StepProgram | None = None,
    checkpoint: CheckpointOptions | None = None,
    resume: Checkpoint | str | Path | None = None,
) -> TrainingResult | None:
    """Train on the ranks of MPI.COMM_WORLD (MPIComm); rank 0 gets the result, the others
    None. Rank 0 compiles the program (or loads it from the compile cache) and the
    others take it from rank 0. `checkpoint`/`resume` as in
    `train_simulated`: the ranks share out the checksum verification, and every rank
    raises the same CheckpointError when one of them finds a problem."""
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, abort_on_error, use_comm
    from shardc.runtime.execute.kernels import agreement

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    grid = cfg.grid(world.Get_size(), ranks_per_host(world))
    ck = resume if isinstance(resume, Checkpoint) else None
    if resume is not None and ck is None:
        ck = open_for_resume(resume, cfg, checkpoint.meta if checkpoint else None, rank, world.Get_size(), world.allgather, model_arrays(cfg.model))
    checkpoint = run_options(checkpoint, ck, lambda run: world.bcast(run, root=0))
    program = program or compile_program(cfg, grid, world=world)
    agreement.agree(world)
    with abort_on_error(world), use_comm(MPIComm(world)):
        world.Barrier()
        log, local = run_rank(cfg, program, rank, train_data, val_data, on_step if rank == 0 else None, checkpoint, ck)
    parts = world.gather(local, root=0)
    if rank != 0:
        return None
    assert parts is not None
    params = gather_params(program, parts)
    return TrainingResult(cfg, grid, log, params, memory(cfg, grid), program.compile_seconds, program)


def reference_losses(cfg: TrainingConfig, train_data: np.ndarray, grid: Grid) -> tuple[list[float], dict[str, np.ndarray]]:
    """The single-rank run (unsharded IR) on the same global batches: the reference a
    sharded run must reproduce."""
    from shardc.training.train import Trainer

    tc = replace(cfg.schedule(), batch_size=cfg.microbatch(grid))
    trainer = Trainer(cfg.model, tc)
    it = batches(train_data, tc.batch_size, cfg.model.block_size, cfg.seed)
    losses = [trainer.train_step([next(it) for _ in range(cfg.accum)]) for _ in range(cfg.steps)]
    return losses, {s.path: p for s, p in zip(param_specs(cfg.model), trainer.params)}


__all__ = [
    "StepLog",
    "TrainingConfig",
    "TrainingResult",
    "compile_program",
    "memory",
    "reference_losses",
    "run_rank",
    "simulated_step_hooks",
    "train_mpi",
    "train_simulated",
]
