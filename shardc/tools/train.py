"""`shardc-train`: train a small GPT with the compiled, sharded training step.

    shardc-train                                 # the synthetic corpus, on the ranks started with
    mpiexec -n 4 shardc-train --tp 2 --fsdp      # under MPI: grid (batch=2, shard=2)
    shardc-train --np 4 --tp 2                   # launch mpiexec itself
    shardc-train --simulate 4 --no-zero          # 4 ranks as threads of this process

The step (`@train_step`, `@adamw_step`, `@loss`) is built with shard annotations at its
layout boundaries, compiled through the shard pipeline down to `mpi.*` and executed on
every rank. Rank 0 prints the batch accounting, the per-rank memory of the state and the
collectives per step, shows progress (loss, tokens/s), and writes to `--out`: loss.csv,
loss.png and params.npz (global arrays); `--emit-ir DIR` writes each stage of the
compiled step. Command-line and configuration problems: one line, exit code 1.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from shardc.tools.cli import ArgParser, UserError, run_tool, under_mpi

TOOL = "shardc-train"


def _arg_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog=TOOL, description="Train a small GPT with the sharded step compiled by shardc.")
    where = p.add_argument_group("ranks")
    where.add_argument("--np", type=int, metavar="N", help="launch `mpiexec -n N` on this command")
    where.add_argument("--simulate", type=int, metavar="N", help="run N ranks as threads of this process (no MPI)")
    lay = p.add_argument_group("sharding")
    lay.add_argument("--tp", type=int, default=1, help="tensor-parallel degree: must divide the ranks per host (default 1)")
    lay.add_argument("--zero", action=argparse.BooleanOptionalAction, default=None, help="split optimizer state and gradients over batch (default on)")
    lay.add_argument("--fsdp", action=argparse.BooleanOptionalAction, default=False, help="split stored parameters over batch too (needs ZeRO)")
    run = p.add_argument_group("training")
    run.add_argument("--steps", type=int, default=100)
    run.add_argument("--per-device-batch", type=int, default=8, help="sequences per data replica and microbatch")
    run.add_argument("--accum", type=int, default=1, help="gradient accumulation steps")
    run.add_argument("--lr", type=float, default=3e-3)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--eval-every", type=int, default=25, help="held-out loss every N steps (0: at the end)")
    model = p.add_argument_group("model")
    model.add_argument("--n-layer", type=int, default=2)
    model.add_argument("--n-head", type=int, default=4)
    model.add_argument("--n-embd", type=int, default=64)
    model.add_argument("--block-size", type=int, default=32)
    io = p.add_argument_group("files")
    io.add_argument("--data", metavar="FILE", help="a UTF-8 text file, char-level (default: the synthetic corpus)")
    io.add_argument("--out", metavar="DIR", default="shardc-train-out", help="loss.csv, loss.png, params.npz (default: %(default)s)")
    io.add_argument("--emit-ir", metavar="DIR", help="write each stage of the compiled step to DIR")
    io.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _check_args(a: argparse.Namespace) -> None:
    for name in ("steps", "per_device_batch", "accum", "tp", "n_layer", "n_head", "n_embd", "block_size"):
        if getattr(a, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be positive, got {getattr(a, name)}")
    for name in ("np", "simulate"):
        v = getattr(a, name)
        if v is not None and v < 1:
            raise UserError(f"--{name} must be positive, got {v}")
    if a.np is not None and a.simulate is not None:
        raise UserError("--np and --simulate exclude each other")
    if not a.lr > 0 or not math.isfinite(a.lr):
        raise UserError(f"--lr must be a positive number, got {a.lr}")
    if a.eval_every < 0:
        raise UserError(f"--eval-every must be non-negative, got {a.eval_every}")
    if a.fsdp and a.zero is False:
        raise UserError("--fsdp requires ZeRO: drop --no-zero")


def _launch(argv: Sequence[str], n: int) -> int:
    """Re-run this command under `mpiexec -n N` (without --np)."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise UserError("--np needs mpiexec on PATH")
    rest: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == "--np":
            skip = True
        elif not a.startswith("--np="):
            rest.append(a)
    cmd = [mpiexec, "-n", str(n), sys.executable, "-m", "shardc.tools.train", *rest]
    return subprocess.call(cmd)


# ---------------------------------------------------------------------------------------
# The job
# ---------------------------------------------------------------------------------------


def _configure(a: argparse.Namespace, world: int, ranks_per_host: int | None):
    """(config, grid, tokenizer, train data, held-out data); configuration errors as
    UserError, before anything is compiled or allocated."""
    from shardc.training.axis import ShardingConfigError, ShardingValidationError, validate_layouts
    from shardc.training.data import CharTokenizer, load_text, split, synthetic_corpus
    from shardc.training.gpt import GPTConfig, param_specs
    from shardc.training.mesh import GridError
    from shardc.training.trainer import TrainingConfig

    try:
        text = load_text(a.data) if a.data else synthetic_corpus(60000, a.seed)
    except OSError as e:
        raise UserError(f"cannot read '{a.data}': {e.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"cannot read '{a.data}': not UTF-8 text") from None
    try:
        if a.tp > world or world % a.tp:
            raise GridError(f"tp={a.tp} does not divide the {world} ranks")
        dp = world // a.tp
        tok = CharTokenizer.from_text(text, pad_to=math.lcm(8, dp))
        model = GPTConfig(a.n_layer, a.n_head, a.n_embd, a.block_size, tok.vocab_size)
        cfg = TrainingConfig(
            model, a.per_device_batch, a.accum, a.steps, a.lr, seed=a.seed, eval_every=a.eval_every
        ).shard(tp=a.tp, zero=True if a.zero is None else a.zero, fsdp=a.fsdp)
        grid = cfg.grid(world, ranks_per_host)
        validate_layouts(param_specs(model), cfg.plan, cfg.policy, grid)
    except ShardingValidationError as e:
        more = f" (and {len(e.failures) - 1} more)" if len(e.failures) > 1 else ""
        raise UserError(e.failures[0] + more) from None
    except (GridError, ShardingConfigError, ValueError) as e:
        raise UserError(str(e)) from None
    data = tok.encode(text)
    train, val = split(data, 0.1)
    if len(val) <= model.block_size or len(train) <= model.block_size:
        raise UserError(f"the data ({len(data)} tokens) is too short for block size {model.block_size}")
    return cfg, grid, tok, train, val


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.2f} MiB"


def _header(cfg, grid, world: int, program) -> str:
    from shardc.training.trainer import memory

    p = cfg.policy
    micro = cfg.microbatch(grid)
    mem = memory(cfg, grid)
    lines = [
        f"{TOOL}: {world} rank{'s' if world > 1 else ''}, grid {grid}, policy tp={p.tp} zero={p.zero} fsdp={p.fsdp}",
        f"  model: {cfg.model.n_layer} layers, {cfg.model.n_head} heads, n_embd {cfg.model.n_embd}, block {cfg.model.block_size}, vocab {cfg.model.vocab_size}",
        f"  global batch: {cfg.per_device_batch} per device x {grid.batch} data replica{'s' if grid.batch > 1 else ''} "
        f"x {cfg.accum} accumulation step{'s' if cfg.accum > 1 else ''} = {cfg.global_batch(grid)} sequences "
        f"({cfg.global_batch(grid) * cfg.model.block_size} tokens; microbatch {micro})",
        f"  per-rank state: params {_kib(mem.params)}, grads {_kib(mem.grads)}, optimizer {_kib(mem.opt_state)} (total {_kib(mem.total)})",
        f"  compiled the step through {len(program.stages) - 1} passes in {program.compile_seconds:.1f} s",
    ]
    for fn, counts in program.shard_collectives.items():
        text = ", ".join(f"{n} {k.split('.')[1]}" for k, n in sorted(counts.items())) or "none"
        text = text.replace("[0]", " over batch").replace("[1]", " over shard").replace("[0,1]", " over batch+shard")
        lines.append(f"  collectives in @{fn}: {text}")
    return "\n".join(lines)


class Progress:
    """A one-line progress bar on a terminal, a line per ~10% otherwise."""

    def __init__(self, steps: int, quiet: bool):
        self.steps, self.quiet = steps, quiet
        self.tty = sys.stdout.isatty()
        self.t0 = time.perf_counter()
        self.first: float | None = None

    def __call__(self, s) -> None:  # s: StepLog
        if self.first is None:
            self.first = s.loss
        if self.quiet:
            return
        width = 30
        done = int(width * s.step / self.steps)
        ev = f"  eval {s.eval_loss:.4f}" if s.eval_loss is not None else ""
        line = f"step {s.step:>{len(str(self.steps))}}/{self.steps} [{'=' * done}{' ' * (width - done)}] loss {s.loss:.4f}{ev}  {s.tokens_per_s:,.0f} tok/s"
        if self.tty:
            sys.stdout.write("\r" + line + ("\n" if s.step == self.steps else ""))
            sys.stdout.flush()
        elif s.step == 1 or s.step == self.steps or s.eval_loss is not None or s.step % max(1, self.steps // 10) == 0:
            print(line, flush=True)


def _write_outputs(out: Path, result, tok) -> list[str]:
    import numpy as np

    from shardc.training.plot import plot_losses

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "loss.csv", "w") as f:
        f.write("step,loss,eval_loss,lr,seconds,tokens_per_s\n")
        for s in result.log:
            ev = "" if s.eval_loss is None else f"{s.eval_loss:.6f}"
            f.write(f"{s.step},{s.loss:.6f},{ev},{s.lr:.6g},{s.seconds:.6f},{s.tokens_per_s:.1f}\n")
    plot_losses(out / "loss.png", result.losses, result.eval_losses)
    np.savez(out / "params.npz", **result.params)
    (out / "vocab.txt").write_text(tok.chars)
    return ["loss.csv", "loss.png", "params.npz", "vocab.txt"]


def _emit_ir(directory: str, program) -> None:
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
        for name, text in program.stage_texts():
            (d / name).write_text(text)
    except OSError as e:
        raise UserError(f"cannot write to '{directory}': {e.strerror}") from None


def _finish(a: argparse.Namespace, result, tok, progress: Progress) -> None:
    losses = result.losses
    tps = sum(s.tokens_per_s for s in result.log[1:]) / max(1, len(result.log) - 1) if len(result.log) > 1 else result.log[0].tokens_per_s
    evs = result.eval_losses
    ev = f", held-out {evs[-1][1]:.4f}" if evs else ""
    print(f"{TOOL}: loss {losses[0]:.4f} -> {losses[-1]:.4f}{ev} in {len(losses)} steps, {tps:,.0f} tokens/s")
    try:
        files = _write_outputs(Path(a.out), result, tok)
    except OSError as e:
        raise UserError(f"cannot write to '{a.out}': {e.strerror}") from None
    print(f"{TOOL}: wrote {', '.join(str(Path(a.out) / f) for f in files)}")


def _run_simulated(a: argparse.Namespace) -> int:
    from shardc.training.train import set_blas_threads
    from shardc.training.trainer import compile_program, train_simulated

    world = a.simulate or 1
    cfg, grid, tok, train, val = _configure(a, world, None)
    set_blas_threads(1)
    program = compile_program(cfg, grid, keep_text=bool(a.emit_ir))
    if a.emit_ir:
        _emit_ir(a.emit_ir, program)
    print(_header(cfg, grid, world, program), flush=True)
    progress = Progress(cfg.steps, a.quiet)
    result = train_simulated(cfg, train, world, val, progress, program)
    _finish(a, result, tok, progress)
    return 0


def _run_mpi(a: argparse.Namespace) -> int:
    from mpi4py import MPI

    from shardc.training.train import set_blas_threads
    from shardc.training.trainer import compile_program, ranks_per_host, train_mpi

    world = MPI.COMM_WORLD
    rank, n = world.Get_rank(), world.Get_size()
    error: str | None = None
    try:
        cfg, grid, tok, train, val = _configure(a, n, ranks_per_host(world))
    except UserError as e:
        error = str(e)
    errors = world.allgather(error)
    if any(e is not None for e in errors):
        if rank == 0:
            sys.stderr.write(f"{TOOL}: error: {next(e for e in errors if e is not None)}\n")
        return 1
    set_blas_threads(1)
    program = compile_program(cfg, grid, keep_text=bool(a.emit_ir) and rank == 0)
    if rank == 0:
        with _abort_on_user_error(world):
            if a.emit_ir:
                _emit_ir(a.emit_ir, program)
        print(_header(cfg, grid, n, program), flush=True)
    progress = Progress(cfg.steps, a.quiet)
    result = train_mpi(cfg, train, val, progress if rank == 0 else None, program)
    if rank == 0:
        assert result is not None
        with _abort_on_user_error(world):
            _finish(a, result, tok, progress)
    world.Barrier()
    return 0


@contextlib.contextmanager
def _abort_on_user_error(world) -> Iterator[None]:
    """Rank 0's file output failing ends the whole job (the others wait in collectives)."""
    try:
        yield
    except UserError as e:
        sys.stderr.write(f"{TOOL}: error: {e}\n")
        sys.stderr.flush()
        world.Abort(1)


def main(argv: Sequence[str] | None = None) -> int:
    return run_tool(TOOL, lambda: _main(list(sys.argv[1:] if argv is None else argv)))


def _main(argv: list[str]) -> int:
    args = _arg_parser().parse_args(argv)
    _check_args(args)
    if args.np is not None:
        if under_mpi():
            raise UserError("--np launches mpiexec: do not use it under mpiexec")
        return _launch(argv, args.np)
    if args.simulate is None and under_mpi():
        return _run_mpi(args)
    return _run_simulated(args)


if __name__ == "__main__":
    sys.exit(main())
