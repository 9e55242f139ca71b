"""The GPT training step with gradients reduced in float32 and in bf16 (`--grad-reduce`),
side by side: one process per rank holds both compiled steps and runs them alternately
(f32, bf16, bf16, f32, ...) on the same batches, so both meet the same moments of a
shared machine's load (bench/train_step.py's model and batch of 8 sequences).
`--compare layout` pairs ZeRO against FSDP instead (the same reduction in both).

    mpiexec -n 2 python bench/grad_reduce_step.py                    # dp=2 (ZeRO), --precision bf16
    mpiexec -n 2 python bench/grad_reduce_step.py --large --steps 4  # n_layer 12, n_embd 768, block 256
    mpiexec -n 2 python bench/grad_reduce_step.py --fsdp --precision f32
    mpiexec -n 2 python bench/grad_reduce_step.py --compare layout   # ZeRO vs FSDP, --precision bf16

Per step: wall time between barriers (the slowest rank's), each rank's CPU time, and
the CPU time each rank spent inside the gradients' collectives (the mpi backend's
reduce-scatter and all-reduce calls and their waits, the loss's scalar all-reduce
among them: where the bytes move; FSDP's all-gathers of the parameters are not counted,
so with `--compare layout` that row is the reductions only). bf16
moves half the bytes and pays two casts (each rank's partial sum to bf16, the reduced
part back to float32). Last, the two runs' parameters: how far bf16 reductions moved
them (the same start and batches). With `--compare layout` the two layouts' losses
instead: each rank holds different parts of their parameters.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

MODES = ("f32", "bf16")


def _collective_clock(backend) -> list[float]:
    """Wrap the mpi backend's reducing calls (and the waits of their nonblocking starts)
    and the two-rank reduce-scatter exchange to add their CPU seconds to the returned
    counter (the step's code calls them through these names)."""
    spent = [0.0]

    def timed(fn):
        def run(*args, **kwargs):
            t = time.process_time()
            out = fn(*args, **kwargs)
            if hasattr(out, "wait"):  # a Pending: time its wait too
                inner = out.wait

                def wait():
                    w = time.process_time()
                    try:
                        return inner()
                    finally:
                        spent[0] += time.process_time() - w

                out.wait = wait
            spent[0] += time.process_time() - t
            return out

        return run

    for name in ("allreduce", "reduce_scatter_block", "iallreduce", "ireduce_scatter_block"):
        setattr(backend, name, timed(getattr(backend, name)))
    from shardc.runtime.execute.kernels import mpi_run

    mpi_run.reduce_scatter_pair = timed(mpi_run.reduce_scatter_pair)  # two ranks' exchange, called directly
    return spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--large", action="store_true", help="n_layer 12, n_embd 768, n_head 12, block 256")
    ap.add_argument("--precision", choices=MODES, default="bf16")
    ap.add_argument("--compare", choices=("grad-reduce", "layout"), default="grad-reduce",
                    help="grad-reduce: --grad-reduce f32 vs bf16 (the default); layout: ZeRO vs FSDP")
    ap.add_argument("--fsdp", action="store_true", help="FSDP instead of ZeRO (with --compare grad-reduce)")
    ap.add_argument("--grad-reduce", choices=MODES, default="f32", help="the reduction of both steps with --compare layout")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10, help="timed steps of each program")
    args = ap.parse_args()
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, current_comm, use_comm
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.data import batches
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram
    from shardc.training.train import set_blas_threads

    set_blas_threads(1)
    comm = MPI.COMM_WORLD
    world, rank = comm.Get_size(), comm.Get_rank()
    if args.large:
        cfg = GPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=256, vocab_size=512)
    else:
        cfg = GPTConfig(n_layer=4, n_head=4, n_embd=256, block_size=128, vocab_size=512)
    grid = make_grid(world, args.tp)
    if args.compare == "layout":  # (label, policy, grad_reduce) of the first and the second step
        variants = [("ZeRO", ShardingPolicy(args.tp, zero=True), args.grad_reduce), ("FSDP", ShardingPolicy(args.tp, zero=True, fsdp=True), args.grad_reduce)]
        setting = f"--grad-reduce {args.grad_reduce}"
    else:
        policy = ShardingPolicy(args.tp, zero=True, fsdp=args.fsdp)
        variants = [(f"--grad-reduce {m}", policy, m) for m in MODES]
        setting = "FSDP" if args.fsdp else "ZeRO"
    names = [v[0] for v in variants]
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 200000).astype(np.int32)
    with use_comm(MPIComm(comm)):
        states = {
            name: RankState(StepProgram.build(cfg, 8, grid, policy, GPT_PLAN, precision=args.precision, grad_reduce=gr, world=comm), rank, init_params(cfg, 0))
            for name, policy, gr in variants
        }
        spent = _collective_clock(current_comm().mpi_backend())
        wall: dict[str, list[float]] = {m: [] for m in names}
        cpu: dict[str, list[float]] = {m: [] for m in names}
        coll: dict[str, list[float]] = {m: [] for m in names}
        losses: dict[str, list[float]] = {m: [] for m in names}
        stream = batches(data, 8, cfg.block_size, 0)  # the global batch: each rank takes its part
        for i in range(args.steps + 1):
            mb = [next(stream)]
            for m in names if i % 2 == 0 else names[::-1]:
                comm.Barrier()
                t, c, spent[0] = time.perf_counter(), time.process_time(), 0.0
                losses[m].append(states[m].train_step(mb, 1e-3))
                c = time.process_time() - c
                comm.Barrier()
                if i:  # the first step of each compiles kernels and warms caches
                    wall[m].append(time.perf_counter() - t)
                    cpu[m].append(c)
                    coll[m].append(spent[0])
    first, second = names
    if args.compare == "layout":  # each layout holds its own parts of the parameters: the losses compare
        moved = max(abs(a - b) for a, b in zip(losses[first], losses[second]))
        outcome = f"losses of the {args.steps + 1} steps: max |ZeRO - FSDP| {moved:.2e}"
    else:
        moved = max(float(np.abs(a - b).max()) for a, b in zip(states[first].params, states[second].params))
        scale = max(float(np.abs(a).max()) for a in states[first].params)
        outcome = f"parameters after {args.steps + 1} steps of each: max |f32-reduced - bf16-reduced| {moved:.2e} (largest |parameter| {scale:.2f})"
    cpus, colls = comm.gather(cpu, root=0), comm.gather(coll, root=0)
    if rank == 0:
        med = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
        print(f"{cfg}, batch 8 over {grid}: {setting}, --precision {args.precision}; medians of {args.steps} steps each, alternating")
        ratio_name = f"{second.split()[-1]}/{first.split()[-1]}"
        print(f"{'':<34} {first:>18} {second.split()[-1]:>9} {ratio_name:>9}")

        def row(what: str, per: dict[str, list[float]]) -> None:
            ratios = [b / a for a, b in zip(per[first], per[second]) if a > 0]
            print(f"{what:<34} {med(per[first]):>15.1f} ms {med(per[second]):>6.1f} ms {statistics.median(ratios) if ratios else float('nan'):>9.3f}")

        row("step, wall", wall)
        for r, (c, k) in enumerate(zip(cpus, colls)):
            row(f"rank {r} CPU", c)
            row(f"rank {r} CPU in gradient collectives", k)
        print(outcome)


if __name__ == "__main__":
    main()
