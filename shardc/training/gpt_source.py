"""The built-in GPT as a model source of the trainer (`shardc.training.job`): its
configuration from `--n-layer/--n-head/--n-embd/--block-size` and the tokenizer, its
step program built by `shardc.training.step` and compiled by `shardc.training.trainer`,
trained on `--simulate` threads or the MPI world, sampled by `shardc.training.sample`.
"""

from __future__ import annotations

import argparse
from typing import Any

from shardc.training.job import TOOL, Job, JobError, accounting, collective_lines, layouts_head, sharding_error_line


def configure(a: argparse.Namespace, world: int, ranks_per_host: int | None, tok: Any = None) -> tuple[Any, Any, Any, Any, Any]:
    """(config, grid, tokenizer, train data, held-out data) of a GPT run on `world`
    ranks; configuration errors as JobError, before anything is compiled or allocated.
    `tok`: a tokenizer already made (under MPI rank 0 trains BPE once and sends it to
    the others)."""
    return GPTSource().configure(Job(a, world), ranks_per_host, tok)


class GPTSource:
    """The built-in GPT (`shardc.training.gpt`): a `ModelSource`."""

    def configure(self, job: Job, ranks_per_host: int | None, tok: Any = None) -> tuple[Any, Any, Any, Any, Any]:
        """See `configure`."""
        from shardc.training.axis import ShardingConfigError, ShardingValidationError, validate_layouts
        from shardc.training.data import split
        from shardc.training.gpt import GPTConfig, param_specs
        from shardc.training.mesh import GridError
        from shardc.training.trainer import TrainingConfig

        a = job.settings
        text = job.text()
        if tok is None:
            tok = job.tokenizer(text)
        try:
            model = GPTConfig(a.n_layer, a.n_head, a.n_embd, a.block_size, tok.vocab_size)
            cfg = TrainingConfig(
                model, a.per_device_batch, a.accum, a.steps, a.lr, seed=a.seed, eval_every=a.eval_every, precision=getattr(a, "precision", "f32"),
                grad_reduce=getattr(a, "grad_reduce", "f32"),
            ).shard(tp=a.tp, zero=True if a.zero is None else a.zero, fsdp=a.fsdp, overrides=tuple(getattr(a, "policy_override", None) or ()))
            grid = cfg.grid(job.world, ranks_per_host)
            validate_layouts(param_specs(model), cfg.plan, cfg.policy, grid)
        except ShardingValidationError as e:
            raise JobError(sharding_error_line(e)) from None
        except (GridError, ShardingConfigError, ValueError) as e:
            raise JobError(str(e)) from None
        try:
            data = tok.encode(text)
        except ValueError as e:
            raise JobError(str(e)) from None
        train, val = split(data, 0.1)
        if len(val) <= model.block_size or len(train) <= model.block_size:
            raise JobError(f"the data ({len(data)} tokens) is too short for block size {model.block_size}")
        return cfg, grid, tok, train, val

    def show_layouts(self, job: Job) -> int:
        """`--show-layouts`: the grid and every parameter's layouts; nothing is compiled."""
        from shardc.training.gpt import param_specs
        from shardc.training.layout_view import parameter_layouts, print_texts

        cfg, grid, _, _, _ = self.configure(job, None)
        if job.rank != 0:
            return 0
        p = cfg.policy
        head = layouts_head(f"{TOOL}: {job.world} rank{'s' if job.world > 1 else ''}, grid {grid}, policy {p.text()}", grid)
        print_texts([*head, *parameter_layouts(param_specs(cfg.model), cfg.plan, cfg.policy, grid)])
        return 0

    def train(self, job: Job) -> int:
        return self._train_mpi(job) if job.comm is not None else self._train_simulated(job)

    def _train_simulated(self, job: Job) -> int:
        from shardc.runtime.execute.comm import RankFailed
        from shardc.training.checkpoint import CheckpointError
        from shardc.training.train import set_blas_threads
        from shardc.training.trainer import compile_program, train_simulated

        a, world = job.settings, job.world
        cfg, grid, tok, train, val = self.configure(job, None)
        prompt = job.prompt(tok) if a.sample else []
        opts, where = job.checkpoint_options(tok)
        job.hold_directories(opts)
        ck = self._resume(job, cfg, grid, opts, where)
        opts = job.claim_checkpoints(opts, ck)
        set_blas_threads(1)
        program = compile_program(cfg, grid, keep_text=bool(a.emit_ir))
        job.compiled()
        if a.emit_ir:
            job.emit_ir(program)
        print(self._header(cfg, grid, world, program), flush=True)
        progress = job.progress()
        try:
            result = train_simulated(cfg, train, world, val, progress, program, checkpoint=opts, resume=ck)
        except RankFailed as e:  # a save every rank gave up together (a full disk)
            if isinstance(e.__cause__, CheckpointError):
                raise JobError(str(e.__cause__)) from None
            raise
        progress.close()
        job.finish(result, tok, self._title(result, result.grid.size))
        if a.sample:
            from shardc.training.sample import Sampler, generate

            ids = generate(Sampler.for_result(result), result.params, prompt, a.sample, **job.sample_args(tok))
            job.print_sample(tok, ids)
        return 0

    def _train_mpi(self, job: Job) -> int:
        import sys

        from shardc.training.checkpoint import CheckpointError
        from shardc.training.tokenizer import tokenizer_from_json, tokenizer_to_json
        from shardc.training.train import set_blas_threads
        from shardc.training.trainer import compile_program, ranks_per_host, train_mpi

        a, world, rank, n = job.settings, job.comm, job.rank, job.world
        # Rank 0 makes the tokenizer (BPE training reads the whole text) and sends it.
        made: tuple[str, str] | None = None
        if rank == 0:
            try:
                tok0 = job.tokenizer(job.text())
                made = ("ok", tokenizer_to_json(tok0))
            except JobError as e:
                made = ("error", str(e))
        made = world.bcast(made, root=0)
        assert made is not None
        if made[0] == "error":
            if rank == 0:
                sys.stderr.write(f"{TOOL}: error: {made[1]}\n")
            return 1
        tok = tok0 if rank == 0 else tokenizer_from_json(made[1])
        error: str | None = None
        try:
            cfg, grid, tok, train, val = self.configure(job, ranks_per_host(world), tok)
            prompt = job.prompt(tok) if a.sample else []
        except JobError as e:
            error = str(e)
        errors = world.allgather(error)
        if any(e is not None for e in errors):
            if rank == 0:
                sys.stderr.write(f"{TOOL}: error: {next(e for e in errors if e is not None)}\n")
            return 1
        opts, where = job.checkpoint_options(tok)
        if not job.agreed(lambda: job.hold_directories(opts) if rank == 0 else None):
            return 1
        try:
            ck = self._resume(job, cfg, grid, opts, where)
        except JobError as e:  # every rank has it: rank 0 says it
            if rank == 0:
                sys.stderr.write(f"{TOOL}: error: {e}\n")
            return 1
        claimed: list[Any] = []
        if not job.agreed(lambda: claimed.append(job.claim_checkpoints(opts, ck)) if rank == 0 else None):
            return 1
        opts = world.bcast(claimed[0] if rank == 0 else None, root=0)
        set_blas_threads(1)
        program = compile_program(cfg, grid, keep_text=bool(a.emit_ir) and rank == 0, world=world)
        job.compiled()
        if rank == 0:
            with job.abort_on_error():
                if a.emit_ir:
                    job.emit_ir(program)
            print(self._header(cfg, grid, n, program), flush=True)
        progress = job.progress()
        try:
            result = train_mpi(cfg, train, val, progress if rank == 0 else None, program, checkpoint=opts, resume=ck)
        except CheckpointError as e:  # raised by every rank together (a full disk): rank 0 says it
            if rank == 0:
                progress.close()
                sys.stderr.write(f"{TOOL}: error: {e}\n")
            return 1
        if rank == 0:
            progress.close()
            assert result is not None
            with job.abort_on_error():
                job.finish(result, tok, self._title(result, result.grid.size))
        if a.sample:
            from shardc.training.sample import Sampler, generate_mpi

            sampler = Sampler(cfg.model, grid, cfg.policy, cfg.plan, cfg.dtype, world=world)
            ids = generate_mpi(sampler, result.params if result is not None else None, prompt, a.sample, **job.sample_args(tok))
            if rank == 0:
                job.print_sample(tok, ids)
        world.Barrier()
        return 0

    @staticmethod
    def _resume(job: Job, cfg: Any, grid: Any, opts: Any, where: Any) -> Any:
        """The checkpoint to resume from, checked (under MPI by all ranks, agreeing), or
        None; its problems as one JobError line."""
        from shardc.training.checkpoint import CheckpointError, model_arrays, open_for_resume

        if where is None:
            return None
        world = job.comm
        try:
            n = 1 if world is None else world.Get_size()
            ck = open_for_resume(where, cfg, opts.meta, job.rank, n, None if world is None else world.allgather, model_arrays(cfg.model))
        except CheckpointError as e:
            raise JobError(str(e)) from None
        if job.rank == 0:
            job.say_resumed(ck, cfg, grid)
        return ck

    @staticmethod
    def _header(cfg: Any, grid: Any, world: int, program: Any) -> str:
        from shardc.training.pipeline import precision_lines
        from shardc.training.trainer import memory

        p = cfg.policy
        mem = memory(cfg, grid)
        lines = [
            f"{TOOL}: {world} rank{'s' if world > 1 else ''}, grid {grid}, policy {p.text()}",
            f"  model: {cfg.model.n_layer} layers, {cfg.model.n_head} heads, n_embd {cfg.model.n_embd}, block {cfg.model.block_size}, vocab {cfg.model.vocab_size}",
            *accounting(cfg, grid, cfg.model.block_size, mem),
            f"  compiled the step through {len(program.stages) - 1} passes in {program.compile_seconds:.1f} s"
            if program.cached == "compiled" else f"  loaded the compiled step from the compile cache in {program.compile_seconds:.1f} s",
        ]
        lines += collective_lines(program.shard_collectives)
        lines += precision_lines(TOOL, cfg.precision, cfg.grad_reduce)
        return "\n".join(lines)

    @staticmethod
    def _title(result: Any, world: int) -> str:
        """The plots' title: the model, then the ranks, grid and policy."""
        m, p = result.config.model, result.config.policy
        policy = f"tp={p.tp}" + (" fsdp" if p.fsdp else " zero" if p.zero else " data-parallel")
        return (
            f"GPT {m.n_layer} layer{'s' if m.n_layer > 1 else ''}, n_embd {m.n_embd}, {m.n_head} heads, vocab {m.vocab_size}\n"
            f"{world} rank{'s' if world > 1 else ''}, grid {result.grid}, {policy}"
        )


__all__ = ["GPTSource", "configure"]
