"""Sum reductions of bf16 buffers that move bf16: half float32's bytes on the wire.

MPI has no bf16 type, so a bf16 sum used to widen the whole send buffer to float32 and
let MPI reduce that: twice the bytes of the data, the opposite of why a user asks for
bf16 gradient reductions (`--grad-reduce bf16`). Here the 16-bit patterns move instead
and each rank adds what it receives in float32:

- reduce-scatter: one all-to-all of the blocks (each rank receives every rank's copy of
  its own block), their float32 sum in rank order, rounded to bf16 once;
- all-reduce: the same reduce-scatter over the flat buffer cut into one block a rank
  (padded to a multiple of the group size), then an all-gather of the rounded blocks:
  every rank ends with the same bits, each element summed by one rank only.

Each element is the float32 sum of the bf16 contributions rounded to bf16 once, the
rule every bf16 reduction of the runtime follows (`comm.py`); with two ranks that is
one addition, the same bits as MPI's float32 sum; with more, the order is rank order,
the same on every run. Bytes sent per rank: (n-1)/n of the bf16 buffer for a
reduce-scatter, twice that for an all-reduce, as a ring's. Measured in
`bench/bf16_allreduce.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from shardc.runtime.execute.kernels.bf16_run import bfloat16

# The float32 sum of bf16 contributions, rounded to bf16 once, in one pass: `first`
# (rows, cols; any strides) plus each of `rest` (k, rows, cols), in that order, into
# `out` (rows, cols), all as 16-bit patterns; float32 accumulators a chunk of a row long
# stay in cache. numpy's widen, add and round took four passes over the data.
_SUM_LOOP = """
def kernel(first, rest, out):
    chunk = 2048
    acc = np.empty(chunk, np.float32)
    wide = np.empty(chunk, np.uint32)
    accb = acc.view(np.uint32)
    widef = wide.view(np.float32)
    cols = out.shape[1]
    for r in range(out.shape[0]):
        for start in range(0, cols, chunk):
            m = min(chunk, cols - start)
            src = first[r, start : start + m]
            for i in range(m):
                accb[i] = np.uint32(src[i]) << np.uint32(16)
            for k in range(rest.shape[0]):
                more = rest[k, r, start : start + m]
                for i in range(m):
                    wide[i] = np.uint32(more[i]) << np.uint32(16)
                for i in range(m):
                    acc[i] += widef[i]
            dst = out[r, start : start + m]
            for i in range(m):
                v = accb[i]
"""

def _sum_kernel() -> Any:
    """The summing loop jit-compiled once per process (`fused_run.jit_once`), or None
    where fused kernels are off (`SHARDC_KERNELS=numpy`, no numba): numpy then."""
    from shardc.runtime.execute.kernels import fused_run

    return fused_run.jit_once("bf16sums", _sum_source())


@functools.cache
def _sum_source() -> str:
    """The loop's source, made once: every bf16 collective asks for the kernel."""
    from shardc.runtime.execute.kernels.bf16_cast import rounding_lines

    return _SUM_LOOP + rounding_lines(16)


def _bits(x: np.ndarray) -> np.ndarray:
    """`x` (bf16) as its 16-bit patterns, one contiguous row of elements."""
    return np.ascontiguousarray(x).view(np.uint16).reshape(-1)


def _rows(bits: np.ndarray, cols: int) -> np.ndarray:
    """`bits` as (rows, cols) without a copy where its axes fold so, else a copy."""
    try:
        return np.reshape(bits, (-1, cols), copy=False)
    except ValueError:
        return np.ascontiguousarray(bits).reshape(-1, cols)


def sum_into(first: np.ndarray, rest: np.ndarray, recv: np.ndarray) -> None:
    """`recv` (bf16) = `first` + `rest[0]` + `rest[1]` + ..., summed in float32 in that
    order and rounded to bf16 once: `first` of `recv`'s shape (bf16 or its patterns, any
    strides), `rest` the other contributions' patterns, (k, *recv.shape) contiguous."""
    if recv.size == 0:
        return
    first = first.view(np.uint16)
    kernel = _sum_kernel()
    if kernel is None:  # numpy: widen, add, round
        from shardc.runtime.execute.kernels.bf16_cast import round_to_bfloat16, widen_bfloat16

        total = widen_bfloat16(first)
        widened = np.empty_like(total)
        with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN sum as float32's do
            for more in rest:
                total += widen_bfloat16(more.reshape(total.shape), out=widened)
        recv[...] = round_to_bfloat16(total).reshape(recv.shape)
        return
    cols = recv.shape[-1] if recv.ndim else 1
    direct = recv.flags.c_contiguous and recv.flags.writeable
    out = recv.view(np.uint16) if direct else np.empty(recv.shape, np.uint16)
    kernel(_rows(first, cols), rest.reshape(len(rest), -1, cols), out.reshape(-1, cols))  # type: ignore[operator]
    if not direct:
        recv[...] = out.view(bfloat16())


Started = tuple[Any, Callable[[], None], tuple[Any, ...]]
"""A started reduction: its MPI request, what its wait runs after the request completes,
and the buffers MPI uses until then (`comm.Pending`'s three arguments)."""


def _scattered(incoming: np.ndarray, recv: np.ndarray) -> None:
    """`recv` = the float32 sum, in rank order, of the group's copies of this rank's block."""
    sum_into(incoming[0].reshape(recv.shape), incoming[1:].reshape(len(incoming) - 1, *recv.shape), recv)


def start_reduce_scatter(comm: Any, send: np.ndarray, recv: np.ndarray) -> Started:
    """MPI_Reduce_scatter_block(send, recv, MPI_SUM) of bf16 buffers, started: `send`
    holds the group's blocks in rank order, each of `recv`'s size."""
    outgoing = _bits(send).reshape(comm.Get_size(), recv.size)
    incoming = np.empty_like(outgoing)
    request = comm.Ialltoall(outgoing, incoming)
    return request, lambda: _scattered(incoming, recv), (outgoing, incoming, recv)


def _completed(started: Started) -> None:
    request, finish, _ = started
    request.Wait()
    finish()


def reduce_scatter(comm: Any, send: np.ndarray, recv: np.ndarray) -> None:
    """`start_reduce_scatter`, completed."""
    _completed(start_reduce_scatter(comm, send, recv))


def _padded_blocks(send: np.ndarray, n: int) -> np.ndarray:
    """`send`'s patterns as n rows of equal length (zeros after the last element)."""
    flat = _bits(send)
    count = -(-flat.size // n)
    if count * n == flat.size:
        return flat.reshape(n, count)
    out = np.zeros(count * n, np.uint16)
    out[: flat.size] = flat
    return out.reshape(n, count)


def _gathered(comm: Any, incoming: np.ndarray, recv: np.ndarray) -> None:
    """Sum this rank's block, then all-gather the rounded blocks into `recv` (the
    all-reduce's second half)."""
    n, count = incoming.shape
    mine = np.empty(count, bfloat16())
    _scattered(incoming, mine)
    whole = np.empty((n, count), np.uint16)
    comm.Allgather(mine.view(np.uint16), whole)
    recv[...] = whole.reshape(-1)[: recv.size].view(bfloat16()).reshape(recv.shape)


def start_allreduce(comm: Any, send: np.ndarray, recv: np.ndarray) -> Started:
    """MPI_Allreduce(send, recv, MPI_SUM) of bf16 buffers, started: the all-to-all now,
    the sum and the all-gather at the wait (every rank waits in the same order: the
    program's)."""
    outgoing = _padded_blocks(send, comm.Get_size())
    incoming = np.empty_like(outgoing)
    request = comm.Ialltoall(outgoing, incoming)
    return request, lambda: _gathered(comm, incoming, recv), (outgoing, incoming, recv)


def allreduce(comm: Any, send: np.ndarray, recv: np.ndarray) -> None:
    """`start_allreduce`, completed (`send` may be `recv`: it is read before `recv` is
    written)."""
    _completed(start_allreduce(comm, send, recv))


def pair_sum(mine: np.ndarray, incoming: np.ndarray, recv: np.ndarray) -> None:
    """`recv` = bf16(float32(mine) + float32(incoming)): the two-rank exchange's sum
    (`comm_pair`); `mine` may be strided, `incoming` is the other rank's block's patterns."""
    sum_into(mine, incoming.reshape(1, *recv.shape), recv)


__all__ = ["Started", "allreduce", "pair_sum", "reduce_scatter", "start_allreduce", "start_reduce_scatter", "sum_into"]
