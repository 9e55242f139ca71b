"""Text from a trained GPT, as nanoGPT's sample.py makes it, through the compiled forward
of the same model sharded like training.

`@logits(params..., tokens, vocab_ids) -> logits` is built with the training layouts at
its boundary (parameters arrive in storage layout and are resharded to compute layout,
tokens are split over `batch`) and the logits annotated replicated at the result, so
the compiler derives the FSDP gathers, the TP all-reduces and the final all-gather; it
runs through the same pipeline down to `mpi.*`. Every rank then holds the same logits
and draws the next token with the same seeded generator, so all ranks agree on the
text without sending it around.

Sequences are `block_size` long (the model has that many positions): a shorter context
sits at the start, padded after it (causal attention never looks ahead), and the next
token is read at the context's last position; a longer one keeps its last
`block_size` tokens. The microbatch has one row per data replica (the batch split
needs one per rank group); every row holds the context and row 0 is used.

    text = sample(result, tok, "the red", 50, temperature=0.8, top_k=20, seed=1)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from shardc.training.axis import PartitionSpec, ShardingPlan, ShardingPolicy, annotate, resolve
from shardc.training.gpt import GPTConfig, float_type, gpt_logits, param_specs, param_types
from shardc.training.ir_builder import FuncBuilder, Value, int_tensor
from shardc.training.mesh import BATCH, Grid
from shardc.training.pipeline import PIPELINE, run_pipeline
from shardc.training.spmd import local_part


def build_logits_module(model: GPTConfig, batch: int, grid: Grid, plan: ShardingPlan, policy: ShardingPolicy, dtype: str = "float32") -> ModuleOp:
    """`@logits` annotated for `grid` with the training layouts (see the module doc)."""
    ft = float_type(dtype)
    specs = param_specs(model)
    args = [*param_types(model, ft), ("tokens", int_tensor([batch, model.block_size])), ("vocab_ids", int_tensor([model.vocab_size]))]
    fb = FuncBuilder("logits", args, ft)

    def reshard(v: Value, src: PartitionSpec, dst: PartitionSpec) -> Value:
        return Value(annotate(fb, annotate(fb, v.ssa, grid, src), grid, dst, for_users=True), fb)

    params: dict[str, Value] = {}
    for s, v in zip(specs, fb.args):
        lay = resolve(s.axes, plan, policy, s.path)
        params[s.path] = reshard(v, lay.storage, lay.compute)
    data = PartitionSpec(BATCH, None)
    tokens = reshard(fb.args[len(specs)], data, data)
    ids = reshard(fb.args[len(specs) + 1], PartitionSpec(None), PartitionSpec(None))
    logits = gpt_logits(fb, model, params, tokens, ids)
    fb.ret(reshard(logits, PartitionSpec(BATCH, None, None), PartitionSpec(None, None, None)))
    return ModuleOp([grid.grid_op(), fb.func])  # type: ignore[list-item]


@dataclass
class Sampler:
    """The compiled `@logits` of one model, grid and policy, built, run through the
    pipeline and compiled through the compile cache (a hit runs no pass). Under MPI pass
    `world` (the communicator): rank 0 compiles or loads, the other ranks take its result."""

    model: GPTConfig
    grid: Grid
    policy: ShardingPolicy
    plan: ShardingPlan
    dtype: str = "float32"
    world: object = field(default=None, repr=False, compare=False)
    compiled: object = field(init=False, repr=False)
    cached: str = field(init=False, default="compiled")
    """Where `compiled` came from: "compiled", "cache" (this rank's disk) or "broadcast"."""

    def __post_init__(self) -> None:
        from shardc.runtime.codegen.cache import compile_cached, make_key

        key = make_key(
            "gpt-logits", model=self.model, batch=self.batch, grid=self.grid, policy=self.policy, plan=self.plan,
            dtype=self.dtype, pipeline=PIPELINE, fuse=True,
        )

        def build() -> tuple[ModuleOp, dict[str, object]]:
            module = build_logits_module(self.model, self.batch, self.grid, self.plan, self.policy, self.dtype)
            run_pipeline(module, PIPELINE)
            return module, {}

        got = compile_cached(key, build, "logits", world=self.world)
        self.compiled, self.cached = got.compiled, got.source

    @staticmethod
    def for_result(result: object) -> Sampler:
        """The sampler of a `TrainingResult`'s model, grid and policy."""
        cfg = result.config  # type: ignore[attr-defined]
        return Sampler(cfg.model, result.grid, cfg.policy, cfg.plan, cfg.dtype)  # type: ignore[attr-defined]

    @property
    def batch(self) -> int:
        return self.grid.batch

    def generate_rank(
        self,
        rank: int,
        params: Mapping[str, np.ndarray],
        prompt: Sequence[int],
        n_tokens: int,
        temperature: float = 0.8,
        top_k: int | None = 200,
        seed: int = 0,
        n_valid: int | None = None,
    ) -> np.ndarray:
        """Run on `rank` (under the rank's Comm): the `n_tokens` ids drawn after `prompt`
        from the global `params`. Ids at or above `n_valid` (the tokenizer's size; the
        rest is vocabulary padding) are never drawn. `temperature` 0 takes the argmax."""
        if not len(prompt):
            raise ValueError("the prompt must have at least one token")
        m = self.model
        dt = np.dtype(self.dtype)
        local = [local_part(params[s.path].astype(dt), resolve(s.axes, self.plan, self.policy, s.path).storage, self.grid, rank) for s in param_specs(m)]
        ids = np.arange(m.vocab_size, dtype=np.int32)
        rng = np.random.default_rng(seed)
        ctx = [int(t) for t in prompt]
        out: list[int] = []
        for _ in range(n_tokens):
            window = ctx[-m.block_size :]
            row = np.zeros(m.block_size, np.int32)
            row[: len(window)] = window
            tokens = row[None, :]  # this rank's piece of the [batch, block] tokens: one row
            logits = np.asarray(self.compiled.call("logits", *local, tokens, ids))  # type: ignore[attr-defined]
            nxt = pick(logits[0, len(window) - 1], temperature, top_k, rng, n_valid)
            ctx.append(nxt)
            out.append(nxt)
        return np.asarray(out, dtype=np.int32)


def pick(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator, n_valid: int | None = None) -> int:
    """One token from next-token logits: padding masked, top-k, temperature, softmax."""
    z = np.asarray(logits, dtype=np.float64).copy()
    if n_valid is not None:
        z[n_valid:] = -np.inf
    if temperature <= 0:
        return int(np.argmax(z))
    z = z / temperature
    if top_k is not None and 0 < top_k < int(np.isfinite(z).sum()):
        kth = np.partition(z, -top_k)[-top_k]
        z[z < kth] = -np.inf
    p = np.exp(z - z.max())
    p /= p.sum()
    return int(rng.choice(len(p), p=p))


def generate(
    sampler: Sampler,
    params: Mapping[str, np.ndarray],
    prompt: Sequence[int],
    n_tokens: int,
    temperature: float = 0.8,
    top_k: int | None = 200,
    seed: int = 0,
    n_valid: int | None = None,
) -> np.ndarray:
    """`generate_rank` on every rank of the sampler's grid, as threads (SimulatedComm)."""
    from shardc.runtime.execute.comm import run_simulated

    world = sampler.grid.size
    outs = run_simulated(
        world,
        lambda r: sampler.generate_rank(r, params, prompt, n_tokens, temperature, top_k, seed, n_valid),
        per_rank_args=[(r,) for r in range(world)],
        timeout=3600.0,
    )
    return outs[0]


def generate_mpi(
    sampler: Sampler,
    params: Mapping[str, np.ndarray] | None,
    prompt: Sequence[int],
    n_tokens: int,
    temperature: float = 0.8,
    top_k: int | None = 200,
    seed: int = 0,
    n_valid: int | None = None,
) -> np.ndarray:
    """`generate_rank` on the ranks of MPI.COMM_WORLD; `params` is needed on rank 0 only
    (it is broadcast)."""
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, abort_on_error, use_comm
    from shardc.runtime.execute.kernels import agreement

    world = MPI.COMM_WORLD
    params = world.bcast(dict(params) if world.Get_rank() == 0 and params is not None else None, root=0)
    agreement.agree(world)
    with abort_on_error(world), use_comm(MPIComm(world)):
        return sampler.generate_rank(world.Get_rank(), params, prompt, n_tokens, temperature, top_k, seed, n_valid)


def prompt_ids(tok: object, prompt: str) -> list[int]:
    """The prompt's token ids; an empty prompt starts from a newline (as nanoGPT's
    sample.py does), or from id 0 where the tokenizer has no newline."""
    text = prompt if prompt else "\n"
    try:
        ids = [int(i) for i in tok.encode(text)]  # type: ignore[attr-defined]
    except ValueError:
        if prompt:
            raise
        ids = [0]
    return ids or [0]


def sample(
    result: object,
    tok: object,
    prompt: str = "",
    n_tokens: int = 100,
    temperature: float = 0.8,
    top_k: int | None = 200,
    seed: int = 0,
) -> str:
    """The text of `n_tokens` tokens generated after `prompt` by a `TrainingResult`'s
    model on simulated ranks of its grid (the prompt is not repeated)."""
    sampler = Sampler.for_result(result)
    ids = generate(sampler, result.params, prompt_ids(tok, prompt), n_tokens, temperature, top_k, seed, tok.n_tokens)  # type: ignore[attr-defined]
    return tok.decode(ids)  # type: ignore[attr-defined]


__all__ = ["Sampler", "build_logits_module", "generate", "generate_mpi", "pick", "prompt_ids", "sample"]
