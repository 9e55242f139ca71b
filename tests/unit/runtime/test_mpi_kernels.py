"""Every mpi dialect op kernel on the simulated MPI world (and, through
tests/mpi/kernels_main.py, under mpiexec), checked against every rank's inputs."""

import numpy as np
import pytest

from shardc.runtime import compile_text
from shardc.runtime.execute.comm import RankFailed, run_simulated

SIZES = [1, 2, 3, 4]


def run_prog(text, n, per_rank):
    cm = compile_text(text)
    return run_simulated(n, lambda *a: cm.call("f", *a), per_rank_args=per_rank)


WORLD = """
func.func @f() -> (i32, i32, i1, i1, i1) {
  %rv0 = mpi.init : !mpi.retval
  %comm = mpi.comm_world : !mpi.comm
  %rv1, %rank = mpi.comm_rank(%comm) : !mpi.retval, i32
  %rv2, %size = mpi.comm_size(%comm) : !mpi.retval, i32
  %rv3 = mpi.barrier(%comm) -> !mpi.retval
  %ok0 = mpi.retval_check %rv1 = <MPI_SUCCESS> : i1
  %ec = mpi.error_class %rv2 : !mpi.retval
  %ok1 = mpi.retval_check %ec = <MPI_SUCCESS> : i1
  %bad = mpi.retval_check %rv3 = <MPI_ERR_COMM> : i1
  %rv4 = mpi.finalize : !mpi.retval
  return %rank, %size, %ok0, %ok1, %bad : i32, i32, i1, i1, i1
}"""


@pytest.mark.parametrize("n", SIZES)
def test_world_ops(n):
    got = run_prog(WORLD, n, [()] * n)
    assert got == [(r, n, True, True, False) for r in range(n)]


SPLIT = """
func.func @f(%x: memref<2xi32>) -> (i32, i32, memref<2xi32>, memref<4xi32>) {
  %comm = mpi.comm_world : !mpi.comm
  %rank = mpi.comm_rank(%comm) : i32
  %c2 = arith.constant 2 : i32
  %color = arith.remsi %rank, %c2 : i32
  %c0 = arith.constant 0 : i32
  %key = arith.subi %c0, %rank : i32
  %sub = mpi.comm_split(%comm, %color, %key) : !mpi.comm
  %srank = mpi.comm_rank(%sub) : i32
  %ssize = mpi.comm_size(%sub) : i32
  %sum = memref.alloc() : memref<2xi32>
  mpi.allreduce(%x, %sum, MPI_SUM, %sub) : memref<2xi32>, memref<2xi32>
  %g = memref.alloc() : memref<4xi32>
  %c1 = arith.constant 1 : i32
  %pair = arith.divsi %rank, %c2 : i32
  %sub2 = mpi.comm_split(%comm, %pair, %rank) : !mpi.comm
  %s2 = mpi.comm_size(%sub2) : i32
  mpi.allgather(%x, %g, %sub2) : memref<2xi32>, memref<4xi32>
  return %srank, %ssize, %sum, %g : i32, i32, memref<2xi32>, memref<4xi32>
}"""


@pytest.mark.parametrize("n", [2, 4])
def test_split_ops(n):
    X = [np.array([r, 10 * r], np.int32) for r in range(n)]
    got = run_prog(SPLIT, n, [(x,) for x in X])
    for r, (srank, ssize, s, g) in enumerate(got):
        mem = [q for q in range(n) if q % 2 == r % 2]
        ordered = sorted(mem, key=lambda q: -q)  # key = -rank
        assert (srank, ssize) == (ordered.index(r), len(mem))
        np.testing.assert_array_equal(s, sum(X[q] for q in mem))
        pair = [q for q in range(n) if q // 2 == r // 2]
        np.testing.assert_array_equal(g, np.concatenate([X[q] for q in pair]))


REDUCTIONS = ["MPI_SUM", "MPI_MAX", "MPI_MIN", "MPI_PROD", "MPI_BAND", "MPI_BOR", "MPI_BXOR", "MPI_LAND", "MPI_LOR", "MPI_LXOR"]
REF = {
    "MPI_SUM": lambda s: s.sum(0),
    "MPI_MAX": lambda s: s.max(0),
    "MPI_MIN": lambda s: s.min(0),
    "MPI_PROD": lambda s: s.prod(0),
    "MPI_BAND": lambda s: np.bitwise_and.reduce(s, 0),
    "MPI_BOR": lambda s: np.bitwise_or.reduce(s, 0),
    "MPI_BXOR": lambda s: np.bitwise_xor.reduce(s, 0),
    "MPI_LAND": lambda s: np.logical_and.reduce(s != 0, 0).astype(s.dtype),
    "MPI_LOR": lambda s: np.logical_or.reduce(s != 0, 0).astype(s.dtype),
    "MPI_LXOR": lambda s: np.logical_xor.reduce(s != 0, 0).astype(s.dtype),
}


def reduction_prog(op, n):
    return f"""
func.func @f(%x: memref<{2 * n}xi32>) -> (memref<{2 * n}xi32>, memref<2xi32>, memref<{2 * n}xi32>) {{
  %comm = mpi.comm_world : !mpi.comm
  %a = memref.alloc() : memref<{2 * n}xi32>
  %rv = mpi.allreduce(%x, %a, {op}, %comm) : memref<{2 * n}xi32>, memref<{2 * n}xi32> -> !mpi.retval
  %b = memref.alloc() : memref<2xi32>
  mpi.reduce_scatter_block(%x, %b, {op}, %comm) : memref<{2 * n}xi32>, memref<2xi32>
  %c = memref.alloc() : memref<{2 * n}xi32>
  memref.copy %x, %c : memref<{2 * n}xi32> to memref<{2 * n}xi32>
  mpi.allreduce(%c, %c, {op}, %comm) : memref<{2 * n}xi32>, memref<{2 * n}xi32>
  return %a, %b, %c : memref<{2 * n}xi32>, memref<2xi32>, memref<{2 * n}xi32>
}}"""


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", REDUCTIONS)
def test_allreduce_ops(n, op):
    rng = np.random.default_rng(3)
    X = [rng.integers(0, 4, 2 * n).astype(np.int32) for _ in range(n)]
    want = REF[op](np.stack(X))
    for r, (a, b, c) in enumerate(run_prog(reduction_prog(op, n), n, [(x,) for x in X])):
        np.testing.assert_array_equal(a, want)
        np.testing.assert_array_equal(c, want)  # in place (sendbuf == recvbuf), as lowered code does
        np.testing.assert_array_equal(b, want[2 * r : 2 * r + 2])


def ring_prog(n: int, tag: int, body: str) -> str:
    """`@f(%x: memref<n x f64>) -> %got`: each rank's `%next` / `%prev` neighbours on a
    ring, `%tag`, a fresh `%got`, then `body` (the exchange)."""
    t = f"memref<{n}xf64>"
    return f"""
func.func @f(%x: {t}) -> {t} {{
  %comm = mpi.comm_world : !mpi.comm
  %rank = mpi.comm_rank(%comm) : i32
  %size = mpi.comm_size(%comm) : i32
  %c1 = arith.constant 1 : i32
  %n0 = arith.addi %rank, %c1 : i32
  %next = arith.remsi %n0, %size : i32
  %p0 = arith.addi %rank, %size : i32
  %p1 = arith.subi %p0, %c1 : i32
  %prev = arith.remsi %p1, %size : i32
  %tag = arith.constant {tag} : i32
  %got = memref.alloc() : {t}
{body}
  return %got : {t}
}}"""


RING = ring_prog(3, 7, """  %c2 = arith.constant 2 : i32
  %odd = arith.remsi %rank, %c2 : i32
  %c0 = arith.constant 0 : i32
  %even = arith.cmpi eq, %odd, %c0 : i32
  scf.if %even {
    mpi.send(%x, %tag, %next, %comm) : memref<3xf64>, i32, i32
    %rv = mpi.recv(%got, %tag, %prev, %comm) : memref<3xf64>, i32, i32 -> !mpi.retval
  } else {
    mpi.recv(%got, %tag, %prev, %comm) : memref<3xf64>, i32, i32
    mpi.send(%x, %tag, %next, %comm) : memref<3xf64>, i32, i32
  }""")


@pytest.mark.parametrize("n", [2, 4])
def test_p2p_ring(n):
    X = [np.full(3, float(r)) for r in range(n)]
    for r, y in enumerate(run_prog(RING, n, [(x,) for x in X])):
        np.testing.assert_array_equal(y, X[(r - 1) % n])


NONBLOCKING = ring_prog(3, 9, """  %r1 = mpi.irecv(%got, %tag, %prev, %comm) : memref<3xf64>, i32, i32 -> !mpi.request
  %rv, %r2 = mpi.isend(%x, %tag, %next, %comm) : memref<3xf64>, i32, i32 -> !mpi.retval, !mpi.request
  mpi.wait(%r2) : !mpi.request
  %w = mpi.wait(%r1) : !mpi.request -> !mpi.retval""")


@pytest.mark.parametrize("n", [1, 2, 4])
def test_nonblocking_ring(n):
    X = [np.full(3, float(r)) for r in range(n)]
    for r, y in enumerate(run_prog(NONBLOCKING, n, [(x,) for x in X])):
        np.testing.assert_array_equal(y, X[(r - 1) % n])


BIG_RING = ring_prog(1048576, 3, """  mpi.send(%x, %tag, %next, %comm) : memref<1048576xf64>, i32, i32
  mpi.recv(%got, %tag, %prev, %comm) : memref<1048576xf64>, i32, i32
  mpi.barrier(%comm)""")


@pytest.mark.parametrize("n", [2])
def test_send_before_recv_of_8mb_does_not_deadlock(n):
    """Every rank sends 8 MB before it receives (upstream's halo exchange order): with
    MPI_Send this deadlocks beyond the eager limit, with buffered sends it goes through.
    The send buffer is copied: the sender may overwrite it at once."""
    X = [np.full(1 << 20, float(r)) for r in range(n)]
    for r, y in enumerate(run_prog(BIG_RING, n, [(x,) for x in X])):
        np.testing.assert_array_equal(y, X[(r - 1) % n])


def test_buffered_send_copies_its_buffer():
    """A send returns at once and later writes to its buffer do not reach the message."""
    text = """
func.func @f(%x: memref<4xf64>) -> memref<4xf64> {
  %comm = mpi.comm_world : !mpi.comm
  %rank = mpi.comm_rank(%comm) : i32
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %i0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f64
  %got = memref.alloc() : memref<4xf64>
  %first = arith.cmpi eq, %rank, %c0 : i32
  scf.if %first {
    mpi.send(%x, %c0, %c1, %comm) : memref<4xf64>, i32, i32
    memref.store %zero, %x[%i0] : memref<4xf64>
    memref.copy %x, %got : memref<4xf64> to memref<4xf64>
  } else {
    mpi.recv(%got, %c0, %c0, %comm) : memref<4xf64>, i32, i32
  }
  return %got : memref<4xf64>
}"""
    got = run_prog(text, 2, [(np.arange(1.0, 5.0),), (np.zeros(4),)])
    np.testing.assert_array_equal(got[0], [0, 2, 3, 4])
    np.testing.assert_array_equal(got[1], [1, 2, 3, 4])


def test_unsupported_reduction_is_a_compile_error():
    from shardc.runtime import CompileError

    with pytest.raises(CompileError, match="MPI_MAXLOC is not supported"):
        compile_text(reduction_prog("MPI_MAXLOC", 1))


def test_bad_peer_fails_the_rank():
    text = RING.replace("%next = arith.remsi %n0, %size : i32", "%next = arith.addi %n0, %size : i32")
    with pytest.raises(RankFailed, match="out of range"):
        run_prog(text, 2, [(np.zeros(3),)] * 2)
