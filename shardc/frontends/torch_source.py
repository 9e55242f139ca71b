"""`shardc-train --torch-model FILE.py:FACTORY`: train a user's PyTorch module.

The contract: FILE.py defines FACTORY(vocab_size=, block_size=, seed=) returning a
`shardc.frontends.torch_train.TorchTask` of kind "lm": a language model taking int64
tokens [batch, block_size] and returning logits; `loss_fn(logits, targets)`; the
parameters' (and buffers') logical axes by FQN pattern and the ShardingPlan that splits
them; optionally `no_decay` (FQN patterns AdamW does not decay) and `generate` (the
sampling hook `--sample` calls on the trained module). `examples/torch_gpt.py:make` is
one.

`TorchSource` is the trainer's model source for it; the rest is the trainer's
(`shardc.training.job`), shared with the built-in GPT: the
text (`--data` or the synthetic corpus) and tokenizer (vocabulary padded to lcm(8, data
replicas)), the grid from the MPI world or `--simulate N`, `--tp/--zero/--fsdp`,
`--per-device-batch`, `--accum`, `--steps`, `--lr` with the warmup + cosine schedule,
`--seed`, the same seeded batch stream, the held-out loss every `--eval-every` steps,
the header (batch accounting, per-rank memory, collectives), progress, `--out`
(loss.csv, loss.png, tokens_per_s.png, params.npz by FQN, model.safetensors that
`model.load_state_dict` takes, the tokenizer), sharded checkpoints every
`--checkpoint-every` steps keyed by FQN and `--resume` on any grid. The step is
imported from PyTorch's autograd through torch-mlir and compiled by shardc
(`TorchTraining`); `--emit-ir DIR` writes each stage of it; `--show-layouts` draws
each parameter's layouts on the grid (nothing imported or compiled) and exits.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from shardc.training.job import TOOL, Job, JobError, accounting, collective_lines, kib, layouts_head, sharding_error_line


class _Tokens:
    """The CLI's batch stream (`checkpoint.BatchStream`, so a checkpoint keeps its
    position) with the tokens as int64, what nn.Embedding and cross-entropy take."""

    def __init__(self, stream: Any, make_batch: Any = None):
        self.stream = stream
        self.make_batch = make_batch

    def __iter__(self) -> _Tokens:
        return self

    def __next__(self) -> tuple[np.ndarray, ...]:
        return _as_step_batch(next(self.stream), self.make_batch)

    def state(self) -> dict[str, Any]:
        return self.stream.state()

    def restore(self, state: Any) -> None:
        self.stream.restore(state)


def load_cli_task(a: argparse.Namespace, vocab_size: int, n_tokens: int | None = None) -> Any:
    """The TorchTask `--torch-model` names: `hf:CLASS` / `hf:DIR` (`shardc.frontends.hf`,
    with `--model-config`) or `FILE.py:FACTORY`."""
    from shardc.frontends.hf import hf_task, is_hf_spec
    from shardc.frontends.torch_train import TorchTrainError, load_task

    config = getattr(a, "model_config", None)
    if is_hf_spec(a.torch_model):
        return hf_task(a.torch_model, model_config=config, vocab_size=vocab_size, block_size=a.block_size, seed=a.seed, tp=a.tp, n_tokens=n_tokens)
    if config is not None:
        raise TorchTrainError(f"--model-config goes with --torch-model hf:CLASS (a transformers model), not {a.torch_model}")
    return load_task(a.torch_model, vocab_size=vocab_size, block_size=a.block_size, seed=a.seed)


def _as_step_batch(batch: Any, make_batch: Any) -> tuple[np.ndarray, ...]:
    tokens = tuple(x.astype(np.int64) for x in batch)
    return tokens if make_batch is None else tuple(make_batch(*tokens))


class TorchSource:
    """A PyTorch module as a `ModelSource` of the trainer (`shardc.training.job`):
    `--torch-model FILE.py:FACTORY`, `hf:CLASS` (with `--model-config`) or `hf:DIR`;
    the step is imported from PyTorch's autograd through torch-mlir and compiled by
    shardc (`shardc.frontends.torch_train.TorchTraining`)."""

    def train(self, job: Job) -> int:
        """Run one `--torch-model` job (on the job's MPI world, or its `--simulate`
        threads)."""
        from shardc.frontends.torch import MissingTorch

        try:
            return self._train(job)
        except MissingTorch as e:
            raise JobError(str(e)) from None

    def _train(self, job: Job) -> int:
        from shardc.frontends.hf import dropout_note, is_hf_spec
        from shardc.frontends.torch_train import TorchTask, TorchTrainError, TorchTraining
        from shardc.training.axis import ShardingConfigError, ShardingPolicy, ShardingValidationError
        from shardc.training.checkpoint import BatchStream, CheckpointError
        from shardc.training.data import batches, split
        from shardc.training.mesh import GridError
        from shardc.training.pipeline import PipelineError
        from shardc.training.train import TrainConfig, set_blas_threads

        a, world, rank, mpi = job.settings, job.world, job.rank, job.comm is not None
        text = job.text()
        tok = job.tokenizer(text)  # checks that tp divides the ranks
        try:
            policy = ShardingPolicy(a.tp, True if a.zero is None else a.zero, a.fsdp, tuple(getattr(a, "policy_override", None) or ()))
            task: TorchTask = load_cli_task(a, tok.vocab_size, tok.n_tokens)
            if task.kind != "lm":
                raise JobError(f"--torch-model {a.torch_model}: a TorchTask of kind {task.kind!r}; shardc-train trains kind 'lm'")
            train, val = split(tok.encode(text), 0.1)
            if len(val) <= a.block_size or len(train) <= a.block_size:
                raise JobError(f"the data ({len(train) + len(val)} tokens) is too short for block size {a.block_size}")
            micro = a.per_device_batch * (world // a.tp)
            held_out = batches(val, micro, a.block_size, a.seed + 1)  # as the built-in trainer's evaluate
            evals = [_as_step_batch(next(held_out), task.make_batch) for _ in range(2)]
            sched = TrainConfig(a.per_device_batch, a.accum, a.steps, a.lr, a.lr / 10, 10, a.seed)
            opts, where = job.checkpoint_options(tok)
            set_blas_threads(1)
            t0 = time.perf_counter()
            training = TorchTraining.prepare(
                task.model, _Tokens(BatchStream(train, micro, a.block_size, a.seed), task.make_batch), task.loss_fn,
                axes=task.axes, plan=task.plan, policy=policy, world=None if mpi else world, n_inputs=task.n_inputs,
                accum=a.accum, steps=a.steps, lr=sched, no_decay=task.no_decay, eval_batches=evals,
                eval_every=a.eval_every, checkpoint=opts, resume=where, keep_text=bool(a.emit_ir) and rank == 0,
                precision=getattr(a, "precision", "f32"),
                grad_reduce=getattr(a, "grad_reduce", "f32"),
            )
            seconds = time.perf_counter() - t0
            # --auto measures the training from here; the module's parameters (the state's
            # arrays view them) are torch's memory, which the trace of numpy cannot see
            job.compiled(untraced_bytes=sum(p.numel() * p.element_size() for p in task.model.parameters()))
            # after the module is imported and checked (a bad one writes nothing), before training
            training.checkpoint = _claim_directories(job, training.checkpoint, where)
        except ShardingValidationError as e:
            raise JobError(sharding_error_line(e)) from None
        except (TorchTrainError, GridError, ShardingConfigError, CheckpointError, ValueError) as e:
            raise JobError(str(e)) from None
        except PipelineError as e:  # every rank compiles the same step and fails the same way
            raise JobError(f"cannot compile the training step of {type(task.model).__name__}: {' '.join(str(e).split())}") from None
        if rank == 0:
            if a.emit_ir:
                with job.abort_on_error():  # under MPI the others wait in the step
                    job.emit_ir(training.program)
            print(_header(a, task, training, world, seconds), flush=True)
            if is_hf_spec(a.torch_model) and (note := dropout_note(task.model)):
                print(f"  {note}", flush=True)
            if training.resume is not None:
                job.say_resumed(training.resume, training.config, training.grid)
        progress = job.progress()
        try:
            result = training.run(progress if rank == 0 else None)
        except TorchTrainError as e:  # the batches ran out, a checkpoint's data position is foreign
            raise JobError(str(e)) from None
        if rank == 0:
            progress.close()
            title = _title(a, task, training, world)
            if is_hf_spec(a.torch_model):
                _finish_pretrained(job, result, tok, title, task.model)
            else:
                job.finish(result, tok, title, result.state_arrays(task.model))
            if a.sample:
                sample(job, task, result, tok)
        return 0

    def show_layouts(self, job: Job) -> int:
        """`--show-layouts` with `--torch-model`: the grid and every parameter's and
        buffer's storage / compute / update layouts, checked against the grid; nothing
        is imported or compiled (for `--np N` no job is launched)."""
        from shardc.frontends.hf import derive_layouts, is_hf_spec
        from shardc.frontends.torch import MissingTorch
        from shardc.frontends.torch_train import ParamInfo, TorchTrainError, plan_state
        from shardc.training.axis import ShardingConfigError, ShardingPolicy, ShardingValidationError
        from shardc.training.layout_view import parameter_layouts, print_texts
        from shardc.training.mesh import GridError, make_grid

        a, world = job.settings, job.world
        tok = job.tokenizer(job.text())
        try:
            policy = ShardingPolicy(a.tp, True if a.zero is None else a.zero, a.fsdp, tuple(getattr(a, "policy_override", None) or ()))
            grid = make_grid(world, a.tp)
            task = load_cli_task(a, tok.vocab_size, tok.n_tokens)
            params, buffers = plan_state(task.model, task.axes, task.plan, policy, grid, task.no_decay)
        except MissingTorch as e:
            raise JobError(str(e)) from None
        except ShardingValidationError as e:
            raise JobError(sharding_error_line(e)) from None
        except (TorchTrainError, GridError, ShardingConfigError, ValueError) as e:
            raise JobError(str(e)) from None
        if job.rank != 0:
            return 0
        # layout_view names every dimension: "-" for one the axes leave unnamed.
        def shown(infos: Any) -> list[ParamInfo]:
            return [ParamInfo(i.path, i.shape, tuple(x or "-" for x in i.axes)) for i in infos]

        head = layouts_head(
            f"{TOOL}: {type(task.model).__name__} from {a.torch_model}, {world} rank{'s' if world > 1 else ''}, grid {grid}, "
            f"policy {policy.text()}",
            grid,
            f"; buffers ({', '.join(b.path for b in buffers)}) keep their compute layout" if buffers else "",
        )
        if is_hf_spec(a.torch_model):
            head.append("logical axes derived from the module types and names (shardc.frontends.hf)")
            head += [f"note: {n}" for n in derive_layouts(task.model).notes]
        as_compute = ShardingPolicy(policy.tp, False, False)  # a buffer is stored as it is used
        print_texts([*head, *parameter_layouts(shown(params), task.plan, policy, grid), *parameter_layouts(shown(buffers), task.plan, as_compute, grid)])
        return 0


def _finish_pretrained(job: Job, result: Any, tok: Any, title: str, model: Any) -> None:
    """A transformers model's outputs: model.safetensors as `save_pretrained` writes it
    and config.json beside it, so `CLASS.from_pretrained(OUT)` loads the trained model."""
    from shardc.frontends.hf import pretrained_state, write_config

    out = job.settings.out
    job.finish(result, tok, title, pretrained_state(model, result.state_dict(model)))
    try:
        path = write_config(model, out)
    except OSError as e:
        raise JobError(f"cannot write to '{out}': {e.strerror}") from None
    print(f"{TOOL}: wrote {path} ({type(model).__name__}.from_pretrained('{out}') loads the trained model)")


def _claim_directories(job: Job, opts: Any, where: Any) -> Any:
    """Rank 0 makes, tests and locks `--out` and the checkpoint directory, and a fresh
    run refuses another run's checkpoints (`Job.claim_checkpoints`); under MPI every
    rank raises the JobError rank 0 found, and takes rank 0's run."""
    error, claimed = None, opts
    if job.rank == 0:
        try:
            job.hold_directories(opts)
            if where is None:
                claimed = job.claim_checkpoints(opts, None)
        except JobError as e:
            error = str(e)
    if job.comm is not None:
        error, claimed = job.comm.bcast((error, claimed), root=0)
    if error is not None:
        raise JobError(error)
    return claimed


def _header(a: argparse.Namespace, task: Any, training: Any, world: int, seconds: float) -> str:
    from shardc.training.pipeline import precision_lines

    p, prog = training.config.policy, training.program
    n = sum(int(np.prod(i.shape)) for i in prog.params)
    decayed = sum(1 for i in prog.params if i.decay)
    bufs = f", {len(prog.buffers)} buffers ({kib(training.buffer_bytes)} per rank)" if prog.buffers else ", no buffers"
    return "\n".join([
        f"{TOOL}: {type(task.model).__name__} from {a.torch_model}, {world} rank{'s' if world > 1 else ''}, grid {training.grid}, "
        f"policy {p.text()}",
        f"  model: {len(prog.params)} parameters ({n:,} values; {decayed} with weight decay){bufs}, {prog.dtype}, block {a.block_size}",
        *accounting(training.config, training.grid, a.block_size, training.memory),
        f"  imported from PyTorch and compiled the step in {seconds:.1f} s (compile {prog.compile_seconds:.1f} s{'' if prog.cached == 'compiled' else ', from the compile cache'})",
        *collective_lines(prog.shard_collectives),
        *precision_lines(TOOL, getattr(a, "precision", "f32"), getattr(a, "grad_reduce", "f32")),
    ])


def _title(a: argparse.Namespace, task: Any, training: Any, world: int) -> str:
    p = training.config.policy
    policy = f"tp={p.tp}" + (" fsdp" if p.fsdp else " zero" if p.zero else " data-parallel")
    n = sum(int(np.prod(i.shape)) for i in training.program.params)
    return f"{type(task.model).__name__} ({a.torch_model}), {n:,} parameters\n{world} rank{'s' if world > 1 else ''}, grid {training.grid}, {policy}"


def sample(job: Job, task: Any, result: Any, tok: Any) -> None:
    """`--sample N`: the factory's `generate` hook on the trained module, or a line
    saying why there is no sample."""
    a = job.settings
    if task.generate is None:
        print(f"{TOOL}: --sample skipped: {a.torch_model} gives no generate hook (TorchTask.generate)")
        return
    prompt = job.prompt(tok)
    task.model.load_state_dict(result.state_dict(task.model))
    try:
        ids = task.generate(task.model, list(prompt), a.sample, **job.sample_args(tok))
    except Exception as e:  # noqa: BLE001 - the user's hook: one line naming it
        raise JobError(f"--sample: the generate hook of {a.torch_model} failed: {type(e).__name__}: {e}") from None
    job.print_sample(tok, [int(i) for i in ids])


__all__ = ["TorchSource", "load_cli_task", "sample"]
