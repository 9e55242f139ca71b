"""Which BLAS `SHARDC_BLAS=auto` runs: the faster one here, measured once per machine.

Neither library wins everywhere. MKL (what PyTorch's CPU build runs) takes its AVX-512
paths only on Intel processors; on an AMD EPYC with AVX-512 numpy's OpenBLAS multiplied
at 242-246 GFLOP/s on one thread against MKL's 102-110, and even held to its Haswell
kernels (`OPENBLAS_CORETYPE=Haswell`) at 125-127. A rule by vendor or flag would be a
guess; a measurement is not: a few products of a GPT step's shapes, each library's best
of several rounds by the thread's CPU clock (other processes' load does not count).

The answer is kept in the cache directory (`blas-choice-<key>.json`), keyed by what it
depends on: the processor (model and flags), both library files, numpy's version, the
thread count and OpenBLAS's own variables. The first process to measure publishes its
answer with a hard link (one writer wins); every process then reads that file, so the
ranks on one machine run one library and a replicated product rounds alike on each.
Across hosts, the entry points of a run make rank 0's answer everyone's
(`blas.agree`). Delete the file to measure again. `bf16_gemm_choice.py` keeps its own
answer with the same record functions. With `SHARDC_CACHE=0` nothing is kept
and each process measures for itself (`agree` still aligns the ranks of a run).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from shardc import cache_dir as cache_dirs

ROUNDS = 5
"""Rounds of the probe; each library's best round per shape counts."""

# (batch, m, n, k, transpose a): a projection, a weight gradient (a read transposed),
# attention's per-head scores.
SHAPES = ((1, 512, 768, 256, False), (1, 256, 768, 512, True), (16, 128, 128, 64, False))

_ROW, _NOTRANS, _TRANS = 101, 111, 112


def cpu_description() -> str:
    """The processor's model name and flags (Linux), else the platform's description."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("model name", "flags", "vendor_id"))]
        return "".join(sorted(set(lines)))
    except OSError:
        import platform

        return platform.processor() or platform.machine()


def file_id(path: str | None) -> str:
    """A library file's identity for a record's key: its real path, size and mtime."""
    if path is None:
        return "-"
    try:
        st = os.stat(path)
        return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        return f"{path}:missing"


def key(library_files: Sequence[str | None]) -> str:
    """The record's key: this processor, the `library_files` (`blas.library_files()`:
    MKL's and OpenBLAS's, None where absent), numpy and the variables the speed follows."""
    parts = [
        cpu_description(),
        *(file_id(path) for path in library_files),
        np.__version__,
        os.environ.get("SHARDC_BLAS_THREADS", "1"),
        os.environ.get("OPENBLAS_CORETYPE", ""),
        os.environ.get("OPENBLAS_L2_SIZE", ""),
        str(ROUNDS),
        repr(SHAPES),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def record_path(kind: str, record_key: str, label: str) -> str | None:
    """Where the cache directory keeps a measured answer (`<kind>-<record_key>.json`);
    None where nothing is kept. `label` names it in warnings."""
    if not cache_dirs.enabled():
        return None
    root = cache_dirs.usable_dir(cache_dirs.cache_root(), lambda m: cache_dirs.warning(label, m))
    return os.path.join(root, f"{kind}-{record_key}.json") if root is not None else None


def read_record(path: str) -> dict[str, Any] | None:
    """A kept answer (a dict with a string `choice`), None where absent or unreadable."""
    try:  # a regular file only: a FIFO in its place would block the read forever
        got = json.loads(cache_dirs.read_regular(path, 1 << 20))
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) and isinstance(got.get("choice"), str) else None


def publish(path: str, record: dict[str, Any], label: str) -> None:
    """Write `record` at `path` unless another process did first (a hard link of a
    finished temporary file: readers never see half a file)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    except OSError as e:
        cache_dirs.warning(label, f"cannot keep the measurement in {path}: {e.strerror}")
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def measure(libs: dict[str, Any]) -> dict[str, float]:
    """Seconds of thread CPU time each library takes for `SHAPES` (best round each)."""
    rng = np.random.default_rng(0)
    cases = []
    for batch, m, n, k, ta in SHAPES:
        a = rng.standard_normal((batch, k, m) if ta else (batch, m, k)).astype(np.float32)
        b = rng.standard_normal((batch, k, n)).astype(np.float32)
        c = np.empty((batch, m, n), np.float32)
        cases.append((batch, m, n, k, ta, a, b, c))
    best = {name: [float("inf")] * len(cases) for name in libs}
    f32 = np.dtype(np.float32)
    for _ in range(ROUNDS):
        for name, lib in libs.items():
            for i, (batch, m, n, k, ta, a, b, c) in enumerate(cases):
                pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
                t = time.thread_time()
                if batch == 1 or f32 not in lib.strided:
                    for j in range(batch):
                        lib.gemm[f32](
                            _ROW, _TRANS if ta else _NOTRANS, _NOTRANS, m, n, k, 1.0,
                            pa + j * a[0].nbytes, m if ta else k, pb + j * b[0].nbytes, n, 0.0, pc + j * c[0].nbytes, n,
                        )
                else:
                    lib.strided[f32](
                        _ROW, _TRANS if ta else _NOTRANS, _NOTRANS, m, n, k, 1.0,
                        pa, m if ta else k, m * k, pb, n, k * n, 0.0, pc, n, m * n, batch,
                    )
                best[name][i] = min(best[name][i], time.thread_time() - t)
    return {name: sum(ts) for name, ts in best.items()}


def remembered(path: str | None, label: str, valid: Callable[[str], bool], measure_now: Callable[[], tuple[str, dict[str, Any] | None]]) -> str:
    """The answer kept at `path` where `valid` accepts it, else `measure_now()`'s:
    (answer, record to keep beside it, None for an answer not worth keeping). The first
    answer published wins, so every process on a machine runs the same; `path` None
    (the cache off) keeps nothing."""
    if path is not None and (kept := read_record(path)) is not None and valid(kept["choice"]):
        return kept["choice"]
    choice, record = measure_now()
    if path is None or record is None:
        return choice
    publish(path, {"choice": choice, **record}, label)
    kept = read_record(path)
    return kept["choice"] if kept is not None and valid(kept["choice"]) else choice


def choose(load: Callable[[str], Any], libraries: Sequence[str], library_files: Sequence[str | None]) -> str:
    """The library name `auto` runs (one of `libraries`, which `load` loads, or `numpy`
    when none loads): the kept answer for this machine, else measured now (and kept)."""

    def measure_now() -> tuple[str, dict[str, Any] | None]:
        libs = {name: lib for name in libraries if (lib := load(name)) is not None}
        if len(libs) < 2:  # nothing to choose between: nothing measured or kept
            return next(iter(libs), "numpy"), None
        seconds = measure(libs)
        record = {"seconds": seconds, "libraries": {n: lib.describe() for n, lib in libs.items()}, "shapes": [list(s) for s in SHAPES]}
        return min(seconds, key=lambda n: seconds[n]), record

    path = record_path("blas-choice", key(library_files), "BLAS choice")
    return remembered(path, "BLAS choice", lambda c: c == "numpy" or (c in libraries and load(c) is not None), measure_now)
