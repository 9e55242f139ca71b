"""Driver of test_step_parts_mpi.py: the GPT step compiled through `compile_program`
on the ranks of COMM_WORLD; rank 0 prints where the program came from on each rank,
a hash of its generated source and the first losses. `--fail-rank R`: rank R's part
raises while it is built."""

from __future__ import annotations

import argparse
import hashlib
import json

import numpy as np
from mpi4py import MPI

from shardc.runtime.execute.comm import MPIComm, use_comm
from shardc.training import split_compile
from shardc.training.gpt import GPTConfig, init_params
from shardc.training.spmd import RankState
from shardc.training.trainer import TrainingConfig, compile_program, ranks_per_host

ap = argparse.ArgumentParser()
ap.add_argument("--fail-rank", type=int, default=-1)
args = ap.parse_args()
world = MPI.COMM_WORLD
rank = world.Get_rank()
if rank == args.fail_rank:
    part = split_compile._part  # pyright: ignore[reportPrivateUsage]

    def failing(*a: object) -> object:
        def build() -> object:
            raise RuntimeError(f"part refused on rank {rank}")

        part(*a)  # type: ignore[arg-type]
        return build

    split_compile._part = failing  # type: ignore[assignment]  # pyright: ignore[reportPrivateUsage]
cfg = TrainingConfig(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32), per_device_batch=2, steps=1)
grid = cfg.grid(world.Get_size(), ranks_per_host(world))
try:
    program = compile_program(cfg, grid, world=world)
except Exception as e:  # reported by every rank, as a job's ranks would
    print(json.dumps({"rank": rank, "error": f"{type(e).__name__}: {e}"}), flush=True)
    raise SystemExit(1) from None
comm = MPIComm(world)
state = RankState(program, rank, init_params(cfg.model, 0, np.float32), comm=comm)
rng = np.random.default_rng(0)
batch = (rng.integers(0, 32, (program.batch, 8)).astype(np.int32), rng.integers(0, 32, (program.batch, 8)).astype(np.int32))
with use_comm(comm):
    losses = [state.train_step([batch], 1e-2) for _ in range(2)]
got = world.gather((program.cached, hashlib.sha256(program.compiled.source.encode()).hexdigest(), losses), root=0)
if rank == 0:
    print(json.dumps({"sources": [g[0] for g in got], "hashes": sorted({g[1] for g in got}), "losses": [g[2] for g in got]}), flush=True)
