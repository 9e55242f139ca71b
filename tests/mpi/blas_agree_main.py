"""Driver for test_blas_agree_mpi.py: each rank prints the BLAS `auto` gave it alone,
then the one it runs after `blas.agree` over the world."""

from mpi4py import MPI

from shardc.runtime.execute.kernels import blas

world = MPI.COMM_WORLD
alone = blas.active_name()
blas.agree(world)
# One write per line: unbuffered, print() writes the newline apart, and two ranks' lines
# forwarded by mpiexec could interleave between them.
print(f"rank {world.Get_rank()}: alone {alone}, agreed {blas.active_name()}\n", end="", flush=True)
