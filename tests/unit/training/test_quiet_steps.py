"""Simulated ranks wait while rank 0 stops `--auto`'s memory trace
(`trainer.simulated_step_hooks`): `tracemalloc.stop()` racing another thread's numpy
allocations crashes CPython 3.11 (python/cpython#128679), which made
`shardc-train --simulate 2 --auto` die of SIGSEGV now and then."""

import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest

from shardc.runtime.execute.comm import run_simulated
from shardc.training.auto_plan import Measurement
from shardc.training.gpt import GPTConfig
from shardc.training.trainer import StepLog, TrainingConfig, simulated_step_hooks, train_simulated


class _Recorder:
    """A rank-0 step hook that sees how far rank 1 has got while it runs."""

    def __init__(self, quiet_steps: int, started: list[int]):
        self.quiet_steps = quiet_steps
        self.started = started
        self.seen: list[tuple[int, int, int]] = []  # (step, rank 1's step at entry, at exit)

    def __call__(self, entry: StepLog) -> None:
        before = self.started[1]
        deadline = time.monotonic() + 1.0  # rank 1, if free, starts its next step meanwhile
        while self.started[1] == before and before < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        self.seen.append((entry.step, before, self.started[1]))


def _loop(hooks, started: list[int], steps: int):
    def body(rank: int) -> None:
        for step in range(1, steps + 1):
            started[rank] = step
            time.sleep(0.001)
            if hooks[rank] is not None:
                hooks[rank](StepLog(step, 0.0, 0.0, 0.0, 0.0))

    return body


def test_other_ranks_wait_through_the_quiet_steps_only():
    started = [0, 0]
    rec = _Recorder(2, started)
    hooks = simulated_step_hooks(rec, 2)
    assert hooks[1] is not None  # rank 1 takes part in the barriers
    run_simulated(2, _loop(hooks, started, 4), per_rank_args=[(0,), (1,)])
    assert [s for s, _, _ in rec.seen] == [1, 2, 3, 4]
    for step, before, after in rec.seen[:2]:
        assert before == after == step, rec.seen  # rank 1 held at the barrier the whole time
    # past the quiet steps nothing holds rank 1: it has started step 4 by the end of rank
    # 0's third hook (held at a barrier there, it would still be at step 3)
    assert rec.seen[2][0] == 3 and rec.seen[2][2] == 4, rec.seen
    assert rec.seen[-1][1] == 4


def test_without_quiet_steps_only_rank_0_gets_a_hook():
    def on_step(entry: StepLog) -> None:
        pass

    assert simulated_step_hooks(on_step, 3) == [on_step, None, None]
    assert simulated_step_hooks(None, 2) == [None, None]
    on_step.quiet_steps = 2  # type: ignore[attr-defined]
    assert simulated_step_hooks(on_step, 1) == [on_step]


def _rank_stacks() -> dict[str, list[str]]:
    frames = sys._current_frames()
    out = {}
    for t in threading.enumerate():
        if t.name.startswith("shardc-rank-") and t.ident != threading.get_ident() and t.ident in frames:
            names, f = [], frames[t.ident]
            while f is not None:
                names.append(f.f_code.co_qualname)
                f = f.f_back
            out[t.name] = names
    return out


def test_trace_stops_while_the_other_ranks_wait(monkeypatch):
    """The real path: `--auto`'s Measurement on a 2-rank simulated run; when it stops
    tracemalloc, rank 1 is parked in the quiet-step barrier, not in a step."""
    model = GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32)
    cfg = TrainingConfig(model, per_device_batch=2, steps=3, lr=1e-2, warmup_steps=1).shard(2, False, False)
    data = np.random.default_rng(0).integers(0, model.vocab_size, 2000).astype(np.int32)
    stops: list[dict[str, list[str]]] = []
    real_stop = tracemalloc.stop

    def stop() -> None:
        if threading.current_thread().name.startswith("shardc-rank-"):
            stops.append(_rank_stacks())
        real_stop()

    monkeypatch.setattr(tracemalloc, "stop", stop)
    measure = Measurement()
    measure.compiled(trace=True)
    try:
        steps: list[int] = []
        train_simulated(cfg, data, 2, on_step=measure.watch(lambda e: steps.append(e.step)))
    finally:
        measure.stop()
    assert steps == [1, 2, 3]
    assert measure.traced_bytes() is not None and not tracemalloc.is_tracing()
    assert len(stops) == 1, "the trace ends on a rank's thread, after the second step"
    (others,) = stops
    assert list(others) == ["shardc-rank-1"]
    assert "_QuietSteps.__call__" in others["shardc-rank-1"], others


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
