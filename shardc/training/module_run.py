"""A module's compiled training step run on ranks: the trainer's loop for a model that
comes as a step program over named parameters and buffers (a PyTorch module imported by
`shardc.frontends.torch_train`), as `shardc.training.trainer` runs the built-in GPT's.

`ModuleTraining.run` trains on simulated ranks (threads) or the MPI world: each rank
keeps its local pieces (`RankModule`), calls the step on its part of every global
microbatch, applies AdamW, logs, evaluates the held-out batches when due and saves
sharded checkpoints (`shardc.training.checkpoint`), resuming from one on any grid; the
ranks' final pieces are assembled into global arrays by FQN (`ModuleTrainResult`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from shardc.training.axis import PartitionSpec, StateBytes, per_rank_bytes
from shardc.training.checkpoint import Checkpoint, CheckpointOptions
from shardc.training.mesh import BATCH, Grid
from shardc.training.trainer import StepLog, StepLogView, TrainingConfig, simulated_step_hooks


def data_spec(rank: int, dim: int = 0) -> PartitionSpec:
    """Inputs and targets split over the replicas (the grid's batch axis) along `dim`:
    the batch (data parallel), or an image dimension (`shardc.frontends.torch_train.train_module`'s `data_dim`);
    an array without that dimension (class labels of images split by height) is
    whole on every replica."""
    if not rank:
        return PartitionSpec()
    return PartitionSpec(*[BATCH if d == dim else None for d in range(rank)])


def as_numpy(x: Any) -> np.ndarray:
    """A torch tensor (detached, on the CPU) or any array-like as a numpy array."""
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


class RankModule:
    """One rank's local state of a module's step program (parameters in storage
    layout, moments in update layout, buffers in their compute layout) and its step and
    held-out loss calls. `prog` has the parameters and buffers by FQN with their
    layouts, the grid, the data dimension, the exported step's function name and the
    buffers it updates (`shardc.frontends.torch_train.TorchStepProgram`)."""

    def __init__(self, prog: Any, rank: int, params: Mapping[str, np.ndarray] | None, buffers: Mapping[str, np.ndarray] | None = None):
        from shardc.training.spmd import local_part

        self.p, self.rank = prog, rank
        g = prog.grid
        self.buffers = [local_part(np.asarray((buffers or {})[b.path]), s, g, rank) for b, s in zip(prog.buffers, prog.buffer_specs)]
        self.step = 0
        if params is None:  # filled by from_local
            return
        self.params = [local_part(np.asarray(params[i.path]), lay.storage, g, rank) for i, lay in zip(prog.params, prog.layouts)]
        self.mu = [np.zeros_like(local_part(np.asarray(params[i.path]), lay.update, g, rank)) for i, lay in zip(prog.params, prog.layouts)]
        self.nu = [np.zeros_like(m) for m in self.mu]

    @classmethod
    def from_local(cls, prog: Any, rank: int, buffers: Mapping[str, np.ndarray], got: Any) -> RankModule:
        """A rank resumed from a checkpoint's `LoadedState` (its local pieces)."""
        state = cls(prog, rank, None, buffers)
        state.params, state.mu, state.nu, state.step = list(got.params), list(got.mu), list(got.nu), got.step
        state.set_state_buffers(got.buffers)
        return state

    def _data(self, mb: Sequence[np.ndarray]) -> list[np.ndarray]:
        from shardc.training.spmd import local_part

        return [local_part(np.asarray(x), data_spec(np.ndim(x), self.p.data_dim), self.p.grid, self.rank) for x in mb]

    @property
    def updated(self) -> list[int]:
        """Indices (into `buffers`) of the buffers the step updates, in its result order."""
        names = [b.path for b in self.p.buffers]
        return [names.index(n) for n in self.p.exported.updated_buffers]

    @property
    def state_buffers(self) -> list[np.ndarray]:
        """The local pieces of the buffers the step updates: checkpointed state."""
        return [self.buffers[i] for i in self.updated]

    def set_state_buffers(self, values: Sequence[np.ndarray]) -> None:
        for i, v in zip(self.updated, values):
            self.buffers[i] = np.asarray(v)

    def train_step(self, microbatches: Sequence[Sequence[np.ndarray]], lr: float) -> float:
        acc: list[np.ndarray] | None = None
        losses = []
        n_grads = len(self.params)
        for mb in microbatches:  # each microbatch's forward updates the statistics, as in PyTorch
            loss, *outs = self.p.call(self.p.exported.func_name, *self._data(mb), *self.params, *self.buffers)
            grads = outs[:n_grads]
            self.set_state_buffers(outs[n_grads:])
            losses.append(float(np.asarray(loss)))
            acc = [np.asarray(g) for g in grads] if acc is None else [a + np.asarray(g) for a, g in zip(acc, grads)]
        assert acc is not None
        self.step += 1
        n = len(self.params)
        dt = self.params[0].dtype if self.params else np.float32
        out = self.p.call("adamw_step", *self.params, *acc, *self.mu, *self.nu, dt.type(lr), self.step, dt.type(1.0 / len(microbatches)))
        self.params, self.mu, self.nu = list(out[:n]), list(out[n : 2 * n]), list(out[2 * n :])
        return float(np.mean(losses))

    def eval_loss(self, batches: Sequence[Sequence[np.ndarray]]) -> float:
        """Mean loss of `@eval_loss` over held-out global microbatches."""
        return float(np.mean([float(np.asarray(self.p.call("eval_loss", *self._data(mb), *self.params, *self.buffers))) for mb in batches]))


def fork_stream(stream: Any) -> Any:
    """An independent copy of a batch stream (each simulated rank reads its own)."""
    import copy

    return stream.fork() if hasattr(stream, "fork") else copy.deepcopy(stream)


@dataclass
class ModuleTrainResult(StepLogView):
    """The per-step log (loss, lr, time, tokens/s, held-out loss when due), the final
    global parameters by FQN, the compiled program, the grid and the per-rank memory."""

    log: list[StepLog]
    params: dict[str, np.ndarray]
    program: Any
    grid: Grid
    memory: StateBytes
    config: TrainingConfig
    buffers: dict[str, np.ndarray] = field(default_factory=dict)
    """The buffers the step updates (BatchNorm's running statistics), global, by FQN."""


@dataclass
class ModuleTraining:
    """A module's compiled step program with its training job: the configuration, the
    grid, the batch stream (a position a checkpoint keeps), the initial parameters and
    buffers by FQN, the learning rate by step, the held-out batches, the checkpoints and
    the one to resume from; `run()` trains on simulated ranks or the MPI world. A model
    source builds it (`shardc.frontends.torch_train.TorchTraining.prepare`)."""

    result_type: ClassVar[type[ModuleTrainResult]] = ModuleTrainResult
    """What `run` returns (a model source may add to it)."""

    program: Any
    config: TrainingConfig
    grid: Grid
    stream: Any
    dtypes: list[np.dtype]
    init: dict[str, np.ndarray]
    buffers: dict[str, np.ndarray]
    lr_at: Callable[[int], float]
    eval_data: list[list[np.ndarray]] | None
    checkpoint: CheckpointOptions | None
    resume: Checkpoint | None
    mpi: bool
    tokens_per_step: int

    @property
    def memory(self) -> StateBytes:
        """Bytes of the training state each rank keeps between steps (parameters,
        gradient accumulator, AdamW moments), as the layouts split them."""
        itemsize = np.dtype(self.program.dtype).itemsize
        return per_rank_bytes(self.program.params, self.program.plan, self.program.policy, self.grid, itemsize)  # type: ignore[arg-type]

    @property
    def buffer_bytes(self) -> int:
        from shardc.training.spmd import local_slices

        total = 0
        for b, spec in zip(self.program.buffers, self.program.buffer_specs):
            local = self.buffers[b.path][local_slices(b.shape, spec, self.grid, 0)]
            total += local.nbytes
        return total

    def run(self, on_step: Callable[[StepLog], None] | None = None) -> ModuleTrainResult:
        """Train on the simulated ranks (threads) or the MPI world; `on_step` is called on
        rank 0 with each StepLog. Under MPI every rank gets the result."""
        from shardc.training.spmd import assemble

        size = self.grid.size
        if not self.mpi:
            from shardc.runtime.execute.comm import run_simulated

            hooks = simulated_step_hooks(on_step, size)
            outs = run_simulated(size, lambda r: self._run_rank(r, hooks[r]), per_rank_args=[(r,) for r in range(size)], timeout=3600.0)
        else:
            outs = run_on_mpi(lambda r: self._run_rank(r, on_step if r == 0 else None))
        prog = self.program
        params = {
            info.path: assemble([o[1][i] for o in outs], info.shape, lay.storage, self.grid)
            for i, (info, lay) in enumerate(zip(prog.params, prog.layouts))
        }
        names = [b.path for b in prog.buffers]
        buffers = {}
        for j, name in enumerate(prog.exported.updated_buffers):
            k = names.index(name)
            buffers[name] = assemble([o[2][j] for o in outs], prog.buffers[k].shape, prog.buffer_specs[k], self.grid)
        return self.result_type(outs[0][0], params, prog, self.grid, self.memory, self.config, buffers)

    def _run_rank(self, rank: int, on_step: Callable[[StepLog], None] | None) -> tuple[list[StepLog], list[np.ndarray], list[np.ndarray]]:
        """One rank's loop: the built-in trainer's (`trainer.run_rank`) on this program."""
        from shardc.runtime.execute.comm import current_comm
        from shardc.training.checkpoint import crash_point, load_rank, save_rank

        cfg, stream = self.config, fork_stream(self.stream)
        log: list[StepLog] = []
        if self.resume is None:
            state = RankModule(self.program, rank, self.init, self.buffers)
        else:
            state = RankModule.from_local(self.program, rank, self.buffers, load_rank(self.resume, self.program, rank))
            stream.restore(self.resume.progress["data"])
            log = [StepLog(**e) for e in self.resume.progress["history"]]
        for step in range(state.step + 1, cfg.steps + 1):
            crash_point(rank, step, "step")
            t0 = time.perf_counter()
            lr = self.lr_at(step)
            mbs = [[np.asarray(as_numpy(x), dtype=d) for x, d in zip(next(stream), self.dtypes)] for _ in range(cfg.accum)]
            loss = state.train_step(mbs, lr)
            dt = time.perf_counter() - t0
            entry = StepLog(step, loss, lr, dt, self.tokens_per_step / dt if dt > 0 else 0.0)
            due = step == cfg.steps or (cfg.eval_every and step % cfg.eval_every == 0)
            if self.eval_data and due:
                entry.eval_loss = state.eval_loss(self.eval_data)
            log.append(entry)
            if on_step is not None:
                on_step(entry)
            if self.checkpoint is not None and self.checkpoint.due(step, cfg.steps):
                save_rank(self.checkpoint, cfg, state, stream, [asdict(e) for e in log], current_comm())
        return log, [np.asarray(p) for p in state.params], [np.asarray(b) for b in state.state_buffers]


def mpi_world_size() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_size()


def run_on_mpi(run_rank: Callable[[int], Any]) -> list[Any]:
    """`run_rank(rank)` on this rank of the MPI world (its libraries agreed, an exception
    aborting the job); every rank gets every rank's result."""
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, abort_on_error, use_comm
    from shardc.runtime.execute.kernels import agreement

    world = MPI.COMM_WORLD
    agreement.agree(world)
    with abort_on_error(world), use_comm(MPIComm(world)):
        mine = run_rank(world.Get_rank())
    return world.allgather(mine)


__all__ = ["ModuleTrainResult", "ModuleTraining", "RankModule", "as_numpy", "data_spec", "fork_stream", "mpi_world_size", "run_on_mpi"]
