"""Where shardc's caches live and whether a directory is safe to keep them in.

Shared by the compile cache (`shardc.runtime.codegen.cache`) and shardc-opt's result cache
(`shardc.tools.opt_cache`). The standard library only: shardc-opt's start-up reads it
before anything else is imported. A cache entry is code the next run executes, so a
directory another user owns, or one that group or others may write, is refused (IR is
data: nothing from outside this user's files may reach generated code)."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable
from typing import TypeVar

P = TypeVar("P", str, "os.PathLike[str]")


def enabled() -> bool:
    """`SHARDC_CACHE=0` turns every cache off."""
    return os.environ.get("SHARDC_CACHE", "1") != "0"


def cache_root() -> str:
    """`$SHARDC_CACHE_DIR`, else `$XDG_CACHE_HOME/shardc`, else `~/.cache/shardc` (a
    string: pathlib is not imported on shardc-opt's start-up path)."""
    if os.environ.get("SHARDC_CACHE_DIR"):
        return os.environ["SHARDC_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "shardc")


def warning(label: str, message: str) -> None:
    """`shardc: warning: LABEL: MESSAGE`, one line on stderr."""
    sys.stderr.write(f"shardc: warning: {label}: {message}\n")
    sys.stderr.flush()


def debug(label: str, message: str) -> None:
    """One line on stderr when `SHARDC_CACHE_DEBUG` is set."""
    if os.environ.get("SHARDC_CACHE_DEBUG", "0") not in ("", "0"):
        sys.stderr.write(f"shardc: {label}: {message}\n")
        sys.stderr.flush()


def usable_dir(path: P, warn: Callable[[str], None]) -> P | None:
    """`path`, made 0700 if missing, when this user owns it and nobody else may write
    it; otherwise None, after one `warn` line saying why."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError as e:
        warn(f"cannot use {path}: {e.strerror}; not caching")
        return None
    if not stat.S_ISDIR(st.st_mode):
        warn(f"{path} is not a directory; not caching")
        return None
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        warn(f"{path} belongs to another user (uid {st.st_uid}); not caching")
        return None
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        warn(f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}); not caching")
        return None
    return path


# ---------------------------------------------------------------------------------------
# Authentication: what this user's shardc wrote, and nothing else, is read back
# ---------------------------------------------------------------------------------------

MAX_ENTRY_BYTES = 8 << 30
"""The largest cache file read back (`SHARDC_CACHE_MAX_BYTES` overrides): a file that
claims more is refused before a byte of it is read."""

_KEY_BYTES = 32
_KEYS: dict[str, bytes | None] = {}


def key_path() -> str:
    """`$SHARDC_CACHE_KEY`, else `$XDG_CONFIG_HOME/shardc/cache.key`, else
    `~/.config/shardc/cache.key`: outside every cache directory, so that a cache that is
    restored by CI, copied from another machine or written by someone who can write it
    never carries the key its entries are checked with."""
    if os.environ.get("SHARDC_CACHE_KEY"):
        return os.environ["SHARDC_CACHE_KEY"]
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "shardc", "cache.key")


def max_entry_bytes() -> int:
    try:
        return int(os.environ.get("SHARDC_CACHE_MAX_BYTES", MAX_ENTRY_BYTES))
    except ValueError:
        return MAX_ENTRY_BYTES


def read_regular(path: str, limit: int | None = None) -> bytes:
    """The bytes of `path` if it is a regular file (not a symlink, FIFO, socket or
    device) of at most `limit` bytes (default `max_entry_bytes()`); OSError otherwise.
    Opened without following a final symlink and without blocking (a FIFO would wait
    for a writer forever), then checked on the open descriptor."""
    limit = max_entry_bytes() if limit is None else limit
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(e.errno, "a symbolic link, not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file")
        if st.st_size > limit:
            raise OSError(0, f"{st.st_size} bytes, more than the {limit}-byte limit")
        chunks, left = [], st.st_size + 1  # one byte more: a file that grew is refused
        while left > 0:
            got = os.read(fd, min(left, 1 << 24))
            if not got:
                break
            chunks.append(got)
            left -= len(got)
        data = b"".join(chunks)
        if len(data) != st.st_size:
            raise OSError(0, "changed while it was read")
        return data
    finally:
        os.close(fd)


def _make_key(path: str) -> None:
    """A fresh random key at `path` (0600, its directory 0700), unless a key is there
    already: written to a temporary file and hard-linked into place, so a process
    racing with this one reads a whole key or none."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.uname().nodename}.{os.getpid()}.tmp"  # hosts sharing a home make it at once
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(os.urandom(_KEY_BYTES).hex() + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
    finally:
        os.unlink(tmp)


def cache_key(warn: Callable[[str], None]) -> bytes | None:
    """This user's key for authenticating cache files (`key_path()`), created on first
    use; None, after one `warn` line, when it cannot be made or read or is not a 0600
    file of this user's (then nothing is cached)."""
    path = key_path()
    if path in _KEYS:
        return _KEYS[path]
    key: bytes | None = None
    try:
        if not os.path.lexists(path):
            _make_key(path)
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
        try:
            st = os.fstat(fd)
            text = os.read(fd, 4 * _KEY_BYTES) if stat.S_ISREG(st.st_mode) else b""
        finally:
            os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            warn(f"the cache key {path} is not a regular file; not caching")
        elif hasattr(os, "getuid") and st.st_uid != os.getuid():
            warn(f"the cache key {path} belongs to another user (uid {st.st_uid}); not caching")
        elif st.st_mode & 0o077:
            warn(f"the cache key {path} may be read or written by others (mode {stat.S_IMODE(st.st_mode):o}); not caching")
        else:
            try:
                key = bytes.fromhex(text.decode("ascii").strip())
            except (UnicodeDecodeError, ValueError):
                key = None
            if key is None or len(key) != _KEY_BYTES:
                warn(f"the cache key {path} is not a key shardc wrote (delete it to make a new one); not caching")
                key = None
    except OSError as e:
        warn(f"cannot use the cache key {path}: {e.strerror or e}; not caching")
        key = None
    _KEYS[path] = key
    return key


def seal(key: bytes, label: str, data: bytes) -> bytes:
    """HMAC-SHA256 of `data` under `key`, bound to `label` (what the file is: its name),
    so an authentic file moved to another name does not verify either."""
    import hashlib
    import hmac

    return hmac.new(key, label.encode() + b"\0" + data, hashlib.sha256).digest()


def verify(key: bytes, label: str, data: bytes, tag: bytes) -> bool:
    import hmac

    return hmac.compare_digest(seal(key, label, data), tag)
