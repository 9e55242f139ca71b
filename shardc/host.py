"""Facts about the host this process runs on, which the launcher and the cost model share."""

from __future__ import annotations

import os
from pathlib import Path


def physical_cores() -> int:
    """Cores (not hardware threads: two threads of a core share its arithmetic) this process
    may run on. Open MPI gives a host this many slots by default, and the ranks an mpiexec
    starts here share them, which the cost model prices."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
    cores = set()
    for c in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{c}/topology")
        try:
            cores.add((topology.joinpath("physical_package_id").read_text().strip(), topology.joinpath("core_id").read_text().strip()))
        except OSError:
            cores.add(("cpu", str(c)))
    return max(1, len(cores))
