"""Where shardc's caches live and whether a directory is safe to keep them in.

Shared by the compile cache (`shardc.runtime.cache`) and shardc-opt's result cache
(`shardc.tools.opt_cache`). The standard library only: shardc-opt's start-up reads it
before anything else is imported. A cache entry is code the next run executes, so a
directory another user owns, or one that group or others may write, is refused (IR is
data: nothing from outside this user's files may reach generated code)."""

from __future__ import annotations

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
