"""`--out` and the checkpoint directory: made and tested before anything is compiled,
and held by one job at a time (under `mpiexec -n 2`: rank 0 holds them, every rank
stops with rank 0's one line)."""

from __future__ import annotations

import re
import subprocess

import pytest
from _cluster_jobs import MODEL, TRAIN, env, no_traceback, run, under_mpiexec, wait_for

from shardc.training.checkpoint import MANIFEST, complete_checkpoints, step_dir
from shardc.training.outdir import LOCK_NAME

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs and signals sent to running trainers

SHORT = ["--steps", "10", "--checkpoint-every", "5"]


def _one_error(p: subprocess.CompletedProcess[str], start: str) -> str:
    assert p.returncode == 1, p.stdout + p.stderr
    no_traceback(p)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"shardc-train: error: {start}"), p.stderr
    assert "compiled the step" not in p.stdout and "loaded the compiled step" not in p.stdout  # found before compiling
    return lines[0]


def test_two_jobs_on_one_out(tmp_path):
    out = tmp_path / "out"
    first = subprocess.Popen(under_mpiexec(out, "--steps", "100000", "--checkpoint-every", "5", "--keep", "2", n=2), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        wait_for(lambda: (step_dir(out / "checkpoints", 5) / MANIFEST).exists(), first, what="the first job's checkpoint of step 5")
        second = run(under_mpiexec(out, *SHORT, n=2))
        line = _one_error(second, f"--out {out} is in use by another shardc-train job (pid ")
        assert re.search(r"\(pid (\d+) on \S+, started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\): wait for it to end or stop it, or choose another --out$", line), line
        holder = int(re.search(r"pid (\d+)", line).group(1))
        import psutil

        assert "shardc.tools.train" in " ".join(psutil.Process(holder).cmdline())  # the first job's rank 0
        # its temporary directories were left alone, and it keeps saving
        seen = complete_checkpoints(out / "checkpoints")[-1][0]
        wait_for(lambda: complete_checkpoints(out / "checkpoints")[-1][0] > seen, first, what="the first job's next checkpoint")
        assert first.poll() is None
        # a simulated job (one process) is refused the same way
        solo = run([*TRAIN, *MODEL, "--simulate", "2", "--out", str(out), *SHORT])
        _one_error(solo, f"--out {out} is in use by another shardc-train job (pid {holder} on ")
    finally:
        first.terminate()
        first.communicate(timeout=60)
    # the lock ends with the job, however it ends: the next job starts (and --resume continues)
    p = run(under_mpiexec(out, "--resume", "--steps", str(complete_checkpoints(out / "checkpoints")[-1][0] + 5), n=2))
    assert p.returncode == 0, p.stdout + p.stderr


def test_out_that_cannot_be_written(tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    for bad in ("/dev/null", str(afile)):
        p = run(under_mpiexec(tmp_path / "unused", *SHORT, "--out", bad, n=2))
        _one_error(p, f"--out {bad} is not a directory: name a directory")
    p = run(under_mpiexec(tmp_path / "out", *SHORT, "--checkpoint-dir", str(afile / "sub"), n=2))
    _one_error(p, f"--checkpoint-dir {afile / 'sub'}: cannot create it (Not a directory)")


def test_read_only_out(tmp_path):
    """A read-only directory (a read-only tmpfs: root writes through permissions)."""
    import os

    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() == 0:
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)], capture_output=True, text=True)
        if m.returncode != 0:
            pytest.skip(f"cannot mount a read-only tmpfs here ({m.stderr.strip()}): root writes through permissions")
    else:
        ro.chmod(0o500)
    try:
        p = run(under_mpiexec(ro, *SHORT, n=2))
        _one_error(p, f"--out {ro} is not writable (Read-only file system" if os.geteuid() == 0 else f"--out {ro} is not writable (Permission denied")
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(ro)], check=False)
        else:
            ro.chmod(0o700)


def test_lock_names_its_holder_and_ends_with_it(tmp_path):
    from shardc.training.outdir import DirectoryError, DirectoryLock

    a = DirectoryLock(tmp_path).acquire()
    with pytest.raises(DirectoryError, match=rf"--out {tmp_path} is in use by another shardc-train job \(pid {__import__('os').getpid()} on "):
        DirectoryLock(tmp_path).acquire()
    a.release()
    DirectoryLock(tmp_path).acquire().release()
    assert (tmp_path / LOCK_NAME).is_file()  # left in place: the kernel drops the lock with its descriptor
