"""A persistent result cache for `shardc-opt`: the same input, command line and compiler
give the same answer, replayed without importing xDSL.

Python and xDSL alone take longer to start than a one-function file takes to compile
(importing the dialects such a file uses is most of a cold run), so a command that ran
before is answered from disk: what it wrote to stdout and stderr, call by call (so the
two interleave as they did when sharing a pipe), what `-o FILE` received, and the exit
code. The key is a hash over the command line, the input's bytes (file or stdin) and the
compiler's identity: a hash of every source file of shardc, of xDSL's installed-file
record (`RECORD`, a hash per file) and its source files' names, sizes and modification
times, the source of any pass in the table from another package, and the Python
version. Computing it reads shardc's 1.7 MB of source and stats
xDSL's 450 files (about 3 ms); nothing here imports xDSL, numpy or a pass.

Only runs that ended normally are kept (exit 0, or 1 with diagnostics); an internal
error, a crash inside a pass or the parser, ^C, or an output written other than through
`sys.stdout`/`sys.stderr` text calls is never cached. `--help`, `--version` and command
lines that fail to parse are not looked up.

Where and how safely: the directory and rules of the compile cache
(`shardc.runtime.codegen.cache`): `$SHARDC_CACHE_DIR`, else `$XDG_CACHE_HOME/shardc`, else
`~/.cache/shardc`; `SHARDC_CACHE=0` turns it off; the directory must be this user's and
not writable by group or others (else one warning line and no caching). Entries live in
`opt-<identity>/`, are written to a temporary file and renamed into place, carry their
key and a tag over it and their contents (blake2b keyed with this user's cache key,
`shardc.cache_dir.cache_key`, which lives outside the cache), and are checked on reading
(regular files below the size cap only): one that fails is ignored
with one warning line and rewritten. An entry is data (text and an exit code), never
code. Directories of other compiler identities untouched for an hour are removed when a
new entry is written. `SHARDC_CACHE_DEBUG=1` prints `hit`/`miss` per lookup on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from shardc import cache_dir as cache_dirs

try:  # the builtin module: hashlib would load OpenSSL first (3 ms)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - Pythons built without it
    from hashlib import blake2b

if TYPE_CHECKING:
    from collections.abc import Callable

FORMAT = 1
_MAGIC = b"shardc-opt-cache 2\n"
_STALE_S = 3600.0


# ---------------------------------------------------------------------------------------
# Where, messages (the compile cache's rules, without importing the runtime)
# ---------------------------------------------------------------------------------------


def cache_dir() -> str:
    return cache_dirs.cache_root()


def warn(message: str) -> None:
    cache_dirs.warning("opt cache", message)


def _debug(message: str) -> None:
    cache_dirs.debug("opt cache", message)


def usable_dir(path: str) -> str | None:
    """`path` if it is safe to keep results in (`shardc.cache_dir.usable_dir`)."""
    return cache_dirs.usable_dir(path, warn)


# ---------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------


def _sources(root: str, rel: str = "") -> list[tuple[str, str]]:
    """(relative path, path) of every .py file under root, sorted."""
    found: list[tuple[str, str]] = []
    with os.scandir(os.path.join(root, rel)) as it:
        for entry in it:
            name = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    found += _sources(root, name)
            elif entry.name.endswith(".py"):
                found.append((name, entry.path))
    return sorted(found)


def _xdsl_part(h: blake2b) -> None:
    """xDSL's installed-file record (a hash per file, so its version) and its sources'
    names, sizes and times (an xDSL edited in place, or installed editable)."""
    for entry in sys.path:
        where = entry or "."
        pkg = os.path.join(where, "xdsl")
        if not os.path.isfile(os.path.join(pkg, "__init__.py")):
            continue
        try:
            infos = sorted(n for n in os.listdir(where) if n.startswith("xdsl-") and n.endswith(".dist-info"))
        except OSError:
            infos = []
        for info in infos:
            try:
                with open(os.path.join(where, info, "RECORD"), "rb") as f:
                    h.update(b"record\0" + info.encode() + b"\0" + f.read())
            except OSError:
                continue
        for rel, path in _sources(pkg):
            st = os.stat(path)
            h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        return
    h.update(b"no xdsl\0")


def _foreign_part(h: blake2b) -> None:
    """The source of each pass in the table that lives outside shardc and xDSL (none
    today); one that cannot be read makes an identity that never hits."""
    from shardc.passes import PASSES, PIPELINES

    for name, spec in sorted({**PASSES, **PIPELINES}.items()):
        module = spec.partition(":")[0]
        if module.split(".")[0] in ("shardc", "xdsl"):
            continue
        import importlib.util

        try:
            origin = importlib.util.find_spec(module).origin  # type: ignore[union-attr]
            with open(origin, "rb") as f:  # type: ignore[arg-type]
                h.update(f"{name}\0{spec}\0".encode() + f.read())
        except (ImportError, ValueError, AttributeError, OSError, TypeError):
            h.update(os.urandom(16))


_IDENTITY: str | None = None


def compiler_identity() -> str:
    """A hash of what shardc-opt's answers depend on besides the input and command line:
    shardc's source files, xDSL's installed files, the Python version."""
    global _IDENTITY
    if _IDENTITY is None:
        import shardc

        h = blake2b(digest_size=32)
        h.update(f"{FORMAT}\0{sys.version}\0{sys.implementation.cache_tag}\0".encode())
        root = os.path.dirname(os.path.abspath(shardc.__file__))
        for rel, path in _sources(root):
            with open(path, "rb") as f:
                h.update(rel.encode() + b"\0" + f.read() + b"\0")
        _xdsl_part(h)
        _foreign_part(h)
        _IDENTITY = h.hexdigest()
    return _IDENTITY


def make_key(args: list[str], data: bytes) -> str:
    h = blake2b(digest_size=32)
    h.update(json.dumps([FORMAT, compiler_identity(), args]).encode() + b"\0")
    h.update(data)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------
# Recording a run, replaying it
# ---------------------------------------------------------------------------------------


class _Tee:
    """A text stream that writes through to `real` and logs each write and flush."""

    def __init__(self, real: object, fd: int, recording: Recording):
        self._real = real
        self._fd = fd
        self._recording = recording

    def write(self, text: str) -> int:
        n = self._real.write(text)  # type: ignore[attr-defined]
        self._recording.events.append([self._fd, text])
        return n

    def flush(self) -> None:
        self._real.flush()  # type: ignore[attr-defined]
        self._recording.events.append([self._fd, None])

    @property
    def buffer(self) -> object:
        self._recording.tainted = True  # bytes written around the log: not replayable
        return self._real.buffer  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)


class Recording:
    """What a run wrote, in order, and how it ended."""

    def __init__(self) -> None:
        self.events: list[list[object]] = []
        self.tainted = False
        self.result: tuple[int, str | None] | None = None

    def finished(self, code: int, file_output: str | None, crashed: bool) -> None:
        """The run ended normally with `code`, `-o FILE` receiving `file_output`."""
        if code in (0, 1) and not crashed:
            self.result = (code, file_output)

    def payload(self) -> bytes | None:
        if self.result is None or self.tainted:
            return None
        code, file_output = self.result
        return json.dumps({"code": code, "file": file_output, "events": self.events}).encode()


def _replay(entry: dict[str, object], output_file: str | None) -> int:
    streams = {1: sys.stdout, 2: sys.stderr}
    for fd, text in entry["events"]:  # type: ignore[union-attr]
        stream = streams[fd]
        if text is None:
            stream.flush()
        else:
            stream.write(text)
    file_output = entry["file"]
    if file_output is not None and output_file is not None:
        from shardc.tools.argv import UsageError, write_output_file

        try:
            write_output_file(output_file, file_output)  # type: ignore[arg-type]
        except UsageError as exc:
            sys.stderr.write(f"{exc}\n")
            return 1
    return entry["code"]  # type: ignore[return-value]


def _check(entry: object) -> dict[str, object]:
    """The entry if it has the shape `payload` writes; ValueError otherwise."""
    if not isinstance(entry, dict) or set(entry) != {"code", "file", "events"}:
        raise ValueError("not an entry")
    if entry["code"] not in (0, 1) or not isinstance(entry["file"], str | None):
        raise ValueError("bad result")
    events = entry["events"]
    if not isinstance(events, list) or not all(
        isinstance(e, list) and len(e) == 2 and e[0] in (1, 2) and isinstance(e[1], str | None) for e in events
    ):
        raise ValueError("bad events")
    return entry


def _tag(secret: bytes, key: str, body: bytes) -> str:
    """The entry's authentication tag: blake2b keyed with this user's cache key, over
    its own key and contents (an entry moved under another key does not verify)."""
    return blake2b(key.encode() + b"\0" + body, digest_size=32, key=secret).hexdigest()


def _read(path: str, key: str, secret: bytes) -> dict[str, object] | None:
    """The verified entry at `path`; None if absent; a warning line if it fails a check
    (not a regular file below the size cap, or not written by this user's shardc)."""
    try:
        raw = cache_dirs.read_regular(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        warn(f"ignoring {path}: {e.strerror or e}")
        return None
    try:
        if not raw.startswith(_MAGIC):
            raise ValueError("not an entry of this format")
        header, sep, body = raw[len(_MAGIC) :].partition(b"\n")
        stored_key, _, digest = header.decode("ascii").partition(" ")
        if not sep or stored_key != key:
            raise ValueError("key mismatch")
        from hmac import compare_digest  # here, on a found entry only: hmac loads OpenSSL (7 ms)

        if not compare_digest(_tag(secret, key, body), digest):
            raise ValueError("its authentication tag does not verify: not written by this user's shardc with this key")
        return _check(json.loads(body))
    except (ValueError, UnicodeDecodeError) as e:
        warn(f"ignoring {path}: {e}")
        return None


def _write(directory: str, path: str, key: str, body: bytes, secret: bytes) -> None:
    import tempfile

    fresh = not os.path.isdir(directory)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + f"{key} {_tag(secret, key, body)}\n".encode() + body)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        warn(f"cannot write {path}: {e.strerror}")
        return
    if fresh:
        _prune(os.path.dirname(directory), os.path.basename(directory))


def _prune(base: str, keep: str) -> None:
    """Remove the entries of other compiler identities untouched for `_STALE_S`."""
    import shutil
    import time

    now = time.time()
    try:
        with os.scandir(base) as it:
            stale = [e.path for e in it if e.name.startswith("opt-") and e.name != keep and e.is_dir(follow_symlinks=False) and now - e.stat().st_mtime > _STALE_S]
    except OSError:
        return
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)


def cached_main(args: list[str], run: Callable[..., int]) -> int:
    """`run(args)`, or its recorded answer: `run(args, data, recording)` is called on a
    miss with the input's bytes and a Recording to fill (the caller checks
    `shardc.cache_dir.enabled()`)."""
    from shardc.passes import PASSES, PIPELINES
    from shardc.tools.argv import scan_argv

    try:
        opts = scan_argv(args, {**PASSES, **PIPELINES})  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - help, version, usage errors: the plain run reports them
        return run(args)
    try:
        if opts.input_file == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(opts.input_file, "rb") as f:
                data = f.read()
    except OSError:
        return run(args)  # which reports why
    base = usable_dir(cache_dir())
    secret = cache_dirs.cache_key(warn) if base is not None else None
    if base is None or secret is None:
        return run(args, data)
    key = make_key(args, data)
    directory = os.path.join(base, f"opt-{compiler_identity()[:24]}")
    path = os.path.join(directory, key)
    entry = _read(path, key, secret)
    if entry is not None:
        _debug(f"hit {key[:16]}")
        return _replay(entry, opts.output_file if opts.output_file not in (None, "-") else None)
    _debug(f"miss {key[:16]}")
    recording = Recording()
    real = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(real[0], 1, recording), _Tee(real[1], 2, recording)  # type: ignore[assignment]
    try:
        code = run(args, data, recording)
    finally:
        sys.stdout, sys.stderr = real
    body = recording.payload()
    if body is not None:
        _write(directory, path, key, body, secret)
    return code
