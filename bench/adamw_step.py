"""Milliseconds of `@adamw_step` per training step, unsharded: out of place (new p', m',
v' arrays every step) vs in place (the parameters and moments donated), both one call
per parameter; in place with the parameters of one body grouped into one kernel call
(`shardc.runtime.codegen.horizontal`, the default); and the same in-place update over one
buffer holding every parameter (what keeping each layout's parameters in one flat
buffer would take). Also the bytes the update allocates per step (tracemalloc's peak
over one call).

    python bench/adamw_step.py            # n_layer 4, n_embd 256 (bench/train_step.py's model)
    python bench/adamw_step.py --large    # n_layer 12, n_embd 768
    python bench/adamw_step.py --step     # the whole 1-rank training step, donating or not

With `--step`, one process holds two 1-rank trainers (bench/train_step.py's batch of 8),
one compiled with the trainers' donation (`step_donation`) and one without
(SHARDC_DONATE=0), and alternates their steps; with `--step --grouped`, both donate and
one runs without horizontal grouping (compiled with the disk cache off).

Each figure is the median of `--repeats` calls, the variants interleaved call by
call (a shared machine's load hits all three alike).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
import tracemalloc

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from xdsl.dialects.builtin import ModuleOp, TensorType, i64  # noqa: E402

from shardc.runtime import compile_module  # noqa: E402
from shardc.runtime.codegen import horizontal
from shardc.training.gpt import GPTConfig, ParamSpec, float_type, param_specs  # noqa: E402
from shardc.training.ir_builder import FuncBuilder  # noqa: E402
from shardc.training.optimizer import AdamWConfig, StepScalars, adamw_donation, adamw_update  # noqa: E402
from shardc.training.step import build_adamw_step  # noqa: E402

FULL = GPTConfig(n_layer=4, n_head=4, n_embd=256, block_size=128, vocab_size=512)
LARGE = GPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=256, vocab_size=512)


def _state(specs: list[ParamSpec], rng: np.random.Generator) -> list[list[np.ndarray]]:
    p = [rng.standard_normal(s.shape, np.float32) for s in specs]
    g = [rng.standard_normal(s.shape, np.float32) for s in specs]
    return [p, g, [np.zeros_like(a) for a in p], [np.zeros_like(a) for a in p]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--large", action="store_true")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--step", action="store_true", help="the whole training step, paired")
    ap.add_argument("--grouped", action="store_true", help="with --step: grouped vs one call per parameter, both in place")
    args = ap.parse_args()
    cfg = LARGE if args.large else FULL
    if args.step:
        return paired_steps(cfg, args.repeats, args.grouped)
    os.environ.pop("SHARDC_DONATE", None)
    specs = param_specs(cfg)
    n = len(specs)
    module = ModuleOp([build_adamw_step(cfg, AdamWConfig()).func])
    horizontal.GROUP = False
    out_of_place = compile_module(module, "oop")
    in_place = compile_module(module, "inplace", donate=adamw_donation(n))
    horizontal.GROUP = True
    grouped = compile_module(module, "grouped", donate=adamw_donation(n))
    # one parameter holding all of them (decayed: the larger group), as one flat buffer
    total = sum(math.prod(s.shape) for s in specs)
    flat = compile_module(ModuleOp([_flat_adamw([ParamSpec("flat", (total,), (None,), True)]).func]), "flat", donate=adamw_donation(1))
    rng = np.random.default_rng(0)
    st_a, st_b, st_g = _state(specs, rng), _state(specs, rng), _state(specs, rng)
    st_f = [[rng.standard_normal(total, np.float32)], [rng.standard_normal(total, np.float32)], [np.zeros(total, np.float32)], [np.zeros(total, np.float32)]]

    def step(cm, st, k: int) -> None:
        p, g, m, v = st
        out = cm.call("adamw_step", *p, *g, *m, *v, np.float32(1e-3), k, np.float32(1.0))
        st[0], st[2], st[3] = list(out[: len(p)]), list(out[len(p) : 2 * len(p)]), list(out[2 * len(p) :])

    runs = (("out of place", out_of_place, st_a), ("in place", in_place, st_b), ("in place, grouped", grouped, st_g), ("one flat buffer", flat, st_f))
    times: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    for k in range(1, 3):  # warm: kernels compiled, allocator settled
        for _, cm, st in runs:
            step(cm, st, k)
    for k in range(3, 3 + args.repeats):
        for name, cm, st in runs:
            t0 = time.perf_counter()
            step(cm, st, k)
            times[name].append(time.perf_counter() - t0)
    alloc = {}
    for name, cm, st in runs:
        tracemalloc.start()
        step(cm, st, 99)
        alloc[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    mib = total * 4 / 2**20
    print(f"{cfg}: {n} parameters, {total:,} elements ({mib:.0f} MiB per state array)")
    print(f"{'variant':<20}{'ms/step':>10}{'allocated/step':>18}")
    for name, ts in times.items():
        print(f"{name:<20}{1e3 * statistics.median(ts):>10.2f}{alloc[name] / 2**20:>15.1f} MiB")
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"grouped vs one call per parameter (in place): {med['in place'] / med['in place, grouped']:.2f}x faster; one flat buffer vs grouped: {med['in place, grouped'] / med['one flat buffer']:.2f}x")


def paired_steps(cfg: GPTConfig, repeats: int, grouped: bool = False) -> None:
    from shardc.training.gpt import init_params
    from shardc.training.mesh import Grid
    from shardc.training.spmd import RankState, StepProgram
    from shardc.training.trainer import TrainingConfig

    tc = TrainingConfig(cfg, per_device_batch=8)
    states = {}
    variants = (("grouped", "1", True), ("per parameter", "1", False)) if grouped else (("in place", "1", True), ("out of place", "0", True))
    if grouped:
        os.environ["SHARDC_CACHE"] = "0"  # the cache's key does not see horizontal.GROUP
    for name, flag, group in variants:
        os.environ["SHARDC_DONATE"] = flag
        horizontal.GROUP = group
        prog = StepProgram.build(cfg, 8, Grid(1, 1), tc.policy, tc.plan)
        states[name] = RankState(prog, 0, init_params(cfg, 0))
    os.environ.pop("SHARDC_DONATE")
    horizontal.GROUP = True
    rng = np.random.default_rng(0)
    batch = [(rng.integers(0, cfg.vocab_size, (8, cfg.block_size)), rng.integers(0, cfg.vocab_size, (8, cfg.block_size)))]
    times: dict[str, list[float]] = {k: [] for k in states}
    for k in range(2 + repeats):
        for name, st in (states.items() if k % 2 else reversed(states.items())):
            t0 = time.perf_counter()
            st.train_step(batch, 1e-3)
            if k >= 2:
                times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{cfg}, batch 8, 1 rank, {repeats} steps each, alternating")
    for name, m in med.items():
        print(f"{name:<14}{1e3 * m:>9.1f} ms/step  {8 * cfg.block_size / m:>8,.0f} tokens/s")
    a, b = (v for v, _, _ in variants)
    print(f"{a} / {b}: {med[b] / med[a]:.3f}x tokens/s")


def _flat_adamw(specs: list[ParamSpec]) -> FuncBuilder:
    """`@adamw_step` as `build_adamw_step` builds it, over the given parameters."""
    ft = float_type("float32")
    pt = [(s.path, TensorType(ft, list(s.shape))) for s in specs]
    args = [*pt, *((f"grad.{k}", t) for k, t in pt), *((f"mu.{k}", t) for k, t in pt), *((f"nu.{k}", t) for k, t in pt)]
    fb = FuncBuilder("adamw_step", [*args, ("lr", ft), ("step", i64), ("grad_scale", ft)], ft)
    lr, stp, gs = fb.args[4:]
    p2, m2, v2 = adamw_update(fb, AdamWConfig(), StepScalars(lr, stp, gs), *fb.args[:4], True)
    fb.ret(p2, m2, v2)
    return fb


if __name__ == "__main__":
    main()
