"""numba's on-disk cache of shardc's kernels, sealed like the compile cache's entries.

numba keeps a jit-compiled function's machine code beside its module file
(`kernels/__pycache__/*.nbi` index and `*.nbc` data files in the compile cache's
directory, `fused_run.cache_dir`) and unpickles both when it loads them: whoever can
write that directory (a cache restored by CI, copied from another machine, a shared
home) could otherwise run code in the next job. Each file is therefore written as
`_SEALED` + an HMAC-SHA256 tag under this user's key (`shardc.cache_dir.cache_key`,
kept outside the cache, bound to the file's name) + numba's bytes, and read back only
as a regular file below the size cap whose tag verifies: the bytes checked are the bytes
unpickled. Anything else is one warning line and a recompile (numba then writes a
sealed file over it). Without a key nothing is cached on disk."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import pickle
from collections.abc import Callable, Iterator
from typing import Any

from shardc import cache_dir as cache_dirs

_SEALED = b"shardc-sealed-numba\n"
_TAG_BYTES = 32
_WARNED: set[str] = set()


def warn(message: str) -> None:
    """One line on stderr, once per process and message."""
    if message not in _WARNED:
        _WARNED.add(message)
        cache_dirs.warning("kernel cache", message)


class Unsealed(Exception):
    """A cache file that this user's shardc did not write (the reason is the message)."""


def read_sealed(path: str, secret: bytes) -> bytes:
    """numba's bytes in the sealed file `path`: FileNotFoundError when absent, Unsealed
    when it is not a regular file below the cap or its tag does not verify."""
    try:
        raw = cache_dirs.read_regular(path)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise Unsealed(e.strerror or str(e)) from None
    n = len(_SEALED) + _TAG_BYTES
    if not raw.startswith(_SEALED) or len(raw) < n:
        raise Unsealed("not sealed by this user's shardc")
    data = raw[n:]
    if not cache_dirs.verify(secret, os.path.basename(path), data, raw[len(_SEALED) : n]):
        raise Unsealed("its authentication tag does not verify")
    return data


def seal_bytes(path: str, secret: bytes, data: bytes) -> bytes:
    """The sealed form of `data` for the file `path`."""
    return _SEALED + cache_dirs.seal(secret, os.path.basename(path), data) + data


@functools.cache
def _sealed_cache_class() -> type:
    """numba's FunctionCache with its index and data files sealed (numba imported only
    when a kernel is compiled)."""
    from numba.core.caching import FunctionCache, IndexDataCacheFile  # type: ignore[import-not-found]

    class SealedCacheFile(IndexDataCacheFile):  # type: ignore[misc]
        """numba's index/data file logic, each file read through `read_sealed`."""

        def __init__(self, cache_path: str, filename_base: str, source_stamp: Any, secret: bytes):
            super().__init__(cache_path=cache_path, filename_base=filename_base, source_stamp=source_stamp)
            self._secret = secret

        def _read(self, path: str) -> bytes | None:
            try:
                return read_sealed(path, self._secret)
            except FileNotFoundError:
                return None
            except Unsealed as e:
                warn(f"ignoring {path} ({e}); recompiling")
                return None

        def _load_index(self) -> dict[Any, Any]:
            data = self._read(self._index_path)
            if data is None:
                return {}
            f = io.BytesIO(data)
            if pickle.load(f) != self._version:
                return {}
            stamp, overloads = pickle.loads(f.read())
            return overloads if stamp == self._source_stamp else {}

        def _load_data(self, name: str) -> Any:
            data = self._read(self._data_path(name))
            if data is None:
                raise OSError(f"no sealed data file {name}")  # numba's `load`: a miss
            return pickle.loads(data)

        @contextlib.contextmanager
        def _open_for_write(self, filepath: str) -> Iterator[io.BytesIO]:
            buf = io.BytesIO()
            yield buf
            with super()._open_for_write(filepath) as f:
                f.write(seal_bytes(filepath, self._secret, buf.getvalue()))

    class SealedFunctionCache(FunctionCache):  # type: ignore[misc]
        def __init__(self, py_func: Callable[..., object], secret: bytes):
            super().__init__(py_func)
            self._cache_file = SealedCacheFile(self._cache_path, self._impl.filename_base, self._impl.locator.get_source_stamp(), secret)

    return SealedFunctionCache


def njit(numba: Any, fn: Callable[..., object], cache: bool, **options: Any) -> Any:
    """`numba.njit(**options)(fn)`, caching its machine code on disk (`cache`) in sealed
    files only: numba's own `cache=True` is never used."""
    dispatcher = numba.njit(**options)(fn)
    if cache:
        secret = cache_dirs.cache_key(warn)
        if secret is not None:
            dispatcher._cache = _sealed_cache_class()(dispatcher.py_func, secret)  # what numba's enable_caching sets
    return dispatcher


__all__ = ["Unsealed", "njit", "read_sealed", "seal_bytes", "warn"]
