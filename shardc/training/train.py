"""Single-rank training: build the step module, compile it with the runtime, run steps.

    python -m shardc.training.train --steps 100            # the synthetic corpus
    python -m shardc.training.train --text input.txt       # a text file, char-level

The loop is the one the sharded trainer will run: gradients accumulate over microbatches
in a buffer (`@train_step`), then `@adamw_step` applies the update with gradient scale
1 / accumulation steps.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from shardc.runtime.codegen.cache import compile_module_cached
from shardc.runtime.execute.compiled import CompiledModule
from shardc.training.data import CharTokenizer, batches, load_text, synthetic_corpus
from shardc.training.gpt import GPTConfig, init_params, param_specs
from shardc.training.mesh import Grid, global_batch
from shardc.training.optimizer import AdamWConfig, step_donation


def set_blas_threads(n: int) -> int | None:
    """Set the thread count of numpy's bundled OpenBLAS; returns the previous count, or
    None when that library is not found. The step functions are many small matmuls, where
    BLAS threads cost more than they give (and under MPI each rank should use one)."""
    import ctypes

    from shardc.runtime.execute.kernels.blas import openblas_path

    path = openblas_path()
    if path is None:
        return None
    lib = ctypes.CDLL(path)
    try:
        get, put = lib.scipy_openblas_get_num_threads64_, lib.scipy_openblas_set_num_threads64_
    except AttributeError:
        return None
    get.restype = ctypes.c_int
    old = int(get())
    put(ctypes.c_int(n))
    return old


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 8  # per device
    accum_steps: int = 1
    steps: int = 100
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup_steps: int = 10
    seed: int = 0
    dtype: str = "float32"
    opt: AdamWConfig = field(default_factory=AdamWConfig)

    def lr_at(self, step: int) -> float:
        """Linear warmup, then cosine decay to `min_lr` at `steps` (step counts from 1)."""
        if step <= self.warmup_steps:
            return self.lr * step / max(1, self.warmup_steps)
        frac = min(1.0, (step - self.warmup_steps) / max(1, self.steps - self.warmup_steps))
        return self.min_lr + 0.5 * (1.0 + math.cos(math.pi * frac)) * (self.lr - self.min_lr)


class Trainer:
    """Holds the compiled step functions and the training state (params, AdamW moments)."""

    def __init__(self, model: GPTConfig, tc: TrainConfig):
        self.model, self.tc = model, tc
        self.specs = param_specs(model)
        from shardc.training.step import build_step_module  # the IR builder: loaded where IR is built

        self.module = build_step_module(model, tc.batch_size, tc.dtype, tc.opt)
        self.compiled: CompiledModule = compile_module_cached(self.module, "train", donate=step_donation(len(self.specs)))
        dt = np.dtype(tc.dtype)
        params = init_params(model, tc.seed, dt.type)
        self.params = [params[s.path] for s in self.specs]
        self.mu = [np.zeros(s.shape, dt) for s in self.specs]
        self.nu = [np.zeros(s.shape, dt) for s in self.specs]
        self.vocab_ids = np.arange(model.vocab_size, dtype=np.int32)
        self.step = 0
        self._acc: list[np.ndarray] | None = None  # the gradient accumulator, reused

    @property
    def global_batch(self) -> int:
        return global_batch(self.tc.batch_size, Grid(1, 1), self.tc.accum_steps)

    def train_step(self, microbatches: Sequence[tuple[np.ndarray, np.ndarray]]) -> float:
        """One optimizer step over the microbatches; returns their mean loss."""
        acc = self._acc
        if acc is None or not self.compiled.donated("train_step"):
            acc = [np.zeros(s.shape, np.dtype(self.tc.dtype)) for s in self.specs]
        else:  # last step's buffers, donated to @train_step: it adds into them
            for a in acc:
                a.fill(0)
        losses = []
        for tokens, targets in microbatches:
            loss, *acc = self.compiled.call("train_step", *self.params, *acc, tokens, targets, self.vocab_ids)  # type: ignore[misc]
            losses.append(float(loss))
        self.step += 1
        n = len(self.specs)
        self._acc = acc
        # params and moments donated: updated in place, this trainer their only holder
        out = self.compiled.call(
            "adamw_step", *self.params, *acc, *self.mu, *self.nu,
            self.tc.lr_at(self.step), self.step, 1.0 / len(microbatches),
        )
        self.params, self.mu, self.nu = list(out[:n]), list(out[n : 2 * n]), list(out[2 * n :])  # type: ignore[index]
        return float(np.mean(losses))

    def loss(self, tokens: np.ndarray, targets: np.ndarray) -> float:
        return float(self.compiled.call("loss", *self.params, tokens, targets, self.vocab_ids))  # type: ignore[arg-type]


def train(model: GPTConfig, tc: TrainConfig, data: np.ndarray, log: bool = False) -> tuple[Trainer, list[float]]:
    """Train on `data` (token ids) for `tc.steps` steps; returns the trainer and the losses."""
    trainer = Trainer(model, tc)
    it: Iterator[tuple[np.ndarray, np.ndarray]] = batches(data, tc.batch_size, model.block_size, tc.seed)
    losses: list[float] = []
    t0 = time.perf_counter()
    for step in range(1, tc.steps + 1):
        losses.append(trainer.train_step([next(it) for _ in range(tc.accum_steps)]))
        if log and (step == 1 or step % 10 == 0 or step == tc.steps):
            print(f"step {step:4d}  loss {losses[-1]:.4f}  lr {tc.lr_at(step):.2e}  {time.perf_counter() - t0:.1f}s", flush=True)
    return trainer, losses


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Train a small GPT on one rank with the shardc runtime.")
    ap.add_argument("--text", help="a UTF-8 text file (char-level tokens); default: the synthetic corpus")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--accum-steps", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-head", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=32)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--blas-threads", type=int, default=1)
    args = ap.parse_args(argv)
    set_blas_threads(args.blas_threads)
    try:
        text = load_text(args.text) if args.text else synthetic_corpus(50000, args.seed)
    except OSError as e:
        print(f"error: cannot read {args.text}: {e.strerror}", file=sys.stderr)
        return 1
    tok = CharTokenizer.from_text(text, pad_to=8)
    model = GPTConfig(args.n_layer, args.n_head, args.n_embd, args.block_size, tok.vocab_size)
    tc = TrainConfig(args.batch_size, args.accum_steps, args.steps, args.lr, args.lr / 10, seed=args.seed)
    train(model, tc, tok.encode(text), log=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
