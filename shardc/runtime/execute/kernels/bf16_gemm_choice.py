"""Which library `SHARDC_BF16_GEMM=auto` gives the bf16 products that `bf16_gemm`'s
shape rule (`onednn_suits`) leaves to MKL: measured once per machine.

The rule comes from an Intel Xeon with AMX. There, MKL's `cblas_gemm_bf16bf16f32` ran
the weight gradients (`a` a transposed view) and the long contractions faster than
oneDNN. But MKL runs its bf16 kernels on Intel processors only. On an AMD EPYC (Zen 4,
AVX512-BF16) the same products ran at 65-95 GFLOP/s on MKL and at 193-220 on oneDNN
(one thread). That cost about 64 of the n_layer-4 step's 175 ms of bf16 products.

The winner depends on the processor and on both libraries' builds, so `auto` measures
it rather than guessing from the vendor. It times a weight gradient and a long
contraction of a GPT step's kind on each library: the best of `ROUNDS` by the thread's
CPU clock. The answer is `shaped` (the rule: MKL for those products) or `onednn`
(oneDNN for every product it accepts). `onednn` is taken only where oneDNN wins by
`MARGIN`: on the machine the rule was measured on, the larger products of this kind
favoured MKL. The answer is kept in the cache directory as `blas_choice` keeps its own
(`bf16-gemm-choice-<key>.json`, `blas_choice.remembered`). `bf16_gemm.agree` (from
`agreement.agree`) makes rank 0's answer every rank's.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from shardc.runtime.execute.kernels import blas_choice

ROUTINGS = ("shaped", "onednn")
"""`bf16_gemm.routing`'s answers."""

ROUNDS = 3
"""Rounds of the probe; each library's best round per shape counts."""

MARGIN = 1.5
"""How many times faster oneDNN must run the probe (summed) for `onednn`."""

# (m, k, n, a transposed, b transposed): a weight gradient and a long contraction with
# `b` transposed, both beyond `bf16_gemm.ONEDNN_MAX_K`: products the rule gives MKL.
SHAPES = ((384, 1536, 512, True, False), (512, 1536, 384, False, True))

_LABEL = "bf16 GEMM choice"


def key(library_files: tuple[str | None, str | None]) -> str:
    """The record's key: this processor, MKL's and oneDNN's files, the probe."""
    parts = [blas_choice.cpu_description(), *(blas_choice.file_id(p) for p in library_files), np.__version__, str(ROUNDS), str(MARGIN), repr(SHAPES)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def measure(runners: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], Any]], bfloat16: np.dtype) -> dict[str, float]:
    """Thread CPU seconds each runner (`runner(a, b, out)`) takes for `SHAPES`, best round each."""
    rng = np.random.default_rng(0)
    cases = []
    for m, k, n, ta, tb in SHAPES:
        a = rng.standard_normal((k, m) if ta else (m, k), np.float32).astype(bfloat16)
        b = rng.standard_normal((n, k) if tb else (k, n), np.float32).astype(bfloat16)
        cases.append((a.T if ta else a, b.T if tb else b, np.empty((m, n), np.float32)))
    best = {name: [float("inf")] * len(cases) for name in runners}
    for name, run in runners.items():  # a first call each: oneDNN builds its primitives
        for a, b, out in cases:
            run(a, b, out)
    for _ in range(ROUNDS):
        for name, run in runners.items():
            for i, (a, b, out) in enumerate(cases):
                t = time.thread_time()
                run(a, b, out)
                best[name][i] = min(best[name][i], time.thread_time() - t)
    return {name: sum(ts) for name, ts in best.items()}


def decide(seconds: dict[str, float]) -> str:
    """`onednn` where oneDNN ran the probe `MARGIN` times faster than MKL, else `shaped`."""
    return "onednn" if seconds["onednn"] * MARGIN <= seconds["mkl"] else "shaped"


def choose(library_files: tuple[str | None, str | None], runners: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], Any]], bfloat16: np.dtype) -> str:
    """The routing `auto` runs here: the kept answer for this machine, else measured
    now with `runners` (`mkl` and `onednn`) and kept."""

    def measure_now() -> tuple[str, dict[str, Any]]:
        seconds = measure(runners, bfloat16)
        return decide(seconds), {"seconds": seconds, "shapes": [list(s) for s in SHAPES], "margin": MARGIN}

    path = blas_choice.record_path("bf16-gemm-choice", key(library_files), _LABEL)
    return blas_choice.remembered(path, _LABEL, lambda c: c in ROUTINGS, measure_now)
