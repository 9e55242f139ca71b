"""The run time of horizontal fusion (`horizontal.py` plans and renders the groups):
the `Group` a generated function passes to `run_group`, and the grouped kernel's calls.
No xDSL here, so a compile-cache hit loads none; horizontal.py re-exports every name
(tests that patch `MIN_GROUP_ELEMENTS` or `CHUNK` patch them here)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import as_strided

from shardc.runtime.execute.kernels import fused_run

MIN_GROUP_ELEMENTS = 1 << 13
"""Groups with fewer elements in all run member by member (numba's compile time does not
pay there, and most tests' models stay on the numpy path); a group's one call pays for
itself well below `fused_run.MIN_ELEMENTS`, the per-array threshold."""

CHUNK = 8
"""Members per kernel call: the kernel takes tuples of this length, the last call's
padded with empty arrays, so one compile serves every group size. numba's compile time
grows faster than the tuple length (a UniTuple indexed by the member loop becomes a
switch over every element): GPT's AdamW group of 74 compiled in 5.5 s, in 0.4 s at 8,
and its ten calls of 8 add 0.02 ms to the 74 small arrays' 0.07 ms (measured)."""


@dataclass
class Member:
    """One generic of a group, as `emit_structured` compiled it alone."""

    spec: object  # its StructuredSpec
    shape: tuple[int, ...]


@dataclass
class Group:
    """Generics run as one kernel call (`run_group`); `calls` counts the calls that
    took the grouped kernel, for tests and benchmarks."""

    members: list[Member]
    source: str | None = None  # the grouped kernel; None: members run one by one
    arrays: list[int] = field(default_factory=list)  # kernel arguments that are tuples of member arrays
    n_writes: int = 0
    calls: int = 0
    fn: Callable[..., None] | None = field(default=None, repr=False)
    _failed: bool = False
    layout0: np.ndarray | None = field(default=None, repr=False)
    """The kernel's layout table (`_layout`) with every member contiguous, made once."""

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "fn": None, "layout0": None}


_LOCK = threading.Lock()


def run_group(group: Group, calls: Sequence[tuple[object, Callable[..., tuple[object, ...]], Sequence[object], Sequence[object]]]) -> tuple[np.ndarray, ...]:
    """Every member's results, flattened in member order: one kernel call when the group
    has one and its arrays fit, else `run_structured` per member."""
    from shardc.runtime.execute.structured_run import run_structured

    out = _grouped(group, calls) if group.source is not None else None
    if out is not None:
        return out
    return tuple(r for spec, body, ins, outs in calls for r in run_structured(spec, body, ins, outs))  # type: ignore[arg-type]


def _grouped(group: Group, calls: Sequence[tuple[object, object, Sequence[object], Sequence[object]]]) -> tuple[np.ndarray, ...] | None:
    if group._failed or not fused_run.enabled():  # pyright: ignore[reportPrivateUsage]
        return None
    if sum(math.prod(m.shape) for m in group.members) < MIN_GROUP_ELEMENTS:
        return None
    k0 = group.members[0].spec.fused  # type: ignore[attr-defined]
    donated = k0.donated
    flat: list[list[np.ndarray]] = [[] for _ in group.arrays]
    members_args: list[list[object]] = []
    strided: dict[int, list[int]] = {}  # member -> its layout row, where not contiguous
    for i, (m, (_, _, ins, outs)) in enumerate(zip(group.members, calls)):
        block_args = [*ins, *outs]
        members_args.append(block_args)
        arrs = [block_args[k0.params[q][1]] for q in group.arrays]
        contiguous = True
        for q, a in zip(group.arrays, arrs):
            if type(a) is not np.ndarray or a.shape != m.shape:
                return None  # another layout: member by member
            if not a.flags.c_contiguous:
                if q in donated:
                    return None  # written in place: the caller's own array, whole
                contiguous = False
            elif q in donated and not a.flags.writeable:
                return None
        if contiguous:
            for col, a in zip(flat, arrs):
                col.append(a.reshape(-1))
            continue
        row = _layout(arrs, m.shape)
        if row is None:
            return None
        strided[i] = row
        for t, (col, a) in enumerate(zip(flat, arrs)):
            col.append(a.reshape(-1) if a.flags.c_contiguous else as_strided(a, ((row[0] - 1) * row[2 + t] + row[1],), (a.itemsize,)))
    layout = group.layout0
    if layout is None:  # every member contiguous: one row each (padding: no rows)
        rows = [[1, math.prod(m.shape), *[math.prod(m.shape)] * len(group.arrays)] for m in group.members]
        layout = group.layout0 = np.array(rows + [[0] * (2 + len(group.arrays))] * (-len(rows) % CHUNK), np.int64).reshape(-1, 2 + len(group.arrays))
    if strided:
        layout = layout.copy()
        for i, row in strided.items():
            layout[i] = row
    if any(len({(a.dtype, a.flags.writeable) for a in col}) != 1 for col in flat):
        return None  # a tuple of one array type (read-only is a type of its own): numba compiles it once per length
    if not _load(group):
        return None
    dts = k0.stages[0].dtypes
    writes = [[np.empty(math.prod(m.shape), dt) for m in group.members] for dt in dts]
    pad = -len(group.members) % CHUNK  # zero-length members: the kernel loops over nothing
    cols = [col + [_empty(col[0])] * pad for col in flat]
    wcols = [w + [np.empty(0, w[0].dtype)] * pad for w in writes]
    for c in range(0, len(group.members) + pad, CHUNK):
        tuples = dict(zip(group.arrays, (tuple(col[c : c + CHUNK]) for col in cols)))
        args = [tuples[q] if q in tuples else members_args[0][what] if kind == "scalar" else what for q, (kind, what) in enumerate(k0.params)]  # type: ignore[index]
        group.fn(*args, *(tuple(w[c : c + CHUNK]) for w in wcols), layout[c : c + CHUNK])  # type: ignore[misc]
    group.calls += 1
    slot_of = {s: t for t, s in enumerate(k0.stages[0].writes)}
    res: list[np.ndarray] = []
    for i, (m, block_args) in enumerate(zip(group.members, members_args)):
        for kind, n in k0.results:
            res.append(writes[slot_of[n]][i].reshape(m.shape) if kind == "slot" else block_args[n])  # type: ignore[arg-type]
    return tuple(res)


def _empty(like: np.ndarray) -> np.ndarray:
    """A padding member for a tuple of arrays like `like`: of its type, read-only too."""
    e = np.empty(0, like.dtype)
    e.flags.writeable = like.flags.writeable
    return e


def _layout(arrays: Sequence[np.ndarray], shape: tuple[int, ...]) -> list[int] | None:
    """A member's row of the grouped kernel's layout table: [rows, row length, then per
    array the distance between its rows], with every array read as rows of contiguous
    elements. Contiguous arrays are one row; a strided view (a ZeRO slice) needs its
    dimensions to merge into rows of a contiguous tail, the same rows for every strided
    array of the member. None where they do not: the member's own call reads any
    layout."""
    rows, length = 1, math.prod(shape)
    strided: list[tuple[int, int, int] | None] = [None if a.flags.c_contiguous else _rows(a) for a in arrays]
    for a, got in zip(arrays, strided):
        if a.flags.c_contiguous:
            continue
        if got is None or (rows != 1 and got[:2] != (rows, length)):
            return None
        rows, length = got[0], got[1]
    return [rows, length, *(length if got is None else got[2] for got in strided)]


def _rows(a: np.ndarray) -> tuple[int, int, int] | None:
    """(rows, row length, distance between rows), in elements, of a view whose
    innermost dimensions are contiguous and whose outer ones merge into one; None for
    any other layout (an inner stride: rows of one element would not vectorise)."""
    item = a.itemsize
    dims = [(n, st) for n, st in zip(a.shape, a.strides) if n != 1]
    length, k, step = 1, len(dims), item
    while k and dims[k - 1][1] == step:
        k -= 1
        length *= dims[k][0]
        step *= dims[k][0]
    if k == len(dims) or k == 0:
        return None  # no contiguous tail, or contiguous after all (flags say otherwise: not ours)
    stride = dims[k - 1][1]
    if stride % item or stride < step or any(dims[j][1] != dims[j + 1][1] * dims[j + 1][0] for j in range(k - 1)):
        return None
    return math.prod(n for n, _ in dims[:k]), length, stride // item


def _load(group: Group) -> bool:
    if group.fn is not None:
        return True
    with _LOCK:
        if group.fn is None and not group._failed:  # pyright: ignore[reportPrivateUsage]
            try:  # a forged source raises UnsafeCodeError (`_compile` checks the text first)
                group.fn = fused_run.compile_kernel(group.source)  # type: ignore[arg-type]
            except fused_run.KernelRefused:  # member by member
                group._failed = True
    return group.fn is not None
