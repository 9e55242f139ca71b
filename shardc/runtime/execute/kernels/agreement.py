"""Every rank of a run on rank 0's measured library choices: which BLAS runs float32
products (`blas.agree`) and how bf16 products are split between oneDNN and MKL
(`bf16_gemm.agree`). Each is measured per machine; on hosts that measured differently a
replicated product would round differently on each rank. Entry points call `agree`
once, on every rank, before the first step."""

from __future__ import annotations

from typing import Any

from shardc.runtime.execute.kernels import bf16_gemm, blas


def agree(world: Any) -> None:
    """Collective over the mpi4py communicator `world` (nothing on one rank)."""
    blas.agree(world)
    bf16_gemm.agree(world)
