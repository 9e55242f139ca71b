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

from shardc.runtime.codegen_safe import UnsafeCodeError
from shardc.runtime.kernels import fused_run

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

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "fn": None}


_LOCK = threading.Lock()


def run_group(group: Group, calls: Sequence[tuple[object, Callable[..., tuple[object, ...]], Sequence[object], Sequence[object]]]) -> tuple[np.ndarray, ...]:
    """Every member's results, flattened in member order: one kernel call when the group
    has one and its arrays fit, else `run_structured` per member."""
    from shardc.runtime.structured_run import run_structured

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
    for m, (_, _, ins, outs) in zip(group.members, calls):
        block_args = [*ins, *outs]
        members_args.append(block_args)
        for t, q in enumerate(group.arrays):
            a = block_args[k0.params[q][1]]
            if type(a) is not np.ndarray or a.shape != m.shape or not a.flags.c_contiguous or (q in donated and not a.flags.writeable):
                return None  # another layout: member by member
            flat[t].append(a.reshape(-1))
    if any(len({a.dtype for a in col}) != 1 for col in flat):
        return None  # a tuple of one array type: numba compiles it once per length
    if not _load(group):
        return None
    dts = k0.stages[0].dtypes
    writes = [[np.empty(math.prod(m.shape), dt) for m in group.members] for dt in dts]
    pad = -len(group.members) % CHUNK  # zero-length members: the kernel loops over nothing
    cols = [col + [np.empty(0, col[0].dtype)] * pad for col in flat]
    wcols = [w + [np.empty(0, w[0].dtype)] * pad for w in writes]
    for c in range(0, len(group.members) + pad, CHUNK):
        tuples = dict(zip(group.arrays, (tuple(col[c : c + CHUNK]) for col in cols)))
        args = [tuples[q] if q in tuples else members_args[0][what] if kind == "scalar" else what for q, (kind, what) in enumerate(k0.params)]  # type: ignore[index]
        group.fn(*args, *(tuple(w[c : c + CHUNK]) for w in wcols))  # type: ignore[misc]
    group.calls += 1
    slot_of = {s: t for t, s in enumerate(k0.stages[0].writes)}
    res: list[np.ndarray] = []
    for i, (m, block_args) in enumerate(zip(group.members, members_args)):
        for kind, n in k0.results:
            res.append(writes[slot_of[n]][i].reshape(m.shape) if kind == "slot" else block_args[n])  # type: ignore[arg-type]
    return tuple(res)


def _load(group: Group) -> bool:
    if group.fn is not None:
        return True
    with _LOCK:
        if group.fn is None and not group._failed:  # pyright: ignore[reportPrivateUsage]
            try:
                group.fn = fused_run._compile(group.source)  # type: ignore[arg-type]  # pyright: ignore[reportPrivateUsage]
            except UnsafeCodeError:
                raise  # a forged cache entry (fused_run._compile checks the text first)
            except Exception:  # numba refused it: member by member
                group._failed = True
    return group.fn is not None
