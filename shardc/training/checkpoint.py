"""Sharded, atomic training checkpoints; resume; reshard on load.

A checkpoint is a directory `step-NNNNNNNN/` under the checkpoint root:

    rank-00000.safetensors ...   one per rank: the pieces of the state that rank wrote
    manifest.json                written last: what makes the checkpoint complete

Each rank writes only pieces it holds, and every element of the state is written once:
an array's piece that several ranks hold (replicated over a mesh axis its partition spec
does not use) is cut further among those replicas along its longest dimension, so each
rank writes about 1/N of the sharded state and no rank gathers anything. The state is the
parameters (storage layout) and AdamW's two moments (update layout), under the state paths
`params/<name>`, `opt_state/mu/<name>`, `opt_state/nu/<name>`, `<name>` being the model's
parameter name (an FQN for a PyTorch module), and the buffers the step updates
(`buffers/<name>`: an imported module's BatchNorm running statistics, in their own dtype,
`program.state_buffers`). The gradient accumulator is zeroed every step, so it is not
state.

The manifest names, per array, its global shape, dtype, partition spec and the pieces
(file, offset, shape, crc32); plus the grid, policy and plan it was saved under, the model
config, the training configuration and its fingerprint, the step, the data position
(the batch RNG's state) and the loss history.

Atomic: the ranks write into `.tmp-step-NNNNNNNN-RUN/` (each file fsynced and renamed
into place), then, after the ranks agree that every write succeeded, rank 0 writes the
manifest there, fsyncs, and renames the directory to `step-NNNNNNNN/`; a kill at any point
leaves either the new checkpoint complete or only a temporary directory, which loading
never looks at. A write that fails (a full disk: `CheckpointDiskFull` names the path and
the bytes needed and free) removes the temporary directory and every rank raises the same
error; the previous checkpoints stay as they were.

Runs: each checkpoint's manifest names the run that wrote it (`RunInfo`: an id, where and
when it started); a resumed run keeps its checkpoint's run. The newest `keep` checkpoints
of the saving run are kept, those of other runs never touched (`foreign_checkpoints`
finds them, so a fresh run can refuse a directory that holds another's).

Checked before anything loads: `open_checkpoint` validates the manifest's whole schema
(step against the directory's name, world against the grid, every piece inside its array
and the pieces covering it exactly, the history and the batch RNG's state) and
`check_compatible` the model, the arrays' shapes and the training configuration, so
loading cannot fail halfway. Resuming from a directory of checkpoints skips a corrupt
newest one for the newest intact one (`Checkpoint.skipped` says which and why).

Loading on any grid and policy: each rank computes the slice it holds of every array in
its new layout and reads, from the files holding them, only the overlapping parts of the
pieces (safetensors slices are read lazily from the file). Integrity is checked before
training: every file's size on every rank (a stat), and every piece's crc32, the files
shared out among the new ranks so no rank reads the whole model.

Test hook (test-only): `SHARDC_TEST_CRASH_AT=RANK:STEP:PHASE` makes that rank SIGKILL
itself at step STEP, PHASE one of `step` (before the step's compute, the other ranks
then wait in its collectives), `save` (its shard file written, the manifest not) or
`manifest` (rank 0: the manifest written, the directory not yet renamed);
`RANK:STEP:PHASE:pause` makes it sleep there for a minute instead (a test stops the job
while it waits: in the middle of a save).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from shardc.training.axis import PartitionSpec
from shardc.training.mesh import MESH_AXES, Grid

FORMAT = "shardc-checkpoint/1"
MANIFEST = "manifest.json"
CRASH_ENV = "SHARDC_TEST_CRASH_AT"
_STEP_DIR = re.compile(r"^step-(\d{8})$")
# Training fields a resumed run must share with the checkpoint for its trajectory to be
# the one it continues (the fingerprint covers these); steps, batch sizes, evaluation
# and the policy may change.
TRAJECTORY_FIELDS = ("lr", "min_lr", "warmup_steps", "seed", "dtype", "opt")


class CheckpointError(Exception):
    """A missing, incomplete, corrupt or incompatible checkpoint (one line). `agreed`:
    every rank raises it together (no rank waits in a collective), so the job can end
    with one line instead of an abort."""

    agreed = False


class CheckpointCorrupt(CheckpointError):
    """A checkpoint whose own contents are damaged (not one that is merely incompatible
    with this run): resuming from a directory falls back past it."""


class CheckpointDiskFull(CheckpointError):
    """A save that ran out of space (raised on every rank, the partial files removed)."""

    agreed = True


@dataclass(frozen=True)
class RunInfo:
    """Which run wrote a checkpoint: a random id, the host and UTC time it started."""

    id: str
    host: str = ""
    started: str = ""

    @staticmethod
    def new() -> RunInfo:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        return RunInfo(uuid.uuid4().hex[:12], socket.gethostname(), now)

    def describe(self) -> str:
        where = f" on {self.host}" if self.host else ""
        return f"run {self.id} (started {self.started or 'at an unknown time'}{where})"


@dataclass(frozen=True)
class CheckpointOptions:
    """Where and how often to save: every `every` steps (0: only at the end) and at the
    end, keeping the newest `keep` of this run. `meta` is recorded and must match on
    resume (the CLI puts its tokenizer's fingerprint there); `run` names the run in each
    manifest (a resumed run passes its checkpoint's)."""

    directory: Path
    every: int = 0
    keep: int = 2
    meta: Mapping[str, str] = field(default_factory=dict)
    run: RunInfo = field(default_factory=RunInfo.new)

    def due(self, step: int, last: int) -> bool:
        return step == last or (self.every > 0 and step % self.every == 0)


# ---------------------------------------------------------------------------------------
# The data position: the batch stream of `data.batches`, with a state to save
# ---------------------------------------------------------------------------------------


class BatchStream:
    """The (tokens, targets) windows `shardc.training.data.batches` yields, the same
    draws from the same RNG, with `state()` / `restore()` for checkpoints."""

    def __init__(self, data: np.ndarray, batch: int, block_size: int, seed: int = 0):
        self.data = np.asarray(data, dtype=np.int32)
        if len(self.data) <= block_size:
            raise ValueError(f"the data ({len(self.data)} tokens) must be longer than block_size ({block_size})")
        self.batch, self.block_size = batch, block_size
        self.rng = np.random.default_rng(seed)
        self.position = 0
        self._offsets = np.arange(block_size)

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self

    def __next__(self) -> tuple[np.ndarray, np.ndarray]:
        starts = self.rng.integers(0, len(self.data) - self.block_size, size=self.batch)
        idx = starts[:, None] + self._offsets[None, :]
        self.position += 1
        return self.data[idx], self.data[idx + 1]

    def state(self) -> dict[str, Any]:
        return {"position": self.position, "rng": self.rng.bit_generator.state}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.rng.bit_generator.state = dict(state["rng"])
        self.position = int(state["position"])


# ---------------------------------------------------------------------------------------
# Who writes what
# ---------------------------------------------------------------------------------------


def held_slice(shape: Sequence[int], spec: PartitionSpec, grid: Grid, rank: int) -> tuple[slice, ...]:
    from shardc.training.spmd import local_slices

    return tuple(slice(s.start or 0, n if s.stop is None else s.stop) for s, n in zip(local_slices(shape, spec, grid, rank), shape))


def write_slice(shape: Sequence[int], spec: PartitionSpec, grid: Grid, rank: int) -> tuple[slice, ...] | None:
    """The global slice of an array this rank writes (None: nothing). The replicas of a
    held piece (ranks differing only on mesh axes the spec leaves unused) split it
    along its longest dimension, so each element is written by exactly one rank."""
    held = held_slice(shape, spec, grid, rank)
    used = {a for d in spec if d for a in d}
    coords = grid.coords(rank)
    replicas, index = 1, 0
    for a in MESH_AXES:
        if a not in used:
            index = index * grid.axis_size(a) + coords[Grid.axis_index(a)]
            replicas *= grid.axis_size(a)
    if replicas == 1:
        return held
    lengths = [s.stop - s.start for s in held]
    if not lengths:  # a scalar: the first replica writes it
        return held if index == 0 else None
    d = int(np.argmax(lengths))
    n = lengths[d]
    lo, hi = held[d].start + n * index // replicas, held[d].start + n * (index + 1) // replicas
    if lo == hi:
        return None
    return (*held[:d], slice(lo, hi), *held[d + 1 :])


def state_arrays(program: Any) -> list[tuple[str, tuple[int, ...], PartitionSpec]]:
    """(state path, global shape, partition spec) of every saved array, in the order of
    `state_of`: parameters, then mu, then nu, then the buffers the step updates."""
    out = []
    for kind in ("params", "opt_state/mu", "opt_state/nu"):
        for s, lay in zip(program.specs, program.layouts):
            out.append((f"{kind}/{s.path}", tuple(s.shape), lay.storage if kind == "params" else lay.update))
    for name, shape, spec, _ in getattr(program, "state_buffers", ()):
        out.append((f"buffers/{name}", tuple(shape), spec))
    return out


def array_dtype(program: Any, path: str) -> str:
    """The dtype a state array is saved in: the training dtype, a buffer's own."""
    for name, _, _, dtype in getattr(program, "state_buffers", ()):
        if path == f"buffers/{name}":
            return dtype
    return program.dtype


def state_of(state: Any) -> list[np.ndarray]:
    return [np.asarray(a) for a in (*state.params, *state.mu, *state.nu, *getattr(state, "state_buffers", ()))]


# ---------------------------------------------------------------------------------------
# Files: fsync, rename
# ---------------------------------------------------------------------------------------


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a `.part` file (fsynced, renamed); a full disk is a
    CheckpointDiskFull naming the path and the bytes needed and free, the part removed."""
    part = path.with_name(path.name + ".part")
    try:
        with open(part, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            part.unlink()
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise CheckpointDiskFull(f"no space left on the device of {path}: the file needs {len(data):,} bytes, {_free(path.parent):,} are free") from None
        raise CheckpointError(f"cannot write {path}: {e.strerror or e}") from None


def _free(directory: Path) -> int:
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return 0


def crash_point(rank: int, step: int, phase: str) -> None:
    """The test-only hook of `CRASH_ENV` (see the module docstring)."""
    hook = os.environ.get(CRASH_ENV, "")
    if hook == f"{rank}:{step}:{phase}":
        os.kill(os.getpid(), signal.SIGKILL)
    elif hook == f"{rank}:{step}:{phase}:pause":
        import time

        time.sleep(60)


def step_dir(root: Path, step: int) -> Path:
    return Path(root) / f"step-{step:08d}"


def temp_dir(root: Path, step: int, run: RunInfo) -> Path:
    """Where a save of `step` by `run` is written before it is complete: unique per run,
    so two jobs never share one."""
    return Path(root) / f".tmp-step-{step:08d}-{run.id}"


def remove_interrupted(root: Path) -> list[Path]:
    """Remove the temporary directories interrupted saves left (any run's). Only for a
    job that holds the directory (`shardc.training.outdir.DirectoryLock`): another job's
    save in progress looks the same."""
    gone = []
    if Path(root).is_dir():
        for d in Path(root).iterdir():
            if d.name.startswith((".tmp-step-", ".old-step-")):
                shutil.rmtree(d, ignore_errors=True)
                gone.append(d)
    return gone


def _rank_file(rank: int) -> str:
    return f"rank-{rank:05d}.safetensors"


# ---------------------------------------------------------------------------------------
# Save
# ---------------------------------------------------------------------------------------


def describe(cfg: Any) -> dict[str, Any]:
    """The manifest's record of a TrainingConfig: model, training fields, policy, plan."""
    training = {
        "per_device_batch": cfg.per_device_batch, "accum": cfg.accum, "steps": cfg.steps,
        "lr": cfg.lr, "min_lr": cfg.schedule().min_lr, "warmup_steps": cfg.warmup_steps,
        "seed": cfg.seed, "dtype": cfg.dtype, "opt": asdict(cfg.opt),
        "eval_every": cfg.eval_every, "eval_batches": cfg.eval_batches,
    }
    plan = {"tp_rules": dict(cfg.plan.tp_rules), "zero_rules": None if cfg.plan.zero_rules is None else dict(cfg.plan.zero_rules)}
    policy = asdict(cfg.policy)
    if not cfg.policy.overrides:  # a plain policy's record as before per-group overrides
        del policy["overrides"]
    return {"model": asdict(cfg.model), "training": training, "policy": policy, "plan": plan, "fingerprint": fingerprint(training)}


def fingerprint(training: Mapping[str, Any]) -> str:
    """sha256 of the trajectory-defining training fields."""
    key = {k: training[k] for k in TRAJECTORY_FIELDS}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def save_rank(
    opts: CheckpointOptions,
    cfg: Any,
    state: Any,
    stream: BatchStream,
    history: Sequence[Mapping[str, Any]],
    comm: Any,
) -> Path:
    """Save this rank's pieces of the training state at `state.step`; every rank of the
    grid calls it (collectively: barriers). Rank 0 writes the manifest last and renames
    the checkpoint into place; returns its directory."""
    from safetensors.numpy import save as st_save

    program, rank, step = state.p, state.rank, state.step
    root = Path(opts.directory)
    tmp, final = temp_dir(root, step, opts.run), step_dir(root, step)
    comm.barrier()
    error = ""
    if rank == 0:
        try:
            root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)  # this run's own interrupted save of this step
            tmp.mkdir()
        except OSError as e:
            error = _save_error(e, tmp)
    _agree(comm, program.grid, error, tmp, rank)
    tensors: dict[str, np.ndarray] = {}
    pieces: dict[str, dict[str, Any]] = {}
    for (path, shape, spec), local in zip(state_arrays(program), state_of(state)):
        sl = write_slice(shape, spec, program.grid, rank)
        if sl is None:
            continue
        held = held_slice(shape, spec, program.grid, rank)
        piece = np.require(local[tuple(slice(s.start - h.start, s.stop - h.start) for s, h in zip(sl, held))], requirements="C")  # 0-d stays 0-d
        tensors[path] = piece
        pieces[path] = {"offset": [s.start for s in sl], "shape": list(piece.shape), "crc32": zlib.crc32(piece.data)}
    name = _rank_file(rank)
    try:
        blob = st_save(tensors, metadata={"format": FORMAT, "rank": str(rank), "step": str(step)}) if tensors else b""
        if tensors:
            _write_atomic(tmp / name, blob)
        index = {"file": name if tensors else None, "size": len(blob), "pieces": pieces}
        _write_atomic(tmp / f"rank-{rank:05d}.json", json.dumps(index).encode())
    except CheckpointError as e:
        error = str(e)
    crash_point(rank, step, "save")
    _agree(comm, program.grid, error, tmp, rank)
    if rank == 0:
        try:
            _write_manifest(tmp, cfg, program, step, stream, history, opts.meta, opts.run)
        except CheckpointError as e:
            error = str(e)
    _agree(comm, program.grid, error, tmp, rank)
    if rank == 0:
        crash_point(rank, step, "manifest")
        if final.exists():  # a checkpoint of this step already (a corrupt one resumed past): replace it
            old = root / f".old-step-{step:08d}-{opts.run.id}"
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, final)
        _fsync_dir(root)
        prune(root, opts.keep, opts.run.id)
    comm.barrier()
    return final


def _save_error(e: OSError, path: Path) -> str:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left on the device of {path} ({_free(path.parent):,} bytes free)"
    return f"cannot write {path}: {e.strerror or e}"


_MESSAGE_BYTES = 1024


def _agree(comm: Any, grid: Grid, error: str, tmp: Path, rank: int) -> None:
    """Every rank learns whether any rank's write failed; if one did, rank 0 removes the
    partial checkpoint and every rank raises the first failing rank's message (a
    CheckpointDiskFull: the job ends with that one line, the last checkpoint intact)."""
    mine = np.zeros(_MESSAGE_BYTES, np.uint8)
    raw = error.encode()[: _MESSAGE_BYTES - 1]
    mine[: len(raw)] = np.frombuffer(raw, np.uint8)
    everyone = np.asarray(comm.all_gather(mine, grid.shape, (0, 1), 0)).reshape(-1, _MESSAGE_BYTES)
    failed = [bytes(m).rstrip(b"\0").decode(errors="replace") for m in everyone if m[0]]
    if not failed:
        return
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    comm.barrier()
    raise CheckpointDiskFull(f"checkpoint not saved: {failed[0]}; the partial files are removed and the earlier checkpoints are intact")


def _write_manifest(tmp: Path, cfg: Any, program: Any, step: int, stream: BatchStream, history: Sequence[Mapping[str, Any]], meta: Mapping[str, str], run: RunInfo) -> None:
    grid = program.grid
    indexes = [json.loads((tmp / f"rank-{r:05d}.json").read_text()) for r in range(grid.size)]
    arrays: dict[str, Any] = {}
    for path, shape, spec in state_arrays(program):
        chunks = [
            {"file": ix["file"], **ix["pieces"][path]} for ix in indexes if path in ix["pieces"]
        ]
        arrays[path] = {"shape": list(shape), "dtype": array_dtype(program, path), "spec": [list(d) if d else None for d in spec], "pieces": chunks}
    manifest = {
        "format": FORMAT,
        "run": asdict(run),
        "step": step,
        "world": grid.size,
        "grid": {"batch": grid.batch, "shard": grid.shard},
        **describe(cfg),
        "meta": dict(meta),
        "progress": {"data": stream.state(), "lr": history[-1]["lr"] if history else None, "history": list(history)},
        "files": {ix["file"]: ix["size"] for ix in indexes if ix["file"]},
        "arrays": arrays,
    }
    for r in range(grid.size):
        (tmp / f"rank-{r:05d}.json").unlink()
    _write_atomic(tmp / MANIFEST, json.dumps(manifest, indent=1).encode())
    _fsync_dir(tmp)


def complete_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """(step, directory) of the complete checkpoints under `root`, oldest first."""
    out = []
    if root.is_dir():
        for d in root.iterdir():
            m = _STEP_DIR.match(d.name)
            if m and (d / MANIFEST).is_file():
                out.append((int(m.group(1)), d))
    return sorted(out)


def run_of(directory: Path) -> RunInfo | None:
    """The run a checkpoint names in its manifest (None: unreadable, or saved before
    manifests named runs)."""
    try:
        run = json.loads((Path(directory) / MANIFEST).read_text()).get("run")
        return RunInfo(str(run["id"]), str(run.get("host", "")), str(run.get("started", "")))
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None


def prune(root: Path, keep: int, run_id: str | None = None) -> None:
    """Keep the newest `keep` checkpoints of run `run_id` (by step); other runs' are never
    touched (`run_id` None: every checkpoint counts)."""
    mine = [(s, d) for s, d in complete_checkpoints(root) if run_id is None or getattr(run_of(d), "id", None) == run_id]
    for _, d in mine[: -keep if keep > 0 else None]:
        shutil.rmtree(d, ignore_errors=True)


def foreign_checkpoints(root: Path, run_id: str | None) -> list[tuple[int, Path, RunInfo | None]]:
    """(step, directory, run) of the complete checkpoints under `root` that run `run_id`
    did not write (None: every one)."""
    out = []
    for step, d in complete_checkpoints(root):
        run = run_of(d)
        if run_id is None or run is None or run.id != run_id:
            out.append((step, d, run))
    return out


def describe_foreign(found: Sequence[tuple[int, Path, RunInfo | None]]) -> str:
    """"run X (started ...): steps 35, 40" for each run among `found`."""
    by_run: dict[str, list[int]] = {}
    for step, _, run in found:
        by_run.setdefault(run.describe() if run else "an unnamed run", []).append(step)
    return "; ".join(f"{who}: step{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))}" for who, steps in by_run.items())


def resume_hint(root: Path) -> str:
    """Where `--resume` would continue from, for the line that says a job stopped."""
    found = complete_checkpoints(Path(root))
    if not found:
        return "no checkpoint was saved yet: --resume would start over"
    step, d = found[-1]
    return f"--resume continues from step {step} ({d})"


def export_safetensors(params: Mapping[str, np.ndarray], path: str | Path) -> None:
    """The global parameters as one safetensors file, keyed by the model's names (FQNs),
    so `model.load_state_dict(safetensors.torch.load_file(path))` takes them. 0-d tensors
    (BatchNorm's `num_batches_tracked`) keep their shape: `np.ascontiguousarray` alone
    would give them one dimension."""
    from safetensors.numpy import save as st_save

    tensors = {k: np.ascontiguousarray(v).reshape(np.shape(v)) for k, v in params.items()}
    _write_atomic(Path(path), st_save(tensors, metadata={"format": "pt"}))


# ---------------------------------------------------------------------------------------
# Open, check, load
# ---------------------------------------------------------------------------------------


@dataclass
class Checkpoint:
    """A complete checkpoint's manifest, read and checked."""

    directory: Path
    manifest: dict[str, Any]
    skipped: list[str] = field(default_factory=list)  # corrupt newer checkpoints passed over, one line each

    @property
    def run(self) -> RunInfo | None:
        r = self.manifest.get("run")
        return RunInfo(r["id"], r.get("host", ""), r.get("started", "")) if isinstance(r, dict) else None

    @property
    def step(self) -> int:
        return int(self.manifest["step"])

    @property
    def progress(self) -> dict[str, Any]:
        return self.manifest["progress"]

    def fail(self, what: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {self.directory}: {what}")

    def corrupt(self, what: str) -> CheckpointCorrupt:
        return CheckpointCorrupt(f"checkpoint {self.directory}: {what}")

    @property
    def files(self) -> list[str]:
        return sorted(self.manifest["files"])


def find(path: str | Path) -> Path:
    """The checkpoint `path` names: itself when it holds a manifest, else the newest
    complete checkpoint under it."""
    p = Path(path)
    if (p / MANIFEST).is_file():
        return p
    if _STEP_DIR.match(p.name) and p.is_dir():
        raise CheckpointError(f"checkpoint {p} is incomplete: it has no {MANIFEST} (a save was interrupted)")
    if not p.is_dir():
        raise CheckpointError(f"no checkpoint at {p}: no such directory")
    found = complete_checkpoints(p)
    if not found:
        raise CheckpointError(f"no complete checkpoint in {p}")
    return found[-1][1]


def open_checkpoint(path: str | Path) -> Checkpoint:
    """Read and validate the manifest of the checkpoint `path` names (see `find`)."""
    return read_checkpoint(find(path))


def read_checkpoint(d: Path) -> Checkpoint:
    """Read and validate the manifest of checkpoint directory `d` (CheckpointCorrupt
    naming the first problem)."""
    try:
        manifest = json.loads((d / MANIFEST).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CheckpointCorrupt(f"checkpoint {d}: {MANIFEST} is unreadable or corrupt ({e})") from None
    ck = Checkpoint(d, manifest)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ck.corrupt(f"{MANIFEST} is not a {FORMAT} manifest")
    validate_manifest(ck)
    return ck


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def validate_manifest(ck: Checkpoint) -> None:
    """The manifest's schema and its internal consistency: anything loading relies on."""
    m = ck.manifest
    for key, kind in (("step", int), ("world", int), ("grid", dict), ("model", dict), ("training", dict), ("fingerprint", str), ("progress", dict), ("files", dict), ("arrays", dict), ("meta", dict)):
        if not isinstance(m.get(key), kind) or (kind is int and isinstance(m[key], bool)):
            raise ck.corrupt(f"{MANIFEST} is corrupt: {key!r} is missing or not a{'n' if kind is int else ''} {kind.__name__}")
    if "run" in m and not (isinstance(m["run"], dict) and isinstance(m["run"].get("id"), str) and m["run"]["id"]):
        raise ck.corrupt(f"{MANIFEST} is corrupt: 'run' has no id")
    step = m["step"]
    named = _STEP_DIR.match(ck.directory.name)
    if step < 0 or (named and int(named.group(1)) != step):
        raise ck.corrupt(f"{MANIFEST} says step {step}, the directory's name says {int(named.group(1)) if named else '?'}")
    grid = m["grid"]
    if not all(_int(grid.get(a)) and grid[a] >= 1 for a in MESH_AXES):
        raise ck.corrupt(f"{MANIFEST} is corrupt: grid {grid} is not a (batch, shard) grid of positive sizes")
    if m["world"] != grid["batch"] * grid["shard"]:
        raise ck.corrupt(f"{MANIFEST} says world {m['world']}, its grid (batch={grid['batch']}, shard={grid['shard']}) has {grid['batch'] * grid['shard']} ranks")
    # A checkpoint is data: the files it names stay inside its directory (rank files only).
    for name, size in m["files"].items():
        if not re.fullmatch(r"rank-\d{5}\.safetensors", name) or int(name[5:10]) >= m["world"]:
            raise ck.corrupt(f"{MANIFEST} is corrupt: {ascii(name)} is not one of its rank files")
        if not _int(size) or size < 0:
            raise ck.corrupt(f"{MANIFEST} is corrupt: the size of {name} is {size!r}")
    for path, a in m["arrays"].items():
        _validate_array(ck, path, a)
    _validate_progress(ck)


def _validate_array(ck: Checkpoint, path: str, a: Any) -> None:
    files = ck.manifest["files"]
    if not isinstance(a, dict) or not isinstance(a.get("shape"), list) or not all(_int(n) and n >= 0 for n in a["shape"]):
        raise ck.corrupt(f"{MANIFEST} is corrupt: array {path} has no valid shape")
    shape = a["shape"]
    if a.get("dtype") not in ("float32", "float64", "float16", "bfloat16", "int64", "int32"):
        raise ck.corrupt(f"{MANIFEST} is corrupt: array {path} has dtype {a.get('dtype')!r}")
    spec = a.get("spec")
    if not isinstance(spec, list) or len(spec) != len(shape) or not all(d is None or (isinstance(d, list) and all(x in MESH_AXES for x in d)) for d in spec):
        raise ck.corrupt(f"{MANIFEST} is corrupt: array {path} has partition spec {spec!r}")
    pieces = a.get("pieces")
    if not isinstance(pieces, list):
        raise ck.corrupt(f"{MANIFEST} is corrupt: array {path} lists no pieces")
    boxes = []
    for p in pieces:
        ok = (
            isinstance(p, dict) and isinstance(p.get("file"), str) and p["file"] in files
            and isinstance(p.get("offset"), list) and isinstance(p.get("shape"), list)
            and len(p["offset"]) == len(shape) == len(p["shape"]) and _int(p.get("crc32"))
            and all(_int(o) and _int(n) and o >= 0 and n >= 0 and o + n <= full for o, n, full in zip(p["offset"], p["shape"], shape))
        )
        if not ok:
            raise ck.corrupt(f"{MANIFEST} is corrupt: a piece of {path} ({_short(p)}) does not fit its shape {shape} or names no rank file")
        boxes.append((p["offset"], p["shape"]))
    covered = sum(int(np.prod(n)) for _, n in boxes)
    if covered != int(np.prod(shape)) or _overlap(boxes):
        raise ck.corrupt(f"{MANIFEST} is corrupt: the pieces of {path} do not cover its shape {shape} exactly once")


def _short(x: Any) -> str:
    text = json.dumps(x)
    return text if len(text) <= 120 else text[:117] + "..."


def _overlap(boxes: Sequence[tuple[Sequence[int], Sequence[int]]]) -> bool:
    for i, (o1, n1) in enumerate(boxes):
        for o2, n2 in boxes[i + 1 :]:
            if all(max(a, b) < min(a + m, b + k) for a, m, b, k in zip(o1, n1, o2, n2)) and all(n1) and all(n2):
                return True
    return False


def _validate_progress(ck: Checkpoint) -> None:
    """The data position, the loss history (steps 1..step) and the batch RNG's state."""
    prog, step = ck.manifest["progress"], ck.manifest["step"]
    history = prog.get("history")
    if not isinstance(history, list) or len(history) != step:
        raise ck.corrupt(f"{MANIFEST} is corrupt: the loss history has {len(history) if isinstance(history, list) else 'no'} entries for step {step}")
    for i, e in enumerate(history, 1):
        ok = isinstance(e, dict) and e.get("step") == i and all(_number(e.get(k)) for k in ("loss", "lr", "seconds", "tokens_per_s"))
        ok = ok and (e.get("eval_loss") is None or _number(e["eval_loss"])) and set(e) <= {"step", "loss", "lr", "seconds", "tokens_per_s", "eval_loss"}
        if not ok:
            raise ck.corrupt(f"{MANIFEST} is corrupt: entry {i} of the loss history is {_short(e)}")
    data = prog.get("data")
    if not isinstance(data, dict) or not _int(data.get("position")) or data["position"] < 0:
        raise ck.corrupt(f"{MANIFEST} is corrupt: the data position is {_short(data)}")
    if "rng" in data:
        try:
            np.random.default_rng().bit_generator.state = dict(data["rng"])
        except (TypeError, ValueError, KeyError, OverflowError) as e:
            raise ck.corrupt(f"{MANIFEST} is corrupt: the batch RNG's state is not a generator's state ({e})") from None


def check_compatible(ck: Checkpoint, cfg: Any, meta: Mapping[str, str] | None = None, arrays: Sequence[tuple[str, Sequence[int]]] | None = None) -> None:
    """Raise CheckpointError naming the first field where the run differs from the
    checkpoint: the model config, the vocabulary (meta), the trajectory fields, the
    arrays (`arrays`: this model's state paths and shapes), a step past `cfg.steps`."""
    if ck.step > cfg.steps:
        raise ck.fail(f"it is at step {ck.step}, past this run's last step {cfg.steps} (--steps): train to step {ck.step} or beyond to continue it")
    mine = describe(cfg)
    for k, theirs in ck.manifest["model"].items():
        here = mine["model"].get(k)
        if here != theirs:
            raise ck.fail(f"saved for a different model: {k} is {theirs} there, {here} here")
    if arrays is not None:  # the same model: arrays that disagree with it are damage
        saved = ck.manifest["arrays"]
        for path, shape in arrays:
            if path not in saved:
                raise ck.corrupt(f"{MANIFEST} is corrupt: it holds no array {path}")
            if saved[path]["shape"] != list(shape):
                raise ck.corrupt(f"{MANIFEST} is corrupt: array {path} has shape {saved[path]['shape']}, this model's is {list(shape)}")
        extra = sorted(set(saved) - {p for p, _ in arrays})
        if extra:
            raise ck.corrupt(f"{MANIFEST} is corrupt: it holds array {extra[0]}, which this model does not have")
    for k, v in (meta or {}).items():
        if ck.manifest["meta"].get(k) != v:
            raise ck.fail(f"saved with a different {k} (this run's does not match the checkpoint's)")
    if ck.manifest["fingerprint"] != mine["fingerprint"]:
        for k in TRAJECTORY_FIELDS:
            theirs, here = ck.manifest["training"].get(k), mine["training"][k]
            if theirs != here:
                raise ck.fail(f"saved with a different training configuration: {k} is {theirs} there, {here} here")
        raise ck.fail("the training configuration's fingerprint does not match")


def check_files(ck: Checkpoint) -> None:
    """Every file the manifest names is there with its size (a stat per file)."""
    for name, size in ck.manifest["files"].items():
        f = ck.directory / name
        if not f.is_file():
            raise ck.corrupt(f"{name} is missing")
        got = f.stat().st_size
        if got != size:
            raise ck.corrupt(f"{name} is truncated ({got} of {size} bytes)" if got < size else f"{name} has {got} bytes, the manifest says {size}")


def verify_share(ck: Checkpoint, rank: int, world: int) -> int:
    """Check the crc32 of every piece in the files of this rank's share (file i goes to
    rank i mod world); returns the bytes read."""
    read = 0
    mine = set(ck.files[rank::world])
    for path, a in ck.manifest["arrays"].items():
        for p in a["pieces"]:
            if p["file"] not in mine:
                continue
            x = _read(ck, p["file"], path, None)
            read += x.nbytes
            if list(x.shape) != p["shape"] or str(x.dtype) != a["dtype"]:
                raise ck.corrupt(f"{p['file']}: {path} is {x.dtype}{list(x.shape)}, the manifest says {a['dtype']}{p['shape']}")
            if zlib.crc32(np.ascontiguousarray(x).data) != p["crc32"]:
                raise ck.corrupt(f"checksum mismatch in {p['file']} ({path})")
    return read


def _read(ck: Checkpoint, file: str, key: str, sl: tuple[slice, ...] | None) -> np.ndarray:
    from safetensors import safe_open

    try:
        with safe_open(str(ck.directory / file), framework="numpy") as f:
            return f.get_tensor(key) if sl is None else f.get_slice(key)[sl]
    except Exception as e:  # noqa: BLE001 - safetensors' errors: a corrupt or foreign file
        raise ck.corrupt(f"{file} is corrupt ({e})") from None


@dataclass
class LoadedState:
    params: list[np.ndarray]
    mu: list[np.ndarray]
    nu: list[np.ndarray]
    step: int
    bytes_read: int
    buffers: list[np.ndarray] = field(default_factory=list)
    """The buffers the step updates (`program.state_buffers`), local pieces."""


class _Files:
    """The checkpoint's files, each opened once (its header parsed once) for all the
    slices read from it."""

    def __init__(self, ck: Checkpoint, stack: contextlib.ExitStack):
        self.ck, self.stack = ck, stack
        self.open: dict[str, Any] = {}

    def read(self, file: str, key: str, sl: tuple[slice, ...]) -> np.ndarray:
        from safetensors import safe_open

        try:
            f = self.open.get(file)
            if f is None:
                f = self.open[file] = self.stack.enter_context(safe_open(str(self.ck.directory / file), framework="numpy"))
            return f.get_slice(key)[sl]
        except Exception as e:  # noqa: BLE001 - safetensors' errors: a corrupt or foreign file
            raise self.ck.fail(f"{file} is corrupt ({e})") from None


def load_rank(ck: Checkpoint, program: Any, rank: int) -> LoadedState:
    """This rank's pieces of the saved state in `program`'s layouts (any grid/policy):
    only the overlaps of the saved pieces with the slices it holds are read."""
    with contextlib.ExitStack() as stack:
        return _load_rank(ck, program, rank, _Files(ck, stack))


def _load_rank(ck: Checkpoint, program: Any, rank: int, files: _Files) -> LoadedState:
    arrays = state_arrays(program)
    out: list[np.ndarray] = []
    read = 0
    for path, shape, spec in arrays:
        a = ck.manifest["arrays"].get(path)
        if a is None:
            raise ck.fail(f"it holds no array {path}")
        if a["shape"] != list(shape):
            raise ck.fail(f"array {path} has shape {a['shape']}, this model's is {list(shape)}")
        if a["dtype"] != array_dtype(program, path):
            raise ck.fail(f"array {path} is {a['dtype']}, this run trains in {program.dtype}")
        want = held_slice(shape, spec, program.grid, rank)
        local = np.empty(tuple(s.stop - s.start for s in want), dtype=np.dtype(a["dtype"]))
        filled = 0
        for p in a["pieces"]:
            lo = [max(w.start, o) for w, o in zip(want, p["offset"])]
            hi = [min(w.stop, o + n) for w, o, n in zip(want, p["offset"], p["shape"])]
            if any(h <= l for l, h in zip(lo, hi)):
                continue
            src = tuple(slice(l - o, h - o) for l, h, o in zip(lo, hi, p["offset"]))
            x = files.read(p["file"], path, src)
            dst = tuple(slice(l - w.start, h - w.start) for l, h, w in zip(lo, hi, want))
            if x.shape != local[dst].shape:
                raise ck.fail(f"{p['file']}: {path} does not match the manifest")
            local[dst] = x
            read += x.nbytes
            filled += x.size
        if filled != local.size:
            raise ck.fail(f"its pieces do not cover {path}")
        out.append(local)
    n = len(program.specs)
    return LoadedState(out[:n], out[n : 2 * n], out[2 * n : 3 * n], ck.step, read, out[3 * n :])


def run_options(opts: CheckpointOptions | None, ck: Checkpoint | None, bcast: Callable[[Any], Any] | None = None) -> CheckpointOptions | None:
    """The options a job saves with: a resumed run keeps its checkpoint's run, and under
    MPI (`bcast`: rank 0's value to every rank) every rank takes rank 0's, so all write
    into the same temporary directory."""
    if opts is None:
        return None
    run = ck.run if ck is not None and ck.run is not None else opts.run
    if bcast is not None:
        run = bcast(run)
    return replace(opts, run=run)


def model_arrays(model: Any) -> list[tuple[str, tuple[int, ...]]]:
    """The state paths and global shapes a checkpoint of the built-in GPT `model` holds."""
    from shardc.training.gpt import param_specs

    specs = param_specs(model)
    return [(f"{kind}/{s.path}", tuple(s.shape)) for kind in ("params", "opt_state/mu", "opt_state/nu") for s in specs]


def open_for_resume(
    path: str | Path,
    cfg: Any,
    meta: Mapping[str, str] | None,
    rank: int = 0,
    world: int = 1,
    allgather: Callable[[Any], list[Any]] | None = None,
    arrays: Sequence[tuple[str, Sequence[int]]] | None = None,
) -> Checkpoint:
    """Open the checkpoint to resume from and check it before anything trains: the
    manifest (`validate_manifest`) and against `cfg`, `meta` and `arrays`, every file's
    size, and this rank's share of the checksums (all of them when world is 1). With
    `allgather` (under MPI), the ranks agree: each raises the first problem any of them
    found. `path` a directory of checkpoints: a corrupt newest one is passed over for the
    newest intact one (`Checkpoint.skipped` says so); one that is merely incompatible
    with this run is an error."""
    p = Path(path)
    if (p / MANIFEST).is_file() or _STEP_DIR.match(p.name) or not p.is_dir():
        candidates = [find(p)]
    else:
        candidates = [d for _, d in reversed(complete_checkpoints(p))]
        if not candidates:
            raise CheckpointError(f"no complete checkpoint in {p}")
    skipped: list[str] = []
    for i, d in enumerate(candidates):
        error: tuple[bool, str] | None = None
        ck: Checkpoint | None = None
        try:
            ck = read_checkpoint(d)
            check_compatible(ck, cfg, meta, arrays)
            check_files(ck)
            verify_share(ck, rank, world)
        except CheckpointError as e:
            error = (isinstance(e, CheckpointCorrupt), str(e))
        if allgather is not None:
            error = next((e for e in allgather(error) if e is not None), None)
        if error is None:
            assert ck is not None
            ck.skipped = skipped
            return ck
        corrupt, message = error
        if not corrupt or i == len(candidates) - 1:
            raise (CheckpointCorrupt if corrupt else CheckpointError)(message)
        skipped.append(message)
    raise AssertionError("unreachable")


__all__ = [
    "CRASH_ENV",
    "MANIFEST",
    "BatchStream",
    "Checkpoint",
    "CheckpointCorrupt",
    "CheckpointDiskFull",
    "CheckpointError",
    "CheckpointOptions",
    "LoadedState",
    "RunInfo",
    "check_compatible",
    "check_files",
    "complete_checkpoints",
    "crash_point",
    "describe",
    "describe_foreign",
    "export_safetensors",
    "find",
    "fingerprint",
    "foreign_checkpoints",
    "held_slice",
    "load_rank",
    "model_arrays",
    "open_checkpoint",
    "open_for_resume",
    "prune",
    "read_checkpoint",
    "remove_interrupted",
    "resume_hint",
    "run_of",
    "run_options",
    "temp_dir",
    "validate_manifest",
    "save_rank",
    "state_arrays",
    "state_of",
    "step_dir",
    "verify_share",
    "write_slice",
]
