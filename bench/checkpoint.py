"""Sharded checkpoint save and load on 2 MPI ranks for a GPT with n_layer 12, n_embd 768
(GPT-2 small's shapes, vocab 50304, block 256): the time of a save and of a load (with
its checksum share) per rank and the bytes each rank writes, against the time of one
training step, and against gathering the state on rank 0 and writing it with
`np.savez`. Each rank must write its own share: 1/2 of the sharded state.

    python bench/checkpoint.py                  # launches mpiexec -n 2 itself
    python bench/checkpoint.py --quick          # n_layer 2, n_embd 128: a smoke run
    python bench/checkpoint.py --tp 2 --fsdp    # another policy

The state is the parameters and AdamW's two moments (the gradient accumulator is not
kept between steps); with the default policy (ZeRO) the parameters are replicated over
the two ranks and split between them only for writing. Files go to a temporary
directory on the local disk (`--dir` to choose one); the page cache is not dropped, so
load times are of a warm cache.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
from _paired import under_mpiexec  # noqa: E402

from shardc.training.gpt import GPTConfig, init_params  # noqa: E402

FULL = GPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=256, vocab_size=50304)
QUICK = GPTConfig(n_layer=2, n_head=4, n_embd=128, block_size=64, vocab_size=512)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--fsdp", action="store_true")
    p.add_argument("--dir", help="where to write (default: a temporary directory)")
    args = p.parse_args()
    under_mpiexec(__file__, 2)

    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, use_comm
    from shardc.training.checkpoint import BatchStream, CheckpointOptions, load_rank, open_for_resume, save_rank, state_of
    from shardc.training.spmd import RankState, assemble
    from shardc.training.train import set_blas_threads
    from shardc.training.trainer import TrainingConfig, compile_program

    world = MPI.COMM_WORLD
    rank, n = world.Get_rank(), world.Get_size()
    set_blas_threads(1)
    model = QUICK if args.quick else FULL
    cfg = TrainingConfig(model, per_device_batch=1, steps=10, warmup_steps=1).shard(tp=args.tp, fsdp=args.fsdp)
    grid = cfg.grid(n)
    t0 = time.perf_counter()
    program = compile_program(cfg, grid)
    compile_s = time.perf_counter() - t0
    root = Path(world.bcast(args.dir or tempfile.mkdtemp(prefix="shardc-ckpt-bench-"), root=0))
    data = np.random.default_rng(0).integers(0, model.vocab_size, 100_000).astype(np.int32)

    def slowest(x: float) -> float:
        return float(world.allreduce(x, op=MPI.MAX))

    with use_comm(MPIComm(world)) as comm:
        state = RankState(program, rank, init_params(model, 0, np.float32))
        stream = BatchStream(data, program.batch, model.block_size, 0)
        step_times = []
        for step in (1, 2):  # the first warms up; the second is timed
            world.Barrier()
            t0 = time.perf_counter()
            loss = state.train_step([next(stream)], cfg.schedule().lr_at(step))
            step_times.append(slowest(time.perf_counter() - t0))
        history = [{"step": s, "loss": loss, "lr": 0.0, "seconds": t, "tokens_per_s": 0.0, "eval_loss": None} for s, t in zip((1, 2), step_times)]
        opts = CheckpointOptions(root / "ckpt", keep=1)
        world.Barrier()
        t0 = time.perf_counter()
        d = save_rank(opts, cfg, state, stream, history, comm)
        save_s = slowest(time.perf_counter() - t0)
        written = (d / f"rank-{rank:05d}.safetensors").stat().st_size
        local = state_of(state)
        state_bytes = sum(int(np.prod(s.shape)) * 4 for s in program.specs) * 3  # params, mu, nu: global
        held = sum(a.nbytes for a in local)

        world.Barrier()
        t0 = time.perf_counter()
        ck = open_for_resume(d, cfg, None, rank, n, world.allgather)
        loaded = load_rank(ck, program, rank)
        load_s = slowest(time.perf_counter() - t0)
        assert all(np.array_equal(a, b) for a, b in zip(local, (*loaded.params, *loaded.mu, *loaded.nu)))

        # The alternative: gather the whole state on rank 0, np.savez it there.
        from shardc.training.checkpoint import state_arrays

        world.Barrier()
        t0 = time.perf_counter()
        parts = world.gather(local, root=0)
        gathered = None
        if rank == 0:
            gathered = {path.replace("/", "."): assemble([q[i] for q in parts], shape, spec, grid) for i, (path, shape, spec) in enumerate(state_arrays(program))}
        gather_s = time.perf_counter() - t0
        savez_s, savez_bytes = 0.0, 0
        if rank == 0:
            t0 = time.perf_counter()
            with open(root / "state.npz", "wb") as f:
                np.savez(f, **gathered)
                f.flush()
                os.fsync(f.fileno())
            savez_s = time.perf_counter() - t0
            savez_bytes = (root / "state.npz").stat().st_size
        del parts, gathered

    rows = world.gather((rank, written, held, load_s, loaded.bytes_read), root=0)
    if rank == 0:
        mib = 1 << 20
        print(f"model: {model}; grid {grid}, policy {cfg.policy}; compile {compile_s:.1f} s")
        print(f"sharded state (params, mu, nu): {state_bytes / mib:.1f} MiB; one training step {step_times[1]:.2f} s")
        print(f"save (slowest rank, fsync + rename): {save_s:.2f} s = {save_s / step_times[1]:.2f} steps")
        print(f"load (slowest rank, checksums included): {load_s:.2f} s = {load_s / step_times[1]:.2f} steps")
        for r, w, h, _, b in sorted(rows):
            print(f"  rank {r}: wrote {w / mib:.1f} MiB = {w / state_bytes:.4f} of the state (holds {h / mib:.1f} MiB); read {b / mib:.1f} MiB for its slices")
        print(f"gather on rank 0 + np.savez: {gather_s:.2f} s + {savez_s:.2f} s, {savez_bytes / mib:.1f} MiB written by rank 0 alone")
        print(f"save vs gather + np.savez: {save_s / (gather_s + savez_s):.2f}x the time")
        share = max(w for _, w, _, _, _ in rows) / state_bytes
        print(f"largest share written by a rank: {share:.4f} (target 1/{n} = {1 / n:.4f} plus headers)")
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
