"""What the reliability tests of stopping, locking and checkpoints share: the smallest
GPT job as `shardc-train` runs it (under `--np`, or `mpiexec -n N` directly), waiting for
a checkpoint or a save in progress, and the processes of a job."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

MPIEXEC = shutil.which("mpiexec")
TRAIN = [sys.executable, "-m", "shardc.tools.train"]
# the smallest GPT the 4-rank tp=2 FSDP grid takes: each step a few milliseconds
MODEL = [
    "--n-layer", "1", "--n-head", "4", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "1",
    "--tp", "2", "--fsdp", "--eval-every", "0", "--quiet",
]


def env() -> dict[str, str]:
    e = dict(os.environ, PYTHONUNBUFFERED="1")
    e.pop("SHARDC_TEST_CRASH_AT", None)
    return e


def need_mpiexec() -> str:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    return MPIEXEC


def launched(out: Path, *extra: str, n: int = 4) -> list[str]:
    """`shardc-train --np N` (shardc's launcher; this machine has fewer CPUs: --oversubscribe)."""
    need_mpiexec()
    return [*TRAIN, "--np", str(n), "--oversubscribe", *MODEL, "--out", str(out), *extra]


def under_mpiexec(out: Path, *extra: str, n: int = 4) -> list[str]:
    """The ranks started by `mpiexec -n N` itself."""
    return [need_mpiexec(), "-n", str(n), *TRAIN, *MODEL, "--out", str(out), *extra]


def run(cmd: list[str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env())


def wait_for(predicate, job: subprocess.Popen | None = None, timeout: float = 150, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if job is not None and job.poll() is not None:
            raise AssertionError(f"the job ended (status {job.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def job_processes(pid: int) -> list:
    """The process `pid` and everything below it (psutil.Process objects)."""
    import psutil

    try:
        top = psutil.Process(pid)
        return [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def alive(procs: list) -> list:
    """Those of `procs` still running (a zombie no one reaped has ended)."""
    import psutil

    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def same_params(a: Path, b: Path) -> bool:
    x, y = np.load(a / "params.npz"), np.load(b / "params.npz")
    return set(x.files) == set(y.files) and all(np.array_equal(x[k], y[k]) for k in x.files)


def no_traceback(p: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
