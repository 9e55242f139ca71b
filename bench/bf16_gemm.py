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

Run it without OPENBLAS_CORETYPE set (it pins OpenBLAS's kernels; unset it for this
command only)."""

from __future__ import annotations

import argparse
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=2048)
    ap.add_argument("--k", type=int, default=768)
    ap.add_argument("--n", type=int, default=3072)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
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
