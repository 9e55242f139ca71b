"""Stopping a `shardc-train --np 4` job (MPICH's mpiexec, the ranks oversubscribed on
this machine's CPUs): SIGTERM, SIGINT and SIGHUP to the launcher mid-training and during
a save, SIGKILL to the launcher, SIGKILL to one rank. Each time no process of the job is
alive 5 s later, one line says what stopped it and the step `--resume` continues from
(where the launcher lives to say it), and `--resume` ends bitwise equal to an
uninterrupted run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from _cluster_jobs import alive, env, job_processes, launched, run, same_params, wait_for

from shardc.training.checkpoint import CRASH_ENV, MANIFEST, complete_checkpoints, step_dir

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs and signals sent to running trainers

STEPS = ["--steps", "60", "--checkpoint-every", "5", "--keep", "3"]
RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference")
    p = run(launched(out, *STEPS))
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def _start(out: Path, pause_save_at: int | None = None, mpiexec: str | None = None) -> subprocess.Popen:
    e = env()
    if mpiexec is not None:  # the launcher shardc-train uses (SHARDC_MPIEXEC)
        e["SHARDC_MPIEXEC"] = mpiexec
    if pause_save_at is not None:  # rank 1 waits in the save of that step, its shard written
        e[CRASH_ENV] = f"1:{pause_save_at}:save:pause"
    return subprocess.Popen(launched(out, *STEPS), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)


def _rank_process(job: subprocess.Popen, rank: int):
    """The rank's own process (the watcher shardc's launcher leaves above it has the
    same environment: the rank is the one whose parent is a rank too)."""
    for p in job_processes(job.pid):
        try:
            mine, parent = p.environ(), p.parent().environ()
        except Exception:  # noqa: BLE001 - a process that ended meanwhile
            continue
        if any(mine.get(v) == str(rank) for v in RANK_VARS) and any(v in parent for v in RANK_VARS):
            return p
    raise AssertionError(f"rank {rank} not found")


def _stopped(job: subprocess.Popen, sig: int, target=None) -> tuple[int, str, str]:
    """Send `sig` (to the launcher, or `target`), then: no process of the job alive 5 s
    later; returns (status, stdout, stderr)."""
    procs = job_processes(job.pid)
    assert len(procs) >= 6, [p.cmdline() for p in procs]  # launcher, mpiexec, proxy, ranks
    os.kill(target.pid if target is not None else job.pid, sig)
    time.sleep(5)
    left = alive(procs)
    assert not left, [(p.pid, p.cmdline()) for p in left]
    out, err = job.communicate(timeout=30)
    return job.returncode, out, err


def _resume_equals(out: Path, reference: Path, line: str) -> None:
    m = re.search(r"--resume continues from step (\d+) \((.*)\)$", line)
    assert m, line
    step = int(m.group(1))
    assert complete_checkpoints(out / "checkpoints")[-1] == (step, Path(m.group(2)))
    p = run(launched(out, *STEPS, "--resume"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"resuming from {step_dir(out / 'checkpoints', step)} (step {step}," in p.stdout
    assert same_params(out, reference)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_stop_signal_mid_training(tmp_path, reference, sig):
    job = _start(tmp_path)
    wait_for(lambda: (step_dir(tmp_path / "checkpoints", 10) / MANIFEST).exists(), job, what="the checkpoint of step 10")
    status, _, err = _stopped(job, sig)
    assert status == 128 + sig, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"shardc-train: stopped by {signal.Signals(sig).name}: the job's 4 ranks ended; --resume continues from step "), err
    assert err.count("shardc-train:") == 1 and "Traceback" not in err, err
    _resume_equals(tmp_path, reference, last)


def test_sigterm_during_a_save(tmp_path, reference):
    job = _start(tmp_path, pause_save_at=15)
    ck = tmp_path / "checkpoints"
    wait_for(lambda: any((d / "rank-00001.safetensors").exists() for d in ck.glob(".tmp-step-00000015-*")), job, what="the save of step 15")
    status, _, err = _stopped(job, signal.SIGTERM)
    assert status == 128 + signal.SIGTERM
    last = err.strip().splitlines()[-1]
    assert last.endswith(f"--resume continues from step 10 ({step_dir(ck, 10)})"), err
    assert list(ck.glob(".tmp-step-*")), "the interrupted save is left for the next job to clear"
    _resume_equals(tmp_path, reference, last)
    assert not list(ck.glob(".tmp-step-*"))


@pytest.mark.parametrize("moment", ["step", "save"])
def test_sigkill_of_the_launcher_leaves_no_rank(tmp_path, reference, moment):
    job = _start(tmp_path, pause_save_at=15 if moment == "save" else None)
    ck = tmp_path / "checkpoints"
    if moment == "save":
        wait_for(lambda: any(ck.glob(".tmp-step-00000015-*/rank-00001.safetensors")), job, what="the save of step 15")
    else:
        wait_for(lambda: (step_dir(ck, 10) / MANIFEST).exists(), job, what="the checkpoint of step 10")
    status, _, _ = _stopped(job, signal.SIGKILL)
    assert status == -signal.SIGKILL
    newest = complete_checkpoints(ck)[-1]
    time.sleep(1)
    assert complete_checkpoints(ck)[-1] == newest  # nothing trains on behind the user's back
    _resume_equals(tmp_path, reference, f"--resume continues from step {newest[0]} ({newest[1]})")


def test_killed_rank_is_named(tmp_path, reference):
    job = _start(tmp_path)
    wait_for(lambda: (step_dir(tmp_path / "checkpoints", 10) / MANIFEST).exists(), job, what="the checkpoint of step 10")
    victim = _rank_process(job, 2)
    status, _, err = _stopped(job, signal.SIGKILL, target=victim)
    assert status != 0
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"shardc-train: rank 2 (pid {victim.pid} on "), err
    assert "was killed by SIGKILL; the job ended; --resume continues from step " in last, err
    _resume_equals(tmp_path, reference, last)


OPEN_MPI = "/usr/bin/mpiexec.openmpi"  # Debian's Open MPI (.ci/system-deps)


@pytest.mark.parametrize("how", ["SIGTERM", "rank", "SIGKILL"])
def test_open_mpi_job_stops(tmp_path, reference, how):
    """The same under Open MPI's mpiexec: its ranks are the launcher's children, not a
    proxy's; `--oversubscribe` becomes its flag."""
    if not os.path.exists(OPEN_MPI):
        pytest.skip(f"{OPEN_MPI} is absent (apt-get install openmpi-bin libopenmpi-dev)")
    job = _start(tmp_path, mpiexec=OPEN_MPI)
    wait_for(lambda: (step_dir(tmp_path / "checkpoints", 10) / MANIFEST).exists(), job, what="the checkpoint of step 10")
    assert any("--oversubscribe" in p.cmdline() for p in job_processes(job.pid))
    if how == "rank":
        victim = _rank_process(job, 1)
        status, _, err = _stopped(job, signal.SIGKILL, target=victim)
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"shardc-train: rank 1 (pid {victim.pid} on ") and "was killed by SIGKILL; the job ended; --resume continues from step " in last, err
    elif how == "SIGTERM":
        status, _, err = _stopped(job, signal.SIGTERM)
        last = err.strip().splitlines()[-1]
        assert status == 128 + signal.SIGTERM and last.startswith("shardc-train: stopped by SIGTERM: the job's 4 ranks ended; --resume continues from step "), err
    else:
        status, _, _ = _stopped(job, signal.SIGKILL)
        newest = complete_checkpoints(tmp_path / "checkpoints")[-1]
        last = f"--resume continues from step {newest[0]} ({newest[1]})"
    assert status != 0
    _resume_equals(tmp_path, reference, last)
