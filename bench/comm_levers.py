"""The 2-rank GPT training step with this round's copy-saving levers on and off, in one
process per rank, steps alternating (on, off, off, on, ...), so both see the same
moments of a shared machine's load (bench/train_step.py's model and batch).

    mpiexec -n 2 python bench/comm_levers.py               # dp=2 (ZeRO), every lever
    mpiexec -n 2 python bench/comm_levers.py --off inplace # one lever only
    mpiexec -n 2 python bench/comm_levers.py --tp 2

Levers (`--off` names those the "off" program goes without; all by default):
  inplace   a gradient accumulator's `acc + reduce_scatter(dW)` as one ufunc call into
            the donated accumulator (`kernels.fused.InplaceUfunc`), not a fresh sum
            copied into it
  rs_copy   reduce_scatter along a non-leading dim sends from the transpose's own
            buffer (`lowering.shard_to_mpi_collectives._ranks_first`), no copy first
  held      small collectives held until an op needs them, then run as one call per
            kind (`runtime.overlap._small_held`: dp=2's 26 gradient all-reduces of
            1 KiB become one call), not each where it is written

Wall time is the step between barriers; CPU time is each rank's process time over its
step (MPI's busy waiting included: MPICH polls). Both programs compile here, the "off" one with the levers patched out, with the disk
cache off (`SHARDC_CACHE=0`: an entry keyed by the same compiler would be shared). The
parameters after the steps are compared: the levers change no bits.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ["SHARDC_CACHE"] = "0"
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def _old_ranks_first(e, value, axis, n):  # the lowering before: transpose, then a copy
    from xdsl.dialects import tensor
    from xdsl.dialects.builtin import DenseArrayBase, MemRefType, TensorType, i64
    from xdsl.dialects.linalg import ops as linalg

    from shardc.lowering.shard_to_mpi_collectives import _reassociation

    if isinstance(value.type, MemRefType):
        value = e.to_tensor(value)
    t = value.type
    assert isinstance(t, TensorType)
    shape, elem = list(t.get_shape()), t.get_element_type()
    expanded = shape[:axis] + [n, shape[axis] // n] + shape[axis + 1 :]
    groups = [[i] for i in range(axis)] + [[axis, axis + 1]] + [[i + 1] for i in range(axis + 1, len(shape))]
    expand = tensor.ExpandShapeOp.create(
        operands=[value], result_types=[TensorType(elem, expanded)],
        properties={"reassociation": _reassociation(groups), "static_output_shape": DenseArrayBase.from_list(i64, expanded)},
    )
    value = e.emit(expand).results[0]
    perm = [axis] + [i for i in range(len(expanded)) if i != axis]
    init = e.emit(tensor.EmptyOp([], TensorType(elem, [expanded[p] for p in perm]))).results[0]
    value = e.emit(linalg.TransposeOp(value, init, DenseArrayBase.from_list(i64, perm))).results[0]
    buffer = e.alloc([expanded[p] for p in perm], elem)
    e.linalg_copy(e.to_buffer(value), buffer)
    return buffer


LEVERS = ("inplace", "rs_copy", "held")


def build(cfg, grid, tp, off: set[str]):
    import shardc.lowering.shard_to_mpi_collectives as coll
    import shardc.runtime.codegen.kernels.fused as fused
    import shardc.runtime.codegen.overlap as overlap
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.spmd import StepProgram

    saved = (fused._inplace_ufunc, coll._ranks_first, overlap._small_held)
    try:
        if "inplace" in off:
            fused._inplace_ufunc = lambda *a, **k: None
        if "rs_copy" in off:
            coll._ranks_first = _old_ranks_first
        if "held" in off:
            overlap._small_held = lambda op: False
        return StepProgram.build(cfg, 8, grid, ShardingPolicy(tp, zero=True, fsdp=False), GPT_PLAN)
    finally:
        fused._inplace_ufunc, coll._ranks_first, overlap._small_held = saved


def _time_elementwise(prog) -> list[float]:
    """Wrap the program's `run_structured` global: [CPU seconds of this process in its
    elementwise calls (copies, transposes, accumulator adds, fused chains) since the
    last reset]: what the levers remove, without the descheduling a shared machine adds."""
    ns = prog.compiled["train_step"].__globals__
    acc = [0.0]
    for name, fn in list(ns.items()):
        if getattr(fn, "__name__", "") == "run_structured" and callable(fn):
            def timed(spec, body, ins, outs, aux=(), _fn=fn):
                if spec.kind != "elementwise":
                    return _fn(spec, body, ins, outs, aux)
                t = time.process_time()
                r = _fn(spec, body, ins, outs, aux)
                acc[0] += time.process_time() - t
                return r

            ns[name] = timed
    return acc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20, help="timed steps of each program")
    ap.add_argument("--off", nargs="*", default=list(LEVERS), choices=LEVERS)
    args = ap.parse_args()
    from mpi4py import MPI

    from shardc.training.data import batches
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState

    comm = MPI.COMM_WORLD
    world, rank = comm.Get_size(), comm.Get_rank()
    if world % args.tp:
        raise SystemExit("comm_levers: --tp must divide the number of ranks")
    cfg = GPTConfig(n_layer=4, n_head=4, n_embd=256, block_size=128, vocab_size=512)
    grid = make_grid(world, args.tp)
    progs = {"on": build(cfg, grid, args.tp, set()), "off": build(cfg, grid, args.tp, set(args.off))}
    states = {k: RankState(p, rank, init_params(cfg, 0)) for k, p in progs.items()}
    ew = {k: _time_elementwise(p) for k, p in progs.items()}
    ew_steps: dict[str, list[float]] = {"on": [], "off": []}
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 20000).astype(np.int32)
    times: dict[str, list[float]] = {"on": [], "off": []}
    cpu: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(args.steps + 1):
        mb = [next(batches(data, 8, cfg.block_size, i))]
        order = ("on", "off") if i % 2 == 0 else ("off", "on")
        for k in order:
            comm.Barrier()
            t, c = time.perf_counter(), time.process_time()
            ew[k][0] = 0.0
            states[k].train_step(mb, 1e-3)
            c = time.process_time() - c
            comm.Barrier()
            if i:
                times[k].append(time.perf_counter() - t)
                cpu[k].append(c)
                ew_steps[k].append(ew[k][0])
    same = all(np.array_equal(a, b) for a, b in zip(states["on"].params, states["off"].params))
    same = comm.allreduce(int(same), op=MPI.MIN)
    cpus = comm.gather(cpu, root=0)
    ews = comm.gather(ew_steps, root=0)
    if rank == 0:
        print(f"ranks {world} tp {args.tp}, levers off: {' '.join(args.off)}")
        for what, on, off in [("wall", times["on"], times["off"]), *[(f"CPU rank {r}", c["on"], c["off"]) for r, c in enumerate(cpus)],
                                *[(f"elementwise calls' CPU, rank {r}", c["on"], c["off"]) for r, c in enumerate(ews)]]:
            ratios = [b / a for a, b in zip(on, off)]
            q = statistics.quantiles(ratios, n=4)
            print(f"  {what}: on {statistics.median(on) * 1e3:.1f} ms, off {statistics.median(off) * 1e3:.1f} ms (medians of {args.steps});"
                  f" off/on per pair: median {statistics.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}, range {min(ratios):.3f}-{max(ratios):.3f})")
        print(f"  parameters bitwise equal: {bool(same)}")


if __name__ == "__main__":
    main()
