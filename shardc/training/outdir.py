"""A training job's output directories: made and tested before anything is compiled,
and held by one job at a time.

`prepare_directory` creates `--out` (or the checkpoint directory) and writes and removes
a probe file in it, so an unwritable, read-only or non-directory path is one line before
training instead of a lost run after it. `DirectoryLock` takes an exclusive `flock` on
`DIR/.shardc-train.lock` for the life of the process and records who holds it (pid, host,
start time); a second job on the same directory gets one line naming the holder. The
lock ends with the process, however it ends (the kernel drops it), so a killed job never
leaves a stale lock.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import socket
from pathlib import Path

LOCK_NAME = ".shardc-train.lock"


class DirectoryError(Exception):
    """An output directory that cannot be used (one line)."""


def prepare_directory(path: str | Path, flag: str) -> Path:
    """Create `path` (and its parents) and check that files can be written in it;
    `flag` names the option in the message (`--out`, `--checkpoint-dir`)."""
    d = Path(path)
    if d.exists() and not d.is_dir():
        raise DirectoryError(f"{flag} {d} is not a directory: name a directory (it is created if missing)")
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DirectoryError(f"{flag} {d}: cannot create it ({e.strerror or e})") from None
    probe = d / f".shardc-write-test-{os.getpid()}"
    try:
        with open(probe, "wb") as f:
            f.write(b"shardc")
        probe.unlink()
    except OSError as e:
        raise DirectoryError(f"{flag} {d} is not writable ({e.strerror or e}): choose another directory") from None
    return d


class DirectoryLock:
    """An exclusive lock on a directory for this process's life (or until `release`)."""

    def __init__(self, directory: str | Path, flag: str = "--out"):
        self.path = Path(directory) / LOCK_NAME
        self.flag, self.directory = flag, Path(directory)
        self.fd: int | None = None

    def acquire(self) -> DirectoryLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise DirectoryError(f"{self.flag} {self.directory}: cannot create its lock file ({e.strerror or e})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise DirectoryError(
                f"{self.flag} {self.directory} is in use by another shardc-train job ({holder}): "
                f"wait for it to end or stop it, or choose another {self.flag}"
            ) from None
        except OSError as e:  # a filesystem without flock: say so rather than risk two writers silently
            os.close(fd)
            raise DirectoryError(f"{self.flag} {self.directory}: cannot lock it ({e.strerror or e})") from None
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": now}).encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode())
        return f"pid {int(info['pid'])} on {info['host']}, started {info['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "pid unknown: its lock file is being written"


_HELD: list[DirectoryLock] = []  # the locks of this process's job, held until it exits


def hold(directory: str | Path, flag: str) -> DirectoryLock:
    """Lock `directory` for the rest of this process (idempotent per directory)."""
    d = Path(directory).resolve()
    for lock in _HELD:
        if lock.directory.resolve() == d:
            return lock
    lock = DirectoryLock(directory, flag).acquire()
    _HELD.append(lock)
    return lock


def release_all() -> None:
    """Drop every lock `hold` took (tests and in-process drivers that run several jobs)."""
    while _HELD:
        _HELD.pop().release()


__all__ = ["LOCK_NAME", "DirectoryError", "DirectoryLock", "hold", "prepare_directory", "release_all"]
