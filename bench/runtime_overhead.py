"""Per-op overhead of compiled functions, and the GPT training step's fixed cost.

    python bench/runtime_overhead.py            # 1,000 tiny scalar and tensor ops: us/op (target < 10)
    python bench/runtime_overhead.py --step     # the GPT step at a tiny size (n_embd 32, block 8, batch 1)
    python bench/runtime_overhead.py --step --ranks 2 --tp 1   # the same under mpiexec -n 2 (dp=2; --tp 2: tp=2)

`--step` runs the bench's GPT (n_layer 4) at a size where the kernels cost next to
nothing, with every size threshold at 0 (`blas.MIN_FLOPS`, `fused_run.MIN_ELEMENTS`,
`horizontal_run.MIN_GROUP_ELEMENTS`) so each call takes the code path it takes at the
real size: the step's time is then its fixed cost, what stays when the per-rank batch
halves. It prints the step (median and best of `--steps`), then each structured call
of one step replayed alone by kind (best of `--repeats`, rank 0): us per call and ms
per step.
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

N_OPS = 1000


def build() -> str:
    lines = [
        "func.func @f(%i: i64, %x: f64, %t: tensor<4xf32>) -> (i64, f64, tensor<4xf32>) {",
        "  %c3 = arith.constant 3 : i64",
        "  %h = arith.constant 0.5 : f64",
    ]
    i, x, t = "%i", "%x", "%t"
    for k in range(N_OPS // 4):
        lines.append(f"  %i{k} = arith.addi {i}, %c3 : i64")
        lines.append(f"  %j{k} = arith.muli %i{k}, %c3 : i64")
        lines.append(f"  %x{k} = arith.mulf {x}, %h : f64")
        lines.append(f"  %t{k} = arith.addf {t}, {t} : tensor<4xf32>")
        i, x, t = f"%j{k}", f"%x{k}", f"%t{k}"
    lines.append(f"  return {i}, {x}, {t} : i64, f64, tensor<4xf32>")
    lines.append("}")
    return "\n".join(lines)


def per_op() -> None:
    from shardc.runtime import compile_text

    cm = compile_text(build())
    fn = cm["f"]
    args = (1, np.float64(1.0), np.ones(4, np.float32))
    np.seterr(all="ignore")  # the tensor chain overflows to inf: harmless here
    fn(*args)
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(20):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / 20)
    per = best / N_OPS * 1e6
    print(f"runtime overhead: {per:.2f} us/op over {N_OPS} ops (target < 10)")


def step(args: argparse.Namespace) -> None:
    import shardc.runtime.codegen.structured as structured
    import shardc.runtime.execute.structured_run as sr
    from shardc.runtime.execute import horizontal_run
    from shardc.runtime.execute.kernels import blas, fused_run
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    blas.MIN_FLOPS = blas.MIN_MATRIX_FLOPS = 0
    fused_run.MIN_ELEMENTS = 0
    horizontal_run.MIN_GROUP_ELEMENTS = 0
    world, rank, barrier = 1, 0, (lambda: None)
    if args.ranks > 1:
        from mpi4py import MPI

        world, rank, barrier = MPI.COMM_WORLD.Get_size(), MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Barrier
    real = sr.run_structured
    recorded: list[tuple] = []
    recording = [False]

    def recording_run_structured(spec, body, ins, outs, aux=()):
        if recording[0]:
            recorded.append((spec, body, tuple(ins), tuple(outs), tuple(aux)))
        return real(spec, body, ins, outs, aux)

    # before the step is compiled, so the generated code calls it; the compile cache
    # names runtime functions by module and name: keep those
    recording_run_structured.__module__, recording_run_structured.__name__ = real.__module__, real.__name__
    recording_run_structured.__qualname__ = real.__qualname__
    structured.run_structured = sr.run_structured = recording_run_structured  # type: ignore[assignment]
    cfg = GPTConfig(n_layer=4, n_head=4, n_embd=args.n_embd, block_size=args.block, vocab_size=64)
    batch = args.batch * (world // args.tp)
    prog = StepProgram.build(cfg, batch, make_grid(world, args.tp), ShardingPolicy(args.tp, zero=True, fsdp=False), GPT_PLAN)
    state = RankState(prog, rank, init_params(cfg, 0))
    rng = np.random.default_rng(0)
    x = rng.integers(0, 64, (batch, args.block)).astype(np.int32)
    y = rng.integers(0, 64, (batch, args.block)).astype(np.int32)
    for _ in range(3):  # warm: the fused kernels compile (or load) here
        state.train_step([(x, y)], 1e-3)
    recording[0] = True
    state.train_step([(x, y)], 1e-3)
    recording[0] = False
    times = []
    for _ in range(args.steps):
        barrier()
        t = time.perf_counter()
        state.train_step([(x, y)], 1e-3)
        times.append(time.perf_counter() - t)
    barrier()
    if rank:
        return
    grid = "1 rank" if world == 1 else f"{world} ranks, tp={args.tp}"
    print(f"GPT step fixed cost ({grid}; n_embd {args.n_embd}, block {args.block}, batch {args.batch}/rank, thresholds 0):")
    print(f"  step median {statistics.median(times) * 1e3:.2f} ms, best {min(times) * 1e3:.2f} ms ({args.steps} steps)")
    kinds: dict[str, list[tuple]] = collections.defaultdict(list)
    for r in recorded:
        s = r[0]
        kinds[s.kind + (" (fused kernel)" if s.fused is not None else "") + (" (one-hot)" if s.onehot is not None else "")].append(r)
    np.seterr(all="ignore")
    best: dict[str, float] = {}
    for _ in range(args.repeats):
        for k, calls in kinds.items():
            t = time.perf_counter()
            for spec, body, ins, outs, aux in calls:
                real(spec, body, ins, outs, aux)
            best[k] = min(best.get(k, float("inf")), time.perf_counter() - t)
    total = 0.0
    for k, calls in sorted(kinds.items(), key=lambda kv: -best[kv[0]]):
        total += best[k]
        print(f"  {k:34s} {len(calls):4d} calls  {best[k] / len(calls) * 1e6:7.1f} us/call  {best[k] * 1e3:6.2f} ms/step")
    print(f"  structured calls replayed: {total * 1e3:.2f} ms/step over {len(recorded)} calls ({total / len(recorded) * 1e6:.1f} us/call)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--step", action="store_true", help="the GPT training step's fixed cost instead of the per-op chain")
    ap.add_argument("--ranks", type=int, default=1, help="with --step: run under mpiexec -n RANKS")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--n-embd", type=int, default=32)
    ap.add_argument("--block", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1, help="sequences per data-parallel rank")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    if not args.step:
        per_op()
        return
    if args.ranks < 1 or args.tp < 1 or args.ranks % args.tp:
        sys.exit("runtime_overhead.py: --tp must divide --ranks")
    if args.ranks > 1:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from _paired import under_mpiexec

        under_mpiexec(__file__, args.ranks)
    step(args)


if __name__ == "__main__":
    main()
