"""Kill-and-resume under real `mpiexec -n 4` (tp=2, FSDP): a rank killed in the middle
of a save (the test hook), rank 0 killed between writing the manifest and the rename, a
rank SIGKILLed by the test while the job trains; each time the job resumes from the
newest complete checkpoint, and the run ends with parameters and losses bitwise equal
to the uninterrupted run's."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from shardc.training.checkpoint import CRASH_ENV, MANIFEST, complete_checkpoints, step_dir

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MPIEXEC = shutil.which("mpiexec")
STEPS, EVERY = 40, 5
ARGS = [
    "--n-layer", "1", "--n-head", "4", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "1",
    "--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--keep", "3", "--tp", "2", "--fsdp",
    "--eval-every", "0", "--quiet",
]


def _cmd(out, *extra: str) -> list[str]:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    return [MPIEXEC, "-n", "4", sys.executable, "-m", "shardc.tools.train", *ARGS, "--out", str(out), *extra]


def _env(crash: str | None = None) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop(CRASH_ENV, None)
    if crash:
        env[CRASH_ENV] = crash
    return env


def _run(out, *extra: str, crash: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(_cmd(out, *extra), capture_output=True, text=True, timeout=180, env=_env(crash))


def _steps(out) -> list[int]:
    return [s for s, _ in complete_checkpoints(out / "checkpoints")]


def _history(out) -> list[float]:
    d = complete_checkpoints(out / "checkpoints")[-1][1]
    return [e["loss"] for e in json.loads((d / MANIFEST).read_text())["progress"]["history"]]


def _rank_of(env: dict[str, str]) -> str | None:
    """A rank process's rank, as MPICH (PMI), Open MPI or PMIx sets it."""
    return next((env[v] for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK") if v in env), None)


def _kill_rank_when(out, rank: int, step: int) -> int:
    """Run the job, SIGKILL rank `rank` as soon as the checkpoint of `step` is complete;
    returns mpiexec's exit status."""
    import psutil

    job = subprocess.Popen(_cmd(out, "--resume"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env())
    try:
        deadline = time.monotonic() + 150
        while not (step_dir(out / "checkpoints", step) / MANIFEST).exists():
            assert job.poll() is None, job.stdout.read()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        victim = next(
            p for p in psutil.Process(job.pid).children(recursive=True)
            if "shardc.tools.train" in " ".join(p.cmdline()) and _rank_of(p.environ()) == str(rank)
        )
        os.kill(victim.pid, signal.SIGKILL)
        return job.wait(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
        job.communicate()


def test_kill_and_resume_is_bitwise_equal(tmp_path):
    ref, out = tmp_path / "ref", tmp_path / "run"
    p = _run(ref)
    assert p.returncode == 0, p.stdout + p.stderr

    # Rank 1 dies in the save of step 15, its shard file written, the manifest not.
    p = _run(out, crash="1:15:save")
    assert p.returncode != 0
    assert _steps(out) == [5, 10] and len(list((out / "checkpoints").glob(".tmp-step-00000015-*"))) == 1, p.stdout + p.stderr

    # Resumed from 10; rank 0 dies at step 20 between the manifest and the rename.
    p = _run(out, "--resume", crash="0:20:manifest")
    assert p.returncode != 0, p.stdout + p.stderr
    assert "resuming from" in p.stdout and "step 10, saved on 4 ranks" in p.stdout
    assert _steps(out) == [5, 10, 15], p.stdout + p.stderr
    assert [(d / MANIFEST).is_file() for d in (out / "checkpoints").glob(".tmp-step-00000020-*")] == [True]  # complete, never renamed: ignored

    # Resumed from 15; the test SIGKILLs rank 2 while it trains past step 25.
    assert _kill_rank_when(out, 2, 25) != 0
    assert _steps(out)[-1] < STEPS

    p = _run(out, "--resume")
    assert p.returncode == 0, p.stdout + p.stderr
    assert _steps(out)[-1] == STEPS
    got, want = np.load(out / "params.npz"), np.load(ref / "params.npz")
    assert set(got.files) == set(want.files)
    for k in want.files:
        assert np.array_equal(got[k], want[k]), k
    assert _history(out) == _history(ref)
    assert (out / "loss.csv").read_text().count("\n") == STEPS + 1  # the whole run's log

    # A corrupt piece that only rank 3 checks (its share of the checksums): every rank
    # refuses to start from it, and rank 0 alone says so, in one line (named: from the
    # directory of checkpoints the run would fall back to the older intact one).
    d = complete_checkpoints(out / "checkpoints")[-1][1]
    f = d / "rank-00003.safetensors"
    raw = bytearray(f.read_bytes())
    raw[-1] ^= 0x01
    f.write_bytes(bytes(raw))
    p = _run(out, "--resume", str(d))
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"shardc-train: error: checkpoint {d}: checksum mismatch in rank-00003.safetensors ("), p.stderr
