"""A persistent compile cache, and one compile per MPI job.

Compiling a program (the pass pipeline, then code generation) costs seconds that every
run of the same job would pay again; like JAX's and torch.compile's caches, an entry on
disk keeps what a compile produced:

- the lowered module's text (after the pipeline, before the runtime's fusion),
- the generated Python source of every function, and the constants it binds (kernel
  functions, numpy arrays, structured-op specs) as tagged data (never pickle),
- each function's argument types, and what the caller adds (collective counts, stage
  names and times, boundary shardings).

No code object is stored: a hit compiles the verified source, one function at a time
when it is first needed, and checks the compiled code (`code_check.check_code`, 5 ms
for the GPT step) before running it (compiling all of the GPT step's 0.75 MB took
0.35-0.6 s). A marshalled code object would skip that, but marshal is data that
becomes code without any check (the package never imports it: tests/unit/security).
The numba kernels' source texts in the entry (fused, row-chain and grouped-update
kernels) are checked the same way (`check_generated`) before they are compiled.

The key is a sha256 over the caller's description of the input (a module's text, or
the configuration a builder makes its module from), the pipeline and its options, the
runtime's code-generation choices (`fuse`), and the compiler's identity: shardc's
version and a hash of all of shardc's own source files, xDSL's and numpy's versions and
the Python implementation. Any change to any of these misses.

Where: `$SHARDC_CACHE_DIR`, else `$XDG_CACHE_HOME/shardc`, else `~/.cache/shardc`;
`SHARDC_CACHE=0` turns the disk cache off. The directory is made 0700; one that another
user owns, or that group or others may write, is refused with a one-line warning and
nothing is read from or written to it (IR is data: an entry must not become a way to
run someone else's code). Entries are written to a temporary file and renamed into
place, so concurrent writers (ranks, jobs) never expose a partial file. Each file is
sealed: an HMAC-SHA256 under this user's key, which lives outside the cache
(`shardc.cache_dir.cache_key`), so that a cache restored by CI, copied from another
machine or written by anyone else does not verify however its checksums were made.
Reading takes regular files below a size cap only (no FIFO, symlink or device: opened
with O_NOFOLLOW|O_NONBLOCK), then checks the seal, the key stored inside the entry, a
sha256 over its contents and over the generated source; anything that fails
(truncated, corrupt, forged, of another format) is ignored with one warning line and
rebuilt. Generated code runs over `code_check.generated_namespace()`: numpy's
functions bound by name, never a module. Constants are decoded (the cyclic GC paused: it made decoding
the GPT step's 170,000 nodes 3x slower) from tagged data that can hold only
plain values, numpy arrays, scalars, dtypes and ufuncs, and the functions, classes and
dataclass instances (made by `object.__new__`, no constructor runs; their attribute
names stored once per class and attribute set) of the
`shardc.runtime.execute` modules the entry lists (imported first: those alone, so a hit does not
load every dialect's emitters), not those that compile, exec or launch; nothing else can
be named or imported.

Under `mpiexec` (`world=` an mpi4py communicator) rank 0 alone looks up or compiles and
broadcasts the entry (a hit as soon as it is read and verified, so that all ranks build
their callables at the same time); every other rank builds its callables from those
bytes, so a job compiles once however many ranks it has, with or without a shared
filesystem.
`SHARDC_CACHE_DEBUG=1` prints one line per lookup (`hit`, `miss`, `received`) on stderr.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import io
import json
import linecache
import math
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

from shardc import cache_dir as cache_dirs
from shardc.errors import ReportedElsewhere

import numpy as np

from shardc.runtime.execute.code_check import generated_namespace
from shardc.runtime.execute.compiled import CompiledModule, external_stub, scalar_spec

FORMAT = 7
_MAGIC = b"shardc-compile-cache\n"
_SEALED = b"shardc-sealed-entry\n"
_TAG_BYTES = 32


class CorruptEntry(Exception):
    """An entry that does not verify (the reason is the message)."""


class PeerFailed(ReportedElsewhere):
    """Rank 0 failed to compile what this rank waited for (rank 0 reports the error)."""


class UncacheableError(Exception):
    """A compiled module whose constants cannot be stored (they are not plain data or
    named runtime objects)."""


# ---------------------------------------------------------------------------------------
# Where, whether, and messages
# ---------------------------------------------------------------------------------------


def enabled() -> bool:
    return cache_dirs.enabled()


def cache_dir() -> Path:
    return Path(cache_dirs.cache_root())


_WARNED: set[str] = set()


def warn(message: str) -> None:
    """One line on stderr, once per process and message."""
    if message not in _WARNED:
        _WARNED.add(message)
        cache_dirs.warning("compile cache", message)


def debug(message: str) -> None:
    cache_dirs.debug("compile cache", message)


def usable_dir(path: Path) -> Path | None:
    """`path` if it is safe to keep compiled code in (`shardc.cache_dir.usable_dir`)."""
    return cache_dirs.usable_dir(path, warn)


# ---------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------


@functools.cache
def compiler_identity() -> str:
    """A hash of everything outside the input that code generation depends on: shardc's
    version and source files, xDSL, numpy and the Python implementation."""
    import importlib.metadata
    import importlib.util

    import shardc

    h = hashlib.sha256()
    try:
        xdsl_version = importlib.metadata.version("xdsl")
    except importlib.metadata.PackageNotFoundError:
        xdsl_version = "unknown"
    for part in (shardc.__version__, xdsl_version, np.__version__, sys.version, sys.implementation.cache_tag or "", importlib.util.MAGIC_NUMBER.hex()):
        h.update(part.encode() + b"\0")
    root = Path(shardc.__file__).resolve().parent
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def make_key(kind: str, **parts: object) -> str:
    """The key of a compile: `kind` (what builds the input) and its `parts` (the input
    text or the builder's configuration, the pipeline, code-generation choices), with
    the compiler's identity. Parts are plain data or dataclasses (their repr)."""
    # what the environment chooses in code generation: `overlap.scheduling()`, whose
    # SCHEDULE override exists only once overlap.py (code generation, xDSL) is loaded
    from shardc.runtime.execute.overlap_run import scheduling_asked

    ov = sys.modules.get("shardc.runtime.codegen.overlap")
    codegen = {"overlap": ov.scheduling() if ov is not None else scheduling_asked()}  # type: ignore[attr-defined]
    desc = json.dumps({"format": FORMAT, "kind": kind, "parts": parts, "codegen": codegen, "compiler": compiler_identity()}, sort_keys=True, default=repr)
    return hashlib.sha256(desc.encode()).hexdigest()


# ---------------------------------------------------------------------------------------
# The constant pool: tagged plain data, naming only runtime objects (no pickle)
# ---------------------------------------------------------------------------------------

# An entry names objects of the run side alone (what generated code calls), never of the
# modules there that exec code or launch a job.
_NAMEABLE_PACKAGE = "shardc.runtime.execute."
_NOT_NAMEABLE = frozenset({"shardc.runtime.execute.compiled", "shardc.runtime.execute.selftest"})
_UFUNC_METHODS = frozenset({"reduce", "accumulate", "reduceat", "outer", "at"})
_SEQUENCES: dict[type, str] = {tuple: "tuple", list: "list", frozenset: "frozenset", set: "set"}
_FROM_TAG = {v: k for k, v in _SEQUENCES.items()}
_PLAIN = (bool, int, float, str)
_FLAT_ENC = frozenset({type(None), bool, int, str})


def _nameable(module: str) -> bool:
    return module.startswith(_NAMEABLE_PACKAGE) and module not in _NOT_NAMEABLE


class _Encoder:
    """Values as JSON trees `[tag, ...]`, array bytes in a side buffer. Objects other than
    plain data, numpy arrays/scalars/dtypes/ufuncs, and the functions, classes and
    dataclass instances of runtime modules are refused (UncacheableError)."""

    def __init__(self) -> None:
        self.blob = bytearray()
        self.memo: dict[int, int] = {}
        self.count = 0
        self.keep: list[object] = []  # ids stay unique while encoding
        self.objects: dict[type, list[Any]] = {}
        """Dataclass types met, with their names: instances go straight to `_memoized`."""
        self.shapes: dict[tuple[type, tuple[str, ...]], int] = {}
        self.shape_table: list[list[Any]] = []
        """[class name, attribute names] per (class, attributes) met: an object is stored as
        ["object", shape, values], its names once per shape (11,000 objects in the GPT step)."""
        self.modules: set[str] = set()
        """The runtime modules named: a hit imports these alone (see `import_named`)."""

    def ref(self, obj: object) -> list[Any]:
        if type(obj).__name__ == "builtin_function_or_method" and isinstance(getattr(obj, "__self__", None), np.ufunc):
            return ["ufunc_method", obj.__self__.__name__, obj.__name__]  # type: ignore[attr-defined]
        mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if isinstance(mod, str) and isinstance(qual, str) and _nameable(mod) and "." not in qual and getattr(sys.modules.get(mod), qual, None) is obj:
            self.modules.add(mod)
            return ["global", mod, qual]
        raise UncacheableError(f"cannot name {obj!r}")

    def enc(self, obj: object) -> Any:
        t = type(obj)
        if obj is None or t is bool or t is str or t is int:
            return obj  # JSON keeps ints of any size exactly
        if t in _SEQUENCES or t is dict or t in self.objects:  # the common containers first
            return self._memoized(obj, t)
        if t is float:
            return obj if math.isfinite(obj) else ["float", obj.hex()]  # type: ignore[attr-defined]
        if t is bytes:
            return ["bytes", self._raw(obj)]  # type: ignore[arg-type]
        if t is complex:
            return ["complex", obj.real.hex(), obj.imag.hex()]  # type: ignore[attr-defined]
        if t is slice:
            return ["slice", self.enc(obj.start), self.enc(obj.stop), self.enc(obj.step)]  # type: ignore[attr-defined]
        if isinstance(obj, np.dtype):
            return ["dtype", self._dtype(obj)]
        if isinstance(obj, np.generic):
            return ["scalar", self._dtype(obj.dtype), self._raw(obj.tobytes())]
        if isinstance(obj, np.ufunc):
            if getattr(np, obj.__name__, None) is not obj:
                raise UncacheableError(f"cannot name ufunc {obj.__name__}")
            return ["ufunc", obj.__name__]
        if isinstance(obj, type) and issubclass(obj, np.generic):
            return ["sctype", self._dtype(np.dtype(obj))]
        if isinstance(obj, type) or (callable(obj) and not is_dataclass(obj)):
            return self.ref(obj)  # by name, never memoized (the decoder looks it up again)
        return self._memoized(obj, t)

    def _memoized(self, obj: Any, t: type) -> Any:
        if id(obj) in self.memo:
            return ["ref", self.memo[id(obj)]]
        self.memo[id(obj)] = self.count
        self.count += 1
        self.keep.append(obj)
        if t is np.ndarray:
            a: np.ndarray = obj  # type: ignore[assignment]
            if a.size > 1 and a.ndim and not any(a.strides):  # a broadcast element (a large splat constant)
                return ["splat", self._dtype(a.dtype), list(a.shape), self._raw(a.reshape(-1)[:1].tobytes())]
            return ["ndarray", self._dtype(a.dtype), list(a.shape), self._raw(np.ascontiguousarray(a).tobytes())]
        if t in _SEQUENCES:
            if set(map(type, obj)) <= _FLAT_ENC:
                return [_SEQUENCES[t], list(obj)]
            return [_SEQUENCES[t], [self.enc(x) for x in obj]]
        if t is dict:
            return ["dict", [[self.enc(k), self.enc(v)] for k, v in obj.items()]]  # type: ignore[attr-defined]
        if t is object:
            return ["sentinel"]
        cls = self.objects.get(t)
        if cls is None and is_dataclass(obj) and hasattr(obj, "__dict__") and not hasattr(t, "__slots__"):
            cls = self.objects[t] = self.ref(t)
        if cls is not None:
            attrs = vars(obj)
            shape = self.shapes.get((t, tuple(attrs)))
            if shape is None:
                shape = self.shapes[(t, tuple(attrs))] = len(self.shape_table)
                self.shape_table.append([cls, list(attrs)])
            return ["object", shape, [self.enc(v) for v in attrs.values()]]
        raise UncacheableError(f"cannot store a {t.__module__}.{t.__qualname__}")

    def _dtype(self, dt: np.dtype) -> str:
        if dt.hasobject or dt.fields is not None or dt.subdtype is not None:
            raise UncacheableError(f"cannot store dtype {dt}")
        if dt.kind == "V" and dt.name == "bfloat16":
            return "bfloat16"  # ml_dtypes' (its `str` is "<V2": raw bytes when read back)
        return dt.str

    def _raw(self, data: bytes) -> list[int]:
        at = len(self.blob)
        self.blob += data
        return [at, len(data)]


class _Decoder:
    """The inverse of `_Encoder`; it constructs nothing but plain data, numpy arrays and
    scalars, `object.__new__` of runtime dataclasses, and looks up runtime functions in
    modules already loaded (it imports nothing). Anything else is CorruptEntry.
    One handler per tag, looked up in a table (the step's pool has 170,000 nodes)."""

    def __init__(self, blob: bytes, shapes: Any = ()):
        self.blob = blob
        self.memo: list[object] = []
        self.names: dict[tuple[Any, ...], Any] = {}
        if type(shapes) is not list and shapes != ():
            raise CorruptEntry("bad object shapes")
        self.shapes = [self._shape(s) for s in shapes]
        self.tags: dict[str, Callable[[list[Any]], Any]] = {
            "tuple": self._tuple, "list": self._sequence, "set": self._sequence, "frozenset": self._sequence,
            "dict": self._dict, "object": self._object, "ref": self._ref, "ndarray": self._ndarray,
            "global": self.named, "ufunc_method": self.named, "splat": self._splat,
            "float": lambda n: float.fromhex(n[1]),
            "bytes": lambda n: self.raw(n[1]),
            "complex": lambda n: complex(float.fromhex(n[1]), float.fromhex(n[2])),
            "slice": lambda n: slice(self.dec(n[1]), self.dec(n[2]), self.dec(n[3])),
            "dtype": lambda n: self.dtype(n[1]),
            "scalar": lambda n: np.frombuffer(self.raw(n[2]), dtype=self.dtype(n[1]))[0],
            "ufunc": self._ufunc,
            "sctype": lambda n: self.dtype(n[1]).type,
            "sentinel": self._sentinel,
        }

    def raw(self, span: Any) -> bytes:
        at, n = int(span[0]), int(span[1])
        if at < 0 or n < 0 or at + n > len(self.blob):
            raise CorruptEntry("constant bytes out of range")
        return self.blob[at : at + n]

    def dtype(self, text: Any) -> np.dtype:
        if text == "bfloat16":
            from shardc.runtime.execute.kernels.bf16_run import bfloat16

            return bfloat16()
        dt = np.dtype(str(text))
        if dt.hasobject or dt.fields is not None:
            raise CorruptEntry(f"dtype {text!r} is not allowed")
        return dt

    def named(self, node: list[Any]) -> Any:
        key = tuple(node)
        found = self.names.get(key)
        if found is None:
            if len(node) != 3 or not all(type(x) is str for x in node):
                raise CorruptEntry("bad name")
            found = self.names[key] = self._named(node)
        return found

    def _named(self, node: list[Any]) -> Any:
        if node[0] == "ufunc_method":
            uf = getattr(np, str(node[1]), None)
            if not isinstance(uf, np.ufunc) or node[2] not in _UFUNC_METHODS:
                raise CorruptEntry(f"'{node[1]}.{node[2]}' is not allowed")
            return getattr(uf, node[2])
        mod, qual = str(node[1]), str(node[2])
        obj = getattr(sys.modules.get(mod), qual, None) if _nameable(mod) and "." not in qual and not qual.startswith("__") else None
        if obj is None or getattr(obj, "__module__", None) != mod:
            raise CorruptEntry(f"global '{mod}.{qual}' is not allowed")
        return obj

    def dec(self, node: Any) -> Any:
        t = type(node)
        if t is list:
            try:
                handler = self.tags[node[0]]
            except (KeyError, IndexError, TypeError):
                raise CorruptEntry(f"unknown constant tag {node[0]!r}" if node else "bad constant") from None
            return handler(node)
        if t in _FLAT:
            return node
        raise CorruptEntry("bad constant")

    def _slot(self) -> int:
        memo = self.memo
        memo.append(None)
        return len(memo) - 1

    def _items(self, node: list[Any]) -> list[Any]:
        items = node[1]
        if type(items) is not list:
            raise CorruptEntry(f"bad {node[0]}")
        if set(map(type, items)) <= _FLAT:  # plain values only: nothing to decode
            return items
        return [self.dec(x) for x in items]

    def _tuple(self, node: list[Any]) -> tuple[Any, ...]:
        slot = self._slot()
        out = self.memo[slot] = tuple(self._items(node))
        return out

    def _sequence(self, node: list[Any]) -> Any:
        slot = self._slot()
        items = self._items(node)
        out = self.memo[slot] = items if node[0] == "list" and items is not node[1] else _FROM_TAG[node[0]](items)
        return out

    def _dict(self, node: list[Any]) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        self.memo[self._slot()] = out
        dec = self.dec
        for k, v in node[1]:
            out[dec(k)] = dec(v)
        return out

    def _shape(self, node: Any) -> tuple[type, list[str]]:
        """A class and its attribute names, checked once for all its objects."""
        if type(node) is not list or len(node) != 2 or type(node[0]) is not list or type(node[1]) is not list:
            raise CorruptEntry("bad object shape")
        cls = self.named(node[0])
        if not isinstance(cls, type) or not is_dataclass(cls):
            raise CorruptEntry(f"'{node[0][1]}.{node[0][2]}' is not a runtime dataclass")
        keys = node[1]
        if not all(type(k) is str and not k.startswith("__") for k in keys):
            raise CorruptEntry("bad attribute name")
        return cls, keys

    def _object(self, node: list[Any]) -> object:
        shape, values = node[1], node[2]
        if type(shape) is not int or not 0 <= shape < len(self.shapes) or type(values) is not list:
            raise CorruptEntry("bad object")
        cls, keys = self.shapes[shape]
        if len(values) != len(keys):
            raise CorruptEntry("bad object")
        out = object.__new__(cls)
        self.memo[self._slot()] = out
        attrs = out.__dict__
        dec = self.dec
        for k, v in zip(keys, values):
            attrs[k] = v if type(v) in _FLAT else dec(v)
        return out

    def _ref(self, node: list[Any]) -> object:
        k = node[1]
        if type(k) is not int or not 0 <= k < len(self.memo):
            raise CorruptEntry("bad reference")
        return self.memo[k]

    def _ndarray(self, node: list[Any]) -> np.ndarray:
        slot = self._slot()
        out = self.memo[slot] = np.frombuffer(self.raw(node[3]), dtype=self.dtype(node[1])).reshape([int(n) for n in node[2]]).copy()
        return out

    def _splat(self, node: list[Any]) -> np.ndarray:
        """One element broadcast, read-only, as `dense_to_array` makes a large splat."""
        slot = self._slot()
        one = np.frombuffer(self.raw(node[3]), dtype=self.dtype(node[1]))
        shape = [int(n) for n in node[2]]
        if one.size != 1:
            raise CorruptEntry("bad splat")
        out = self.memo[slot] = np.broadcast_to(one.reshape([1] * len(shape)), shape)
        return out

    def _ufunc(self, node: list[Any]) -> np.ufunc:
        uf = getattr(np, str(node[1]), None)
        if not isinstance(uf, np.ufunc):
            raise CorruptEntry(f"'{node[1]}' is not a ufunc")
        return uf

    def _sentinel(self, node: list[Any]) -> object:
        out = self.memo[self._slot()] = object()
        return out


_FLAT = frozenset({type(None), *_PLAIN})


_GENERATED = frozenset(generated_namespace())
"""What every namespace of generated code starts with (`_np`, builtins): never stored."""

_SHAPES = " shapes"  # the pool's key of the object shapes: no binding's name (an identifier)


def dump_bindings(bindings: Mapping[str, object], modules: set[str] | None = None, loaded: dict[str, object] | None = None) -> bytes:
    """The constant pool (all but the numpy module) as bytes: a JSON tree, a NUL, the
    array bytes. UncacheableError when a constant is not storable. `modules`, when
    given, receives the runtime modules whose objects the pool names; `loaded` the pool
    read back (the check below), which is what a hit would load from these bytes."""
    enc = _Encoder()
    with gc_paused():
        pool = {k: enc.enc(v) for k, v in bindings.items() if k not in _GENERATED}
        tree = {_SHAPES: enc.shape_table, **pool} if enc.shape_table else pool  # the shapes first: decoded first
        data = json.dumps(tree).encode() + b"\0" + bytes(enc.blob)
    if modules is not None:
        modules |= enc.modules
    try:
        back = load_bindings(data)  # what cannot be read back must not be stored
    except CorruptEntry as e:
        raise UncacheableError(str(e)) from None
    if loaded is not None:
        loaded.update(back)
    return data


def load_bindings(data: bytes) -> dict[str, object]:
    with gc_paused():
        return _load_bindings(data)


def _slices(whole: Any, lengths: Sequence[int]) -> list[Any]:
    """`whole` cut into consecutive pieces of `lengths` (none: `[whole]`)."""
    if not lengths:
        return [whole]
    out, at = [], 0
    for n in lengths:
        out.append(whole[at : at + n])
        at += n
    return out


def load_entry_bindings(entry: Entry, loaded: Mapping[int, Mapping[str, object]] | None = None) -> dict[str, object]:
    """The namespace of an entry's constants: its one pool, or its parts' pools
    together (their names are scoped apart: one name in two pools is CorruptEntry).
    `loaded`: pools already read from these same bytes, by part (a rank's own parts,
    read back when their entries were made), taken instead of decoded again."""
    pools = _slices(entry.bindings, entry.pools)
    if len(pools) == 1:
        return dict(loaded[0]) if loaded and 0 in loaded else load_bindings(pools[0])
    out: dict[str, object] = {}
    with gc_paused():
        for k, data in enumerate(pools):
            got = dict(loaded[k]) if loaded and k in loaded else _load_bindings(data)
            for k in _GENERATED:
                got.pop(k, None)
            if not out.keys().isdisjoint(got):
                raise CorruptEntry("two parts bind the same name")
            out.update(got)
    out.update(generated_namespace())
    return out


def import_named(modules: Sequence[str]) -> None:
    """Import the runtime modules an entry's constants name (and nothing else: a hit
    need not load every dialect's emitters). Only nameable modules of the installed
    `shardc.runtime.execute` package qualify; any other name is CorruptEntry."""
    import importlib

    for mod in modules:
        if type(mod) is not str or not _nameable(mod) or not all(part.isidentifier() for part in mod.split(".")):
            raise CorruptEntry(f"module {mod!r} is not allowed")
        if mod in sys.modules:
            continue
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:  # the module exists; something it imports is missing
                raise
            raise CorruptEntry(f"no runtime module {mod!r}") from None


def _load_bindings(data: bytes) -> dict[str, object]:
    cut = data.find(b"\0")
    if cut < 0:
        raise CorruptEntry("constants without their bytes")
    try:
        tree = json.loads(data[:cut])
    except ValueError:
        raise CorruptEntry("unreadable constants") from None
    if not isinstance(tree, dict):
        raise CorruptEntry("constants are not a table")
    try:
        dec = _Decoder(data[cut + 1 :], tree.pop(_SHAPES, ()))
        pool = {str(k): dec.dec(v) for k, v in tree.items()}
    except CorruptEntry:
        raise
    except Exception as e:  # a damaged tree fails in many ways
        raise CorruptEntry(f"unreadable constants ({type(e).__name__})") from None
    pool.update(generated_namespace())
    return pool


# ---------------------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------------------


@dataclass
class Entry:
    """What one compile produced, as stored."""

    key: str
    lowered: str
    source: str
    bindings: bytes
    functions: dict[str, str]
    """symbol -> Python name of the generated function."""
    externals: list[str]
    """Symbols declared without a body (they raise when called, as compiled)."""
    arg_specs: dict[str, list[list[Any]]]
    meta: dict[str, Any] = field(default_factory=dict)
    modules: list[str] = field(default_factory=list)
    """The runtime modules the constants name (imported before they are decoded)."""
    pools: list[int] = field(default_factory=list)
    """A module compiled in parts (`shardc.runtime.codegen.parts`): the byte length of each
    part's constant pool in `bindings`, in order (empty: one pool)."""
    lowered_parts: list[int] = field(default_factory=list)
    """The same for `lowered`: the length of each part's module text (empty: one)."""

    def encode(self) -> bytes:
        body = json.dumps(
            {
                "lowered": self.lowered, "source": self.source, "functions": self.functions, "externals": self.externals,
                "arg_specs": self.arg_specs, "meta": self.meta, "modules": self.modules,
                **({"pools": self.pools, "lowered_parts": self.lowered_parts} if self.pools else {}),
            }
        ).encode()
        payload = body + self.bindings
        header = {
            "format": FORMAT, "key": self.key, "json": len(body), "bindings": len(self.bindings),
            "sha256": hashlib.sha256(payload).hexdigest(), "source_sha256": hashlib.sha256(self.source.encode()).hexdigest(),
        }
        return _MAGIC + json.dumps(header).encode() + b"\n" + payload

    @staticmethod
    def decode(data: bytes, key: str) -> Entry:
        """The entry in `data` if it is whole and is the entry of `key`; else CorruptEntry."""
        if not data.startswith(_MAGIC):
            raise CorruptEntry("not a shardc cache entry")
        nl = data.find(b"\n", len(_MAGIC))
        try:
            header = json.loads(data[len(_MAGIC) : nl])
            n_json, n_bind = int(header["json"]), int(header["bindings"])
        except (ValueError, KeyError, TypeError):
            raise CorruptEntry("bad header") from None
        if header.get("format") != FORMAT:
            raise CorruptEntry(f"format {header.get('format')!r}, expected {FORMAT}")
        if header.get("key") != key:
            raise CorruptEntry("its stored key differs from its name")
        payload = data[nl + 1 :]
        if len(payload) != n_json + n_bind or min(n_json, n_bind) < 0:
            raise CorruptEntry(f"truncated ({len(payload)} of {n_json + n_bind} bytes)")
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            raise CorruptEntry("checksum mismatch")
        try:
            body = json.loads(payload[:n_json])
            entry = Entry(
                key, body["lowered"], body["source"], payload[n_json:], body["functions"], body["externals"], body["arg_specs"], body["meta"],
                list(body["modules"]), list(body.get("pools", ())), list(body.get("lowered_parts", ())),
            )
        except (ValueError, KeyError, TypeError):
            raise CorruptEntry("bad contents") from None
        for lengths, total in ((entry.pools, len(entry.bindings)), (entry.lowered_parts, len(entry.lowered))):
            if lengths and (not all(type(n) is int and n >= 0 for n in lengths) or sum(lengths) != total):
                raise CorruptEntry("bad part lengths")
        if hashlib.sha256(entry.source.encode()).hexdigest() != header.get("source_sha256"):
            raise CorruptEntry("generated source does not hash to what the entry claims")
        return entry


class DiskCache:
    """Entries under a directory: `<dir>/<key[:2]>/<key>.entry`, each sealed with an
    HMAC under this user's key (`shardc.cache_dir.cache_key`, kept outside the cache):
    `_SEALED` + the 32-byte tag + the encoded entry. Only what this user's shardc wrote
    verifies; anything else (a forged entry with recomputed checksums, an entry from
    another machine, a FIFO, a symlink, a file over the size cap) is a warning and a
    rebuild, and not a byte of it is decoded."""

    def __init__(self, root: Path, secret: bytes):
        self.root = root
        self.secret = secret

    @staticmethod
    def default() -> DiskCache | None:
        """The user's cache, or None (off, or its directory refused)."""
        if not enabled():
            return None
        root = usable_dir(cache_dir())
        if root is None:
            return None
        secret = cache_dirs.cache_key(warn)
        return None if secret is None else DiskCache(root, secret)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.entry"

    def _unseal(self, name: str, sealed: bytes) -> bytes:
        """The entry bytes of a sealed file named `name`, if its tag verifies."""
        n = len(_SEALED) + _TAG_BYTES
        if not sealed.startswith(_SEALED) or len(sealed) < n:
            raise CorruptEntry("not sealed by this user's shardc")
        data = sealed[n:]
        if not cache_dirs.verify(self.secret, name, data, sealed[len(_SEALED) : n]):
            raise CorruptEntry("its authentication tag does not verify: not written by this user's shardc with this key")
        return data

    def get(self, key: str) -> Entry | None:
        got = self.read(key)
        return None if got is None else got[1]

    def read(self, key: str) -> tuple[bytes, Entry] | None:
        """The entry of `key` as stored and decoded, or None (absent, unreadable, corrupt)."""
        p = self.path(key)
        try:
            sealed = cache_dirs.read_regular(str(p))
        except FileNotFoundError:
            return None
        except OSError as e:
            warn(f"ignoring {p}: {e.strerror or e}; rebuilding it")
            return None
        try:
            data = self._unseal(p.name, sealed)
            return data, Entry.decode(data, key)
        except CorruptEntry as e:
            warn(f"ignoring corrupt entry {p} ({e}); rebuilding it")
            return None

    def put(self, entry: Entry, data: bytes | None = None) -> None:
        """Store `entry` (`data`: the entry already encoded), sealed (`write`)."""
        self.write(self.path(entry.key), entry.encode() if data is None else data)

    def write(self, p: Path, data: bytes) -> None:
        """`data` sealed at `p`, atomically: a temporary file in the same directory,
        renamed into place. A failure is one warning line."""
        try:
            p.parent.mkdir(mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-", suffix=".entry")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_SEALED + cache_dirs.seal(self.secret, p.name, data))
                    f.write(data)
                os.replace(tmp, p)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as e:
            warn(f"cannot write {p}: {e.strerror}")

    def unsealed(self, p: Path) -> bytes:
        """The entry bytes stored at `p` (OSError: unreadable or not a regular file;
        CorruptEntry: not sealed with this user's key)."""
        return self._unseal(p.name, cache_dirs.read_regular(str(p)))


# ---------------------------------------------------------------------------------------
# Compiled modules to entries and back
# ---------------------------------------------------------------------------------------


def _spec_of(t: Any) -> list[Any]:
    from xdsl.dialects.builtin import MemRefType, TensorType

    from shardc.runtime.execute.dtypes import is_bfloat16, np_dtype

    if isinstance(t, TensorType | MemRefType):
        dt = np_dtype(t.get_element_type())
        return ["array", "bfloat16" if is_bfloat16(dt) else dt.str, list(t.get_shape())]  # bf16's str is "<V2"
    return ["scalar", str(t)]


def _scalar_type(text: str) -> Any:
    from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type, IndexType, IntegerType

    simple = {"f16": Float16Type, "f32": Float32Type, "f64": Float64Type, "bf16": BFloat16Type, "index": IndexType}
    if text in simple:
        return simple[text]()
    if text.startswith("i") and text[1:].isdigit():
        return IntegerType(int(text[1:]))
    from shardc.context import make_context
    from shardc.ir.fast_parser import FastParser

    return FastParser(make_context(), text).parse_type()


def _arg_spec(spec: list[Any]) -> Any:
    if spec[0] == "array":
        if spec[1] == "bfloat16":
            from shardc.runtime.execute.kernels.bf16_run import bfloat16

            return bfloat16(), tuple(spec[2])
        return np.dtype(spec[1]), tuple(spec[2])
    return None, _scalar_type(spec[1])


def to_entry(key: str, lowered: str, cm: CompiledModule, meta: Mapping[str, Any], loaded: dict[str, object] | None = None) -> Entry:
    """The entry of a module compiled by `compile_module` (UncacheableError if its
    constants cannot be stored); `loaded` as in `dump_bindings`."""
    externals = [sym for sym, f in cm.signatures.items() if not f.body.blocks]
    stubs = {cm.pynames[sym] for sym in externals}  # closures: remade on loading
    specs = {sym: [_spec_of(t) for t in f.function_type.inputs.data] for sym, f in cm.signatures.items()}
    pool = {k: v for k, v in cm.bindings.items() if k not in stubs}
    modules: set[str] = set()
    data = dump_bindings(pool, modules, loaded)
    return Entry(key, lowered, cm.source, data, dict(cm.pynames), externals, specs, dict(meta), sorted(modules))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collections inside (what is built here is acyclic or lives as long as
    the module); the collector's previous state is restored."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def split_functions(source: str) -> dict[str | None, tuple[int, str]]:
    """The generated source cut before each top-level `def`: Python name -> (first line,
    the function's text with the statements that follow it, its attributes); None -> what
    precedes the first `def`, if anything. Generated statements at the top level never
    span lines, so each piece compiles alone (one that does not is CorruptEntry when it
    is compiled)."""
    starts = [0] if source.startswith("def ") else []
    at = source.find("\ndef ")
    while at >= 0:
        starts.append(at + 1)
        at = source.find("\ndef ", at + 1)
    out: dict[str | None, tuple[int, str]] = {}
    if not starts or starts[0] > 0:
        out[None] = (1, source[: starts[0] if starts else len(source)])
    line = 1
    prev = 0
    for k, start in enumerate(starts):
        line += source.count("\n", prev, start)
        prev = start
        text = source[start : starts[k + 1] if k + 1 < len(starts) else len(source)]
        pyname = text[4 : text.find("(")]
        if not pyname.isidentifier() or pyname in out:
            raise CorruptEntry(f"generated function {pyname[:40]!r} is not a function definition")
        out[pyname] = (line, text)
    return out


class _LazyFunctions(Mapping[str, Callable[..., object]]):
    """symbol -> generated function, compiled on first access (`CachedModule`)."""

    def __init__(self, cm: CachedModule):
        self._cm = cm

    def __getitem__(self, sym: str) -> Callable[..., object]:
        pyname = self._cm.pynames[sym]
        if sym in self._cm.entry.externals:
            return self._cm._namespace[pyname]  # type: ignore[return-value]  # pyright: ignore[reportPrivateUsage]
        return self._cm._function(pyname)  # pyright: ignore[reportPrivateUsage]

    def __iter__(self) -> Iterator[str]:
        return iter(self._cm.pynames)

    def __len__(self) -> int:
        return len(self._cm.pynames)


class CachedModule(CompiledModule):
    """A CompiledModule rebuilt from an entry: its callables come from the stored source
    and constants; `module` (and `signatures`) are parsed from the stored lowered text
    only if someone asks for them.

    Each function's source is compiled (and its code checked, `check_code`) when the
    function is first asked for or called, not on loading: a training job's first step
    needs `@train_step` and `@adamw_step`, never `@loss`'s 12% of the GPT step's source.
    A stored function that does not compile or pass the check raises CorruptEntry then
    (its checksums fit, so the entry was forged, not damaged: nothing of it runs)."""

    def __init__(self, entry: Entry, name: str, loaded: Mapping[int, Mapping[str, object]] | None = None):
        """`loaded`: as in `load_entry_bindings`."""
        from shardc.runtime.execute.compiled import prepare_process

        import_named(entry.modules)  # the modules whose objects the constants name, alone
        prepare_process()
        self.entry = entry
        self.source = entry.source
        self._parsed: Any = None
        self._arg_specs = {}
        self._conv_specs: dict[str, list[Any]] = {}
        self.bindings = {}
        self.pynames = dict(entry.functions)
        self._filename = filename = f"<shardc-runtime:{name}:cached:{entry.key[:12]}>"
        linecache.cache[filename] = (len(entry.source), None, entry.source.splitlines(True), filename)
        self._lock = threading.Lock()  # simulated ranks (threads) share one module
        with gc_paused():
            self._namespace = namespace = load_entry_bindings(entry, loaded)
        for sym in entry.externals:
            namespace[entry.functions[sym]] = external_stub(sym)
        chunks = split_functions(entry.source)
        prelude = chunks.pop(None, None)
        missing = [py for sym, py in entry.functions.items() if sym not in entry.externals and py not in chunks]
        if missing:
            raise CorruptEntry(f"no generated function {missing[0]!r}")
        self._pending = chunks
        for pyname in chunks:
            namespace[pyname] = self._deferred(pyname)  # what a call from another function meets first
        if prelude is not None:
            self._run(*prelude)
        self.functions = _LazyFunctions(self)  # type: ignore[assignment]

    def _deferred(self, pyname: str) -> Callable[..., object]:
        def first_call(*args: object) -> object:
            return self._function(pyname)(*args)

        return first_call

    def _function(self, pyname: str) -> Callable[..., object]:
        """The generated function `pyname`, compiled on the first request."""
        if pyname in self._pending:
            with self._lock:
                chunk = self._pending.get(pyname)
                if chunk is not None:
                    self._run(*chunk)
                    del self._pending[pyname]
        return self._namespace[pyname]  # type: ignore[return-value]

    def _run(self, line: int, text: str) -> None:
        """Compile, check and run a piece of the stored source that starts at `line`
        (padded with blank lines, so tracebacks quote the stored source's lines)."""
        from shardc.runtime.execute.code_check import UnsafeCodeError, check_code

        try:
            code = compile("\n" * (line - 1) + text, self._filename, "exec")
            check_code(code)
        except (SyntaxError, ValueError) as e:
            raise CorruptEntry(f"generated source does not compile ({e})") from None
        except UnsafeCodeError as e:
            raise CorruptEntry(f"{e}: not code the runtime generates") from None
        with gc_paused():
            exec(code, self._namespace)

    def arg_specs(self, name: str) -> list[Any]:
        specs = self._arg_specs.get(name)
        if specs is None:
            specs = self._arg_specs[name] = [_arg_spec(s) for s in self.entry.arg_specs[name]]
        return specs

    def _call_specs(self, name: str) -> list[Any]:
        """`arg_specs` with scalar types by their text where `CompiledModule.call` can
        convert them so (no xDSL type is built for a call)."""
        specs = self._conv_specs.get(name)
        if specs is None:
            specs = self._conv_specs[name] = [(s[0] == "scalar" and scalar_spec(s[1])) or _arg_spec(s) for s in self.entry.arg_specs[name]]
        return specs

    @property  # type: ignore[override]
    def module(self) -> Any:
        """The fused module as compile_module would hold it (parsed and fused on demand)."""
        if self._parsed is None:
            from shardc.runtime.codegen.fusion import fuse_elementwise

            self._parsed = entry_module(self.entry)
            fuse_elementwise(self._parsed)
        return self._parsed

    @property  # type: ignore[override]
    def signatures(self) -> dict[str, Any]:
        from xdsl.dialects import func

        return {op.sym_name.data: op for op in self.module.walk() if isinstance(op, func.FuncOp)}


def parse_lowered(text: str) -> Any:
    from shardc.context import make_context
    from shardc.ir.fast_parser import FastParser

    return FastParser(make_context(), text).parse_module()


def entry_module(entry: Entry) -> Any:
    """The lowered module of an entry: its text parsed, or its parts' texts parsed and
    joined (`join_modules`)."""
    texts = _slices(entry.lowered, entry.lowered_parts)
    if len(texts) == 1:
        return parse_lowered(texts[0])
    return join_modules([parse_lowered(t) for t in texts])


# ---------------------------------------------------------------------------------------
# The one entry point: compile through the cache (and once per MPI job)
# ---------------------------------------------------------------------------------------


@dataclass
class Compiled:
    """A compile's result: the callables, the lowered module (or a loader of it from the
    entry's text), the caller's metadata, and whether it came from a cache or a peer."""

    compiled: CompiledModule
    module: Any
    meta: dict[str, Any]
    source: str  # "compiled", "cache" (this rank's disk) or "broadcast" (from rank 0)


Build = Callable[[], tuple[Any, Mapping[str, Any]]]
"""Makes the lowered module (xDSL ModuleOp) and JSON-able metadata about it."""


def _compile_here(
    key: str,
    build: Build,
    name: str,
    fuse: bool,
    disk: DiskCache | None,
    read: bool,
    lowered: str | None,
    donate: Any = None,
    share: Callable[[bytes | None], None] | None = None,
    consume: bool = False,
) -> tuple[Compiled, Entry | None]:
    """Look up or compile. `share` is called once with the entry's bytes (None: there is
    none) as soon as they are known: on a hit before the callables are built from them,
    so that the other ranks build theirs at the same time. `consume`: as in
    `compile_cached`."""
    if read and disk is not None:
        got = disk.read(key)
        if got is not None:
            data, entry = got
            if share is not None:
                share(data)
                share = None
            try:
                cm = CachedModule(entry, name)
                debug(f"hit {key[:16]} ({name})")
                return Compiled(cm, lambda e=entry: entry_module(e), entry.meta, "cache"), entry
            except CorruptEntry as e:
                warn(f"ignoring corrupt entry {disk.path(key)} ({e}); rebuilding it")
    debug(f"miss {key[:16]} ({name}): compiling")
    from shardc.runtime.codegen.compile import compile_module  # a miss only
    from shardc.ir.printer import module_to_string  # a miss only

    with gc_paused():  # see `compile_cached`
        module, meta = build()
        if consume and lowered is None:  # printed before code generation rewrites it
            lowered = module_to_string(module)
        cm = compile_module(module, name, fuse=fuse, donate=donate, copy=not consume)
        entry: Entry | None = None
        try:
            entry = to_entry(key, module_to_string(module) if lowered is None else lowered, cm, meta)
        except Exception as e:  # UncacheableError, or a type the entry cannot describe
            debug(f"not storable ({type(e).__name__}: {e})")
    data = entry.encode() if entry is not None else None
    if data is not None and disk is not None:
        disk.put(entry, data)  # type: ignore[arg-type]
    if share is not None:
        share(data)
    if consume:
        assert lowered is not None
        return Compiled(cm, lambda text=lowered: parse_lowered(text), dict(meta), "compiled"), entry
    return Compiled(cm, module, dict(meta), "compiled"), entry


def compile_cached(
    key: str,
    build: Build,
    name: str = "module",
    *,
    fuse: bool = True,
    world: Any = None,
    read: bool = True,
    lowered: str | None = None,
    donate: Any = None,
    consume: bool = False,
) -> Compiled:
    """Look `key` up, or `build()` the lowered module and compile it, storing the entry
    (with `lowered` as the module's text when given, else the module printed).
    `consume=True`: the module `build()` returns is the compiler's to rewrite (no copy
    is fused), and `Compiled.module` parses the lowered text on first use, as after a hit.
    `read=False` compiles afresh (the entry is still written). With `world` (an mpi4py
    communicator of more than one rank) every rank must call this with the same key:
    rank 0 looks up or compiles, the others take its entry over MPI (PeerFailed when
    rank 0 could not compile). `donate` as in `compile_module`: the key must name it.

    A compile runs with the cyclic GC paused: building, rewriting and generating code for
    the GPT step allocates millions of objects and each full collection rescans them all
    (its cold compile took 1.6x the CPU time with the collector on: 23.1 s against 14.3 s,
    under load); the cyclic garbage (erased ops, about 50 MiB for the GPT step) waits for
    the first collection after the compile."""
    disk = DiskCache.default()
    if world is None or world.Get_size() == 1:
        return _compile_here(key, build, name, fuse, disk, read, lowered, donate, consume=consume)[0]
    rank = world.Get_rank()
    if rank == 0:
        sent: list[bool] = []

        def share(data: bytes | None) -> None:
            sent.append(True)
            world.bcast(("entry", data) if data is not None else ("compile", None), root=0)

        try:
            return _compile_here(key, build, name, fuse, disk, read, lowered, donate, share, consume)[0]
        except BaseException as e:
            if not sent:  # the others still wait for one message
                world.bcast(("error", f"rank 0 failed to compile {name}: {type(e).__name__}: {e}"), root=0)
            raise
    kind, payload = world.bcast(None, root=0)
    if kind == "error":
        raise PeerFailed(payload)
    if kind == "entry":
        try:
            entry = Entry.decode(payload, key)
            cm = CachedModule(entry, name)
            debug(f"received {key[:16]} ({name}) from rank 0")
            return Compiled(cm, lambda e=entry: entry_module(e), entry.meta, "broadcast")
        except CorruptEntry as e:  # another key (ranks disagree) or damage in transit
            warn(f"the entry rank 0 sent does not verify ({e}); compiling here")
    debug(f"miss {key[:16]} ({name}): compiling")
    from shardc.runtime.codegen.compile import compile_module

    with gc_paused():
        module, meta = build()
        return Compiled(compile_module(module, name, fuse=fuse, donate=donate), module, dict(meta), "compiled")


def compile_module_cached(
    module: Any, name: str = "module", *, fuse: bool = True, world: Any = None, extra: Mapping[str, object] | None = None, donate: Mapping[str, Mapping[int, int]] | None = None
) -> CompiledModule:
    """`compile_module` through the cache, keyed by the module's text with its locations
    (which the runtime's error messages quote); the pipeline has already run, so this
    saves code generation only. `world` as in `compile_cached`."""
    from shardc.ir.printer import print_module

    out = io.StringIO()
    print_module(module, out, debuginfo=True)
    text = out.getvalue()
    donated = sorted((sym, sorted(pairs.items())) for sym, pairs in (donate or {}).items())
    key = make_key("module", text=text, name=name, fuse=fuse, **({"donate": donated} if donated else {}), **(extra or {}))
    return compile_cached(key, lambda: (module, {}), name, fuse=fuse, world=world, lowered=text, donate=donate).compiled


def join_modules(modules: Sequence[Any]) -> Any:
    """The parts' lowered modules as one: every function in order, each other top-level
    op (a `shard.grid`) once, where it first appears; a declaration that a later part
    repeats differently is CorruptEntry."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ModuleOp

    from shardc.ir.printer import module_to_string

    ops: list[Any] = []
    seen: dict[str, str] = {}
    for m in modules:
        for op in list(m.ops):
            if not isinstance(op, func.FuncOp):
                text = module_to_string(ModuleOp([op.clone()]))
                name = getattr(getattr(op, "sym_name", None), "data", op.name)
                if name in seen:
                    if seen[name] != text:
                        raise CorruptEntry(f"parts declare {name} differently")
                    continue
                seen[name] = text
            op.detach()
            ops.append(op)
    return ModuleOp(ops)


__all__ = [
    "CachedModule",
    "Compiled",
    "CorruptEntry",
    "DiskCache",
    "Entry",
    "PeerFailed",
    "cache_dir",
    "compile_cached",
    "compile_module_cached",
    "compiler_identity",
    "enabled",
    "join_modules",
    "make_key",
    "usable_dir",
]

