"""Collective communication over a device grid, with the semantics of MLIR's shard
dialect, on numpy arrays.

Groups: for a grid shape and `grid_axes`, devices that share their coordinates on the
other axes form a group; a device's in-group index linearises its coordinates along
`grid_axes` in the order given, row-major (last listed axis fastest), as MLIR does. The
world rank of a device is the row-major linearisation of its grid coordinates.

`Comm` fixes the API; `MPIComm` runs it with mpi4py buffer calls (one cached
sub-communicator per (grid, grid_axes)); `SimulatedComm` runs N ranks as threads of one
process (`run_simulated`), so compiled functions can make blocking collective calls.

Where MLIR leaves a result undefined (gather/reduce on non-root devices, shift without a
source), we return zeros (gather) or the local input (reduce, shift).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import traceback
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shardc.ir.escape import display
from shardc.runtime.execute import bf16_sums
from shardc.runtime.execute.kernels.bf16_run import is_bfloat16

Grid = tuple[int, ...]
Axes = tuple[int, ...]

REDUCTION_KINDS = ("sum", "max", "min", "product", "average", "bitwise_and", "bitwise_or", "bitwise_xor")


class CommError(Exception):
    """A collective was called with inconsistent arguments (shapes, grid, root...)."""


class RankFailed(Exception):
    """A simulated rank raised: the message names the rank; `__cause__` is the original."""

    def __init__(self, rank: int, exc: BaseException):
        super().__init__(display(f"rank {rank}: {type(exc).__name__}: {exc}"))
        self.rank = rank


class _Aborted(Exception):
    """Raised in simulated ranks blocked in a collective when another rank failed."""


class Pending:
    """A collective in flight (the `i*` calls of a Comm or an mpi backend): `wait()`
    completes it and returns its result; later calls return the same result. `test()`
    says whether it has completed, and under MPI drives MPI's progress engine (MPICH
    advances a nonblocking collective only inside MPI calls)."""

    __slots__ = ("_request", "_finish", "_result", "_done", "_keep")

    def __init__(self, request: Any = None, finish: Callable[[], Any] | None = None, keep: object = None):
        self._request = request  # an mpi4py Request, or None (completes at `wait`)
        self._finish = finish  # what turns the received buffers into the result
        self._result: Any = None
        self._done = False
        self._keep = keep  # buffers MPI reads or writes until the request completes

    @classmethod
    def completed(cls, result: Any) -> Pending:
        p = cls()
        p._result, p._done = result, True
        return p

    def test(self) -> bool:
        if self._done:
            return True
        return self._request is not None and bool(self._request.Test())

    def wait(self) -> Any:
        if not self._done:
            if self._request is not None:
                self._request.Wait()
            self._result = self._finish() if self._finish is not None else None
            self._done, self._finish, self._keep, self._request = True, None, None, None
        return self._result


# ---------------------------------------------------------------------------------------
# Grid arithmetic
# ---------------------------------------------------------------------------------------


def linearize(coords: Sequence[int], shape: Sequence[int]) -> int:
    idx = 0
    for c, s in zip(coords, shape, strict=True):
        idx = idx * s + c
    return idx


def delinearize(index: int, shape: Sequence[int]) -> tuple[int, ...]:
    out = []
    for s in reversed(shape):
        out.append(index % s)
        index //= s
    return tuple(reversed(out))


def group_size(grid: Grid, axes: Axes) -> int:
    return int(np.prod([grid[a] for a in axes], dtype=np.int64)) if axes else 1


def in_group_index(grid: Grid, axes: Axes, coords: Sequence[int]) -> int:
    return linearize([coords[a] for a in axes], [grid[a] for a in axes])


def group_members(grid: Grid, axes: Axes, coords: Sequence[int]) -> list[int]:
    """World ranks of the group containing `coords`, in in-group index order."""
    members = []
    for k in range(group_size(grid, axes)):
        sub = delinearize(k, [grid[a] for a in axes])
        c = list(coords)
        for a, v in zip(axes, sub):
            c[a] = v
        members.append(linearize(c, grid))
    return members


def group_color(grid: Grid, axes: Axes, coords: Sequence[int]) -> int:
    """Linearisation of the coordinates outside `axes`: one value per group."""
    others = [a for a in range(len(grid)) if a not in axes]
    return linearize([coords[a] for a in others], [grid[a] for a in others])


def _check_axes(grid: Grid, axes: Axes) -> None:
    if len(set(axes)) != len(axes) or any(not 0 <= a < len(grid) for a in axes):
        raise CommError(f"invalid grid_axes {list(axes)} for a grid of shape {list(grid)}")


def combine_fn(kind: str, dtype: np.dtype) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Elementwise combiner of a reduction kind (on i1, sum is xor as in MLIR's i1 addition)."""
    if kind not in REDUCTION_KINDS:
        raise CommError(f"unsupported reduction kind '{kind}'")
    if dtype == np.bool_:
        table = {"sum": np.logical_xor, "average": np.logical_xor, "product": np.logical_and, "max": np.logical_or, "min": np.logical_and}
        table |= {"bitwise_and": np.logical_and, "bitwise_or": np.logical_or, "bitwise_xor": np.logical_xor}
        return table[kind]
    if kind.startswith("bitwise") and (dtype.kind == "f" or is_bfloat16(dtype)):
        raise CommError(f"reduction '{kind}' needs an integer element type, got {dtype}")
    return {
        "sum": np.add,
        "average": np.add,
        "product": np.multiply,
        "max": np.maximum,
        "min": np.minimum,
        "bitwise_and": np.bitwise_and,
        "bitwise_or": np.bitwise_or,
        "bitwise_xor": np.bitwise_xor,
    }[kind]


def reduce_list(parts: Sequence[np.ndarray], kind: str) -> np.ndarray:
    """Reference reduction of group contributions, in in-group order."""
    dtype = parts[0].dtype
    if is_bfloat16(dtype):  # as under MPI: reduced in float32, rounded to bf16 once
        return reduce_list([np.asarray(p, np.float32) for p in parts], kind).astype(dtype)
    fn = combine_fn(kind, dtype)
    acc = np.array(parts[0], copy=True)
    for p in parts[1:]:
        acc = fn(acc, p).astype(dtype, copy=False)
    if kind == "average" and dtype != np.bool_:
        n = len(parts)
        acc = (acc // n if dtype.kind in "iu" else acc / dtype.type(n)).astype(dtype)
    return acc


def split_even(x: np.ndarray, n: int, axis: int, what: str) -> list[np.ndarray]:
    if not 0 <= axis < x.ndim:
        raise CommError(f"{what}: axis {axis} out of range for a tensor of rank {x.ndim}")
    if x.shape[axis] % n:
        raise CommError(f"{what}: dimension {axis} of size {x.shape[axis]} is not divisible by the group size {n}")
    return np.split(x, n, axis=axis)


# ---------------------------------------------------------------------------------------
# The abstract communicator
# ---------------------------------------------------------------------------------------


class Comm(ABC):
    """One device's view of the world. Every method is called by all ranks of the group."""

    rank: int
    size: int

    # --- queries --------------------------------------------------------------------
    def _coords(self, grid: Grid) -> tuple[int, ...]:
        n = int(np.prod(grid, dtype=np.int64)) if grid else 1
        if n != self.size:
            raise CommError(f"grid of shape {list(grid)} has {n} devices but the world has {self.size} ranks")
        return delinearize(self.rank, grid)

    def process_multi_index(self, grid: Grid, axes: Axes | None = None) -> tuple[int, ...]:
        coords = self._coords(tuple(grid))
        return coords if axes is None else tuple(coords[a] for a in axes)

    def process_linear_index(self, grid: Grid) -> int:
        self._coords(tuple(grid))
        return self.rank

    def group_index(self, grid: Grid, axes: Axes) -> int:
        return in_group_index(grid, axes, self._coords(grid))

    def _root_index(self, grid: Grid, axes: Axes, root: Sequence[int] | int) -> int:
        if isinstance(root, int | np.integer):
            r = int(root)
        else:
            if len(root) != len(axes):
                raise CommError(f"root {list(root)} must have one index per grid axis {list(axes)}")
            for v, a in zip(root, axes):
                if not 0 <= v < grid[a]:
                    raise CommError(f"root index {v} out of range for grid axis {a} of size {grid[a]}")
            r = linearize(list(root), [grid[a] for a in axes])
        if not 0 <= r < group_size(grid, axes):
            raise CommError(f"root {root} out of range")
        return r

    # --- collectives --------------------------------------------------------------------
    @abstractmethod
    def all_reduce(self, x: np.ndarray, grid: Grid, axes: Axes, kind: str = "sum") -> np.ndarray: ...

    @abstractmethod
    def all_gather(self, x: np.ndarray, grid: Grid, axes: Axes, gather_axis: int) -> np.ndarray: ...

    def all_slice(self, x: np.ndarray, grid: Grid, axes: Axes, slice_axis: int) -> np.ndarray:
        grid, axes = tuple(grid), tuple(axes)
        _check_axes(grid, axes)
        parts = split_even(np.asarray(x), group_size(grid, axes), slice_axis, "all_slice")
        return parts[self.group_index(grid, axes)]

    @abstractmethod
    def all_to_all(self, x: np.ndarray, grid: Grid, axes: Axes, split_axis: int, concat_axis: int) -> np.ndarray: ...

    @abstractmethod
    def reduce_scatter(self, x: np.ndarray, grid: Grid, axes: Axes, scatter_axis: int, kind: str = "sum") -> np.ndarray: ...

    # Nonblocking forms: started now, the result from `wait()`; bitwise the blocking
    # call's result (MPIComm: the same MPI reduction). By default they run blocking.
    def iall_reduce(self, x: np.ndarray, grid: Grid, axes: Axes, kind: str = "sum") -> Pending:
        return Pending.completed(self.all_reduce(x, grid, axes, kind))

    def ireduce_scatter(self, x: np.ndarray, grid: Grid, axes: Axes, scatter_axis: int, kind: str = "sum") -> Pending:
        return Pending.completed(self.reduce_scatter(x, grid, axes, scatter_axis, kind))

    def iall_gather(self, x: np.ndarray, grid: Grid, axes: Axes, gather_axis: int) -> Pending:
        return Pending.completed(self.all_gather(x, grid, axes, gather_axis))

    @abstractmethod
    def broadcast(self, x: np.ndarray, grid: Grid, axes: Axes, root: Sequence[int] | int) -> np.ndarray: ...

    @abstractmethod
    def gather(self, x: np.ndarray, grid: Grid, axes: Axes, gather_axis: int, root: Sequence[int] | int) -> np.ndarray: ...

    @abstractmethod
    def reduce(self, x: np.ndarray, grid: Grid, axes: Axes, root: Sequence[int] | int, kind: str = "sum") -> np.ndarray: ...

    @abstractmethod
    def scatter(self, x: np.ndarray, grid: Grid, axes: Axes, scatter_axis: int, root: Sequence[int] | int) -> np.ndarray: ...

    @abstractmethod
    def send(self, x: np.ndarray, grid: Grid, axes: Axes, destination: Sequence[int] | int) -> None: ...

    @abstractmethod
    def recv(self, like: np.ndarray, grid: Grid, axes: Axes, source: Sequence[int] | int | None) -> np.ndarray:
        """Receive from in-group device `source` (None: from any device of the group)."""

    @abstractmethod
    def sendrecv(self, x: np.ndarray | None, dest: int | None, like: np.ndarray, source: int | None) -> np.ndarray | None:
        """Point-to-point exchange between world ranks (None: no peer); for halos/shifts."""

    def shift(self, x: np.ndarray, grid: Grid, axes: Axes, shift_axis: int, offset: int, rotate: bool) -> np.ndarray:
        """Data moves `offset` positions up along `shift_axis`: device i gets i - offset's."""
        grid, axes = tuple(grid), tuple(axes)
        _check_axes(grid, axes)
        if shift_axis not in axes:
            raise CommError(f"shift_axis {shift_axis} must be one of grid_axes {list(axes)}")
        coords = list(self._coords(grid))
        n = grid[shift_axis]
        i = coords[shift_axis]

        def peer(j: int) -> int | None:
            if rotate:
                j %= n
            elif not 0 <= j < n:
                return None
            c = list(coords)
            c[shift_axis] = j
            return linearize(c, grid)

        x = np.ascontiguousarray(x)
        got = self.sendrecv(x, peer(i + offset), x, peer(i - offset))
        return x.copy() if got is None else got

    @abstractmethod
    def barrier(self) -> None: ...

    def trusted(self) -> Comm:
        """This comm for calls whose inputs are known to agree across the group (static
        shapes in the IR): the MPI comm then skips its shape/dtype header exchange."""
        return self

    @abstractmethod
    def mpi_backend(self) -> Any:
        """The backend of the `mpi` dialect's ops on this communicator (see `MPIP2P`)."""


# ---------------------------------------------------------------------------------------
# Current communicator (per thread: simulated ranks are threads)
# ---------------------------------------------------------------------------------------

_local = threading.local()


def current_comm() -> Comm:
    comm = getattr(_local, "comm", None)
    if comm is None:
        comm = _default_comm()
        _local.comm = comm
    return comm


@contextlib.contextmanager
def use_comm(comm: Comm) -> Iterator[Comm]:
    prev = getattr(_local, "comm", None)
    _local.comm = comm
    try:
        yield comm
    finally:
        _local.comm = prev


def _default_comm() -> Comm:
    if os.environ.get("PMI_RANK") is not None or os.environ.get("OMPI_COMM_WORLD_RANK") is not None:
        return MPIComm()
    world = SimulatedWorld(1)
    return SimulatedComm(world, 0)


# ---------------------------------------------------------------------------------------
# Simulated: N ranks as threads of one process
# ---------------------------------------------------------------------------------------


@dataclass
class _Slot:
    parts: dict[int, Any] = field(default_factory=dict)
    readers: int = 0


class SimulatedWorld:
    """Shared state of N simulated ranks: a rendezvous table and mailboxes."""

    def __init__(self, size: int, timeout: float = 120.0):
        self.size = size
        self.timeout = timeout
        self.cond = threading.Condition()
        self.slots: dict[tuple[Any, ...], _Slot] = {}
        self.counters: dict[tuple[int, tuple[Any, ...]], int] = {}
        self.mail: dict[tuple[Any, ...], list[np.ndarray]] = {}
        self.failed: tuple[int, BaseException] | None = None

    def fail(self, rank: int, exc: BaseException) -> None:
        with self.cond:
            if self.failed is None:
                self.failed = (rank, exc)
            self.cond.notify_all()

    def _wait(self, pred: Callable[[], bool], rank: int, what: str) -> None:
        if not self.cond.wait_for(lambda: pred() or self.failed is not None, timeout=self.timeout):
            raise CommError(f"rank {rank}: timed out after {self.timeout:.0f}s in {what} (deadlock or a rank that skipped the call)")
        if self.failed is not None and not pred():
            raise _Aborted()

    def exchange(self, rank: int, members: Sequence[int], key: tuple[Any, ...], value: Any, what: str) -> list[Any]:
        """Every member contributes `value`; each gets all contributions in member order."""
        return self.collect(rank, self.contribute(rank, members, key, value, what))

    def contribute(self, rank: int, members: Sequence[int], key: tuple[Any, ...], value: Any, what: str) -> tuple[Any, ...]:
        """The first half of `exchange`, which never blocks: post `value` in the next slot
        of `key` (its place in the sequence is taken now, as MPI orders a nonblocking
        collective when it starts) and return the ticket `collect` takes."""
        with self.cond:
            if self.failed is not None:
                raise _Aborted()
            ckey = (rank, key)
            seq = self.counters.get(ckey, 0)
            self.counters[ckey] = seq + 1
            skey = (*key, seq)
            slot = self.slots.setdefault(skey, _Slot())
            slot.parts[rank] = value
            self.cond.notify_all()
            return (skey, tuple(members), what)

    def collect(self, rank: int, ticket: tuple[Any, ...]) -> list[Any]:
        """The second half of `exchange`: wait for every member's part of the slot."""
        skey, members, what = ticket
        with self.cond:
            slot = self.slots[skey]
            self._wait(lambda: len(slot.parts) == len(members), rank, what)
            out = [slot.parts[m] for m in members]
            slot.readers += 1
            if slot.readers == len(members):
                del self.slots[skey]
            return out

    def post(self, src: int, dst: int, x: np.ndarray, channel: Any = None) -> None:
        with self.cond:
            self.mail.setdefault((src, dst, channel), []).append(np.array(x, copy=True))
            self.cond.notify_all()

    def take(self, src: int, dst: int, what: str, channel: Any = None) -> np.ndarray:
        with self.cond:
            box = self.mail.setdefault((src, dst, channel), [])
            self._wait(lambda: bool(box), dst, what)
            return box.pop(0)

    def take_any(self, sources: Sequence[int], dst: int, what: str, channel: Any = None) -> tuple[int, np.ndarray]:
        """The first message from any of `sources` (lowest rank first when several wait)."""
        with self.cond:
            boxes = [(s, self.mail.setdefault((s, dst, channel), [])) for s in sources]
            self._wait(lambda: any(boxes[i][1] for i in range(len(boxes))), dst, what)
            for s, box in boxes:
                if box:
                    return s, box.pop(0)
            raise AssertionError("unreachable")


class SimulatedComm(Comm):
    """Rank `rank` of a `SimulatedWorld`; collectives exchange whole arrays (copies)."""

    def __init__(self, world: SimulatedWorld, rank: int):
        self.world = world
        self.rank = rank
        self.size = world.size

    def _gather_all(self, x: np.ndarray, grid: Grid, axes: Axes, what: str, check: bool = True) -> tuple[list[np.ndarray], int]:
        return self._gathered(self._start(x, grid, axes, what), check)

    def _start(self, x: np.ndarray, grid: Grid, axes: Axes, what: str) -> tuple[Any, list[int]]:
        grid, axes = tuple(grid), tuple(axes)
        _check_axes(grid, axes)
        coords = self._coords(grid)
        members = group_members(grid, axes, coords)
        key = ("coll", grid, axes, group_color(grid, axes, coords))
        return self.world.contribute(self.rank, members, key, (what, np.array(x, copy=True)), what), members

    def _gathered(self, started: tuple[Any, list[int]], check: bool = True) -> tuple[list[np.ndarray], int]:
        ticket, members = started
        what = ticket[2]
        parts = self.world.collect(self.rank, ticket)
        names = {p[0] for p in parts}
        if len(names) != 1:
            raise CommError(f"rank {self.rank}: mismatched collectives in one group: {sorted(names)}")
        arrays = [p[1] for p in parts]
        if check:
            _check_same(arrays, members, what)
        return arrays, members.index(self.rank)

    def all_reduce(self, x: np.ndarray, grid: Grid, axes: Axes, kind: str = "sum") -> np.ndarray:
        parts, _ = self._gather_all(x, grid, axes, "all_reduce")
        return reduce_list(parts, kind)

    # Nonblocking: the contribution is posted at the start, the others collected at wait.
    def iall_reduce(self, x: np.ndarray, grid: Grid, axes: Axes, kind: str = "sum") -> Pending:
        combine_fn(kind, np.asarray(x).dtype)  # a bad kind fails at the start, as blocking
        started = self._start(x, grid, axes, "all_reduce")
        return Pending(finish=lambda: reduce_list(self._gathered(started)[0], kind))

    def ireduce_scatter(self, x: np.ndarray, grid: Grid, axes: Axes, scatter_axis: int, kind: str = "sum") -> Pending:
        combine_fn(kind, np.asarray(x).dtype)
        started = self._start(x, grid, axes, "reduce_scatter")

        def finish() -> np.ndarray:
            parts, me = self._gathered(started)
            return split_even(reduce_list(parts, kind), len(parts), scatter_axis, "reduce_scatter")[me]

        return Pending(finish=finish)

    def iall_gather(self, x: np.ndarray, grid: Grid, axes: Axes, gather_axis: int) -> Pending:
        started = self._start(x, grid, axes, "all_gather")
        return Pending(finish=lambda: np.concatenate(self._gathered(started)[0], axis=gather_axis))

    def all_gather(self, x: np.ndarray, grid: Grid, axes: Axes, gather_axis: int) -> np.ndarray:
        parts, _ = self._gather_all(x, grid, axes, "all_gather")
        return np.concatenate(parts, axis=gather_axis)

    def all_to_all(self, x: np.ndarray, grid: Grid, axes: Axes, split_axis: int, concat_axis: int) -> np.ndarray:
        parts, me = self._gather_all(x, grid, axes, "all_to_all")
        n = len(parts)
        return np.concatenate([split_even(p, n, split_axis, "all_to_all")[me] for p in parts], axis=concat_axis)

    def reduce_scatter(self, x: np.ndarray, grid: Grid, axes: Axes, scatter_axis: int, kind: str = "sum") -> np.ndarray:
        parts, me = self._gather_all(x, grid, axes, "reduce_scatter")
        return split_even(reduce_list(parts, kind), len(parts), scatter_axis, "reduce_scatter")[me]

    def broadcast(self, x: np.ndarray, grid: Grid, axes: Axes, root: Sequence[int] | int) -> np.ndarray:
        r = self._root_index(tuple(grid), tuple(axes), root)
        parts, _ = self._gather_all(x, grid, axes, "broadcast")
        return parts[r]

    def gather(self, x: np.ndarray, grid: Grid, axes: Axes, gather_axis: int, root: Sequence[int] | int) -> np.ndarray:
        r = self._root_index(tuple(grid), tuple(axes), root)
        parts, me = self._gather_all(x, grid, axes, "gather")
        full = np.concatenate(parts, axis=gather_axis)
        return full if me == r else np.zeros_like(full)

    def reduce(self, x: np.ndarray, grid: Grid, axes: Axes, root: Sequence[int] | int, kind: str = "sum") -> np.ndarray:
        r = self._root_index(tuple(grid), tuple(axes), root)
        parts, me = self._gather_all(x, grid, axes, "reduce")
        return reduce_list(parts, kind) if me == r else np.array(x, copy=True)

    def scatter(self, x: np.ndarray, grid: Grid, axes: Axes, scatter_axis: int, root: Sequence[int] | int) -> np.ndarray:
        r = self._root_index(tuple(grid), tuple(axes), root)
        parts, me = self._gather_all(x, grid, axes, "scatter")
        return split_even(parts[r], len(parts), scatter_axis, "scatter")[me]

    def _peer(self, grid: Grid, axes: Axes, idx: Sequence[int] | int) -> int:
        grid, axes = tuple(grid), tuple(axes)
        r = self._root_index(grid, axes, idx)
        return group_members(grid, axes, self._coords(grid))[r]

    def send(self, x: np.ndarray, grid: Grid, axes: Axes, destination: Sequence[int] | int) -> None:
        self.world.post(self.rank, self._peer(grid, axes, destination), np.asarray(x))

    def recv(self, like: np.ndarray, grid: Grid, axes: Axes, source: Sequence[int] | int | None) -> np.ndarray:
        if source is None:
            grid, axes = tuple(grid), tuple(axes)
            members = [m for m in group_members(grid, axes, self._coords(grid)) if m != self.rank]
            _, got = self.world.take_any(members, self.rank, "recv")
        else:
            got = self.world.take(self._peer(grid, axes, source), self.rank, "recv")
        _check_same([np.asarray(like), got], [self.rank, -1], "recv")
        return got

    def sendrecv(self, x: np.ndarray | None, dest: int | None, like: np.ndarray, source: int | None) -> np.ndarray | None:
        if dest is not None and x is not None:
            self.world.post(self.rank, dest, x)
        if source is None:
            return None
        return self.world.take(source, self.rank, "sendrecv")

    def barrier(self) -> None:
        self.world.exchange(self.rank, list(range(self.size)), ("barrier",), None, "barrier")

    def mpi_backend(self) -> SimulatedMPI:
        backend = getattr(self, "_mpi", None)
        if backend is None:
            backend = self._mpi = SimulatedMPI(self.world, self.rank)
        return backend


def _check_same(arrays: Sequence[np.ndarray], members: Sequence[int], what: str) -> None:
    first = arrays[0]
    for a, m in zip(arrays[1:], members[1:]):
        if a.shape != first.shape or a.dtype != first.dtype:
            desc = ", ".join(f"rank {r}: {x.shape} {x.dtype}" for r, x in zip(members, arrays))
            raise CommError(f"{what}: mismatched inputs across the group ({desc})")


def run_simulated(size: int, fn: Callable[..., Any], *args: Any, timeout: float = 120.0, per_rank_args: Sequence[Sequence[Any]] | None = None) -> list[Any]:
    """Run `fn(*args)` (or `fn(*per_rank_args[r])`) on `size` simulated ranks, each thread
    with its own `SimulatedComm` as current comm. Returns per-rank results; if a rank
    raises, raises `RankFailed` naming the first failing rank."""
    world = SimulatedWorld(size, timeout)
    results: list[Any] = [None] * size

    def body(r: int) -> None:
        comm = SimulatedComm(world, r)
        try:
            with use_comm(comm), np.errstate(all="ignore"):
                results[r] = fn(*(per_rank_args[r] if per_rank_args is not None else args))
        except _Aborted:
            pass
        except BaseException as e:  # noqa: BLE001 - re-raised below, naming the rank
            world.fail(r, e)

    threads = [threading.Thread(target=body, args=(r,), name=f"shardc-rank-{r}", daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if world.failed is not None:
        rank, exc = world.failed
        raise RankFailed(rank, exc) from exc
    return results


# ---------------------------------------------------------------------------------------
# MPI
# ---------------------------------------------------------------------------------------

_HEADER = 10  # ndim, dtype code, up to 8 dims


def _mpi() -> Any:
    from mpi4py import MPI

    return MPI


class MPIComm(Comm):
    """mpi4py buffer calls; one sub-communicator per (grid, grid_axes), created with
    `Split` (color = the group, key = the in-group index) and cached.

    `checked` (default on; env SHARDC_COMM_CHECK=0 turns it off) allgathers a small
    shape/dtype header before each collective and reports mismatches on every rank."""

    def __init__(self, comm: Any = None, checked: bool | None = None):
        MPI = _mpi()
        self.mpi = MPI
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.checked = checked if checked is not None else os.environ.get("SHARDC_COMM_CHECK", "1") != "0"
        self._subs: dict[tuple[Grid, Axes], Any] = {}

    def trusted(self) -> MPIComm:
        if not self.checked:
            return self
        twin = getattr(self, "_twin", None)
        if twin is None:
            twin = self._twin = MPIComm(self.comm, checked=False)
            twin._p2p = self.mpi_backend()  # one set of buffered sends for both
            twin._subs = self._subs  # one sub-communicator cache for both
        return twin

    def sub(self, grid: Grid, axes: Axes) -> Any:
        key = (tuple(grid), tuple(axes))
        c = self._subs.get(key)
        if c is None:
            _check_axes(*key)
            coords = self._coords(key[0])
            if key[1] == tuple(range(len(key[0]))):  # the whole grid in world order
                self._subs[key] = self.comm
                return self.comm
            c = self.comm.Split(group_color(key[0], key[1], coords), in_group_index(key[0], key[1], coords))
            self._subs[key] = c
        return c

    def _op(self, kind: str, dtype: np.dtype) -> Any:
        return mpi_op(kind, dtype)

    def _check(self, c: Any, x: np.ndarray, what: str) -> None:
        if not self.checked:
            return
        if x.ndim > _HEADER - 2:
            raise CommError(f"{what}: rank {x.ndim} tensors are not supported by the checked mode")
        h = np.full(_HEADER, -1, dtype=np.int64)
        h[0] = x.ndim
        h[1] = x.dtype.num
        h[2 : 2 + x.ndim] = x.shape
        allh = np.empty((c.Get_size(), _HEADER), dtype=np.int64)
        c.Allgather(h, allh)
        if not (allh == allh[0]).all():
            desc = ", ".join(f"in-group {i}: {tuple(int(s) for s in row[2 : 2 + row[0]])} {_dtype_name(int(row[1]))}" for i, row in enumerate(allh))
            raise CommError(f"{what}: mismatched inputs across the group ({desc})")

    def _prep(self, x: np.ndarray, grid: Grid, axes: Axes, what: str) -> tuple[Any, np.ndarray]:
        c = self.sub(tuple(grid), tuple(axes))
        x = np.require(x, requirements="C")  # 0-d stays 0-d (ascontiguousarray makes it 1-d)
        self._check(c, x, what)
        return c, x

    @staticmethod
    def _widen(x: np.ndarray) -> np.ndarray:
        if is_bfloat16(x.dtype):
            return widened(x)  # reduced in float32, rounded once
        return x.astype(np.float32) if x.dtype == np.float16 else x

    @classmethod
    def _widen_unless_summed(cls, x: np.ndarray, kind: str) -> np.ndarray:
        """`x` to send: bf16 stays bf16 for a sum (`bf16_sums` moves its 16 bits)."""
        return x if kind == "sum" and is_bfloat16(x.dtype) else cls._widen(x)

    def all_reduce(self, x: np.ndarray, grid: Grid, axes: Axes, kind: str = "sum") -> np.ndarray:
        c, x = self._prep(x, grid, axes, "all_reduce")
        if kind == "sum" and is_bfloat16(x.dtype):  # bf16 on the wire (bf16_sums)
            out = np.empty_like(x)
            bf16_sums.allreduce(c, x, out)
            return out
        w = self._widen(x)
        out = np.empty_like(w)
        c.Allreduce(w, out, op=self._op(kind, x.dtype))
        return self._finish_reduce(out, x.dtype, kind, c.Get_size())

    def iall_reduce(self, x: np.ndarray, grid: Grid, axes: Axes, kind: str = "sum") -> Pending:
        c, x = self._prep(x, grid, axes, "all_reduce")
        if kind == "sum" and is_bfloat16(x.dtype):
            out = np.empty_like(x)
            return _summing(bf16_sums.start_allreduce(c, x, out), out)
        w = self._widen(x)
        out = np.empty_like(w)
        if not nonblocking_matches(c, "allreduce", w.size, w.dtype, self._op(kind, x.dtype)):
            c.Allreduce(w, out, op=self._op(kind, x.dtype))
            return Pending.completed(self._finish_reduce(out, x.dtype, kind, c.Get_size()))
        req = c.Iallreduce(w, out, op=self._op(kind, x.dtype))
        n, dtype = c.Get_size(), x.dtype
        return Pending(req, lambda: self._finish_reduce(out, dtype, kind, n), keep=(w, out))

    def ireduce_scatter(self, x: np.ndarray, grid: Grid, axes: Axes, scatter_axis: int, kind: str = "sum") -> Pending:
        c, x = self._prep(x, grid, axes, "reduce_scatter")
        send = np.ascontiguousarray(np.stack(split_even(self._widen_unless_summed(x, kind), c.Get_size(), scatter_axis, "reduce_scatter")))
        recv = np.empty_like(send[0])
        if is_bfloat16(send.dtype):
            return _summing(bf16_sums.start_reduce_scatter(c, send, recv), recv)
        if not nonblocking_matches(c, "reduce_scatter_block", recv.size, recv.dtype, self._op(kind, x.dtype)):
            c.Reduce_scatter_block(send, recv, op=self._op(kind, x.dtype))
            return Pending.completed(self._finish_reduce(recv, x.dtype, kind, c.Get_size()))
        req = c.Ireduce_scatter_block(send, recv, op=self._op(kind, x.dtype))
        n, dtype = c.Get_size(), x.dtype
        return Pending(req, lambda: self._finish_reduce(recv, dtype, kind, n), keep=(send, recv))

    def iall_gather(self, x: np.ndarray, grid: Grid, axes: Axes, gather_axis: int) -> Pending:
        c, x = self._prep(x, grid, axes, "all_gather")
        n = c.Get_size()
        buf = np.empty((n, *x.shape), dtype=x.dtype)
        req = c.Iallgather(wire(x), wire(buf))

        def finish() -> np.ndarray:
            if gather_axis == 0:
                return buf.reshape((n * x.shape[0], *x.shape[1:]))
            return np.concatenate(list(buf), axis=gather_axis)

        return Pending(req, finish, keep=(x, buf))

    @staticmethod
    def _finish_reduce(out: np.ndarray, dtype: np.dtype, kind: str, n: int) -> np.ndarray:
        if kind == "average" and dtype != np.bool_:
            out = out // n if dtype.kind in "iu" else out / out.dtype.type(n)
        return rounded(out) if is_bfloat16(dtype) else out.astype(dtype, copy=False)

    def all_gather(self, x: np.ndarray, grid: Grid, axes: Axes, gather_axis: int) -> np.ndarray:
        c, x = self._prep(x, grid, axes, "all_gather")
        n = c.Get_size()
        buf = np.empty((n, *x.shape), dtype=x.dtype)
        c.Allgather(wire(x), wire(buf))
        if gather_axis == 0:  # the pieces are already in place: a free reshape
            return buf.reshape((n * x.shape[0], *x.shape[1:]))
        return np.concatenate(list(buf), axis=gather_axis)

    def all_to_all(self, x: np.ndarray, grid: Grid, axes: Axes, split_axis: int, concat_axis: int) -> np.ndarray:
        c, x = self._prep(x, grid, axes, "all_to_all")
        send = np.ascontiguousarray(np.stack(split_even(x, c.Get_size(), split_axis, "all_to_all")))
        recv = np.empty_like(send)
        c.Alltoall(wire(send), wire(recv))
        return np.concatenate(list(recv), axis=concat_axis)

    def reduce_scatter(self, x: np.ndarray, grid: Grid, axes: Axes, scatter_axis: int, kind: str = "sum") -> np.ndarray:
        c, x = self._prep(x, grid, axes, "reduce_scatter")
        send = np.ascontiguousarray(np.stack(split_even(self._widen_unless_summed(x, kind), c.Get_size(), scatter_axis, "reduce_scatter")))
        recv = np.empty_like(send[0])
        if is_bfloat16(send.dtype):
            bf16_sums.reduce_scatter(c, send, recv)
            return recv
        c.Reduce_scatter_block(send, recv, op=self._op(kind, x.dtype))
        return self._finish_reduce(recv, x.dtype, kind, c.Get_size())

    def broadcast(self, x: np.ndarray, grid: Grid, axes: Axes, root: Sequence[int] | int) -> np.ndarray:
        r = self._root_index(tuple(grid), tuple(axes), root)
        c, x = self._prep(x, grid, axes, "broadcast")
        buf = np.array(x, copy=True)
        c.Bcast(wire(buf), root=r)
        return buf

    def gather(self, x: np.ndarray, grid: Grid, axes: Axes, gather_axis: int, root: Sequence[int] | int) -> np.ndarray:
        r = self._root_index(tuple(grid), tuple(axes), root)
        c, x = self._prep(x, grid, axes, "gather")
        buf = np.empty((c.Get_size(), *x.shape), dtype=x.dtype) if c.Get_rank() == r else None
        c.Gather(wire(x), None if buf is None else wire(buf), root=r)
        if buf is None:
            shape = list(x.shape)
            shape[gather_axis] *= c.Get_size()
            return np.zeros(shape, x.dtype)
        return np.concatenate(list(buf), axis=gather_axis)

    def reduce(self, x: np.ndarray, grid: Grid, axes: Axes, root: Sequence[int] | int, kind: str = "sum") -> np.ndarray:
        r = self._root_index(tuple(grid), tuple(axes), root)
        c, x = self._prep(x, grid, axes, "reduce")
        w = self._widen(x)
        out = np.empty_like(w) if c.Get_rank() == r else None
        c.Reduce(w, out, op=self._op(kind, x.dtype), root=r)
        return self._finish_reduce(out, x.dtype, kind, c.Get_size()) if out is not None else x.copy()

    def scatter(self, x: np.ndarray, grid: Grid, axes: Axes, scatter_axis: int, root: Sequence[int] | int) -> np.ndarray:
        r = self._root_index(tuple(grid), tuple(axes), root)
        c, x = self._prep(x, grid, axes, "scatter")
        n = c.Get_size()
        parts = split_even(x, n, scatter_axis, "scatter")
        send = np.ascontiguousarray(np.stack(parts)) if c.Get_rank() == r else None
        recv = np.empty_like(parts[0], order="C")
        c.Scatter(None if send is None else wire(send), wire(recv), root=r)
        return recv

    def send(self, x: np.ndarray, grid: Grid, axes: Axes, destination: Sequence[int] | int) -> None:
        """Buffered (MPIP2P.send): a program may send before it receives."""
        c = self.sub(tuple(grid), tuple(axes))
        self.mpi_backend().send(c, wire(np.asarray(x)), self._root_index(tuple(grid), tuple(axes), destination), 17)

    def recv(self, like: np.ndarray, grid: Grid, axes: Axes, source: Sequence[int] | int | None) -> np.ndarray:
        c = self.sub(tuple(grid), tuple(axes))
        buf = np.empty(np.shape(like), dtype=np.asarray(like).dtype)
        src = self.mpi.ANY_SOURCE if source is None else self._root_index(tuple(grid), tuple(axes), source)
        self.mpi_backend().recv(c, wire(buf), src, 17)
        return buf

    def sendrecv(self, x: np.ndarray | None, dest: int | None, like: np.ndarray, source: int | None) -> np.ndarray | None:
        MPI = self.mpi
        buf = np.empty(np.shape(like), dtype=np.asarray(like).dtype) if source is not None else None
        send = wire(np.ascontiguousarray(x)) if x is not None and dest is not None else np.empty(0, np.uint8)
        self.comm.Sendrecv(
            send,
            dest=dest if dest is not None else MPI.PROC_NULL,
            sendtag=23,
            recvbuf=wire(buf) if buf is not None else np.empty(0, np.uint8),
            source=source if source is not None else MPI.PROC_NULL,
            recvtag=23,
        )
        return buf

    def barrier(self) -> None:
        self.mpi_backend().barrier(self.comm)

    def mpi_backend(self) -> MPIP2P:
        backend = getattr(self, "_p2p", None)
        if backend is None:
            backend = self._p2p = MPIP2P(self.comm)
        return backend


def wire(x: np.ndarray) -> np.ndarray:
    """`x` as MPI moves it: bf16 (ml_dtypes'; MPI has no bf16 datatype and mpi4py cannot
    export its buffer) as its 16-bit patterns, a uint16 view of the same memory. Data
    movement only: sums move the patterns too and add them in float32 (`bf16_sums`);
    other reductions widen bf16 to float32 first; either rounds the result once
    (`MPIComm._widen`, `MPIP2P`'s reducing calls)."""
    return x.view(np.uint16) if is_bfloat16(x.dtype) else x


def widened(x: np.ndarray) -> np.ndarray:
    """bf16 `x` as float32, exactly (its bits shifted up: ml_dtypes' `astype` took 4x the
    float32 allreduce's time on 4M elements, measured)."""
    from shardc.runtime.execute.kernels.bf16_cast import widen_bfloat16

    return widen_bfloat16(x)


def rounded(x: np.ndarray) -> np.ndarray:
    """float32 `x` rounded to bf16 once (nearest even, ml_dtypes' bits, `bf16_cast`'s loop)."""
    from shardc.runtime.execute.kernels.bf16_cast import round_to_bfloat16

    return round_to_bfloat16(np.asarray(x, np.float32))


def mpi_op(kind: str, dtype: np.dtype) -> Any:
    """The MPI reduction op of a reduction kind (logical ops on i1)."""
    MPI = _mpi()
    combine_fn(kind, dtype)  # validates
    if dtype == np.bool_:
        table = {"sum": MPI.LXOR, "average": MPI.LXOR, "product": MPI.LAND, "max": MPI.LOR, "min": MPI.LAND}
        table |= {"bitwise_and": MPI.LAND, "bitwise_or": MPI.LOR, "bitwise_xor": MPI.LXOR}
        return table[kind]
    return {
        "sum": MPI.SUM,
        "average": MPI.SUM,
        "product": MPI.PROD,
        "max": MPI.MAX,
        "min": MPI.MIN,
        "bitwise_and": MPI.BAND,
        "bitwise_or": MPI.BOR,
        "bitwise_xor": MPI.BXOR,
    }[kind]


def _dtype_name(num: int) -> str:
    for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float16, np.float32, np.float64):
        if np.dtype(t).num == num:
            return np.dtype(t).name
    return f"dtype#{num}"


@contextlib.contextmanager
def abort_on_error(comm: Any = None) -> Iterator[None]:
    """Under MPI: on an exception, print it on stderr naming the rank and Abort(1) the
    job, so no rank hangs in a collective waiting for the failed one. An exception whose
    `agreed` is true is raised on every rank together (a checkpoint's full disk) and
    passes through for the tool to say in one line."""
    try:
        yield
    except BaseException as e:  # noqa: BLE001
        if getattr(e, "agreed", False):  # every rank raises it together: no rank waits, no abort
            raise
        MPI = _mpi()
        world = comm if comm is not None else MPI.COMM_WORLD
        msg = f"shardc: rank {world.Get_rank()}: {display(f'{type(e).__name__}: {e}')}\n"
        if os.environ.get("SHARDC_TRACEBACK"):
            msg += traceback.format_exc()
        sys.stderr.write(msg)
        sys.stderr.flush()
        import time

        time.sleep(0.3)  # let mpiexec forward the message before Abort tears the job down
        world.Abort(1)
        raise


# ---------------------------------------------------------------------------------------
# Backends of the mpi dialect: mpi4py, and an MPI-like world over simulated ranks
# ---------------------------------------------------------------------------------------
#
# Communicator handles are opaque to the kernels: mpi4py `Comm` objects, or `SimGroup`s.
# Reductions are named by MLIR's `MPI_ReductionOpEnum` names (MPI_SUM, ...). Every call
# that MLIR gives a `!mpi.retval` returns MPI_SUCCESS (0); failures raise.

MPI_SUCCESS = 0

_MPI_COMBINE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "MPI_MAX": np.maximum,
    "MPI_MIN": np.minimum,
    "MPI_SUM": np.add,
    "MPI_PROD": np.multiply,
    "MPI_BAND": np.bitwise_and,
    "MPI_BOR": np.bitwise_or,
    "MPI_BXOR": np.bitwise_xor,
}
_MPI_LOGICAL = {"MPI_LAND": np.logical_and, "MPI_LOR": np.logical_or, "MPI_LXOR": np.logical_xor}


def mpi_reduce_list(parts: Sequence[np.ndarray], op: str) -> np.ndarray:
    """Reference reduction of an MPI predefined op over contributions in rank order (bf16:
    in float32, rounded once, as `MPIP2P` reduces it)."""
    dtype = parts[0].dtype
    if is_bfloat16(dtype):
        bf16_op_check(op, "reduction")
        return mpi_reduce_list([np.asarray(p, np.float32) for p in parts], op).astype(dtype)
    if op in _MPI_LOGICAL:
        fn = _MPI_LOGICAL[op]
        acc = parts[0] != 0
        for p in parts[1:]:
            acc = fn(acc, p != 0)
        return acc.astype(dtype)
    if op not in _MPI_COMBINE:
        raise CommError(f"reduction {op} is not supported by the runtime")
    if op.startswith("MPI_B") and dtype.kind == "f":
        raise CommError(f"reduction {op} needs an integer element type, got {dtype}")
    fn = _MPI_COMBINE[op]
    if dtype == np.bool_:
        fn = {"MPI_SUM": np.logical_or, "MPI_PROD": np.logical_and}.get(op, fn)
    acc = np.array(parts[0], copy=True)
    for p in parts[1:]:
        acc = fn(acc, p).astype(dtype, copy=False)
    return acc


def bf16_op_check(op: str, what: str) -> None:
    """A bf16 buffer reduces in float32: an MPI op that needs integers is an error."""
    if op.startswith(("MPI_B", "MPI_L")):
        raise CommError(f"{what}: {op} needs an integer element type, got bfloat16")


def _bf16_pair(send: np.ndarray, recv: np.ndarray, what: str) -> bool:
    """Whether a reduction's buffers are bf16 (both are, or it is an error)."""
    one, other = is_bfloat16(send.dtype), is_bfloat16(recv.dtype)
    if one != other:
        raise CommError(f"{what}: send buffer {send.dtype} and receive buffer {recv.dtype} differ")
    return one


def _write(dst: np.ndarray, flat: np.ndarray, what: str) -> None:
    if dst.size != flat.size:
        raise CommError(f"{what}: the receive buffer has {dst.size} elements, {flat.size} arrived")
    dst[...] = flat.reshape(dst.shape)


def _same_buffer(a: np.ndarray, b: np.ndarray) -> bool:
    """The same memory viewed the same way (a buffer reduced in place)."""
    return (
        a.shape == b.shape
        and a.strides == b.strides
        and a.dtype == b.dtype
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )


class MPIP2P:
    """The mpi dialect over mpi4py buffer calls on numpy arrays (memrefs).

    `send` has buffered-send semantics (MPI_Bsend-like): the buffer is copied and sent
    with Isend, so the call returns at once whatever the message size. Upstream's
    lowered halo exchange sends to both neighbours before either receives; with
    MPI_Send that deadlocks as soon as messages outgrow MPI's eager protocol. Pending
    sends progress while this process is in any later MPI call; finished ones are
    reaped at every send, receive and barrier, and all are waited for at exit (before
    MPI is finalized) or by `flush`. A barrier does not wait for them: a message may
    be received after a barrier, as with MPI_Bsend."""

    SUCCESS = MPI_SUCCESS

    def __init__(self, world: Any = None):
        self.world = world
        self._pending: list[tuple[Any, np.ndarray]] = []
        _LIVE_P2P.add(self)

    def comm_world(self) -> Any:
        return self.world if self.world is not None else _mpi().COMM_WORLD

    @staticmethod
    def comm_rank(comm: Any) -> int:
        return comm.Get_rank()

    @staticmethod
    def comm_size(comm: Any) -> int:
        return comm.Get_size()

    def comm_split(self, comm: Any, color: int, key: int, site: object = None) -> Any:
        """`MPI_Comm_split`, cached per call site: when every member of `comm` calls a
        site again with the arguments it used before (one cheap allreduce tells), the
        sub-communicator made then is reused instead of splitting again."""
        MPI = _mpi()
        cache = self.__dict__.setdefault("_splits", {})
        k = (site, comm.py2f(), color, key)
        hit = np.array([k in cache], dtype=np.int32)
        if site is not None:
            comm.Allreduce(MPI.IN_PLACE, hit, op=MPI.MIN)
            if hit[0]:
                return cache[k]
        new = comm.Split(color if color >= 0 else MPI.UNDEFINED, key)
        if site is not None:
            cache[k] = new
        return new

    def send(self, comm: Any, buf: np.ndarray, dest: int, tag: int) -> int:
        """Buffered: copy, Isend, return (see the class)."""
        self._reap()
        data = wire(np.array(buf, order="C", copy=True))
        self._pending.append((comm.Isend(data, dest=dest, tag=tag), data))
        return 0

    def recv(self, comm: Any, buf: np.ndarray, source: int, tag: int) -> int:
        if buf.flags.c_contiguous:
            comm.Recv(wire(buf), source=source, tag=tag)
        else:
            tmp = np.empty_like(buf, order="C")
            comm.Recv(wire(tmp), source=source, tag=tag)
            buf[...] = tmp
        self._reap()
        return 0

    def _reap(self) -> None:
        """Drop the buffered sends that have completed."""
        if self._pending:
            self._pending = [(r, d) for r, d in self._pending if not r.Test()]

    @property
    def pending_sends(self) -> int:
        return len(self._pending)

    def flush(self) -> None:
        """Wait for every buffered send."""
        pending, self._pending = self._pending, []
        for request, _ in pending:
            request.Wait()

    @staticmethod
    def isend(comm: Any, buf: np.ndarray, dest: int, tag: int) -> Any:
        return comm.Isend(wire(np.ascontiguousarray(buf)), dest=dest, tag=tag)

    @staticmethod
    def irecv(comm: Any, buf: np.ndarray, source: int, tag: int) -> Any:
        if not buf.flags.c_contiguous:
            raise CommError("irecv needs a contiguous buffer")
        return comm.Irecv(wire(buf), source=source, tag=tag)

    @staticmethod
    def wait(request: Any) -> int:
        request.Wait()
        return 0

    @staticmethod
    def _op(op: str) -> Any:
        MPI = _mpi()
        if op not in _MPI_COMBINE and op not in _MPI_LOGICAL:
            raise CommError(f"reduction {op} is not supported by the runtime")
        return getattr(MPI, op[4:])

    @staticmethod
    def _widened(send: np.ndarray, recv: np.ndarray, op: str, what: str) -> np.ndarray | None:
        """bf16 `send` of a reduction other than a sum (`_bf16_sum`) as a float32 copy to
        reduce instead (the caller rounds the float32 result into `recv` once), or None
        for any other type. MPI has no bf16 type; reducing in float32 and rounding once is
        MPIComm's rule too, and what a float32 reference gives (an MPI user op on the
        16-bit patterns would round at every step of the reduction tree)."""
        if not _bf16_pair(send, recv, what):
            return None
        bf16_op_check(op, what)
        return widened(np.ascontiguousarray(send))

    @staticmethod
    def _bf16_sum(send: np.ndarray, recv: np.ndarray, op: str, what: str) -> bool:
        """Whether a reduction is a bf16 sum, which `bf16_sums` runs with bf16 on the
        wire (other ops on bf16 widen: `_widened`)."""
        return op == "MPI_SUM" and _bf16_pair(send, recv, what)

    @classmethod
    def allreduce(cls, comm: Any, send: np.ndarray, recv: np.ndarray, op: str) -> int:
        if cls._bf16_sum(send, recv, op, "allreduce"):
            bf16_sums.allreduce(comm, send, recv)
            return 0
        if (wide := cls._widened(send, recv, op, "allreduce")) is not None:
            cls.allreduce(comm, wide, wide, op)  # in place (MPI_IN_PLACE): no second float32 buffer
            recv[...] = rounded(wide).reshape(recv.shape)  # rounded to bf16 once
            return 0
        if _same_buffer(send, recv) and recv.flags.c_contiguous:
            # The lowering reduces a buffer in place (send is recv): MPI_IN_PLACE.
            comm.Allreduce(_mpi().IN_PLACE, recv, op=cls._op(op))
            return 0
        src = np.ascontiguousarray(send)
        if recv.flags.c_contiguous and not np.shares_memory(src, recv):
            comm.Allreduce(src, recv, op=cls._op(op))
        else:
            out = np.empty_like(recv, order="C")
            comm.Allreduce(src, out, op=cls._op(op))
            recv[...] = out
        return 0

    @staticmethod
    def allgather(comm: Any, send: np.ndarray, recv: np.ndarray) -> int:
        send, recv = wire(send), wire(recv)  # bf16 as its 16-bit patterns (FSDP's gathers under --precision bf16)
        if recv.flags.c_contiguous:
            comm.Allgather(np.ascontiguousarray(send), recv)
        else:
            out = np.empty_like(recv, order="C")
            comm.Allgather(np.ascontiguousarray(send), out)
            recv[...] = out
        return 0

    @classmethod
    def reduce_scatter_block(cls, comm: Any, send: np.ndarray, recv: np.ndarray, op: str) -> int:
        if cls._bf16_sum(send, recv, op, "reduce_scatter_block"):
            bf16_sums.reduce_scatter(comm, send, recv)
            return 0
        if (wide := cls._widened(send, recv, op, "reduce_scatter_block")) is not None:
            out = np.empty(recv.shape, np.float32)
            cls.reduce_scatter_block(comm, wide, out, op)
            recv[...] = rounded(out)
            return 0
        src = np.ascontiguousarray(send)
        if recv.flags.c_contiguous and not np.shares_memory(src, recv):
            comm.Reduce_scatter_block(src, recv, op=cls._op(op))
            return 0
        out = np.empty_like(recv, order="C")
        comm.Reduce_scatter_block(src, out, op=cls._op(op))
        recv[...] = out
        return 0

    # Nonblocking collectives, bitwise the blocking calls' results; `Pending.wait()`
    # completes them (and copies into a receive buffer MPI could not write directly).
    # Where MPI may pick another reduction order for the nonblocking call (see
    # `nonblocking_matches`) the blocking call runs instead.
    @classmethod
    def iallreduce(cls, comm: Any, send: np.ndarray, recv: np.ndarray, op: str) -> Pending:
        if cls._bf16_sum(send, recv, op, "allreduce"):
            return _summing(bf16_sums.start_allreduce(comm, send, recv), None)
        if (wide := cls._widened(send, recv, op, "allreduce")) is not None:
            return _rounded_at_wait(cls.iallreduce(comm, wide, wide, op), wide, recv)
        mop = cls._op(op)
        if not nonblocking_matches(comm, "allreduce", recv.size, recv.dtype, mop):
            cls.allreduce(comm, send, recv, op)
            return Pending.completed(None)
        if _same_buffer(send, recv) and recv.flags.c_contiguous:
            return Pending(comm.Iallreduce(_mpi().IN_PLACE, recv, op=mop), keep=recv)
        return _started(lambda s, r: comm.Iallreduce(s, r, op=mop), send, recv, "allreduce")

    @classmethod
    def ireduce_scatter_block(cls, comm: Any, send: np.ndarray, recv: np.ndarray, op: str) -> Pending:
        if cls._bf16_sum(send, recv, op, "reduce_scatter_block"):
            return _summing(bf16_sums.start_reduce_scatter(comm, send, recv), None)
        if (wide := cls._widened(send, recv, op, "reduce_scatter_block")) is not None:
            out = np.empty(recv.shape, np.float32)
            return _rounded_at_wait(cls.ireduce_scatter_block(comm, wide, out, op), out, recv)
        mop = cls._op(op)
        if not nonblocking_matches(comm, "reduce_scatter_block", recv.size, recv.dtype, mop):
            cls.reduce_scatter_block(comm, send, recv, op)
            return Pending.completed(None)
        return _started(lambda s, r: comm.Ireduce_scatter_block(s, r, op=mop), send, recv, "reduce_scatter_block")

    @staticmethod
    def iallgather(comm: Any, send: np.ndarray, recv: np.ndarray) -> Pending:
        return _started(comm.Iallgather, wire(send), wire(recv), "allgather")

    def barrier(self, comm: Any) -> int:
        self._reap()
        comm.Barrier()
        return 0


_LIVE_P2P: weakref.WeakSet[MPIP2P] = weakref.WeakSet()


def _summing(started: bf16_sums.Started, result: object) -> Pending:
    """A started `bf16_sums` reduction as a Pending whose wait returns `result`."""
    request, finish, keep = started

    def done() -> object:
        finish()
        return result

    return Pending(request, done, keep=keep)


def _rounded_at_wait(inner: Pending, wide: np.ndarray, recv: np.ndarray) -> Pending:
    """`inner` (a float32 reduction into `wide`) whose wait rounds `wide` into the bf16
    `recv` once; `test()` drives the same MPI request."""

    def finish() -> None:
        inner.wait()
        recv[...] = rounded(wide).reshape(recv.shape)

    return Pending(inner._request, finish, keep=(inner, wide, recv))


def _started(start: Callable[[np.ndarray, np.ndarray], Any], send: np.ndarray, recv: np.ndarray, name: str) -> Pending:
    """`start(src, dst)` of a nonblocking collective from a contiguous `send`: into `recv`
    when MPI can write it, else into a temporary copied into `recv` at the wait. The
    arrays MPI reads or writes are kept alive until then."""
    src = np.ascontiguousarray(send)
    if recv.flags.c_contiguous and not np.shares_memory(src, recv):
        return Pending(start(src, recv), keep=(src, recv))
    out = np.empty_like(recv, order="C")
    return Pending(start(src, out), lambda: _write(recv, out.reshape(-1), name), keep=(src, out))

_NB_MATCHES: dict[tuple[Any, ...], bool] = {}


def nonblocking_matches(comm: Any, what: str, count: int, dtype: np.dtype, op: Any) -> bool:
    """Whether MPI's nonblocking `what` (allreduce, reduce_scatter_block) of `count`
    elements per rank reduces in the blocking call's order on `comm`.

    MPI picks an algorithm per call from the message size, and its nonblocking
    collectives have their own table: MPICH 5's MPI_Ireduce_scatter_block of 4 ranks
    keeps recursive halving for blocks the blocking call already reduces pairwise
    (float sums then differ in the last bit). Two contributions reduce the same way in
    any order, and integer or bitwise reductions in every order, so only float sums and
    products of more than two ranks are checked: once per (communicator, size, type, op),
    by running both calls on probe data of that size on every rank (all ranks call here
    together, at the same start) and agreeing over the group."""
    MPI = _mpi()
    n = comm.Get_size()
    if n <= 2 or dtype.kind not in "fc" or op not in (MPI.SUM, MPI.PROD):
        return True
    key = (what, comm.py2f(), n, count, dtype.str, op.py2f())
    got = _NB_MATCHES.get(key)
    if got is None:
        rng = np.random.default_rng(1 + comm.Get_rank())
        same = True
        for _ in range(1 if count >= 64 else 8):  # a few elements can agree by chance
            size = count * n if what == "reduce_scatter_block" else count
            x = (rng.standard_normal(size) * np.exp2(rng.integers(-12, 12, size))).astype(dtype)
            a, b = np.empty(count, dtype), np.empty(count, dtype)
            if what == "allreduce":
                comm.Allreduce(x, a, op=op)
                comm.Iallreduce(x, b, op=op).Wait()
            else:
                comm.Reduce_scatter_block(x, a, op=op)
                comm.Ireduce_scatter_block(x, b, op=op).Wait()
            same = same and bool(np.array_equal(a, b))
        got = _NB_MATCHES[key] = bool(comm.allreduce(int(same), op=MPI.MIN))
    return got


# ---------------------------------------------------------------------------------------
# Held collectives: small ones bucketed into one call
# ---------------------------------------------------------------------------------------

BUCKET_BYTES = 64 * 1024
"""Collectives of at most this many bytes (send buffer) that the overlap schedule splits
are held and run together at the first wait (`SHARDC_BUCKET_BYTES`, read at every start;
0: none held)."""


def bucket_bytes() -> int:
    v = os.environ.get("SHARDC_BUCKET_BYTES", "")
    try:
        return max(0, int(v)) if v else BUCKET_BYTES
    except ValueError:
        return BUCKET_BYTES


@dataclass(eq=False)
class _Held:
    kind: str  # allreduce | reduce_scatter_block | allgather
    backend: Any
    comm: Any
    send: np.ndarray
    recv: np.ndarray
    op: str | None
    done: bool = False


class PerThread(threading.local):
    """A list `q` per thread: simulated ranks are threads, each with its own queue."""

    def __init__(self) -> None:
        self.q: list[Any] = []


_held = PerThread()


def _held_queue() -> list[_Held]:
    return _held.q


def hold(kind: str, backend: Any, comm: Any, send: np.ndarray, recv: np.ndarray, op: str | None = None) -> Pending | None:
    """Hold a small collective of an mpi backend (`kind`: allreduce, reduce_scatter_block,
    allgather) instead of calling it: the first wait of any held one runs all of them,
    those on one communicator with one kind, op and dtype as a single call on a flat
    buffer (DDP's buckets: one synchronisation instead of dozens, each of which costs a
    wait for the slowest rank on a shared machine). None when `send` is too large.

    Every rank holds the same collectives in the same order (the schedule is the same
    program everywhere), so the buckets and their order agree. Results are bitwise those
    of the separate calls: with two ranks a sum or product is one commutative operation
    per element; with more, a float sum or product is bucketed only where a probe of
    the bucket's sizes says MPI reduces it in the same order (`_bucket_matches`)."""
    if send.nbytes > bucket_bytes() or recv.dtype != send.dtype:
        return None
    item = _Held(kind, backend, comm, send, recv, op)
    _held_queue().append(item)
    return Pending(finish=lambda: _flush_held(item), keep=item)


def held_count() -> int:
    """Collectives this rank holds now (tests)."""
    return len(_held_queue())


def _flush_held(item: _Held) -> None:
    """Run every held collective (once): `item`'s wait came."""
    if item.done:
        return
    q = _held_queue()
    items, q[:] = list(q), []
    groups: dict[tuple[Any, ...], list[_Held]] = {}
    for h in items:
        groups.setdefault((h.kind, id(h.backend), id(h.comm), h.op, h.send.dtype.str), []).append(h)
    for group in groups.values():  # in the order of their first start: the same on every rank
        _run_bucket(group)
        for h in group:
            h.done = True


def _call(h: _Held, send: np.ndarray, recv: np.ndarray) -> None:
    if h.kind == "allgather":
        h.backend.allgather(h.comm, send, recv)
    else:
        getattr(h.backend, h.kind)(h.comm, send, recv, h.op)


def _run_bucket(group: list[_Held], check: bool = True) -> None:
    first = group[0]
    if len(group) == 1 or (check and not _bucket_matches(group)):
        for h in group:
            _call(h, h.send, h.recv)
        return
    n = first.backend.comm_size(first.comm)
    dt = first.send.dtype
    if first.kind == "allreduce":
        send = np.concatenate([h.send.reshape(-1) for h in group])
        out = np.empty_like(send)
        _call(first, send, out)
        off = 0
        for h in group:
            _write(h.recv, out[off : off + h.recv.size], "allreduce")
            off += h.recv.size
    elif first.kind == "reduce_scatter_block":
        # rank r's block of the bucket: rank r's block of every collective, in turn
        send = np.concatenate([h.send.reshape(n, -1) for h in group], axis=1).reshape(-1)
        out = np.empty(send.size // n, dt)
        _call(first, send, out)
        off = 0
        for h in group:
            _write(h.recv, out[off : off + h.recv.size], "reduce_scatter_block")
            off += h.recv.size
    else:
        send = np.concatenate([h.send.reshape(-1) for h in group])
        out = np.empty((n, send.size), dt)
        _call(first, send, out.reshape(-1))
        off = 0
        for h in group:
            k = h.send.size
            _write(h.recv, out[:, off : off + k].reshape(-1), "allgather")
            off += k


_BUCKET_MATCHES: dict[tuple[Any, ...], bool] = {}


def _bucket_matches(group: list[_Held]) -> bool:
    """Whether one call on the bucket reduces every element in the order the separate
    calls do. MPI picks its algorithm by message size, and with more than two ranks
    the order of a float sum or product follows it; so once per (communicator, kind,
    sizes, dtype, op) both are run on probe data and the ranks agree (MPI backend
    only: the simulated one reduces in rank order whatever the size)."""
    first = group[0]
    if first.kind == "allgather" or not isinstance(first.backend, MPIP2P):
        return True
    comm, dt = first.comm, first.send.dtype
    n = comm.Get_size()
    if n <= 2 or (dt.kind not in "fc" and not is_bfloat16(dt)) or first.op not in ("MPI_SUM", "MPI_PROD"):
        return True  # bf16 reduces in float32: its order matters as float32's does
    key = (first.kind, comm.py2f(), n, tuple(h.send.size for h in group), dt.str, first.op)
    got = _BUCKET_MATCHES.get(key)
    if got is None:
        rng = np.random.default_rng(1 + comm.Get_rank())
        probe = [_Held(h.kind, h.backend, comm, (rng.standard_normal(h.send.size) * np.exp2(rng.integers(-12, 12, h.send.size))).astype(dt), np.empty(h.recv.size, dt), h.op) for h in group]
        for h in probe:
            _call(h, h.send, h.recv)
        alone = [h.recv.copy() for h in probe]
        _run_bucket(probe, check=False)
        same = all(np.array_equal(wire(a), wire(h.recv)) for a, h in zip(alone, probe))
        got = _BUCKET_MATCHES[key] = bool(comm.allreduce(int(same), op=_mpi().MIN))
    return got


@atexit.register
def _flush_buffered_sends() -> None:
    """Complete every buffered send before MPI is finalized (mpi4py finalizes after the
    interpreter's exit handlers), so that no message is lost and no request outlives
    MPI."""
    live = [p for p in list(_LIVE_P2P) if p.pending_sends]
    if live and not _mpi().Is_finalized():
        for p2p in live:
            p2p.flush()


@dataclass(frozen=True)
class SimGroup:
    """A simulated communicator: its members' world ranks in group-rank order."""

    members: tuple[int, ...]
    ident: tuple[Any, ...]


class _Request:
    def __init__(self, complete: Callable[[], None] | None = None):
        self.complete = complete

    def wait(self) -> None:
        if self.complete is not None:
            self.complete()
            self.complete = None


class SimulatedMPI:
    """The mpi dialect on simulated ranks: communicators are `SimGroup`s, messages go
    through the world's mailboxes (matched by communicator and tag, in order)."""

    SUCCESS = MPI_SUCCESS

    def __init__(self, world: SimulatedWorld, rank: int):
        self.world = world
        self.rank = rank
        self._splits: dict[tuple[Any, ...], int] = {}

    def comm_world(self) -> SimGroup:
        return SimGroup(tuple(range(self.world.size)), ("world",))

    def _me(self, comm: SimGroup | None) -> int:
        if comm is None:
            raise CommError("operation on MPI_COMM_NULL")
        if self.rank not in comm.members:
            raise CommError(f"rank {self.rank} is not a member of the communicator")
        return comm.members.index(self.rank)

    def comm_rank(self, comm: SimGroup) -> int:
        return self._me(comm)

    def comm_size(self, comm: SimGroup) -> int:
        self._me(comm)
        return len(comm.members)

    def comm_split(self, comm: SimGroup, color: int, key: int, site: object = None) -> SimGroup | None:
        self._me(comm)
        seq = self._splits.get(comm.ident, 0)
        self._splits[comm.ident] = seq + 1
        parts = self.world.exchange(self.rank, comm.members, ("split", comm.ident), (color, key), "comm_split")
        if color < 0:
            return None
        mine = sorted((k, i) for i, (c, k) in enumerate(parts) if c == color)
        return SimGroup(tuple(comm.members[i] for _, i in mine), (*comm.ident, "split", seq, color))

    def _peer(self, comm: SimGroup, r: int, what: str) -> int:
        self._me(comm)
        if not 0 <= r < len(comm.members):
            raise CommError(f"{what}: rank {r} out of range for a communicator of size {len(comm.members)}")
        return comm.members[r]

    def send(self, comm: SimGroup, buf: np.ndarray, dest: int, tag: int) -> int:
        self.world.post(self.rank, self._peer(comm, dest, "send"), np.asarray(buf), channel=(comm.ident, tag))
        return 0

    def recv(self, comm: SimGroup, buf: np.ndarray, source: int, tag: int) -> int:
        got = self.world.take(self._peer(comm, source, "recv"), self.rank, "recv", channel=(comm.ident, tag))
        _write(buf, got.reshape(-1), "recv")
        return 0

    def isend(self, comm: SimGroup, buf: np.ndarray, dest: int, tag: int) -> _Request:
        self.send(comm, buf, dest, tag)
        return _Request()

    def irecv(self, comm: SimGroup, buf: np.ndarray, source: int, tag: int) -> _Request:
        self._peer(comm, source, "irecv")
        return _Request(lambda: self.recv(comm, buf, source, tag))

    @staticmethod
    def wait(request: _Request) -> int:
        request.wait()
        return 0

    def _collect(self, comm: SimGroup, x: np.ndarray | None, what: str) -> list[Any]:
        return self._finish_collect(self._start_collect(comm, x, what))

    def _start_collect(self, comm: SimGroup, x: np.ndarray | None, what: str) -> tuple[Any, ...]:
        self._me(comm)
        value = None if x is None else np.array(x, copy=True)
        return self.world.contribute(self.rank, comm.members, ("mpi", comm.ident), (what, value), what)

    def _finish_collect(self, ticket: tuple[Any, ...]) -> list[Any]:
        parts = self.world.collect(self.rank, ticket)
        names = {p[0] for p in parts}
        if len(names) != 1:
            raise CommError(f"rank {self.rank}: mismatched collectives in one communicator: {sorted(names)}")
        return [p[1] for p in parts]

    def allreduce(self, comm: SimGroup, send: np.ndarray, recv: np.ndarray, op: str) -> int:
        parts = self._collect(comm, send, "allreduce")
        _check_same(parts, list(comm.members), "allreduce")
        _write(recv, mpi_reduce_list(parts, op).reshape(-1), "allreduce")
        return 0

    def allgather(self, comm: SimGroup, send: np.ndarray, recv: np.ndarray) -> int:
        parts = self._collect(comm, send, "allgather")
        _check_same(parts, list(comm.members), "allgather")
        _write(recv, np.concatenate([p.reshape(-1) for p in parts]), "allgather")
        return 0

    def reduce_scatter_block(self, comm: SimGroup, send: np.ndarray, recv: np.ndarray, op: str) -> int:
        parts = self._collect(comm, send, "reduce_scatter_block")
        _check_same(parts, list(comm.members), "reduce_scatter_block")
        flat = mpi_reduce_list(parts, op).reshape(-1)
        n = len(comm.members)
        if flat.size % n:
            raise CommError(f"reduce_scatter_block: {flat.size} elements do not split in {n} blocks")
        block = flat.size // n
        me = self._me(comm)
        _write(recv, flat[me * block : (me + 1) * block], "reduce_scatter_block")
        return 0

    # Nonblocking: this rank's send buffer is posted at the start (a copy), the
    # reduction done and the receive buffer written at `wait`.
    def _istart(self, comm: SimGroup, send: np.ndarray, recv: np.ndarray, what: str, done: Callable[[list[Any]], None]) -> Pending:
        ticket = self._start_collect(comm, send, what)

        def finish() -> None:
            parts = self._finish_collect(ticket)
            _check_same(parts, list(comm.members), what)
            done(parts)

        return Pending(finish=finish, keep=recv)

    def iallreduce(self, comm: SimGroup, send: np.ndarray, recv: np.ndarray, op: str) -> Pending:
        return self._istart(comm, send, recv, "allreduce", lambda parts: _write(recv, mpi_reduce_list(parts, op).reshape(-1), "allreduce"))

    def iallgather(self, comm: SimGroup, send: np.ndarray, recv: np.ndarray) -> Pending:
        return self._istart(comm, send, recv, "allgather", lambda parts: _write(recv, np.concatenate([p.reshape(-1) for p in parts]), "allgather"))

    def ireduce_scatter_block(self, comm: SimGroup, send: np.ndarray, recv: np.ndarray, op: str) -> Pending:
        me, n = self._me(comm), len(comm.members)

        def done(parts: list[Any]) -> None:
            flat = mpi_reduce_list(parts, op).reshape(-1)
            if flat.size % n:
                raise CommError(f"reduce_scatter_block: {flat.size} elements do not split in {n} blocks")
            block = flat.size // n
            _write(recv, flat[me * block : (me + 1) * block], "reduce_scatter_block")

        return self._istart(comm, send, recv, "reduce_scatter_block", done)

    def barrier(self, comm: SimGroup) -> int:
        self._collect(comm, None, "barrier")
        return 0
