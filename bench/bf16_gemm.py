"""GFLOP/s of one matmul shape on one thread, side by side in one run: numpy float32
(its OpenBLAS), PyTorch float32, shardc's bf16 path (`kernels/bf16_gemm.py`: oneDNN's
matmul or MKL's cblas_gemm_bf16bf16f32 by shape where the CPU has bf16 units, float32
accumulation), each of those two libraries alone, and PyTorch bfloat16 (its own,
newer oneDNN; its result is bf16, as is the `-> bf16` oneDNN row's; the other bf16 rows
write float32). Each is the best of `--repeat` timed calls after a warm-up, by the
wall clock and by the calling thread's CPU time (every row runs on that one thread: on
a shared, loaded machine the CPU-time column is the one that measures the kernels, the
wall clock counts the time other processes held the core).

    python bench/bf16_gemm.py [--m 2048 --k 768 --n 3072 --repeat 10]
    python bench/bf16_gemm.py --step [--large] [--repeat 4]   # the GPT step's bf16 products

`--step` runs shardc's 1-rank `--precision bf16` step of `bench/train_step.py`'s GPT
(n_layer 4, or n_layer 12 / n_embd 768 with `--large`) and prints each bf16 product
shape it ran (`N`/`T`: the operand as stored or a transposed view), its calls and CPU
milliseconds per step and its GFLOP/s, by the calling thread's CPU time.

Run it without OPENBLAS_CORETYPE set (it pins OpenBLAS's kernels; unset it for this
command only)."""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads OpenBLAS: one core for every row
os.environ.setdefault("MKL_NUM_THREADS", "1")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

from shardc.runtime.execute.kernels import bf16_gemm, onednn_matmul  # noqa: E402


def best(fn, repeat: int) -> tuple[float, float]:
    """(wall seconds, this thread's CPU seconds) of the fastest call by each clock."""
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.thread_time()
        fn()
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - t)
    return min(wall), min(cpu)


def processor() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def step_shapes(large: bool, steps: int) -> None:
    """The bf16 products of `steps` GPT training steps, per shape (see the module doc)."""
    import collections
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import train_step as ts

    from shardc.runtime.execute import structured_run
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram
    from shardc.training.train import set_blas_threads

    set_blas_threads(1)
    cfg = ts.LARGE if large else ts.FULL
    prog = StepProgram.build(cfg, ts.BATCH, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN, precision="bf16")
    state = RankState(prog, 0, ts.init_params(cfg, 0))
    it = ts._data(cfg)
    state.train_step([next(it)], ts.LR)  # compiles and warms up: not counted
    stats: dict[tuple, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    real = structured_run.bf16_matmul

    def timed(a, b, out=None, alpha=1.0, beta=0.0):
        c = time.thread_time()
        r = real(a, b, out, alpha=alpha, beta=beta)
        c = time.thread_time() - c
        lay = "".join("N" if x.strides[-1] == x.itemsize else "T" for x in (a, b))
        s = stats[(a.shape, b.shape, lay, str(r.dtype), beta != 0.0)]
        s[0] += 1
        s[1] += c
        s[2] += 2.0 * math.prod(r.shape) * a.shape[-1]
        return r

    structured_run.bf16_matmul = timed
    try:
        for _ in range(steps):
            state.train_step([next(it)], ts.LR)
    finally:
        structured_run.bf16_matmul = real
    print(f"# bf16 products of the GPT step ({'--large' if large else 'n_layer 4'}), 1 rank, {steps} steps; CPU: {processor()}")
    print(f"# shardc bf16: {bf16_gemm.describe()}")
    print(f"{'a':<20} {'b':<20} {'layout':<6} {'result':<8} {'calls/step':>10} {'ms/step':>8} {'GFLOP/s':>8}")
    total = 0.0
    for (sa, sb, lay, dt, acc), (n, cpu, fl) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
        total += cpu
        print(f"{str(sa):<20} {str(sb):<20} {lay:<6} {dt + ('+=' if acc else ''):<8} {n / steps:>10.1f} {cpu / steps * 1e3:>8.2f} {fl / cpu / 1e9:>8.0f}")
    print(f"all bf16 products: {total / steps * 1e3:.1f} ms CPU per step")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=2048)
    ap.add_argument("--k", type=int, default=768)
    ap.add_argument("--n", type=int, default=3072)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--step", action="store_true", help="the GPT step's bf16 products, per shape (steps: --repeat)")
    ap.add_argument("--large", action="store_true", help="with --step: n_layer 12, n_embd 768")
    args = ap.parse_args()
    if args.step:
        step_shapes(args.large, args.repeat)
        return
    m, k, n = args.m, args.k, args.n
    flops = 2.0 * m * k * n
    rng = np.random.default_rng(0)
    a32 = rng.standard_normal((m, k)).astype(np.float32)
    b32 = rng.standard_normal((k, n)).astype(np.float32)
    a16, b16 = a32.astype(ml_dtypes.bfloat16), b32.astype(ml_dtypes.bfloat16)
    out = bf16_gemm.aligned_empty((m, n))  # as the runtime allocates a product's result (64-byte aligned)
    out16 = bf16_gemm.aligned_empty((m, n), ml_dtypes.bfloat16)
    rows: list[tuple[str, tuple[float, float]]] = []
    rows.append(("numpy float32", best(lambda: np.matmul(a32, b32, out=out), args.repeat)))
    try:
        import torch

        torch.set_num_threads(1)
        ta, tb = torch.from_numpy(a32), torch.from_numpy(b32)
        tc = torch.empty(m, n)
        rows.append(("torch float32", best(lambda: torch.matmul(ta, tb, out=tc), args.repeat)))
    except ImportError:
        torch = None  # type: ignore[assignment]
    rows.append((f"shardc bf16 ({bf16_gemm.backend()})", best(lambda: bf16_gemm.matmul(a16, b16, out), args.repeat)))
    # each library on its own, whichever `bf16_gemm` picks for this shape (`onednn_suits`)
    if onednn_matmul.available():
        rows.append(("oneDNN bf16", best(lambda: onednn_matmul.matmul(a16, b16, out), args.repeat)))
        rows.append(("oneDNN bf16 -> bf16", best(lambda: onednn_matmul.matmul(a16, b16, out16), args.repeat)))
    saved = os.environ.get("SHARDC_BF16_GEMM")
    os.environ["SHARDC_BF16_GEMM"] = "mkl"
    if bf16_gemm.backend() == "mkl":
        rows.append(("MKL bf16", best(lambda: bf16_gemm.matmul(a16, b16, out), args.repeat)))
    if saved is None:
        del os.environ["SHARDC_BF16_GEMM"]
    else:
        os.environ["SHARDC_BF16_GEMM"] = saved
    if torch is not None:
        ta16, tb16 = ta.to(torch.bfloat16), tb.to(torch.bfloat16)
        tc16 = torch.empty(m, n, dtype=torch.bfloat16)
        rows.append(("torch bfloat16 -> bf16", best(lambda: torch.matmul(ta16, tb16, out=tc16), args.repeat)))
    print(f"# {m}x{k}x{n} matmul, 1 thread, best of {args.repeat}; CPU: {processor()}")
    print(f"# shardc bf16: {bf16_gemm.describe()}")
    base = rows[0][1]
    print(f"{'':<24} {'GFLOP/s wall':>13} {'GFLOP/s CPU':>12} {'vs numpy f32 (CPU)':>19}")
    for name, (wall, cpu) in rows:
        print(f"{name:<24} {flops / wall / 1e9:>13.1f} {flops / cpu / 1e9:>12.1f} {base[1] / cpu:>18.2f}x")


if __name__ == "__main__":
    main()
