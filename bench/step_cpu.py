"""Where the 1-rank GPT training step's CPU time goes, by the calling thread's CPU clock
(`time.thread_time`), not the wall clock: on a shared machine a wall-clock time per call
also counts the moments the process waited for a core (`bench/step_ops.py --in-step`
under load showed GELU's forward at 12 ms a call; its CPU time is 1.2-1.6 ms).

Every `run_structured` call (contractions, fused elementwise kernels, reductions) and
every row-chain kernel call (`kernels/rows_run.py`) of `--steps` real steps is timed in
place; one more step then copies each call's operands (after the timed steps: the copies
grow the heap, and steps after them fault the new pages in, 12 ms of CPU for a GELU call
instead of 1.4), and each call is re-run alone on them (best of `--repeats`, operands
warm in cache), so "in step" against "warm" says what the step's cold operands cost
each op. Contractions carry their GFLOP/s. "rest" is the step's CPU
time outside those calls (the generated code, allocation, the AdamW call's dispatch).

    python bench/step_cpu.py [--steps 5] [--top 30]
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import shardc.runtime.codegen.structured as structured  # noqa: E402
import shardc.runtime.execute.structured_run as structured_run  # noqa: E402
from shardc.runtime.execute.kernels import rows_run  # noqa: E402

_REAL = structured.run_structured
_REAL_ROWS = rows_run.RowKernel.__call__
_ON = [False]
_RECORD = [False]  # the one step that copies operands for the warm re-runs (after the timed ones:
# its copies grow the heap, and the steps after it would fault the new pages in)
_DEPTH = [0]  # a grouped call's members (horizontal_run) are counted in the group's time
_CALLS: dict[int, list] = {}  # id(spec or kernel) -> [kind, key, flops, cpu seconds, calls, replay]


def _copy(x: object) -> object:
    """A private copy of an operand; a broadcast view (a bias as a contraction's init) kept
    as it is: a copy would materialize it and send the op down another path."""
    if not isinstance(x, np.ndarray) or (0 in x.strides and x.size > 1):
        return x
    return np.array(x)


def _record(ident: int, kind: str, key: tuple, flops: int, dt: float, replay) -> None:  # type: ignore[no-untyped-def]
    entry = _CALLS.get(ident)
    if entry is None:
        entry = _CALLS[ident] = [kind, key, flops, 0.0, 0, None]
    if _RECORD[0]:
        if entry[5] is None:
            entry[5] = replay()
        return
    entry[3] += dt
    entry[4] += 1


def _timed_structured(spec, body, ins, outs, aux=()):  # type: ignore[no-untyped-def]
    if not _ON[0] or _DEPTH[0]:
        return _REAL(spec, body, ins, outs, aux)
    _DEPTH[0] += 1
    t = time.thread_time()
    try:
        return _REAL(spec, body, ins, outs, aux)
    finally:
        dt = time.thread_time() - t
        _DEPTH[0] -= 1
        sizes = tuple(spec.sizes([*ins, *outs])) if spec.onehot is None else ()
        kind = spec.kind + (" (fused kernel)" if spec.fused is not None else "") + (" (one-hot)" if spec.onehot is not None else "")
        flops = 0
        if spec.kind == "contraction" and spec.onehot is None and spec.plan is not None:
            flops = 2 * math.prod(s for d, s in enumerate(sizes) if d not in spec.plan.fixed)
        key = (sizes, tuple(spec.in_maps))

        def replay():  # type: ignore[no-untyped-def]
            args = ([_copy(x) for x in ins], [_copy(x) for x in outs], aux)
            return lambda: _REAL(spec, body, *args)

        _record(id(spec), kind, key, flops, dt, replay)


def _timed_rows(self, args):  # type: ignore[no-untyped-def]
    if not _ON[0] or _DEPTH[0]:
        return _REAL_ROWS(self, args)
    _DEPTH[0] += 1
    t = time.thread_time()
    try:
        return _REAL_ROWS(self, args)
    finally:
        dt = time.thread_time() - t
        _DEPTH[0] -= 1
        key = (tuple(self.sizes), tuple(np.shape(a) for a in args))

        def replay():  # type: ignore[no-untyped-def]
            copied = [_copy(a) for a in args]
            return lambda: _REAL_ROWS(self, copied)

        _record(id(self), "row chain (row kernel)", key, 0, dt, replay)


for fn in (_timed_structured,):
    fn.__module__ = _REAL.__module__  # the compile cache names runtime functions by module and name
    fn.__name__ = fn.__qualname__ = _REAL.__name__


def _best(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    fn()
    best = math.inf
    for _ in range(repeats):
        t = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5, help="steps timed")
    ap.add_argument("--repeats", type=int, default=5, help="warm re-runs per call (the best counts)")
    ap.add_argument("--top", type=int, default=30, help="op groups listed, costliest first")
    args = ap.parse_args()
    structured.run_structured = _timed_structured
    structured_run.run_structured = _timed_structured  # what grouped members fall back to
    rows_run.RowKernel.__call__ = _timed_rows  # type: ignore[method-assign]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_step import BATCH, FULL, LR, _data

    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    prog = StepProgram.build(FULL, BATCH, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN)
    state = RankState(prog, 0, init_params(FULL, 0))
    it = _data(FULL)
    for _ in range(3):  # compile (or load) the kernels; record the operands once
        state.train_step([next(it)], LR)
    _ON[0] = True
    t0 = time.thread_time()
    for _ in range(args.steps):
        state.train_step([next(it)], LR)
    step = (time.thread_time() - t0) / args.steps
    _RECORD[0] = True
    state.train_step([next(it)], LR)
    _ON[0] = _RECORD[0] = False
    n = args.steps
    kinds: collections.Counter[str] = collections.Counter()
    warm_kinds: collections.Counter[str] = collections.Counter()
    groups: dict[tuple, list] = {}
    for kind, key, flops, cpu, calls, replay in _CALLS.values():
        warm = _best(replay, args.repeats) * calls / n if replay is not None else math.nan
        kinds[kind] += cpu / n
        warm_kinds[kind] += warm
        g = groups.setdefault((kind, *key), [0.0, 0.0, 0, flops])
        g[0] += cpu / n
        g[1] += warm
        g[2] += calls // n
    inside = sum(kinds.values())
    print(f"step {step * 1e3:.1f} ms CPU (calling thread); in the calls {inside * 1e3:.1f} ms, rest {(step - inside) * 1e3:.1f} ms")
    print("  by kind, in step (warm re-run): " + ", ".join(f"{k} {v * 1e3:.1f} ({warm_kinds[k] * 1e3:.1f})" for k, v in kinds.most_common()))
    for (kind, sizes, maps), (cpu, warm, calls, flops) in sorted(groups.items(), key=lambda kv: -kv[1][0])[: args.top]:
        rate = f"{flops * calls / cpu / 1e9:6.1f} GFLOP/s" if flops and cpu else " " * 14
        print(f"  {cpu * 1e3:7.2f} ms (warm {warm * 1e3:6.2f}) x{calls:<3} {rate} {kind:<26} {str(sizes):<24} {maps}")


if __name__ == "__main__":
    main()
