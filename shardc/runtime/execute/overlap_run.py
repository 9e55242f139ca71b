"""The run time of the overlap schedule (`overlap.py` schedules and emits it): the
starts in flight, their waits and progress. No xDSL here, so a compile-cache hit loads
none; overlap.py re-exports every name."""

from __future__ import annotations

import os
from typing import Any

from shardc.runtime.execute.comm import Pending, PerThread

DEFAULT_ON = True
"""A scheduled program's starts overlap when SHARDC_OVERLAP is unset at run time."""


def scheduling_asked() -> bool:
    """Whether the environment asks code generation for the schedule
    (`SHARDC_OVERLAP=1` at compile time; `overlap.scheduling` and the compile-cache key)."""
    return os.environ.get("SHARDC_OVERLAP", "") == "1"


def enabled() -> bool:
    """Whether starts run nonblocking now (`SHARDC_OVERLAP`, read at every start)."""
    v = os.environ.get("SHARDC_OVERLAP")
    if v is None or v == "":
        return DEFAULT_ON
    return v != "0"


def _max_inflight() -> int:
    try:
        return max(0, int(os.environ.get("SHARDC_OVERLAP_MAX_INFLIGHT", "0")))
    except ValueError:
        return 0


_local = PerThread()  # the collectives in flight


def _inflight() -> list[Pending]:
    return _local.q


def launch(p: Pending) -> Pending:
    """Track a started collective (for `progress`), waiting for the oldest one first
    when the cap is reached."""
    q = _inflight()
    q.append(p)
    cap = _max_inflight()
    while cap and len(q) > cap:
        q.pop(0).wait()
    return p


def wait(p: Pending) -> Any:
    """Complete `p` and return its result."""
    try:
        return p.wait()
    finally:
        q = _inflight()
        if p in q:
            q.remove(p)


def progress() -> None:
    """Let MPI advance the collectives in flight: test them oldest first, up to the first
    that has not completed (one MPI_Test drives MPICH's whole progress engine).
    `SHARDC_OVERLAP_PROGRESS=0` skips the tests (progress then only inside waits, or
    on MPICH's async progress thread)."""
    q = _local.q
    if q and os.environ.get("SHARDC_OVERLAP_PROGRESS") == "0":
        return
    while q:
        if not q[0].test():
            return
        q.pop(0)


def in_flight() -> int:
    """How many collectives this rank has started and not waited for (tests)."""
    return len(_inflight())
