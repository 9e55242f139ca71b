"""Where a GPT training step's time goes on each rank, by kind of call: contractions,
fused and other structured ops, row kernels, collectives, allocation, and the rest
(the generated code itself: Python statements, `del`s, views). Run it on 1 rank and
under `mpiexec -n 2` to see what the 2-rank step pays that the 1-rank step does not.

    python bench/step_profile.py                       # 1 rank
    mpiexec -n 2 python bench/step_profile.py          # dp=2 (ZeRO)
    mpiexec -n 2 python bench/step_profile.py --tp 2   # tp=2
    mpiexec -n 2 python bench/step_profile.py --free-comm [--tp 2]   # the bound: free communication
    mpiexec -n 2 python bench/step_profile.py --tp 2 --precision bf16   # bf16 products, float32 masters

Every callable global of the generated step module is wrapped by a timer after
compilation (kernels are bound as globals of the generated code, so every call goes
through its wrapper); the MPI backend's methods are wrapped on the backend object. A
wrapper costs about 0.3 us a call, counted in "wrapped calls' overhead" below the
table (measured on an empty wrapper). Each rank prints its own table, rank by rank.

`--free-comm` times the step against itself with free communication instead (no
table): every collective the step calls (all-reduce, all-gather, reduce-scatter, the
sub-communicator cache's agreement) moves nothing between ranks and only writes this
rank's own part into its receive buffer, so no rank waits for another inside the step.
Steps alternate between a real state and a free one (real, free, free, real, ...); each
step is timed between barriers, the slowest rank's, in wall time and in the CPU time of
each rank's process (a free step's CPU time is its compute alone, what its wall time
would be with the cores to itself). The free state's numbers are wrong (timing only):
the bound says how fast the step could be if communication cost nothing.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

_T: collections.Counter[str] = collections.Counter()
_N: collections.Counter[str] = collections.Counter()
_ON = [False]
_CLOCK = [time.perf_counter]


def _kind_of_structured(args) -> str:
    spec = args[0]
    kind = spec.kind
    if getattr(spec, "fused", None) is not None:
        kind += " (fused)"
    if getattr(spec, "onehot", None) is not None:
        kind += " (one-hot)"
    if kind not in ("contraction",):
        body_ops = len(getattr(spec, "ops", ()) or ())
        _ = body_ops
    return "structured: " + kind


def _wrap(name: str, fn, classify=None):
    def timed(*args, **kwargs):
        if not _ON[0]:
            return fn(*args, **kwargs)
        clock = _CLOCK[0]
        t = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            key = classify(args) if classify else name
            _T[key] += clock() - t
            _N[key] += 1

    timed.__name__ = getattr(fn, "__name__", name)
    timed.__module__ = getattr(fn, "__module__", None)
    return timed


def _label(gname: str, obj) -> str:
    base = gname.lstrip("_").rsplit("_", 1)[0] if gname[-1:].isdigit() else gname.lstrip("_")
    return base


def instrument(namespace: dict) -> None:
    import shardc.runtime.codegen.structured as structured

    for gname, obj in list(namespace.items()):
        if gname.startswith("__") or not callable(obj) or isinstance(obj, type) or gname.startswith("fn__"):
            continue
        if getattr(obj, "__module__", None) == "numpy" and not hasattr(obj, "__call__"):
            continue
        label = _label(gname, obj)
        if obj is structured.run_structured or label == "run_structured":
            namespace[gname] = _wrap(label, obj, _kind_of_structured)
        elif label == "mpi_backend":
            continue  # the backend's methods are wrapped on the object
        else:
            namespace[gname] = _wrap(label, obj)
    if "_np" in namespace:  # np.empty etc. called as _np.empty
        class _NP:
            def __getattr__(self, a, _np=np):
                v = getattr(_np, a)
                return _wrap("np." + a, v) if callable(v) else v
        namespace["_np"] = _NP()


def _synced(fn, barrier):
    """`fn` after a barrier timed on its own: what a collective's time holds of waiting
    for the slower rank is then "(skew)", not the collective's."""
    def synced(*args, **kwargs):
        if _ON[0]:
            t = _CLOCK[0]()
            barrier()
            _T["(skew: waiting at the collectives)"] += _CLOCK[0]() - t
            _N["(skew: waiting at the collectives)"] += 1
        return fn(*args, **kwargs)

    synced.__name__ = getattr(fn, "__name__", "synced")
    synced.__module__ = getattr(fn, "__module__", None)
    return synced


COLLECTIVES = ("allreduce", "allgather", "reduce_scatter_block", "comm_split")


def instrument_backend(namespace: dict, barrier) -> None:
    from shardc.runtime.execute.comm import current_comm

    b = current_comm().mpi_backend()
    for m in ("allreduce", "allgather", "reduce_scatter_block", "send", "recv", "comm_world", "comm_rank", "comm_split", "barrier", "wait"):
        if hasattr(b, m):
            fn = _wrap("mpi." + m, getattr(b, m))
            setattr(b, m, _synced(fn, barrier) if barrier and m in COLLECTIVES else fn)
    for gname, obj in list(namespace.items()):  # kernels calling MPI directly (the direct reduce-scatter)
        if barrier and _label(gname, obj).startswith("mpi_") and _label(gname, obj) != "mpi_backend":
            namespace[gname] = _synced(obj, barrier)


_FREE = [False]


def _free_stand_ins(backend, namespace: dict) -> None:
    """While `_FREE[0]`, the collectives of `backend` and the generated code's direct
    reduce-scatters move nothing between ranks: each writes only its own part (what a
    1-rank collective would), and a cached sub-communicator is reused without asking the
    others."""
    from shardc.runtime.execute.comm import _write  # pyright: ignore[reportPrivateUsage]

    def allreduce(comm, send, recv, op):
        if send is not recv:
            _write(recv, np.asarray(send).reshape(-1), "allreduce")
        return 0

    def reduce_scatter_block(comm, send, recv, op):
        _write(recv, np.asarray(send).reshape(comm.Get_size(), -1)[comm.Get_rank()], "reduce_scatter_block")
        return 0

    def allgather(comm, send, recv):
        if recv.flags.c_contiguous:
            recv.reshape(comm.Get_size(), -1)[comm.Get_rank()] = np.asarray(send).reshape(-1)
        return 0

    splits: dict = {}

    def comm_split(comm, color, key, site=None, _real=backend.comm_split):
        k = (site, comm.py2f(), color, key)
        if k not in splits:
            splits[k] = _real(comm, color, key, site)
        return splits[k]

    def either(real, free):
        return lambda *a: free(*a) if _FREE[0] else real(*a)

    for name, free in (("allreduce", allreduce), ("allgather", allgather), ("reduce_scatter_block", reduce_scatter_block), ("comm_split", comm_split)):
        setattr(backend, name, either(getattr(backend, name), free))
    for gname, obj in list(namespace.items()):
        if _label(gname, obj) == "mpi_reduce_scatter_block":
            namespace[gname] = either(obj, reduce_scatter_block)


def free_comm_bound(prog, rank: int, params: dict, it, steps: int, world_comm) -> str | None:
    """Median step (slowest rank, between barriers) with real and with free
    communication, alternating; the report on rank 0."""
    from shardc.runtime.execute.comm import current_comm
    from shardc.training.spmd import RankState

    states = {"real": RankState(prog, rank, params), "free": RankState(prog, rank, params)}
    for k in states:  # warm both
        _FREE[0] = k == "free"
        states[k].train_step([next(it)], 1e-3)
    _FREE[0] = False
    _free_stand_ins(current_comm().mpi_backend(), prog.compiled["train_step"].__globals__)
    times: dict[str, list[tuple[float, float]]] = {"real": [], "free": []}
    for i in range(steps):
        mb = [next(it)]
        for k in ("real", "free") if i % 2 == 0 else ("free", "real"):
            _FREE[0] = k == "free"
            world_comm.Barrier()
            t, c = time.perf_counter(), time.process_time()
            states[k].train_step(mb, 1e-3)
            c = time.process_time() - c
            world_comm.Barrier()
            times[k].append((time.perf_counter() - t, c))
    _FREE[0] = False
    every = world_comm.gather(times, root=0)
    if rank:
        return None
    lines = [f"{len(every)} ranks, medians of {steps} steps of the slowest rank (the free steps' numbers are wrong: timing only):"]
    for j, what in ((0, "wall"), (1, "CPU")):
        slowest = {k: [max(x[j] for x in col) for col in zip(*(r[k] for r in every))] for k in times}
        real, free = (statistics.median(slowest[k]) for k in ("real", "free"))
        ratios = [a / b for a, b in zip(slowest["real"], slowest["free"])]
        lines.append(
            f"  {what}: real communication {real * 1e3:.1f} ms, free {free * 1e3:.1f} ms; "
            f"real/free per pair: median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--cpu", action="store_true", help="CPU time of this process (time.process_time) instead of wall time: a shared machine's descheduling left out, MPI's busy waiting kept")
    ap.add_argument("--sync", action="store_true", help="a timed barrier before each collective: its wait is shown apart as skew")
    ap.add_argument("--precision", choices=("f32", "bf16"), default="f32", help="the step's --precision (bf16: bf16 products, float32 masters)")
    ap.add_argument("--fsdp", action="store_true", help="FSDP instead of ZeRO over the data replicas")
    ap.add_argument("--free-comm", action="store_true", help="no table: the step against itself with collectives that move nothing between ranks (the bound; numbers wrong, timing only)")
    args = ap.parse_args()

    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram
    from shardc.training.data import batches

    if args.cpu:
        _CLOCK[0] = time.process_time
    world, rank = 1, 0
    barrier = lambda: None  # noqa: E731
    if "PMI_RANK" in os.environ or "OMPI_COMM_WORLD_RANK" in os.environ or "PMI_SIZE" in os.environ:
        from mpi4py import MPI

        world, rank, barrier = MPI.COMM_WORLD.Get_size(), MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Barrier
    cfg = GPTConfig(n_layer=4, n_head=4, n_embd=256, block_size=128, vocab_size=512)
    prog = StepProgram.build(cfg, 8, make_grid(world, args.tp), ShardingPolicy(args.tp, zero=True, fsdp=args.fsdp), GPT_PLAN, precision=args.precision)
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 20000).astype(np.int32)
    it = batches(data, 8, cfg.block_size, 0)
    if args.free_comm:
        if world == 1:
            raise SystemExit("step_profile: --free-comm needs ranks (mpiexec -n 2)")
        from mpi4py import MPI

        report = free_comm_bound(prog, rank, init_params(cfg, 0), it, args.steps, MPI.COMM_WORLD)
        if report:
            print(f"tp={args.tp}: {report}")
        return
    state = RankState(prog, rank, init_params(cfg, 0))
    state.train_step([next(it)], 1e-3)  # compile kernels
    seen = set()
    for name in ("train_step", "adamw_step"):
        ns = prog.compiled[name].__globals__  # type: ignore[attr-defined]
        if id(ns) not in seen:  # the functions of one module share their globals
            seen.add(id(ns))
            instrument(ns)
    real_call = prog.call

    def call(name, *a):
        if not _ON[0]:
            return real_call(name, *a)
        t = _CLOCK[0]()
        try:
            return real_call(name, *a)
        finally:
            _T["@" + name] += _CLOCK[0]() - t

    prog.call = call  # type: ignore[method-assign]
    instrument_backend(ns, barrier if args.sync and world > 1 else None)
    wall = []
    for i in range(args.steps + 1):
        mb = [next(it)]
        barrier()
        _ON[0] = i > 0
        t = _CLOCK[0]()
        state.train_step(mb, 1e-3)
        dt = _CLOCK[0]() - t
        _ON[0] = False
        if i:
            wall.append(dt)
    # an empty wrapper's cost
    noop = _wrap("noop", lambda: None)
    _ON[0] = True
    t = time.perf_counter()
    for _ in range(20000):
        noop()
    per_call = (time.perf_counter() - t) / 20000
    _ON[0] = False
    steps = args.steps
    lines = [f"rank {rank}/{world} tp={args.tp}: step median {statistics.median(wall) * 1e3:.1f} ms (min {min(wall) * 1e3:.1f})"]
    total = 0.0
    calls = 0
    for key, t in _T.most_common():
        if key == "noop" or key.startswith("@"):
            continue
        total += t
        calls += _N[key]
    for key in ("@train_step", "@adamw_step"):
        lines.append(f"  {key:<42} {_T[key] / steps * 1e3:8.2f} ms")
    for key, t in [kv for kv in _T.most_common() if kv[0] != "noop" and not kv[0].startswith("@")][: args.top]:
        lines.append(f"  {key:<42} {t / steps * 1e3:8.2f} ms {_N[key] / steps:7.1f} calls")
    mean = sum(wall) / len(wall)
    lines.append(f"  {'(all wrapped calls)':<42} {total / steps * 1e3:8.2f} ms {calls / steps:7.1f} calls")
    lines.append(f"  {'(the rest: generated code, dispatch)':<42} {(mean - total / steps) * 1e3:8.2f} ms (mean step {mean * 1e3:.1f})")
    lines.append(f"  wrapper overhead {per_call * 1e6:.2f} us/call = {per_call * calls / steps * 1e3:.2f} ms a step")
    out = "\n".join(lines)
    if world > 1:
        from mpi4py import MPI

        outs = MPI.COMM_WORLD.gather(out, root=0)
        if rank == 0:
            print("\n".join(outs))
    else:
        print(out)


if __name__ == "__main__":
    main()
