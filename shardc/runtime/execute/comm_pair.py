"""The sum reduce-scatter of two MPI ranks as one exchange: each rank sends the block the
other owns, straight from its strided place in the send buffer (an MPI datatype says
where), receives its own block's other half and adds it to its own.

Why: MPI_Reduce_scatter_block takes a contiguous send buffer, and under ZeRO a dp=2
step's largest gradients (the fused qkv and MLP products' weights) are split into
column blocks: the direct path copied the whole send first, every step. Measured (2
ranks, MPICH 5.0.2 over shared memory, CPU time of 24 calls, one step's worth at n_embd
768): column blocks of a 768x3072 float32 gradient, copy + MPI_Reduce_scatter_block 56
ms, this exchange 28 ms; contiguous 1536x768 blocks 34 vs 26 ms. A dp=2 rank's step at
n_embd 768 in bf16 spent about 175 ms of its 1.4 s CPU time in collectives.

Two operands make one addition per element, the same bits in either order (a + b ==
b + a), so the result is MPI's to the bit; with more ranks the order of the sums would
be this module's rather than the MPI library's: left to MPI. The choice depends only on
what every rank of the collective has alike (the operation, the group size, dtype and
shapes), never on a rank's own buffers' layout: the two ranks always take the same path.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from shardc.runtime.execute.bf16_sums import pair_sum
from shardc.runtime.execute.kernels.bf16_run import is_bfloat16

SUMMED = ("float32", "float64", "int32", "int64")
"""dtypes whose MPI_SUM is numpy's add, bit for bit."""

TAG = 32766
"""The exchange's message tag (MPI promises tags up to 32767): the program's own
point-to-point messages on the same communicator (mpi.send/recv) use others; two
exchanges between the same ranks arrive in order (MPI's non-overtaking rule)."""

_cache_lock = threading.Lock()
_datatypes: dict[tuple[str, tuple[int, ...], tuple[int, ...]], Any] = {}


def halves(send: np.ndarray, recv: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The two blocks of `send` (views), rank 0's and rank 1's, when `send` is two of
    `recv`'s shape stacked (`(2, *shape)`) or concatenated along the first axis; None
    otherwise (other layouts are left to MPI)."""
    if send.ndim == recv.ndim + 1 and send.shape[0] == 2 and send.shape[1:] == recv.shape:
        return send[0], send[1]
    if send.ndim == recv.ndim and send.ndim and send.shape[0] == 2 * recv.shape[0] and send.shape[1:] == recv.shape[1:]:
        h = recv.shape[0]
        return send[:h], send[h:]
    return None


def element_type(dtype: np.dtype) -> Any:
    """MPI's predefined type of one `SUMMED` element, by its numpy type code (mpi4py's
    own table: `mpi4py.util.dtlib.from_numpy_dtype` would make a new type per call)."""
    from mpi4py import MPI

    return MPI.Datatype.fromcode(dtype.char)


def strided_type(block: np.ndarray) -> tuple[Any, int] | None:
    """An MPI datatype for the elements of the strided `block` (one of it spans the
    block, row-major) and that span in bytes from its first element; None where a
    stride is negative or zero (the caller copies)."""
    dims = [(n, s) for n, s in zip(block.shape, block.strides) if n != 1]
    if any(s <= 0 for _, s in dims):
        return None
    span = sum((n - 1) * s for n, s in dims) + block.itemsize
    key = (block.dtype.str, block.shape, block.strides)
    with _cache_lock:
        made = _datatypes.get(key)
        if made is None:
            made, dense, parts = element_type(block.dtype), block.itemsize, []
            for n, s in reversed(dims):  # innermost axis first
                made = made.Create_contiguous(n) if s == dense else made.Create_hvector(n, 1, s)
                parts.append(made)
                dense = n * s if s == dense else -1  # contiguous bytes covered so far, -1 once a gap came
            made.Commit()
            for part in parts[:-1]:
                part.Free()
            _datatypes[key] = made
    return made, span


def receives_in_place(send: np.ndarray, recv: np.ndarray) -> bool:
    """Whether a reduce-scatter may write `recv` directly: contiguous, writeable and
    sharing no memory with `send` (else it receives into a temporary and copies)."""
    return bool(recv.flags.c_contiguous and recv.flags.writeable and not np.shares_memory(send, recv))


def reduce_scatter_pair(comm: Any, send: np.ndarray, recv: np.ndarray, op: str) -> bool:
    """MPI_Reduce_scatter_block(send, recv, MPI_SUM) over the 2 ranks of `comm` as one
    exchange, True; False (nothing done) where it does not apply: another op, group size
    or dtype (`SUMMED`, and bf16: its 16 bits move, the sum is float32's rounded once as
    `bf16_sums.pair_sum` makes it), or a send that is not two blocks of `recv`'s shape
    (`halves`)."""
    bf16 = is_bfloat16(send.dtype)
    if op != "MPI_SUM" or send.dtype != recv.dtype or not (bf16 or send.dtype.name in SUMMED) or comm.Get_size() != 2:
        return False
    blocks = halves(send, recv)
    if blocks is None:
        return False
    from mpi4py import MPI

    rank = comm.Get_rank()
    peer = 1 - rank
    theirs, mine = blocks[peer], blocks[rank]
    if bf16:  # MPI has no bf16 type: its patterns as uint16
        theirs = theirs.view(np.uint16)
    if theirs.flags.c_contiguous:
        outgoing: Any = theirs
    elif (typed := strided_type(theirs)) is not None:
        datatype, span = typed
        outgoing = [MPI.buffer.fromaddress(theirs.ctypes.data, span, readonly=True), 1, datatype]
    else:
        outgoing = np.ascontiguousarray(theirs)
    if bf16:
        incoming = np.empty(recv.shape, np.uint16)
        comm.Sendrecv(outgoing, peer, TAG, recvbuf=incoming, source=peer, recvtag=TAG)
        pair_sum(mine, incoming, recv)
        return True
    incoming = recv if receives_in_place(send, recv) else np.empty(recv.shape, recv.dtype)
    comm.Sendrecv(outgoing, peer, TAG, recvbuf=incoming, source=peer, recvtag=TAG)
    np.add(incoming, mine, out=recv)
    return True
