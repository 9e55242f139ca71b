"""The trainer: one `shardc-train` job, whichever model it trains.

A job owns what every model's training shares: the ranks (the MPI world or `--simulate N`
threads), the text and tokenizer, the checkpoint directory and `--resume`, the output
directory and its lock, `--emit-ir`, the header's batch accounting and collectives,
progress, the outputs (loss.csv, the plots, params.npz, model.safetensors, the
tokenizer) and the sample's lines. The model comes from a `ModelSource`: the built-in GPT
(`shardc.training.gpt_source.GPTSource`) or a PyTorch module
(`shardc.frontends.torch_source.TorchSource`, which `shardc.frontends.hf` feeds with
transformers models). A source builds its step program on the job's grid and policy and
runs it through the job's steps, calling back into the job for everything above, so
both report, checkpoint and write alike. `shardc.tools.train` parses the command line and
makes the one call, `run_job`.

Problems of the job's inputs or files are `JobError`s: one line, exit code 1.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

TOOL = "shardc-train"
"""The name every line of a job starts with."""


class JobError(Exception):
    """A command-line, input, configuration or file problem of a job: one line."""


class ModelSource(Protocol):
    """A model the trainer trains. `show_layouts` prints (on rank 0) the grid and every
    parameter's storage / compute / update layout, compiling nothing; `train` builds the
    step program (`@train_step`, `@adamw_step`, `@loss`) on the job's grid and policy,
    its parameters' layouts and initial state, runs the job's steps and exports the
    trained state through `Job.finish`. Both return the exit status; a JobError is the
    job's one-line error."""

    def show_layouts(self, job: Job) -> int: ...

    def train(self, job: Job) -> int: ...


@dataclass
class Job:
    """One job's settings (the parsed command line) and ranks: `comm` is the MPI
    communicator, or None for `--simulate` threads (or one process); `measure`, when
    set (`--auto`), is told when the step is compiled (`compiled`), so that what it
    measures is the training's."""

    settings: argparse.Namespace
    world: int
    rank: int = 0
    comm: Any = None
    measure: Any = None

    def compiled(self, untraced_bytes: int = 0) -> None:
        """Sources call this once the step program is compiled, before training;
        `untraced_bytes`: state numpy does not report (a torch module's parameters)."""
        if self.measure is not None:
            self.measure.compiled(trace=self.rank == 0, untraced_bytes=untraced_bytes)

    # -- data ----------------------------------------------------------------------------

    def text(self) -> str:
        """`--data` (UTF-8), or the synthetic corpus."""
        from shardc.training.data import load_text, synthetic_corpus

        a = self.settings
        try:
            return load_text(a.data) if a.data else synthetic_corpus(60000, a.seed)
        except OSError as e:
            raise JobError(f"cannot read '{a.data}': {e.strerror}") from None
        except UnicodeDecodeError:
            raise JobError(f"cannot read '{a.data}': not UTF-8 text") from None

    def tokenizer(self, text: str) -> Any:
        """The tokenizer of the run: its vocabulary padded to lcm(8, data replicas), so the
        embedding's vocab dimension divides over `batch` (ZeRO/FSDP split it)."""
        from shardc.training.mesh import GridError
        from shardc.training.tokenizer import make_tokenizer

        a = self.settings
        try:
            if a.tp > self.world or self.world % a.tp:
                raise GridError(f"tp={a.tp} does not divide the {self.world} ranks")
            return make_tokenizer(a.tokenizer, text, a.vocab_size, pad_to=math.lcm(8, self.world // a.tp))
        except ValueError as e:
            raise JobError(str(e)) from None

    def progress(self) -> Any:
        from shardc.training.progress import Progress

        a = self.settings
        progress = Progress(a.steps, a.quiet, every=a.log_every)
        return progress if self.measure is None else self.measure.watch(progress)

    # -- checkpoints and directories -------------------------------------------------------

    def checkpoint_options(self, tok: Any) -> tuple[Any, Path | None]:
        """The run's CheckpointOptions and the directory `--resume` names (or None); the
        tokenizer's fingerprint goes into the manifest, so a resume with another
        vocabulary is refused."""
        import hashlib

        from shardc.training.checkpoint import CheckpointOptions
        from shardc.training.tokenizer import tokenizer_to_json

        a = self.settings
        directory = Path(a.checkpoint_dir) if a.checkpoint_dir else Path(a.out) / "checkpoints"
        vocab = hashlib.sha256(tokenizer_to_json(tok).encode()).hexdigest()
        opts = CheckpointOptions(directory, a.checkpoint_every, a.keep, {"vocabulary": vocab})
        return opts, None if a.resume is None else (Path(a.resume) if a.resume else directory)

    def hold_directories(self, opts: Any) -> None:
        """Create and test `--out` and the checkpoint directory, lock them for this job's
        life, and clear the temporary directories interrupted saves left (safe: no other
        job holds them). Problems as one JobError line, before anything is compiled."""
        from shardc.training.checkpoint import remove_interrupted
        from shardc.training.outdir import DirectoryError, hold, prepare_directory

        a = self.settings
        try:
            out = prepare_directory(a.out, "--out")
            hold(out, "--out")
            ckdir = opts.directory
            if a.checkpoint_dir:
                prepare_directory(ckdir, "--checkpoint-dir")
                hold(ckdir, "--checkpoint-dir")
        except DirectoryError as e:
            raise JobError(str(e)) from None
        remove_interrupted(ckdir)

    def claim_checkpoints(self, opts: Any, ck: Any) -> Any:
        """The options this job saves with: its run (a resumed checkpoint's, else a new
        one). Checkpoints of other runs in the checkpoint directory refuse the job (their
        `--keep` and `--resume` would mix with this run's) unless `--overwrite` deletes
        them."""
        import dataclasses
        import shutil

        from shardc.training.checkpoint import RunInfo, describe_foreign, foreign_checkpoints

        run = ck.run if ck is not None and ck.run is not None else RunInfo.new()
        mine = run.id if ck is None or ck.run is not None else None  # an unnamed checkpoint's run: the unnamed ones
        found = [
            (s, d, r) for s, d, r in foreign_checkpoints(opts.directory, None)
            if (r.id if r else None) != mine and not (r is None and ck is not None)  # resuming: unreadable ones were passed over
        ]
        if found and not self.settings.overwrite:
            what = "continue" if ck is not None else "start"
            raise JobError(
                f"checkpoint directory {opts.directory} holds checkpoints of another run ({describe_foreign(found)}): "
                f"this run would {what} beside them; --resume continues the newest, --overwrite deletes them, or choose another --out or --checkpoint-dir"
            )
        for _, d, _ in found:
            shutil.rmtree(d, ignore_errors=True)
        if found:
            print(f"{TOOL}: --overwrite: deleted {len(found)} checkpoint{'s' if len(found) > 1 else ''} of another run ({describe_foreign(found)})", flush=True)
        return dataclasses.replace(opts, run=run)

    def say_resumed(self, ck: Any, cfg: Any, grid: Any) -> None:
        """Rank 0's lines about the checkpoint a run continues from (and the corrupt newer
        ones it passed over)."""
        m = ck.manifest
        for skipped in ck.skipped:
            print(f"{TOOL}: note: {skipped}: passed over for the newest intact checkpoint", flush=True)
        whose = ck.run.describe() if ck.run is not None else "a run saved before checkpoints named their run"
        print(f"{TOOL}: resuming from {ck.directory} (step {ck.step}, saved on {m['world']} rank{'s' if m['world'] != 1 else ''}, grid (batch={m['grid']['batch']}, shard={m['grid']['shard']})) of {whose}", flush=True)
        saved = m["training"]["per_device_batch"] * m["grid"]["batch"] * m["training"]["accum"]
        if saved != cfg.global_batch(grid):
            print(f"{TOOL}: note: the global batch is {cfg.global_batch(grid)}, the checkpoint's run had {saved} (--per-device-batch, --accum)", flush=True)

    # -- ranks agreeing --------------------------------------------------------------------

    def agreed(self, body: Callable[[], object]) -> bool:
        """Run `body` (on the ranks it does something on); False on every rank, rank 0
        saying the first JobError any rank raised, when one did."""
        error: str | None = None
        try:
            body()
        except JobError as e:
            error = str(e)
        errors = self.comm.allgather(error)
        first = next((e for e in errors if e is not None), None)
        if first is not None and self.comm.Get_rank() == 0:
            sys.stderr.write(f"{TOOL}: error: {first}\n")
            sys.stderr.flush()
        return first is None

    @contextlib.contextmanager
    def abort_on_error(self) -> Iterator[None]:
        """Under MPI, rank 0's file output failing ends the whole job (the others wait in
        collectives); alone, the JobError goes on."""
        if self.comm is None:
            yield
            return
        try:
            yield
        except JobError as e:
            sys.stderr.write(f"{TOOL}: error: {e}\n")
            sys.stderr.flush()
            self.comm.Abort(1)

    # -- outputs ---------------------------------------------------------------------------

    def emit_ir(self, program: Any) -> None:
        """`--emit-ir DIR`: each stage of the compiled step, one file each."""
        directory = self.settings.emit_ir
        d = Path(directory)
        try:
            d.mkdir(parents=True, exist_ok=True)
            for name, text in program.stage_texts():
                (d / name).write_text(text)
        except OSError as e:
            raise JobError(f"cannot write to '{directory}': {e.strerror}") from None

    def finish(self, result: Any, tok: Any, title: str, tensors: Any = None) -> None:
        """The summary line and the run's files under `--out`; `title` heads the plots,
        `tensors` (default: the parameters) go to model.safetensors."""
        if self.measure is not None:
            self.measure.trained()
        a = self.settings
        losses = result.losses
        tps = sum(s.tokens_per_s for s in result.log[1:]) / max(1, len(result.log) - 1) if len(result.log) > 1 else result.log[0].tokens_per_s
        evs = result.eval_losses
        ev = f", held-out {evs[-1][1]:.4f}" if evs else ""
        print(f"{TOOL}: loss {losses[0]:.4f} -> {losses[-1]:.4f}{ev} in {len(losses)} steps, {tps:,.0f} tokens/s")
        try:
            files = write_outputs(Path(a.out), result, tok, title, a.log_scale, tensors)
        except OSError as e:
            raise JobError(f"cannot write to '{a.out}': {e.strerror}") from None
        print(f"{TOOL}: wrote {', '.join(str(Path(a.out) / f) for f in files)}")

    # -- sampling --------------------------------------------------------------------------

    def prompt(self, tok: Any) -> list[int]:
        """`--prompt` as token ids (a newline when empty)."""
        from shardc.training.sample import prompt_ids

        try:
            return prompt_ids(tok, self.settings.prompt)
        except ValueError as e:
            raise JobError(f"--prompt: {e}") from None

    def sample_args(self, tok: Any) -> dict[str, Any]:
        """The sampler's keyword arguments from `--temperature/--top-k/--sample-seed`."""
        a = self.settings
        return dict(temperature=a.temperature, top_k=a.top_k or None, seed=a.sample_seed, n_valid=tok.n_tokens)

    def print_sample(self, tok: Any, ids: Any) -> None:
        a = self.settings
        k = f"top-k {a.top_k}" if a.top_k else "no top-k"
        print(f"{TOOL}: sample ({len(ids)} tokens, temperature {a.temperature:g}, {k}, seed {a.sample_seed}):")
        print(a.prompt + tok.decode(ids), flush=True)


def run_job(settings: argparse.Namespace, source: ModelSource, comm: Any = None, world: int | None = None, rank: int = 0, measure: Any = None) -> int:
    """The trainer's one entry: `source`'s layouts (`--show-layouts`) or its training, on
    the MPI communicator `comm` (its ranks) or, without one, on `world` ranks (default
    `--simulate N`, else 1) that `rank` belongs to. Under MPI a JobError is reported by
    rank 0 alone (every rank finds the same one); the job's directory locks are released
    at the end."""
    from shardc.training.outdir import release_all

    if comm is not None:
        world, rank = comm.Get_size(), comm.Get_rank()
    job = Job(settings, world or settings.simulate or 1, rank, comm, measure)
    try:
        return source.show_layouts(job) if settings.show_layouts else source.train(job)
    except JobError:
        if comm is not None and rank != 0:
            return 1
        raise
    finally:
        release_all()  # the job's directory locks (a process's exit drops them too)


def kib(n: int) -> str:
    """A byte count as KiB (below 1 MiB) or MiB."""
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.2f} MiB"


def accounting(cfg: Any, grid: Any, block_size: int, mem: Any) -> list[str]:
    """The header's batch accounting and per-rank memory lines (every source's)."""
    micro = cfg.microbatch(grid)
    return [
        f"  global batch: {cfg.per_device_batch} per device x {grid.batch} data replica{'s' if grid.batch > 1 else ''} "
        f"x {cfg.accum} accumulation step{'s' if cfg.accum > 1 else ''} = {cfg.global_batch(grid)} sequences "
        f"({cfg.global_batch(grid) * block_size} tokens; microbatch {micro})",
        f"  per-rank state: params {kib(mem.params)}, grads {kib(mem.grads)}, optimizer {kib(mem.opt_state)} (total {kib(mem.total)})",
    ]


def collective_lines(shard_collectives: Any) -> list[str]:
    """One header line per function: its shard collectives and their grid axes."""
    lines = []
    for fn, counts in shard_collectives.items():
        text = ", ".join(f"{n} {k.split('.')[1]}" for k, n in sorted(counts.items())) or "none"
        text = text.replace("[0]", " over batch").replace("[1]", " over shard").replace("[0,1]", " over batch+shard")
        lines.append(f"  collectives in @{fn}: {text}")
    return lines


def layouts_head(first: str, grid: Any, note: str = "") -> list[str]:
    """`--show-layouts`' first lines: `first`, the grid drawn, and what the three layouts
    are (`note` appended)."""
    from shardc.training.layout_view import grid_text
    from shardc.training.mesh import MESH_AXES

    return [
        first,
        "  " + grid_text(grid.shape, MESH_AXES).replace("\n", "\n  "),
        "storage: parameters between steps; compute: forward and backward; update: optimizer step, moments, gradients" + note,
    ]


def write_outputs(out: Path, result: Any, tok: Any, title: str, log_scale: bool = False, tensors: Any = None) -> list[str]:
    """The run's files (their names, the tokenizer's last); `title` heads the plots,
    `tensors` (default: the parameters) go to model.safetensors."""
    import numpy as np

    from shardc.training.checkpoint import export_safetensors
    from shardc.training.plot import plot_losses, plot_throughput

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "loss.csv", "w") as f:
        f.write("step,loss,eval_loss,lr,seconds,tokens_per_s\n")
        for s in result.log:
            ev = "" if s.eval_loss is None else f"{s.eval_loss:.6f}"
            f.write(f"{s.step},{s.loss:.6f},{ev},{s.lr:.6g},{s.seconds:.6f},{s.tokens_per_s:.1f}\n")
    plot_losses(out / "loss.png", result.losses, result.eval_losses, title, log_scale)
    plot_throughput(out / "tokens_per_s.png", [s.tokens_per_s for s in result.log], title)
    np.savez(out / "params.npz", allow_pickle=False, **result.params)
    export_safetensors(result.params if tensors is None else tensors, out / "model.safetensors")
    return ["loss.csv", "loss.png", "tokens_per_s.png", "params.npz", "model.safetensors", tok.save(out)]


def sharding_error_line(e: Any) -> str:
    """A ShardingValidationError as one line: its first failure and how many more."""
    more = f" (and {len(e.failures) - 1} more)" if len(e.failures) > 1 else ""
    return e.failures[0] + more


__all__ = [
    "TOOL", "Job", "JobError", "ModelSource", "accounting", "collective_lines", "kib",
    "layouts_head", "run_job", "sharding_error_line", "write_outputs",
]
