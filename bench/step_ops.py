"""The 1-rank GPT training step's work outside the contractions, op by op: each
structured op's call is recorded once during a step, then re-timed alone (best of
`--repeats`) on the fused kernels and on the numpy path (`SHARDC_KERNELS`). The best of
several runs filters a busy host's noise far better than whole steps do, so this is
the figure to compare before and after a change to the elementwise/reduction path.

    python bench/step_ops.py            # totals per step, then the costliest ops
    python bench/step_ops.py --top 40
    python bench/step_ops.py --in-step  # every call timed inside real steps, contractions too
    python bench/step_ops.py --precision bf16   # the mixed-precision step (bf16 products)

With `--in-step` nothing is re-run: each call of `--steps` real steps is timed where it
runs (cold operands and all), grouped by kind, loop sizes and maps, contractions with
their GFLOP/s, the other calls with the bytes they must move (inputs read once, results
written once) and the GB/s that makes, against the machine's copy bandwidth measured in
the same run; the sum against the step's own time says what dispatch costs.

Row kernels (`shardc/runtime/execute/kernels/rows_run.py`: a softmax, layernorm, attention
backward or cross-entropy chain in one call) are timed too: in place with `--in-step`
(kind "row chain"), re-timed alone on their recorded inputs otherwise (one total line:
their member ops never reach `run_structured`, so they are not in the table).

The ops run on recorded copies of their operands, so a time here is an op's own cost
with its inputs warm in cache: a step, whose inputs come from earlier ops, pays more.
The recording hook wraps `shardc.runtime.codegen.structured.run_structured` for this process
only (before the step is compiled, so the generated code calls the wrapper).
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import shardc.runtime.codegen.structured as structured  # noqa: E402
import shardc.runtime.execute.structured_run as structured_run  # noqa: E402
from shardc.runtime.execute.kernels import rows_run  # noqa: E402

_REAL = structured.run_structured
_RECORDED: dict[int, list] = {}
_RECORDING = [False]


def _recording_run_structured(spec, body, ins, outs, aux=()):
    if _RECORDING[0] and spec.kind != "contraction":
        entry = _RECORDED.get(id(spec))
        if entry is None:
            copy = [np.array(x) if isinstance(x, np.ndarray) else x for x in ins]
            _RECORDED[id(spec)] = [spec, body, copy, [np.array(x) for x in outs], aux, 1]
        else:
            entry[5] += 1
    return _REAL(spec, body, ins, outs, aux)


# the compile cache names runtime functions by module and name: keep those
_recording_run_structured.__module__ = _REAL.__module__
_recording_run_structured.__name__ = _recording_run_structured.__qualname__ = _REAL.__name__


_TIMED: dict[tuple, list] = {}


def _timing_run_structured(spec, body, ins, outs, aux=()):
    if not _RECORDING[0]:
        return _REAL(spec, body, ins, outs, aux)
    t = time.perf_counter()
    r = _REAL(spec, body, ins, outs, aux)
    dt = time.perf_counter() - t
    sizes = spec.sizes([*ins, *outs]) if spec.onehot is None else ()
    kind = spec.kind + (" (fused kernel)" if spec.fused is not None else "") + (" (one-hot)" if spec.onehot is not None else "")
    key = (kind, tuple(sizes), tuple(spec.in_maps), spec.out_map if spec.kind == "contraction" else ())
    flops = 0
    if spec.kind == "contraction" and spec.onehot is None and spec.plan is not None:
        flops = 2 * math.prod(s for d, s in enumerate(sizes) if d not in spec.plan.fixed)
    entry = _TIMED.setdefault(key, [0.0, 0, flops, 0, ""])
    entry[0] += dt
    entry[1] += 1
    entry[3] += _moved(ins, outs, r, spec)
    if not entry[4]:
        entry[4] = _operands(ins, outs)
    return r


def _moved(ins, outs, results, spec) -> int:
    """Bytes a call must move at least: every array input read once (a broadcast one as
    its own size), every result written once, an init read where it is not known zero."""
    n = sum(x.nbytes if 0 not in x.strides else getattr(x.base, "nbytes", x.nbytes) for x in ins if isinstance(x, np.ndarray))
    n += sum(x.nbytes for x in results if isinstance(x, np.ndarray))
    if spec.kind in ("contraction", "reduction") and not spec.zero_init:
        n += sum(x.nbytes for x in outs if isinstance(x, np.ndarray) and x.strides.count(0) == 0)
    return n


def _operands(ins, outs) -> str:
    """Input shapes (a `*` for a non-contiguous view, `~` for a broadcast), for naming a row."""
    def one(x):
        if not isinstance(x, np.ndarray):
            return "s"
        mark = "~" if 0 in x.strides and x.size > 1 else "" if x.flags.c_contiguous else "*"
        return "x".join(map(str, x.shape)) + mark
    return " ".join(one(x) for x in ins)


_REAL_ROWS = rows_run.RowKernel.__call__
_ROW_CALLS: dict[int, list] = {}


def _recording_rows(self, args):
    """A row kernel's call (`kernels/rows_run.py`: a whole softmax, layernorm, ... chain):
    timed in place with --in-step, recorded for re-timing otherwise."""
    if not _RECORDING[0]:
        return _REAL_ROWS(self, args)
    t = time.perf_counter()
    r = _REAL_ROWS(self, args)
    dt = time.perf_counter() - t
    if r is None:
        return r
    key = ("row chain (row kernel)", self.sizes, (len(self.params), len(self.outputs), hash(self.source)), ())
    entry = _TIMED.setdefault(key, [0.0, 0, 0, 0, ""])
    entry[0] += dt
    entry[1] += 1
    entry[3] += sum(a.nbytes for a in args if isinstance(a, np.ndarray)) + sum(a.nbytes for a in r)
    if not entry[4]:
        entry[4] = _operands(args, ())
    if id(self) not in _ROW_CALLS:
        _ROW_CALLS[id(self)] = [self, [np.array(a) if isinstance(a, np.ndarray) else a for a in args], 0]
    _ROW_CALLS[id(self)][2] += 1
    return r


rows_run.RowKernel.__call__ = _recording_rows  # type: ignore[method-assign]


_timing_run_structured.__module__ = _REAL.__module__
_timing_run_structured.__name__ = _timing_run_structured.__qualname__ = _REAL.__name__


def in_step(state, it, lr: float, steps: int, top: int) -> None:
    """Time every structured call of `steps` steps in place; print kinds and the costliest."""
    plain = []
    for _ in range(steps):
        t = time.perf_counter()
        state.train_step([next(it)], lr)
        plain.append(time.perf_counter() - t)
    _RECORDING[0] = True
    timed = []
    for _ in range(steps):
        t = time.perf_counter()
        state.train_step([next(it)], lr)
        timed.append(time.perf_counter() - t)
    _RECORDING[0] = False
    kinds: collections.Counter[str] = collections.Counter()
    for (kind, *_), (t, *_) in _TIMED.items():
        kinds[kind] += t / steps
    total = sum(kinds.values())
    print(f"step {statistics.median(plain) * 1e3:.1f} ms untimed, {statistics.median(timed) * 1e3:.1f} ms timed (mean {statistics.mean(timed) * 1e3:.1f}); structured calls {total * 1e3:.1f} ms a step")
    print("  by kind: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in kinds.most_common()))
    rows = sorted(_TIMED.items(), key=lambda kv: -kv[1][0])
    print(f"  (memory bandwidth now: {bandwidth() / 1e9:.1f} GB/s, a large np.copyto: bytes read + written)")
    for (kind, sizes, in_maps, out_map), (t, n, flops, moved, shapes) in rows[:top]:
        rate = f"{flops * n / t / 1e9:6.1f} GFLOP/s" if flops else f"{moved / t / 1e9:6.1f} GB/s   "
        maps = f"{list(in_maps)} -> {out_map}" if kind == "contraction" else f"{moved / n / 2**20:5.1f} MiB/call  ins {shapes}"
        print(f"  {t / steps * 1e3:7.2f} ms x{n // steps:<3} {rate} {kind:<26} {str(sizes):<24} {maps}")
    other = sum(t for (kind, *_), (t, *_) in _TIMED.items() if not kind.startswith("contraction"))
    print(f"  outside contractions {other / steps * 1e3:.1f} ms a step")


def bandwidth(mib: int = 256) -> float:
    """Bytes per second read + written by np.copyto of a `mib` MiB float32 array (best of 5)."""
    src = np.ones(mib << 18, np.float32)
    dst = np.empty_like(src)
    return 2 * src.nbytes / best(lambda: np.copyto(dst, src), 5)


def best(fn, repeats: int) -> float:
    fn()
    t_best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        t_best = min(t_best, time.perf_counter() - t)
    return t_best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--top", type=int, default=20, help="ops listed, costliest first")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs per op and path (the best counts)")
    ap.add_argument("--in-step", action="store_true", help="time every call (contractions too) inside real steps instead")
    ap.add_argument("--steps", type=int, default=5, help="with --in-step: steps timed")
    ap.add_argument("--precision", choices=("f32", "bf16"), default="f32", help="the step's --precision (bf16: bf16 products and casts, float32 masters)")
    args = ap.parse_args()
    _TIMED.clear()
    structured.run_structured = _timing_run_structured if args.in_step else _recording_run_structured
    structured_run.run_structured = structured.run_structured  # what grouped members fall back to (horizontal_run)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_step import BATCH, FULL, LR, _data

    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    prog = StepProgram.build(FULL, BATCH, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN, precision=args.precision)
    state = RankState(prog, 0, init_params(FULL, 0))
    it = _data(FULL)
    for _ in range(2):  # compile (or load) the kernels
        state.train_step([next(it)], LR)
    if args.in_step:
        in_step(state, it, LR, args.steps, args.top)
        return
    _RECORDING[0] = True
    state.train_step([next(it)], LR)
    _RECORDING[0] = False
    rows = []
    mode = os.environ.get("SHARDC_KERNELS")
    try:
        for spec, body, ins, outs, aux, n in _RECORDED.values():
            run = lambda: _REAL(spec, body, ins, outs, aux)  # noqa: E731
            os.environ["SHARDC_KERNELS"] = "auto"
            t_fused = best(run, args.repeats)
            os.environ["SHARDC_KERNELS"] = "numpy"
            t_numpy = best(run, args.repeats)
            sizes = spec.sizes([*ins, *outs]) if spec.onehot is None else ()
            rows.append((t_fused * n, t_numpy * n, n, spec, sizes))
    finally:
        if mode is None:
            os.environ.pop("SHARDC_KERNELS", None)
        else:
            os.environ["SHARDC_KERNELS"] = mode
    t_rows = 0.0
    for kernel, args_, n in _ROW_CALLS.values():
        t_rows += best(lambda: _REAL_ROWS(kernel, args_), args.repeats) * n
    if _ROW_CALLS:
        print(f"row kernels (softmax, layernorm, ... chains; their members are not in the table): {t_rows * 1e3:.1f} ms a step in {sum(n for *_, n in _ROW_CALLS.values())} calls")
    rows.sort(key=lambda r: -r[0])
    fused_total, numpy_total = sum(r[0] for r in rows), sum(r[1] for r in rows)
    print(f"per step, outside the contractions ({sum(r[2] for r in rows)} calls): fused kernels {fused_total * 1e3:.1f} ms, numpy path {numpy_total * 1e3:.1f} ms")
    kinds: collections.Counter[str] = collections.Counter()
    for t, _, _, spec, _ in rows:
        kinds[spec.kind + (" (fused kernel)" if spec.fused is not None else "")] += t
    print("  by kind (fused kernels): " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in kinds.most_common()))
    for t_fused, t_numpy, n, spec, sizes in rows[: args.top]:
        el = max(int(np.prod(sizes)) if sizes else 1, 1)
        print(f"  {t_fused * 1e3:6.2f} ms (numpy {t_numpy * 1e3:6.2f}) x{n} {spec.kind:<11} {str(sizes):<22} {t_fused / n / el * 1e9:5.2f} ns/element  {spec.name}")


if __name__ == "__main__":
    main()
