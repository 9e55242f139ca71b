"""Tokens/s of one training step (microbatch + AdamW update) of a GPT, shardc side by
side with PyTorch eager on the same model, batch and machine, with ratios, peak resident
memory per rank and the fraction of the matmul peak (numpy's float32 matmul; under
`--precision bf16`, shardc's bf16 GEMM).

    python bench/train_step.py                 # n_layer 4, n_embd 256, n_head 4, block 128, vocab 512, batch 8
    python bench/train_step.py --large         # n_layer 12, n_embd 768, n_head 12, block 256
    python bench/train_step.py --no-torch      # shardc only
    python bench/train_step.py --quick         # a smaller model, for a smoke run
    python bench/train_step.py --kernels       # 1 rank: fused kernels vs the numpy path, same process
    python bench/train_step.py --accumulate    # 1 rank: gradients/biases folded into their contractions vs not, same process
    python bench/train_step.py --rows          # 1 rank: row-chain kernels vs not, same process
    python bench/train_step.py --precision bf16   # shardc --precision bf16 vs PyTorch under torch.autocast bf16
    python bench/train_step.py --precision bf16 --grad-reduce bf16   # gradients reduced in bf16: shardc's --grad-reduce bf16, DDP's in bf16 too
    python bench/train_step.py --phases        # also each shardc row's CPU time per step by phase (cProfile)
    python bench/train_step.py --policy zero   # the shardc rows under ZeRO (default: the policy --auto chooses per row)

Rows: shardc on 1 rank against PyTorch on 1 thread; shardc dp=2 and tp=2 (2 MPI ranks)
against PyTorch on 2 threads and DistributedDataParallel on 2 gloo processes (1 thread
each, 4 sequences per process). The shardc rows run the sharding `shardc-train --auto`
would choose for their grid and precision, keeping the row's tp (`row_policy`; `--policy
zero` or `fsdp` sets it): the header names each row's. Every configuration runs in its
own process(es), in rounds that alternate the order of shardc and PyTorch (the machine
may be shared: a load spike hits both); each configuration's figure is its best round's
median step. The 1-rank row is also measured in one process holding both steps,
alternating step by step (`paired_one_rank`): the closest pairing a shared machine
allows.
PyTorch eager is nanoGPT's model written plainly (`_torch_gpt`: fused qkv projection,
`F.scaled_dot_product_attention(is_causal=True)`, tanh GELU as shardc's, tied head)
with `torch.optim.AdamW` (foreach, PyTorch's default on CPU), the same hyperparameters
and float32.

Beside each row's wall time: its CPU time per step summed over its processes and
threads, and the load average while it ran. On a shared machine the wall times of rows
run at different moments do not compare (a 2-process row needs two free cores, and
Linux's autogroup gives the benchmark's session one share however many processes it
runs: measured at n_embd 768 in bf16, dp=2's wall time followed its summed CPU time,
2.9 s against one rank's 2.0 s, and came out slower than one rank); the CPU columns do.

Peak memory is the resident-set high-water mark (VmHWM) of each process over the timed
steps: it is reset (`/proc/self/clear_refs`) after the model is built and one step has
run, so it counts the parameters, optimizer state, activations and the libraries'
resident pages, not the compiler's transient peak; the largest rank is shown.

FLOPs are counted on the step's IR: every linalg.generic contributes its iteration
space times the float ops of its body (a contraction: multiply and add); a factor that
is a constant with one non-zero entry (the one-hot picks of q, k and v out of the fused
projection) is an index, not work, and counts as none, as does a contraction's scalar
constant factor (BLAS's alpha). The peak is a 1024^3 product's rate: numpy's float32
matmul, or under `--precision bf16` shardc's bf16 GEMM (bf16 operands, float32 result,
the products the bf16 step runs). Fraction of peak = FLOPs /
(ranks x peak) / step time, the median over the timed steps, each against the matmul
rate measured right before it. PyTorch's row counts the same FLOPs against the peak
measured at the start, times its cores. The ceiling is the ratio to PyTorch that
shardc's step would reach with every FLOP at the peak: where PyTorch's BLAS is as fast
as numpy's, a row's target above its ceiling cannot be met by any runtime work.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

# One BLAS / OpenMP thread per process unless a configuration asks for more (PyTorch on
# 2 threads sets its own count); set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from _paired import peak_rss as _peak_rss  # noqa: E402  (bench/ is the script's folder)
from _paired import reset_peak_rss as _reset_peak  # noqa: E402
from shardc.training.gpt import GPTConfig, init_params  # noqa: E402

FULL = GPTConfig(n_layer=4, n_head=4, n_embd=256, block_size=128, vocab_size=512)
LARGE = GPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=256, vocab_size=512)
QUICK = GPTConfig(n_layer=2, n_head=4, n_embd=64, block_size=32, vocab_size=64)
BATCH = 8
LR = 1e-3


_A = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
_B = _A.T.copy()


@functools.cache
def _product(precision: str):
    """One 1024^3 product as the step runs it: numpy's float32 matmul, or under bf16
    shardc's bf16 GEMM (`kernels/bf16_gemm.py`: bf16 operands, float32 result); made
    once per process (`matmul_rate` asks before every timed step)."""
    if precision != "bf16":
        return lambda: _A @ _B
    from shardc.runtime.execute.kernels import bf16_gemm
    from shardc.runtime.execute.kernels.aligned import aligned_empty
    from shardc.runtime.execute.kernels.bf16_run import bfloat16

    a, b, out = _A.astype(bfloat16()), _B.astype(bfloat16()), aligned_empty((1024, 1024))
    return lambda: bf16_gemm.matmul(a, b, out)


def matmul_peak(seconds: float = 1.0, precision: str = "f32") -> float:
    """FLOP/s of a 1024^3 matmul (`_product`'s; best of a short run)."""
    run = _product(precision)
    run()
    best = math.inf
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return 2 * 1024**3 / best


def matmul_rate(n: int = 5, precision: str = "f32") -> float:
    """FLOP/s of a 1024^3 matmul (`_product`'s) now: the median of `n` (under the same
    load as the step timed right after it; the machine may be shared)."""
    run = _product(precision)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return 2 * 1024**3 / statistics.median(times)


def step_flops(cfg: GPTConfig, batch: int) -> int:
    """FLOPs of @train_step + @adamw_step of the unsharded IR. A factor that is a constant
    with one non-zero entry neither multiplies nor widens the iteration space: the
    runtime reads it as an index."""
    from xdsl.dialects.arith import ConstantOp
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
    from xdsl.dialects.linalg.ops import GenericOp

    from shardc.training.step import build_step_module

    module = build_step_module(cfg, batch, with_loss=False)
    total = 0
    for op in module.walk():
        if not isinstance(op, GenericOp):
            continue
        extents: dict[int, int] = {}
        selected: set[int] = set()
        selectors = 0
        for operand, amap in zip(op.operands, op.indexing_maps.data):
            shape = operand.type.get_shape() if hasattr(operand.type, "get_shape") else ()
            for expr, n in zip(amap.data.results, shape):
                extents[expr.position] = n  # type: ignore[attr-defined]
            cst = operand.owner
            if isinstance(cst, ConstantOp) and isinstance(cst.value, DenseIntOrFPElementsAttr):
                if sum(1 for v in cst.value.get_values() if v != 0) == 1:
                    selected |= {e.position for e in amap.data.results}  # type: ignore[attr-defined]
                    selectors += 1
        space = math.prod(n for d, n in extents.items() if d not in selected)
        reduces = any("reduction" in str(it) for it in op.iterator_types.data)
        body = sum(
            1 for b in op.body.block.ops
            if b.name.startswith(("arith.", "math.")) and b.name not in ("arith.constant", "arith.cmpi", "arith.select", "arith.sitofp") and "f" in b.name.split(".")[1]
            and not (reduces and any(isinstance(o.owner, ConstantOp) for o in b.operands))  # a contraction's constant factor: BLAS's alpha
        )
        total += space * max(body - selectors, 1)
    return total


def _data(cfg: GPTConfig):
    """The same token stream for shardc and PyTorch."""
    from shardc.training.data import batches

    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 20000).astype(np.int32)
    return batches(data, BATCH, cfg.block_size, 0)


PHASES = (
    ("products", ("bf16_gemm.py", "onednn_matmul.py", "blas.py", "c_einsum", "matmul")),
    ("bf16 casts", ("bf16_cast.py", "/b_")),
    ("collectives", ("comm.py", "mpi_run.py", "overlap_run.py")),
    ("fused kernels", ("/k_", "fused_run.py")),
    ("row kernels", ("/r_", "rows_run.py")),
)
"""A step's CPU time by what runs it: the first phase whose marker is in a function's
file or name takes its own time (`--phases`); the kernels that numba compiles are
files named b_ (casts), k_ (fused elementwise, AdamW's among them) and r_ (rows)."""


def phase_seconds(profile: object, steps: int) -> dict[str, float]:
    """CPU seconds per step by phase (`PHASES`, the rest as 'other') from a cProfile
    timed by `time.process_time`, and the whole @adamw_step (its gathers included)."""
    import pstats

    out: dict[str, float] = {}
    for (file, _line, name), (_cc, _nc, own, cum, _callers) in pstats.Stats(profile).stats.items():  # type: ignore[attr-defined]
        where = f"{file}:{name}"
        phase = next((ph for ph, marks in PHASES if any(m in where for m in marks)), "other")
        out[phase] = out.get(phase, 0.0) + own / steps
        if name == "fn__adamw__step":
            out["(@adamw_step)"] = out.get("(@adamw_step)", 0.0) + cum / steps
    return out


POLICIES = ("auto", "zero", "fsdp")


def row_policy(cfg: GPTConfig, world: int, tp: int, precision: str, grad_reduce: str, choice: str):
    """The sharding policy a shardc row runs: ZeRO or FSDP as asked, or (`auto`) the one
    `shardc-train --auto` would choose on this host among those that keep the row's tp
    for every parameter group (each group's dp / ZeRO / FSDP left to the cost model)."""
    from shardc.training.auto_plan import auto_policies, choose, host_cost_model
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import param_specs

    if choice != "auto":
        return ShardingPolicy(tp, zero=True, fsdp=choice == "fsdp")
    kept = [p for p in auto_policies(param_specs(cfg), GPT_PLAN, world) if p.tp == tp and all(o.tp for o in p.overrides)]
    cost = host_cost_model(None, world)
    return choose(cfg, world, BATCH // (world // tp), policies=kept, cost=cost, precision=precision, grad_reduce=grad_reduce).chosen.policy


def time_steps(cfg: GPTConfig, world: int, tp: int, rank: int, repeats: int, precision: str = "f32", phases: bool = False, grad_reduce: str = "f32", policy: str = "auto") -> dict:
    """Compile the step for the grid under `row_policy`, then time steps on this rank (under
    MPI when world > 1); `phases`: the timed steps under cProfile (CPU time), the result's
    "phases" by phase."""
    from shardc.training.auto_plan import policy_name
    from shardc.training.axis import GPT_PLAN
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    grid = make_grid(world, tp)
    chosen = row_policy(cfg, world, tp, precision, grad_reduce, policy)
    t0 = time.perf_counter()
    prog = StepProgram.build(cfg, BATCH, grid, chosen, GPT_PLAN, precision=precision, grad_reduce=grad_reduce)
    compile_s = time.perf_counter() - t0
    state = RankState(prog, rank, init_params(cfg, 0))
    it = _data(cfg)
    barrier = _barrier(world)
    times, rates, cpu, load = [], [], [], []
    profile = None
    if phases:
        import cProfile

        profile = cProfile.Profile(time.process_time)
    for i in range(repeats + 1):
        mb = [next(it)]
        barrier()
        rate = matmul_rate(precision=precision)  # the peak under the load of this moment
        barrier()
        t, c = time.perf_counter(), time.process_time()
        if profile is not None and i:
            profile.enable()
        state.train_step(mb, LR)
        if profile is not None:
            profile.disable()
        c = time.process_time() - c  # this rank's step without the barrier's wait
        barrier()
        if i:  # the first step warms caches (and compiles the fused kernels)
            times.append(time.perf_counter() - t)
            rates.append(rate)
            cpu.append(c)
            load.append(os.getloadavg()[0])
        else:
            _reset_peak()
    return {
        "compile_s": compile_s,
        "step_s": statistics.median(times),
        "cpu_s": statistics.median(cpu),
        "load": max(load),
        "times": times,
        "rates": rates,
        "rss": _peak_rss(),
        "stages": {s.name: s.seconds for s in prog.stages},
        "phases": phase_seconds(profile, repeats) if profile is not None else {},
        "blas": _blas_in_use(),
        "policy": policy_name(chosen),
    }


def _blas_in_use() -> str:
    from shardc.runtime.execute.kernels import blas

    return blas.active_path()


def fraction_of_peak(flops: float, ranks: int, per_rank: list[dict]) -> float:
    """Median over steps of FLOPs / (ranks x peak) / step time, the peak measured just
    before each step (the slowest rank's step, the lowest rank's peak)."""
    steps = [max(r["times"][i] for r in per_rank) for i in range(len(per_rank[0]["times"]))]
    rates = [min(r["rates"][i] for r in per_rank) for i in range(len(steps))]
    return statistics.median(flops / (ranks * p) / t for p, t in zip(rates, steps))


def _barrier(world: int):
    if world == 1:
        return lambda: None
    from mpi4py import MPI

    return MPI.COMM_WORLD.Barrier


# ---------------------------------------------------------------------------------------
# PyTorch eager: the same model, batch and optimizer
# ---------------------------------------------------------------------------------------


def _torch_gpt(cfg: GPTConfig):
    """nanoGPT's GPT in plain PyTorch, with shardc's GPT's shapes and initialisation."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            c = cfg.n_embd
            self.ln_1, self.ln_2 = nn.LayerNorm(c, eps=cfg.ln_eps), nn.LayerNorm(c, eps=cfg.ln_eps)
            self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
            self.fc, self.proj = nn.Linear(c, cfg.mlp_ratio * c), nn.Linear(cfg.mlp_ratio * c, c)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).view(b, t, 3, cfg.n_head, c // cfg.n_head).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(cfg.vocab_size, cfg.n_embd), nn.Embedding(cfg.block_size, cfg.n_embd)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.n_layer))
            self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.ln_eps)
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif p.dim() == 1:
                    nn.init.ones_(p)
                else:
                    std = 0.02 / math.sqrt(2 * cfg.n_layer) if name.endswith(("c_proj.weight", ".proj.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for blk in self.blocks:
                x = blk(x)
            logits = self.ln_f(x) @ self.wte.weight.T  # the head tied to the token embedding
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1).long())

    return GPT()


def _bf16_allreduce_hook(state, bucket):  # noqa: ANN001, ANN201 - DDP checks the annotations: none or its own
    """DDP's `bf16_compress_hook` for gloo (PyTorch's refuses without CUDA or XPU): the
    bucket's gradients divided by the world size, all-reduced as bf16 on gloo, back into
    the float32 bucket."""
    import torch
    import torch.distributed as dist

    buffer = bucket.buffer()
    small = buffer.to(torch.bfloat16).div_(dist.get_world_size())
    done = dist.all_reduce(small, async_op=True).get_future()

    def back(fut):  # noqa: ANN001, ANN202
        buffer.copy_(fut.value()[0])
        return buffer

    return done.then(back)


def torch_steps(cfg: GPTConfig, threads: int, repeats: int, ddp: bool = False, precision: str = "f32", grad_reduce: str = "f32") -> dict:
    """Time PyTorch eager steps (forward, backward, AdamW) on `threads` threads, or as one
    process of DistributedDataParallel on gloo (its share of the batch); `precision`
    bf16: the forward under `torch.autocast("cpu", dtype=torch.bfloat16)` (float32
    parameters and AdamW, as shardc's --precision bf16); `grad_reduce` bf16: DDP's
    gradients all-reduced in bf16 (`_bf16_allreduce_hook`, as shardc's --grad-reduce bf16)."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = _torch_gpt(cfg)
    rank, world = 0, 1
    if ddp:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        model = torch.nn.parallel.DistributedDataParallel(model)
        if grad_reduce == "bf16":
            model.register_comm_hook(None, _bf16_allreduce_hook)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}], lr=LR, betas=(0.9, 0.95), eps=1e-8)
    it = _data(cfg)
    share = BATCH // world
    times, cpu, load = [], [], []
    for i in range(repeats + 1):
        x, y = next(it)
        x, y = torch.from_numpy(x[rank * share : (rank + 1) * share]), torch.from_numpy(y[rank * share : (rank + 1) * share])
        if ddp:
            dist.barrier()
        t, c = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(x, y)
        loss.backward()
        opt.step()
        c = time.process_time() - c  # all of this process's threads
        if ddp:
            dist.barrier()
        if i:
            times.append(time.perf_counter() - t)
            cpu.append(c)
            load.append(os.getloadavg()[0])
        else:
            _reset_peak()
    out = {"step_s": statistics.median(times), "cpu_s": statistics.median(cpu), "load": max(load), "times": times, "rss": _peak_rss()}
    if ddp:
        got: list[dict] = [{} for _ in range(world)]
        dist.all_gather_object(got, out)
        dist.destroy_process_group()
        return {"step_s": max(g["step_s"] for g in got), "cpu_s": sum(g["cpu_s"] for g in got), "load": max(g["load"] for g in got), "rss": max(g["rss"] for g in got), "ranks": world}
    return out


# ---------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------


def _config(args: argparse.Namespace) -> GPTConfig:
    return QUICK if args.quick else LARGE if args.large else FULL


def paired_one_rank(cfg: GPTConfig, repeats: int, precision: str = "f32") -> dict:
    """shardc's 1-rank step and PyTorch's 1-thread step in one process, alternating step
    by step (the order flipping), so both see the same moments of the machine's load
    (`precision` bf16: shardc's --precision bf16 against PyTorch's forward under
    autocast). Wall and CPU time (`time.process_time`: a shared machine's descheduling
    left out) of each step."""
    import torch

    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram
    from shardc.training.train import set_blas_threads

    set_blas_threads(1)
    torch.set_num_threads(1)
    prog = StepProgram.build(cfg, BATCH, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN, precision=precision)
    state = RankState(prog, 0, init_params(cfg, 0))
    torch.manual_seed(0)
    model = _torch_gpt(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)

    def theirs(x: np.ndarray, y: np.ndarray) -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(torch.from_numpy(x), torch.from_numpy(y))
        loss.backward()
        opt.step()

    it = _data(cfg)
    t_ours: list[tuple[float, float]] = []
    t_theirs: list[tuple[float, float]] = []
    for i in range(repeats + 2):
        x, y = next(it)
        pair = ((t_ours, lambda: state.train_step([(x, y)], LR)), (t_theirs, lambda: theirs(x, y)))
        for times, fn in pair if i % 2 else pair[::-1]:
            t, c = time.perf_counter(), time.process_time()
            fn()
            if i > 1:  # the first steps compile (or load) the kernels
                times.append((time.perf_counter() - t, time.process_time() - c))
    wall = {k: statistics.median(w for w, _ in v) for k, v in (("ours", t_ours), ("theirs", t_theirs))}
    cpu = {k: statistics.median(c for _, c in v) for k, v in (("ours", t_ours), ("theirs", t_theirs))}
    return {**wall, "cpu_ours": cpu["ours"], "cpu_theirs": cpu["theirs"]}


def kernels_vs_numpy(cfg: GPTConfig, repeats: int) -> None:
    """One compiled 1-rank step run with the fused kernels and with the numpy path
    (`SHARDC_KERNELS`, read at every call), alternating step by step."""
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    prog = StepProgram.build(cfg, BATCH, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN)
    state = RankState(prog, 0, init_params(cfg, 0))
    it = _data(cfg)
    times: dict[str, list[float]] = {"auto": [], "numpy": []}
    for i in range(repeats + 2):
        mb = [next(it)]
        for mode in ("auto", "numpy") if i % 2 else ("numpy", "auto"):
            os.environ["SHARDC_KERNELS"] = mode
            t = time.perf_counter()
            state.train_step(mb, LR)
            if i > 1:  # the first steps compile (or load) the kernels
                times[mode].append(time.perf_counter() - t)
    os.environ.pop("SHARDC_KERNELS")
    k, n = statistics.median(times["auto"]), statistics.median(times["numpy"])
    print(f"1 rank, fused kernels vs numpy path (steps alternating): {k * 1e3:.0f} vs {n * 1e3:.0f} ms = {n / k:.2f}x")


SWITCHES = {
    "accumulate": ("accumulations folded", "shardc.runtime.codegen.fusion", "ACCUMULATE"),
    "rows": ("row-chain kernels", "shardc.runtime.codegen.row_fusion", "ENABLED"),
}
"""A/B runs of one compile-time switch: (what it is, its module, its flag)."""


def switch_vs_not(cfg: GPTConfig, repeats: int, name: str) -> None:
    """The step compiled with one of the runtime's compile-time rewrites and without
    (`accumulate`: `x + contraction` folded into the contraction, gradients written into
    their accumulators by BLAS, biases as the init; `rows`: row chains as one numba pass
    per row), two programs in one process, steps alternating; the compile cache is off
    so that each compile sees the switch."""
    import importlib

    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    what, module_name, flag = SWITCHES[name]
    module = importlib.import_module(module_name)
    os.environ["SHARDC_CACHE"] = "0"
    states = {}
    for on in (True, False):
        setattr(module, flag, on)
        prog = StepProgram.build(cfg, BATCH, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN)
        states[on] = RankState(prog, 0, init_params(cfg, 0))
    setattr(module, flag, True)
    it = _data(cfg)
    times: dict[bool, list[float]] = {True: [], False: []}
    for i in range(repeats + 2):
        mb = [next(it)]
        for on in (True, False) if i % 2 else (False, True):
            t = time.perf_counter()
            states[on].train_step(mb, LR)
            if i > 1:
                times[on].append(time.perf_counter() - t)
    diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(states[True].params, states[False].params))
    k, n = statistics.median(times[True]), statistics.median(times[False])
    ratio = statistics.median(b / a for a, b in zip(times[True], times[False]))
    print(f"1 rank, {what} vs not (steps alternating): {k * 1e3:.1f} vs {n * 1e3:.1f} ms, median pair ratio {ratio:.3f}x; max |param difference| {diff:.1e}")


def worker(args: argparse.Namespace) -> None:
    cfg = _config(args)
    if args.worker == "pair":
        print("RESULT " + json.dumps(paired_one_rank(cfg, args.repeats, args.precision)))
        return
    if args.worker == "torch":
        print("RESULT " + json.dumps(torch_steps(cfg, args.threads, args.repeats, precision=args.precision)))
        return
    if args.worker == "ddp":
        res = torch_steps(cfg, 1, args.repeats, ddp=True, precision=args.precision, grad_reduce=args.grad_reduce)
        if os.environ.get("RANK") == "0":
            print("RESULT " + json.dumps(res))
        # PyTorch 2.13's gloo can abort in interpreter teardown ("terminate called without
        # an active exception") after a finished run: leave without it.
        sys.stdout.flush()
        os._exit(0)
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, use_comm
    from shardc.training.train import set_blas_threads

    set_blas_threads(1)
    comm = MPI.COMM_WORLD
    with use_comm(MPIComm(comm)):
        res = time_steps(cfg, comm.Get_size(), args.tp, comm.Get_rank(), args.repeats, args.precision, args.phases, args.grad_reduce, args.policy)
    out = comm.gather(res, root=0)
    if comm.Get_rank() == 0:
        print("RESULT " + json.dumps(out))


def _run(cmd: list[str], env: dict[str, str]) -> object:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode or line is None:
        raise SystemExit(f"benchmark process failed: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return json.loads(line[len("RESULT ") :])


def _common(args: argparse.Namespace) -> list[str]:
    return ["--repeats", str(args.repeats), "--precision", args.precision, "--grad-reduce", args.grad_reduce, "--policy", args.policy, *(["--quick"] if args.quick else []), *(["--large"] if args.large else []), *(["--phases"] if args.phases else [])]


def launch(n: int, tp: int, args: argparse.Namespace) -> list[dict]:
    """shardc on `n` MPI ranks: one result per rank."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise SystemExit("mpiexec is not on PATH")
    cmd = [mpiexec, "-n", str(n), sys.executable, os.path.abspath(__file__), "--worker", "shardc", "--tp", str(tp), *_common(args)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")  # ranks share the machine
    return _run(cmd, env)  # type: ignore[return-value]


def launch_torch(threads: int, args: argparse.Namespace) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    return _run([sys.executable, os.path.abspath(__file__), "--worker", "torch", "--threads", str(threads), *_common(args)], env)  # type: ignore[return-value]


def launch_ddp(n: int, args: argparse.Namespace) -> dict:
    """DistributedDataParallel on `n` gloo processes, one thread each (torchrun's
    environment, set by hand)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(n):
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "ddp", *_common(args)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    outs = [p.communicate(timeout=3600) for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("DDP run failed:\n" + "\n".join(o + e for o, e in outs))
    line = next(ln for ln in outs[0][0].splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


CPU_NOTE = (
    "CPU ms: the CPU time of one step summed over the configuration's processes and threads "
    "(a rank's wait at the barrier after its step left out; MPI's and OpenMP's spinning waits "
    "inside the step count, gloo's sleeping ones do not); load: the 1-minute load average "
    "during the timed steps"
)


def shared_machine_note(loads: list[float]) -> str:
    """What the wall times are worth where the machine was busier than its cores. A
    2-process row needs two free cores at every collective; with other work running it
    gets fewer, and where Linux's autogroup scheduling is on, the CPU is shared between
    sessions, not processes: the benchmark's session gets one share, however many
    processes it runs. Measured (2 cores, load average 5-7, n_embd 768 bf16): a 1-rank
    step's wall time 1.0-1.5x its CPU time, a dp=2 rank's 1.5-2.0x, so dp=2's wall time
    followed its summed CPU time and came out slower than one rank."""
    cores = os.cpu_count() or 1
    worst = max(loads, default=0.0)
    if worst <= cores:
        return f"load average at most {worst:.1f} on {cores} cores: the wall times are the machine's"
    autogroup = ""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            if f.read().strip() == "1":
                autogroup = "; Linux autogroup is on: the CPU is shared between sessions, not processes"
    except OSError:
        pass
    return (
        f"note: load average up to {worst:.1f} on {cores} cores (the benchmark's own processes count in it): other work shared the machine{autogroup}. "
        "A 2-process row's wall time then suffers more than a 1-process row's: compare the CPU columns, "
        "and wall times only of rows run at the same load"
    )


def _have_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--large", action="store_true", help="n_layer 12, n_embd 768, n_head 12, block 256")
    ap.add_argument("--no-torch", action="store_true", help="shardc only")
    ap.add_argument("--repeats", type=int, default=6, help="timed steps per configuration and round (the median counts)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds over all configurations, alternating the order")
    ap.add_argument("--kernels", action="store_true", help="only: 1 rank with fused kernels vs the numpy path")
    ap.add_argument("--accumulate", action="store_true", help="only: 1 rank with accumulations folded into contractions vs not")
    ap.add_argument("--rows", action="store_true", help="only: 1 rank with row-chain kernels vs not")
    ap.add_argument("--precision", choices=("f32", "bf16"), default="f32", help="bf16: shardc's --precision bf16 against PyTorch under torch.autocast bf16")
    ap.add_argument("--grad-reduce", choices=("f32", "bf16"), default="f32", help="bf16: shardc's gradient sums over the batch in bf16 (--grad-reduce bf16) and DDP's in bf16 (a bf16_compress_hook for gloo)")
    ap.add_argument("--policy", choices=POLICIES, default="auto", help="the shardc rows' sharding: auto (the default): the policy shardc-train --auto chooses for the row's grid and precision, keeping its tp; zero or fsdp: that one")
    ap.add_argument("--phases", action="store_true", help="also: each shardc row's CPU time per step by phase (products, casts, collectives, kernels); the timed steps run under cProfile, its overhead in their times")
    ap.add_argument("--worker", choices=("shardc", "torch", "ddp", "pair"), help=argparse.SUPPRESS)
    ap.add_argument("--tp", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    from shardc.training.train import set_blas_threads

    set_blas_threads(1)
    cfg = _config(args)
    if args.kernels:
        kernels_vs_numpy(cfg, args.repeats)
        return
    for name in SWITCHES:
        if getattr(args, name):
            switch_vs_not(cfg, args.repeats, name)
            return
    tokens = BATCH * cfg.block_size
    flops = step_flops(cfg, BATCH)
    peak = matmul_peak(precision=args.precision)
    torch_on = not args.no_torch and _have_torch()
    print(f"model: {cfg}, batch {BATCH} ({tokens} tokens per step)")
    if args.precision == "bf16":
        from shardc.runtime.execute.kernels.bf16_gemm import describe

        f32_peak = matmul_peak()
        print(
            f"step FLOPs {flops / 1e9:.2f} GFLOP; bf16 matmul peak {peak / 1e9:.1f} GFLOP/s per rank "
            f"(shardc's bf16 GEMM, 1 thread; numpy's float32 matmul: {f32_peak / 1e9:.1f}; bf16 {peak / f32_peak:.2f}x that)"
        )
        print(f"precision bf16: shardc --precision bf16 (bf16 products: {describe()}); PyTorch eager under torch.autocast('cpu', bfloat16); 'of peak' and the ceiling are against the bf16 peak")
    else:
        print(f"step FLOPs {flops / 1e9:.2f} GFLOP; numpy matmul peak {peak / 1e9:.1f} GFLOP/s per rank (1 BLAS thread)")
    if args.grad_reduce == "bf16":
        print("grad-reduce bf16: shardc's gradient sums over the batch move bf16 (--grad-reduce bf16); DDP all-reduces its gradients in bf16 (a bf16_compress_hook for gloo); the threads rows reduce nothing")
    if not torch_on:
        print("PyTorch: " + ("not run (--no-torch)" if args.no_torch else "not installed (the [torch] extra): shardc only"))
    forced = [f"{k}={os.environ[k]}" for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if os.environ.get(k)]
    if forced:
        print(
            f"note: {' '.join(forced)} {'is' if len(forced) == 1 else 'are'} set: numpy's OpenBLAS (and shardc's contractions where it is the faster BLAS) "
            "runs those kernels, not this CPU's own; PyTorch's MKL reads neither. "
            "`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` before the command measures this CPU's."
        )
    ours_cfg = {"1 rank": (1, 1), "dp=2": (2, 1), "tp=2": (2, 2)}
    theirs_cfg = {"1 thread": (launch_torch, 1), "2 threads": (launch_torch, 2), "DDP 2 gloo": (launch_ddp, 2)}  # launcher, cores
    ours: dict[str, list[list[dict]]] = {k: [] for k in ours_cfg}
    theirs: dict[str, list[dict]] = {k: [] for k in theirs_cfg} if torch_on else {}
    for r in range(args.rounds):
        jobs = [("ours", k) for k in ours_cfg] + [("theirs", k) for k in theirs]
        order = jobs if r % 2 == 0 else jobs[::-1]
        # interleave: shardc and PyTorch configurations alternate within a round
        mixed = [j for pair in zip(order[::2], order[1::2]) for j in pair] + (order[-1:] if len(order) % 2 else [])
        for side, k in mixed:
            if side == "ours":
                n, tp = ours_cfg[k]
                ours[k].append(launch(n, tp, args))
            else:
                launcher, cores = theirs_cfg[k]
                theirs[k].append(launcher(cores, args))

    pairs = [_run([sys.executable, os.path.abspath(__file__), "--worker", "pair", *_common(args)], dict(os.environ, OMP_NUM_THREADS="1")) for _ in range(args.rounds)] if theirs else []

    def best(runs: list[list[dict]]) -> list[dict]:
        return min(runs, key=lambda per_rank: max(p["step_s"] for p in per_rank))

    mib = 1 << 20
    first = best(ours["1 rank"])[0]
    stages = ", ".join(f"{k.split('{')[0]} {v:.2f}s" for k, v in first["stages"].items() if k != "input")
    print(f"compile of the step: {first['compile_s']:.1f} s ({stages}, then Python codegen; a compile-cache hit skips both)")
    used = sorted({p["blas"] for runs in ours.values() for per_rank in runs for p in per_rank})
    print(f"shardc's contractions: {'; '.join(used)} (SHARDC_BLAS={os.environ.get('SHARDC_BLAS', 'auto')})")
    t_ours, cpu_ours, loads = {}, {}, []
    chosen = {k: best(runs)[0]["policy"] for k, runs in ours.items()}
    print(f"shardc's sharding (--policy {args.policy}): " + ", ".join(f"{k} {v}" for k, v in chosen.items()))
    print(CPU_NOTE)
    print(f"{'shardc':<10} {'tokens/s':>9} {'step ms':>8} {'CPU ms':>8} {'of peak':>8} {'peak RSS/rank':>14} {'load':>5}")
    for k, runs in ours.items():
        per_rank = best(runs)
        step_s = max(p["step_s"] for p in per_rank)
        t_ours[k] = step_s
        cpu_ours[k] = sum(p["cpu_s"] for p in per_rank)
        load = max(p["load"] for p in per_rank)
        loads.append(load)
        frac = fraction_of_peak(flops, len(per_rank), per_rank)
        rss = max(p["rss"] for p in per_rank)
        print(f"{k:<10} {tokens / step_s:>9,.0f} {step_s * 1e3:>8.1f} {cpu_ours[k] * 1e3:>8.0f} {frac:>8.1%} {rss / mib:>10,.0f} MiB {load:>5.1f}")
        if args.phases:
            names = sorted({ph for p in per_rank for ph in p["phases"]}, key=lambda ph: -max(p["phases"].get(ph, 0.0) for p in per_rank))
            by_rank = {ph: "/".join(f"{p['phases'].get(ph, 0.0) * 1e3:.0f}" for p in per_rank) for ph in names}
            print("           CPU ms per step, rank by rank (cProfile): " + ", ".join(f"{ph} {ms}" for ph, ms in by_rank.items()))
    if not theirs:
        print(shared_machine_note(loads))
        return
    t_theirs = {}
    print(f"{'PyTorch':<10} {'tokens/s':>9} {'step ms':>8} {'CPU ms':>8} {'of peak':>8} {'peak RSS/proc':>14} {'load':>5}")
    for k, runs in theirs.items():
        res = min(runs, key=lambda x: x["step_s"])
        t_theirs[k] = res
        loads.append(res["load"])
        frac = flops / (theirs_cfg[k][1] * peak) / res["step_s"]
        print(f"{k:<10} {tokens / res['step_s']:>9,.0f} {res['step_s'] * 1e3:>8.1f} {res['cpu_s'] * 1e3:>8.0f} {frac:>8.1%} {res['rss'] / mib:>10,.0f} MiB {res['load']:>5.1f}")
    print(shared_machine_note(loads))
    if pairs:
        ratios = [p["theirs"] / p["ours"] for p in pairs]  # type: ignore[index]
        print(
            f"1 rank vs 1 thread in one process, steps alternating: "
            + ", ".join(f"shardc {p['ours'] * 1e3:.0f} ms / PyTorch {p['theirs'] * 1e3:.0f} ms = {r:.2f}x" for p, r in zip(pairs, ratios))  # type: ignore[index]
            + "; CPU time: "
            + ", ".join(f"{p['cpu_ours'] * 1e3:.0f} / {p['cpu_theirs'] * 1e3:.0f} ms = {p['cpu_theirs'] / p['cpu_ours']:.2f}x" for p in pairs)  # type: ignore[index]
        )
    print(
        "shardc / PyTorch eager (tokens/s ratio from the separate processes; peak RSS ratio; "
        "CPU: their CPU ms over ours, the ratio a machine with a core per process would show; "
        "ceiling: the ratio if every FLOP of shardc's step ran at the matmul peak above):"
    )
    rss_ours = {k: max(p["rss"] for p in best(v)) for k, v in ours.items()}
    for mine, other in (("1 rank", "1 thread"), ("dp=2", "2 threads"), ("dp=2", "DDP 2 gloo"), ("tp=2", "2 threads"), ("tp=2", "DDP 2 gloo")):
        o = t_theirs[other]
        ceiling = o["step_s"] / (flops / (ours_cfg[mine][0] * peak))
        print(f"  {mine:<7} vs {other:<11} {o['step_s'] / t_ours[mine]:5.2f}x   CPU {o['cpu_s'] / cpu_ours[mine]:5.2f}x   memory {rss_ours[mine] / o['rss']:4.2f}x   ceiling {ceiling:4.2f}x")


if __name__ == "__main__":
    main()
