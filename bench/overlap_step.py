"""Blocking vs overlapped vs bucketed gradient reductions in the training step, side by side.

    python bench/overlap_step.py                    # dp=2 and dp=4, ZeRO and plain DP
    python bench/overlap_step.py --ranks 2 --tp 1 2 --steps 12   # dp=2 and tp=2
    python bench/overlap_step.py --ranks 4 --tp 2   # tp=2 x dp=2
    python bench/overlap_step.py --quick            # a small model, for a smoke run
    python bench/overlap_step.py --rss --steps 3    # peak memory per rank, blocking vs overlapped

Five modes per configuration, in one process per rank, on copies of the same state, each
going first in turn (a load spike hits all): "written" (the step compiled without the
schedule, SHARDC_OVERLAP=0 at compile time), "blocking" (the scheduled program under
SHARDC_OVERLAP=0: `SHARDC_OVERLAP` is read at every start), "overlap" (=1) and the two
again with the small collectives held and bucketed ("bucketed", "overlap+bucketed":
SHARDC_BUCKET_BYTES=--bucket, also read at every start; the others run with 0). Speedup:
the median over steps of written / mode, the slowest rank's step each. After the timed
steps all states must be bitwise equal (the same MPI reductions). The disk cache is off
here (the unscheduled program must not be stored under the scheduled one's key). Each
configuration runs under its own `mpiexec -n N` (N=4 oversubscribes a 2-core machine).
The model is bench/train_step.py's (n_layer 4, n_embd 256, n_head 4, block 128, vocab
512, global batch 8).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["SHARDC_CACHE"] = "0"

import numpy as np  # noqa: E402

from shardc.training.gpt import GPTConfig, init_params  # noqa: E402

FULL = GPTConfig(n_layer=4, n_head=4, n_embd=256, block_size=128, vocab_size=512)
QUICK = GPTConfig(n_layer=2, n_head=4, n_embd=64, block_size=32, vocab_size=64)
BATCH = 8


def rank_main(cfg: GPTConfig, zero: bool, steps: int, tp: int = 1, bucket: int = 65536) -> dict | None:
    from mpi4py import MPI

    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.data import batches
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    from shardc.runtime.codegen import overlap

    world = MPI.COMM_WORLD
    n, rank = world.Get_size(), world.Get_rank()
    build = lambda: StepProgram.build(cfg, BATCH, make_grid(n, tp), ShardingPolicy(tp, zero=zero, fsdp=False), GPT_PLAN)  # noqa: E731
    overlap.SCHEDULE = True
    prog = build()
    overlap.SCHEDULE = False  # the runtime before the schedule: every collective where written
    base = build()
    overlap.SCHEDULE = True
    # mode -> (program, SHARDC_OVERLAP, SHARDC_BUCKET_BYTES): as written; scheduled,
    # blocking; overlapped; the last two with the small collectives bucketed
    b = str(bucket)
    modes = {"written": (base, "0", "0"), "blocking": (prog, "0", "0"), "overlap": (prog, "1", "0"), "bucketed": (prog, "0", b), "overlap+bucketed": (prog, "1", b)}
    states = {m: RankState(p, rank, init_params(cfg, 0)) for m, (p, _, _) in modes.items()}
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 20000).astype(np.int32)
    mbs = [next(it) for it in [batches(data, BATCH, cfg.block_size, 0)] for _ in range(steps + 1)]
    times: dict[str, list[float]] = {m: [] for m in modes}
    names = list(modes)
    for i, mb in enumerate(mbs):
        k = i % len(names)
        for m in names[k:] + names[:k]:  # each mode first in turn
            os.environ["SHARDC_OVERLAP"], os.environ["SHARDC_BUCKET_BYTES"] = modes[m][1:]
            world.Barrier()
            t0 = time.perf_counter()
            states[m].train_step([mb], 1e-3)
            world.Barrier()
            if i:  # the first step warms up (fused kernels compile)
                times[m].append(time.perf_counter() - t0)
    ref = states["written"].params
    same = all(np.array_equal(x, y) for m in names[1:] for x, y in zip(ref, states[m].params))
    same = world.allreduce(int(same), op=MPI.MIN)
    out: dict = {"ranks": n, "zero": zero, "bitwise": bool(same), "modes": names}
    slowest = {m: [world.allreduce(x, op=MPI.MAX) for x in t] for m, t in times.items()}
    for m, t in slowest.items():
        out[m] = statistics.median(t)
        out["best_" + m] = min(t)
        out["ratio_" + m] = statistics.median(w / x for w, x in zip(slowest["written"], t))
    return out if rank == 0 else None


def rank_rss(cfg: GPTConfig, zero: bool, steps: int) -> int | None:
    """Peak resident memory (VmHWM, KiB) of the largest rank over `steps` steps of the
    scheduled program in the mode SHARDC_OVERLAP says, reset after a first step."""
    from mpi4py import MPI

    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.data import batches
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    world = MPI.COMM_WORLD
    prog = StepProgram.build(cfg, BATCH, make_grid(world.Get_size(), 1), ShardingPolicy(1, zero=zero, fsdp=False), GPT_PLAN)
    state = RankState(prog, world.Get_rank(), init_params(cfg, 0))
    it = batches(np.random.default_rng(0).integers(0, cfg.vocab_size, 20000).astype(np.int32), BATCH, cfg.block_size, 0)
    state.train_step([next(it)], 1e-3)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    for _ in range(steps):
        state.train_step([next(it)], 1e-3)
    with open("/proc/self/status") as f:
        hwm = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
    peak = world.allreduce(hwm, op=MPI.MAX)
    return peak if world.Get_rank() == 0 else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="*", default=[2, 4])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rss", action="store_true", help="peak memory per rank, blocking vs overlapped (one process per mode)")
    ap.add_argument("--tp", type=int, nargs="*", default=[1], help="tensor-parallel degrees (1: data parallel)")
    ap.add_argument("--bucket", type=int, default=65536, help="SHARDC_BUCKET_BYTES of the bucketed modes")
    ap.add_argument("--rank-main", nargs=2, metavar=("ZERO", "STEPS"), help=argparse.SUPPRESS)
    ap.add_argument("--rank-rss", nargs=2, metavar=("ZERO", "STEPS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    cfg = QUICK if a.quick else FULL
    if a.rank_rss:
        out = rank_rss(cfg, a.rank_rss[0] == "1", int(a.rank_rss[1]))
        if out is not None:
            print(f"RSS {out}", flush=True)
        return 0
    if a.rank_main:
        out = rank_main(cfg, a.rank_main[0] == "1", int(a.rank_main[1]), a.tp[0], a.bucket)
        if out is not None:
            print("RESULT " + json.dumps(out), flush=True)
        return 0
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        sys.exit("bench/overlap_step.py: mpiexec is not on PATH")
    if a.rss:
        print(f"{'config':<16} {'blocking MiB':>13} {'overlapped MiB':>15}  (peak RSS of the largest rank, {a.steps} steps)")
        for n in a.ranks:
            for zero in (True, False):
                peaks = []
                for flag in ("0", "1"):
                    cmd = [mpiexec, "-n", str(n), sys.executable, os.path.abspath(__file__), "--rank-rss", "1" if zero else "0", str(a.steps)]
                    p = subprocess.run(cmd + (["--quick"] if a.quick else []), capture_output=True, text=True, env=dict(os.environ, SHARDC_OVERLAP=flag))
                    got = [ln for ln in p.stdout.splitlines() if ln.startswith("RSS ")]
                    peaks.append(f"{int(got[0][4:]) / 1024:.0f}" if got else "failed")
                print(f"{'dp=%d %s' % (n, 'zero' if zero else 'plain'):<16} {peaks[0]:>13} {peaks[1]:>15}")
        return 0
    print(f"model n_layer {cfg.n_layer} n_embd {cfg.n_embd} block {cfg.block_size} batch {BATCH}; {a.steps} steps per mode; median (best) step of the slowest rank, ms")
    print("speedup: the median over steps of (as written / mode), each step's modes run back to back")
    for n in a.ranks:
        for tp in a.tp:
            for zero in (True, False) if tp == 1 else (True,):
                cmd = [mpiexec, "-n", str(n), sys.executable, os.path.abspath(__file__), "--rank-main", "1" if zero else "0", str(a.steps), "--tp", str(tp), "--bucket", str(a.bucket)]
                if a.quick:
                    cmd.append("--quick")
                p = subprocess.run(cmd, capture_output=True, text=True)
                lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
                name = f"{'dp' if tp == 1 else 'tp'}={n if tp == 1 else tp}{' x dp=%d' % (n // tp) if 1 < tp < n else ''} {'zero' if zero else 'plain'}"
                if p.returncode or not lines:
                    print(f"{name:<16} failed: {(p.stderr or p.stdout)[-400:]}")
                    continue
                r = json.loads(lines[0][7:])
                cells = [f"{m} {r[m] * 1e3:.1f} ({r['best_' + m] * 1e3:.1f}){'' if m == 'written' else ' %.2fx' % r['ratio_' + m]}" for m in r["modes"]]
                print(f"{name:<16} " + "; ".join(cells) + f"; bitwise {'yes' if r['bitwise'] else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
