"""What the benchmarks share: launching themselves under mpiexec; timing our call against
mpi4py's side by side (interleaved, the order alternating so neither always goes first),
reported as the slowest rank's median and best ratios; a process's peak resident memory
over the timed steps; the processor's name for the report."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np


def under_mpiexec(script: str, ranks: int = 2) -> None:
    """Re-run `script` (with this command's arguments) under `mpiexec -n ranks` unless
    this process already is an MPI rank; exits with the child's status."""
    if any(v in os.environ for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")):
        return
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        sys.exit(f"{os.path.relpath(script)}: mpiexec is not on PATH")
    sys.exit(subprocess.call([mpiexec, "-n", str(ranks), sys.executable, os.path.abspath(script), *sys.argv[1:]]))


def _time(comm, fn: Callable[[np.ndarray], object], x: np.ndarray) -> float:
    comm.Barrier()
    t0 = time.perf_counter()
    fn(x)
    comm.Barrier()
    return time.perf_counter() - t0


def compare(comm, ours: Callable[[np.ndarray], object], theirs: Callable[[np.ndarray], object], x: np.ndarray, repeats: int, rtol: float) -> tuple[float, float, float, float]:
    """(our median, their median, our best, their best) seconds, each the maximum over
    ranks; the results are checked equal first (which also warms both up)."""
    from mpi4py import MPI

    np.testing.assert_allclose(ours(x), theirs(x), rtol=rtol)
    t_ours: list[float] = []
    t_theirs: list[float] = []
    pair = ((t_ours, ours), (t_theirs, theirs))
    for k in range(repeats):
        for times, fn in pair if k % 2 else pair[::-1]:
            times.append(_time(comm, fn, x))
    stats = (statistics.median(t_ours), statistics.median(t_theirs), min(t_ours), min(t_theirs))
    mo, mt, bo, bt = (comm.allreduce(v, op=MPI.MAX) for v in stats)
    return mo, mt, bo, bt


def reset_peak_rss() -> bool:
    """Restart the resident-set high-water mark of this process (Linux >= 4.0), so that
    `peak_rss` counts what the timed steps hold, not an earlier transient (a compile)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def resident_rss() -> int:
    """Bytes resident now (VmRSS), 0 where /proc is absent: read with `reset_peak_rss`, it
    tells what a process already held (libraries, the model, a compiler's leftovers)
    from what its timed steps added."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def peak_rss() -> int:
    """Bytes: VmHWM of this process (since the last reset), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def processor() -> str:
    """The CPU's model name and the cores this process may use (figures are per machine)."""
    import platform

    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            name = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), name)
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{name}, {cores} cores"
