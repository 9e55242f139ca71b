"""`shardc-train --torch-model FILE.py:FACTORY`: train a user's PyTorch module.

The contract: FILE.py defines FACTORY(vocab_size=, block_size=, seed=) returning a
`shardc.frontends.torch_train.TorchTask` of kind "lm" (a language model: int64 tokens
[batch, block_size] in, logits out; `loss_fn(logits, targets)`; the parameters' logical
axes by FQN pattern and a ShardingPlan). `examples/torch_gpt.py:task` is one.

The rest is shardc-train's: the text (`--data` or the synthetic corpus) and tokenizer
(vocabulary padded to lcm(8, data replicas), as for the built-in GPT), the grid from the
MPI world or `--simulate N`, `--tp/--zero/--fsdp`, `--per-device-batch`, `--accum`,
`--steps`, `--lr` with the same warmup + cosine schedule, `--seed`, `--out` (loss.csv,
params.npz by FQN). The step is imported from PyTorch's autograd through torch-mlir and
compiled by shardc (`train_module`); every rank reads the same seeded global batches.
Not yet here for torch models: held-out evaluation, checkpoints, sampling, --emit-ir.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from shardc.tools.cli import UserError

TOOL = "shardc-train"
_UNSUPPORTED = ("resume", "emit_ir", "show_layouts")


def train_torch_model(a: argparse.Namespace, mpi: bool) -> int:
    """Run one `--torch-model` job (on the MPI world when `mpi`, else `--simulate N`)."""
    from shardc.frontends.torch import MissingTorch

    for name in _UNSUPPORTED:
        if getattr(a, name, None):
            raise UserError(f"--{name.replace('_', '-')} is not supported with --torch-model yet")
    if a.sample:
        raise UserError("--sample is not supported with --torch-model yet")
    try:
        return _train(a, mpi)
    except MissingTorch as e:
        raise UserError(str(e)) from None


def _train(a: argparse.Namespace, mpi: bool) -> int:
    from shardc.frontends.torch_train import TorchTrainError, load_task, train_module
    from shardc.training.axis import ShardingConfigError, ShardingPolicy, ShardingValidationError
    from shardc.training.data import batches, split
    from shardc.training.mesh import GridError
    from shardc.training.train import TrainConfig
    from shardc.tools.train import _text, _tokenizer  # pyright: ignore[reportPrivateUsage]

    world = _world() if mpi else (a.simulate or 1)
    rank = _rank() if mpi else 0
    text = _text(a)
    tok = _tokenizer(a, text, world)
    try:
        policy = ShardingPolicy(a.tp, True if a.zero is None else a.zero, a.fsdp)
        task = load_task(a.torch_model, vocab_size=tok.vocab_size, block_size=a.block_size, seed=a.seed)
        if task.kind != "lm":
            raise UserError(f"--torch-model {a.torch_model}: a TorchTask of kind {task.kind!r}; shardc-train trains kind 'lm'")
        replicas = world // a.tp if a.tp and world % a.tp == 0 else 1
        micro = a.per_device_batch * replicas
        train, _ = split(tok.encode(text), 0.1)
        stream = batches(train, micro, a.block_size, a.seed)
        data = [tuple(x.astype(np.int64) for x in next(stream)) for _ in range(a.steps * a.accum)]
        sched = TrainConfig(a.per_device_batch, a.accum, a.steps, a.lr, a.lr / 10, min(10, a.steps // 10), a.seed)
        if rank == 0:
            print(
                f"{TOOL}: {type(task.model).__name__} from {a.torch_model}, {world} rank{'s' if world > 1 else ''}, "
                f"policy tp={policy.tp} zero={policy.zero} fsdp={policy.fsdp}, global batch {micro * a.accum} "
                f"({a.per_device_batch} per device x {replicas} replicas x {a.accum} accumulation)",
                flush=True,
            )
        result = train_module(
            task.model, data, task.loss_fn, axes=task.axes, plan=task.plan, policy=policy,
            world=None if mpi else world, n_inputs=task.n_inputs, accum=a.accum, steps=a.steps, lr=sched.lr_at,
        )
    except ShardingValidationError as e:
        more = f" (and {len(e.failures) - 1} more)" if len(e.failures) > 1 else ""
        raise UserError(e.failures[0] + more) from None
    except (TorchTrainError, GridError, ShardingConfigError, ValueError) as e:
        raise UserError(str(e)) from None
    if rank == 0:
        prog = result.program
        for fn in ("train_step", "adamw_step"):
            counts = ", ".join(f"{k} x{n}" for k, n in sorted(prog.collectives[fn].items())) or "none"
            print(f"{TOOL}: @{fn} collectives per call: {counts}")
        every = a.log_every or max(1, a.steps // 10)
        if not a.quiet:
            for s, loss in enumerate(result.losses, start=1):
                if s % every == 0 or s == 1 or s == a.steps:
                    print(f"step {s}/{a.steps}  loss {loss:.4f}  lr {sched.lr_at(s):.2e}")
        _write(Path(a.out), result)
        print(f"{TOOL}: wrote {a.out}/loss.csv, {a.out}/params.npz")
    return 0


def _write(out: Path, result) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "loss.csv", "w") as f:
            f.write("step,loss\n")
            for s, loss in enumerate(result.losses, start=1):
                f.write(f"{s},{loss!r}\n")
        np.savez(out / "params.npz", **result.params)
    except OSError as e:
        raise UserError(f"cannot write to '{out}': {e.strerror}") from None


def _world() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_size()


def _rank() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


__all__ = ["train_torch_model"]
