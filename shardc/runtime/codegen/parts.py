"""A program compiled in parts, each part on its own rank (issue #16: a job's first
compile used one rank while the others waited).

A caller that can build its module as independent parts (functions that neither call
one another nor share a `memref.global`; declarations such as a `shard.grid` may be
repeated in several parts) gives one builder per part. Under `mpiexec`, after a cache
miss, rank `r` builds, lowers and generates code for parts `r, r + N, ...` at the same
time as the others; rank 0 joins the parts' entries into one cache entry, stores it and
broadcasts it, and every rank builds its callables from it. The GPT step's passes are
function-local, so its parts lower to exactly the functions of the whole module (a test
prints both); `@train_step` alone is about half of the step's compile.

The entry of a parted compile is the same in one process and over any number of ranks:
part `i` is compiled on its own with globals scoped `p<i>__` (`ModuleCodegen`), its
source, constant pool and lowered text kept side by side (`Entry.pools`,
`Entry.lowered_parts`). One process compiles the parts one after the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shardc.runtime.codegen.cache import (
    CachedModule,
    Compiled,
    CorruptEntry,
    DiskCache,
    Entry,
    PeerFailed,
    entry_module,
    gc_paused,
    to_entry,
    warn,
    debug,
)

Part = Callable[[], tuple[Any, Mapping[str, Any]]]
"""Builds one part: its lowered module (only that part's functions) and metadata."""

MergeMeta = Callable[[list[dict[str, Any]]], dict[str, Any]]

_TAG = 0x5C16  # point-to-point messages of the parts protocol


def scope(index: int) -> str:
    """The global-name scope of part `index` (the first part's names are unscoped)."""
    return "" if index == 0 else f"p{index}__"


def compile_part(
    key: str, index: int, build: Part, name: str, fuse: bool, donate: Mapping[str, Mapping[int, int]] | None, loaded: dict[int, dict[str, object]] | None = None
) -> Entry:
    """Build part `index`, print its lowered module, generate its code: its entry
    (under the whole program's `key`). The module is the compiler's to rewrite.
    `loaded[index]` receives the part's constants as read back from the entry (what
    loading the joined entry would decode again)."""
    from xdsl.dialects import func

    from shardc.ir.printer import module_to_string
    from shardc.runtime.codegen.cache import UncacheableError
    from shardc.runtime.codegen.compile import compile_module

    with gc_paused():
        module, meta = build()
        lowered = module_to_string(module)  # before code generation rewrites it
        syms = {op.sym_name.data for op in module.ops if isinstance(op, func.FuncOp)}
        mine = {s: pairs for s, pairs in (donate or {}).items() if s in syms}
        cm = compile_module(module, name, fuse=fuse, donate=mine, copy=False, scope=scope(index))
        back: dict[str, object] = {}
        try:
            entry = to_entry(key, lowered, cm, meta, back)
        except UncacheableError as e:
            raise UncacheableError(f"part {index} of {name} cannot be shared between ranks: {e}") from None
        if loaded is not None:
            loaded[index] = back
        return entry


def join_entries(key: str, parts: Sequence[Entry], merge_meta: MergeMeta, donate: Mapping[str, object] | None = None) -> Entry:
    """One entry of the parts' entries, in order: sources, pools and lowered texts side
    by side, functions and argument types together, metadata by `merge_meta`."""
    from shardc.runtime.codegen.builder import CompileError
    from shardc.ir.escape import display

    functions: dict[str, str] = {}
    specs: dict[str, list[list[Any]]] = {}
    externals: list[str] = []
    modules: set[str] = set()
    for k, e in enumerate(parts):
        if k and e.source and not e.source.startswith("def "):
            raise CorruptEntry(f"part {k}'s source does not start with a function")
        clash = functions.keys() & e.functions.keys()
        if clash:
            raise CorruptEntry(f"function @{display(sorted(clash)[0])} is in two parts")
        functions.update(e.functions)
        specs.update(e.arg_specs)
        externals += e.externals
        modules |= set(e.modules)
    for sym in donate or {}:
        if sym not in functions:
            raise CompileError(f"runtime: cannot donate arguments of @{display(sym)}: no such function")
    return Entry(
        key, "".join(e.lowered for e in parts), "".join(e.source for e in parts), b"".join(e.bindings for e in parts),
        functions, externals, specs, merge_meta([dict(e.meta) for e in parts]), sorted(modules),
        [len(e.bindings) for e in parts], [len(e.lowered) for e in parts],
    )


def _compiled(entry: Entry, name: str, source: str, loaded: Mapping[int, Mapping[str, object]] | None = None) -> Compiled:
    return Compiled(CachedModule(entry, name, loaded), lambda e=entry: entry_module(e), entry.meta, source)


def _compile_all(key: str, parts: Sequence[Part], name: str, fuse: bool, donate: Any, indices: Sequence[int], loaded: dict[int, dict[str, object]]) -> list[Entry]:
    return [compile_part(key, i, parts[i], name, fuse, donate, loaded) for i in indices]


def _local(key: str, parts: Sequence[Part], merge_meta: MergeMeta, name: str, fuse: bool, donate: Any, disk: DiskCache | None) -> Compiled:
    """Every part compiled here, the entry stored (`disk`) and loaded."""
    loaded: dict[int, dict[str, object]] = {}
    entry = join_entries(key, _compile_all(key, parts, name, fuse, donate, range(len(parts)), loaded), merge_meta, donate)
    if disk is not None:
        disk.put(entry)
    return _compiled(entry, name, "compiled", loaded)


def compile_parts_cached(
    key: str,
    parts: Sequence[Part],
    merge_meta: MergeMeta,
    name: str = "module",
    *,
    fuse: bool = True,
    world: Any = None,
    donate: Mapping[str, Mapping[int, int]] | None = None,
) -> Compiled:
    """Look `key` up, or compile `parts` (rank `r` of `world` those `r`, `r + N`, ...;
    one process all of them) and store their joined entry. Every rank of `world` calls
    this with the same key and parts. A rank that fails to compile raises its error;
    the others raise PeerFailed. `donate` as in `compile_module` (split by part)."""
    disk = DiskCache.default()
    n = 1 if world is None else world.Get_size()
    rank = 0 if world is None else world.Get_rank()
    if rank == 0:
        got = disk.read(key) if disk is not None else None
        if got is not None:
            data, entry = got
            if n > 1:
                world.bcast(("entry", data), root=0)
            try:
                compiled = _compiled(entry, name, "cache")
                debug(f"hit {key[:16]} ({name})")
                return compiled
            except CorruptEntry as e:  # verified but not loadable: every rank rebuilds alone
                warn(f"ignoring corrupt entry {disk.path(key)} ({e}); rebuilding it")  # type: ignore[union-attr]
                return _local(key, parts, merge_meta, name, fuse, donate, disk)
        debug(f"miss {key[:16]} ({name}): compiling in {min(n, len(parts))} part(s)")
        if n == 1:
            return _local(key, parts, merge_meta, name, fuse, donate, disk)
        world.bcast(("split", None), root=0)
        loaded: dict[int, dict[str, object]] = {}
        mine: list[Entry] = []
        failed: str | None = None
        try:
            mine = _compile_all(key, parts, name, fuse, donate, range(0, len(parts), n), loaded)
        except BaseException as e:
            failed = f"rank 0 failed to compile {name}: {type(e).__name__}: {e}"
            error: BaseException | None = e
        else:
            error = None
        got_parts: dict[int, Entry] = {i: e for i, e in zip(range(0, len(parts), n), mine)}
        for r in range(1, min(n, len(parts))):
            kind, payload = world.recv(source=r, tag=_TAG)
            if kind == "error":
                failed = failed or payload
                continue
            try:
                for i, data in zip(range(r, len(parts), n), payload):
                    got_parts[i] = Entry.decode(data, key)
            except CorruptEntry as e:
                failed = failed or f"the part rank {r} sent does not verify ({e})"
        try:
            if failed is None:
                entry = join_entries(key, [got_parts[i] for i in range(len(parts))], merge_meta, donate)
                data = entry.encode()
        except BaseException as e:
            failed, error = f"rank 0 failed to join the parts of {name}: {type(e).__name__}: {e}", e
        if failed is not None:
            world.bcast(("error", failed), root=0)
            if error is not None:
                raise error
            raise PeerFailed(failed)
        if disk is not None:
            disk.put(entry, data)
        world.bcast(("entry", data), root=0)
        return _compiled(entry, name, "compiled", loaded)
    kind, payload = world.bcast(None, root=0)
    own: BaseException | None = None
    loaded = {}
    if kind == "split":
        if rank < len(parts):
            try:
                done = _compile_all(key, parts, name, fuse, donate, range(rank, len(parts), n), loaded)
                world.send(("part", [e.encode() for e in done]), dest=0, tag=_TAG)
            except BaseException as e:
                own = e
                world.send(("error", f"rank {rank} failed to compile {name}: {type(e).__name__}: {e}"), dest=0, tag=_TAG)
        kind, payload = world.bcast(None, root=0)
    if kind == "error":
        if own is not None:
            raise own
        raise PeerFailed(payload)
    try:
        compiled = _compiled(Entry.decode(payload, key), name, "broadcast", loaded)
        debug(f"received {key[:16]} ({name}) from rank 0")
        return compiled
    except CorruptEntry as e:  # ranks disagree on the key, or damage in transit
        warn(f"the entry rank 0 sent does not verify ({e}); compiling here")
        return _local(key, parts, merge_meta, name, fuse, donate, None)


__all__ = ["Part", "compile_part", "compile_parts_cached", "join_entries", "scope"]
