"""The overlap schedule (shardc.runtime.codegen.overlap) on simulated ranks: where starts and
waits go, that results are bitwise the blocking ones, nonblocking Comm calls, the cap,
and a failing rank ending a wait.

Simulated nonblocking collectives complete at their wait, so a wait placed after an
op that reads the buffer would show as a wrong result here, not only as a race."""

import re

import numpy as np
import pytest

from shardc.runtime.codegen import overlap
from shardc.runtime.execute.comm import RankFailed, SimulatedComm, SimulatedWorld, run_simulated, use_comm
from shardc.runtime.codegen.compile import compile_text


@pytest.fixture(autouse=True)
def _scheduled(monkeypatch):
    """These tests are about the scheduled program: force scheduling at code generation
    (by default it follows `SHARDC_OVERLAP=1` at compile time)."""
    monkeypatch.setattr(overlap, "SCHEDULE", True)

N = 8
T = f"tensor<{N}x{N}xf32>"
M = f"memref<{N}x{N}xf32>"
MATMUL = "linalg.matmul ins({a}, {b} : {t}, {t}) outs({o} : {t}) -> {t}"
ZERO = f"%c0 = arith.constant 0.0 : f32\n    %z = linalg.fill ins(%c0 : f32) outs(%e : {T}) -> {T}"

# A gradient final early, reduced late as the lowering writes it (alloc, copy, in-place
# allreduce, to_tensor) and accumulated; unrelated contractions in between.
LOWERED = f"""
module {{
  func.func @step(%x: {T}, %w: {T}, %acc: {T}) -> ({T}, {T}) {{
    %comm = mpi.comm_world : !mpi.comm
    %e = tensor.empty() : {T}
    {ZERO}
    %g = {MATMUL.format(a="%x", b="%w", o="%z", t=T)}
    %y = {MATMUL.format(a="%w", b="%x", o="%z", t=T)}
    %y2 = {MATMUL.format(a="%y", b="%x", o="%z", t=T)}
    %gb = bufferization.to_buffer %g read_only : {T} to {M}
    %buf = memref.alloc() : {M}
    linalg.copy ins(%gb : {M}) outs(%buf : {M})
    mpi.allreduce(%buf, %buf, MPI_SUM, %comm) : {M}, {M}
    %r = bufferization.to_tensor %buf restrict : {M} to {T}
    %sum = linalg.add ins(%acc, %r : {T}, {T}) outs(%e : {T}) -> {T}
    return %sum, %y2 : {T}, {T}
  }}
}}
"""

# A view of the receive buffer made before the collective and read right after it.
ALIASED = f"""
module {{
  func.func @step(%x: {T}, %w: {T}) -> ({T}, memref<2x{N}xf32>) {{
    %comm = mpi.comm_world : !mpi.comm
    %e = tensor.empty() : {T}
    {ZERO}
    %gb = bufferization.to_buffer %x read_only : {T} to {M}
    %buf = memref.alloc() : {M}
    %top = memref.subview %buf[0, 0] [2, {N}] [1, 1] : {M} to memref<2x{N}xf32, strided<[{N}, 1]>>
    linalg.copy ins(%gb : {M}) outs(%buf : {M})
    mpi.allreduce(%buf, %buf, MPI_SUM, %comm) : {M}, {M}
    %y = {MATMUL.format(a="%w", b="%w", o="%z", t=T)}
    %out = memref.alloc() : memref<2x{N}xf32>
    memref.copy %top, %out : memref<2x{N}xf32, strided<[{N}, 1]>> to memref<2x{N}xf32>
    return %y, %out : {T}, memref<2x{N}xf32>
  }}
}}
"""

# The same at the shard level: tensors, the result defined by the wait.
SHARDED = f"""
module {{
  shard.grid @grid(shape = 4)
  func.func @step(%x: {T}, %w: {T}) -> ({T}, {T}) {{
    %e = tensor.empty() : {T}
    {ZERO}
    %g = {MATMUL.format(a="%x", b="%w", o="%z", t=T)}
    %y = {MATMUL.format(a="%w", b="%x", o="%z", t=T)}
    %y2 = {MATMUL.format(a="%y", b="%x", o="%z", t=T)}
    %red = shard.all_reduce %g on @grid grid_axes = [0] : {T} -> {T}
    %sum = linalg.add ins(%red, %y2 : {T}, {T}) outs(%e : {T}) -> {T}
    return %sum, %y2 : {T}, {T}
  }}
}}
"""


def _inputs(rank: int, k: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(rank)
    return [(rng.standard_normal((N, N)) * np.exp2(rng.integers(-8, 8, (N, N)))).astype(np.float32) for _ in range(k)]


def _run(text: str, ranks: int, flag: str, monkeypatch, k: int = 3) -> list:
    monkeypatch.setenv("SHARDC_OVERLAP", flag)
    cm = compile_text(text)
    return run_simulated(ranks, lambda *a: cm.call("step", *a), per_rank_args=[_inputs(r, k) for r in range(ranks)]), cm.source


def _lines(source: str) -> list[str]:
    return [ln.strip() for ln in source.splitlines()]


def _index(lines: list[str], pattern: str) -> int:
    return next(i for i, ln in enumerate(lines) if re.search(pattern, ln))


@pytest.mark.parametrize("ranks", [2, 4])
def test_reduction_hoisted_and_waited_before_its_user(ranks, monkeypatch):
    (blocking, source), (overlapped, _) = _run(LOWERED, ranks, "0", monkeypatch), _run(LOWERED, ranks, "1", monkeypatch)
    lines = _lines(source)
    start, wait = _index(lines, r"start_allreduce"), _index(lines, r"overlap_wait")
    assert start < _index(lines, r"progress") < wait  # started early, tested between
    # both unrelated contractions run while the reduction is in flight
    assert sum(1 for ln in lines[start:wait] if "_run_structured" in ln or "contract" in ln or "matmul" in ln) >= 2
    # the reference: x @ w summed over ranks, plus acc; y2 untouched
    xs = [_inputs(r) for r in range(ranks)]
    g = sum(x @ w for x, w, _ in xs)
    for r in range(ranks):
        for a, b in zip(blocking[r], overlapped[r]):
            assert np.array_equal(a, b)
        np.testing.assert_allclose(overlapped[r][0], xs[r][2] + g, rtol=1e-5, atol=1e-3)


def test_view_made_before_the_collective_waits(monkeypatch):
    (blocking, source), (overlapped, _) = _run(ALIASED, 2, "0", monkeypatch, k=2), _run(ALIASED, 2, "1", monkeypatch, k=2)
    lines = _lines(source)
    assert _index(lines, "start_allreduce") < _index(lines, "overlap_wait") < _index(lines, r"\[\.\.\.\] = |copyto|memref_copy|copy\(")
    top = sum(_inputs(r, 2)[0] for r in range(2))[:2]
    for r in range(2):
        assert np.array_equal(blocking[r][1], overlapped[r][1])
        assert np.array_equal(overlapped[r][1], top)


def test_shard_level_all_reduce(monkeypatch):
    (blocking, source), (overlapped, _) = _run(SHARDED, 4, "0", monkeypatch, k=2), _run(SHARDED, 4, "1", monkeypatch, k=2)
    lines = _lines(source)
    start, wait = _index(lines, "start_all_reduce"), _index(lines, "overlap_wait")
    assert start < wait and any("_run_structured" in ln for ln in lines[start:wait])
    for r in range(4):
        for a, b in zip(blocking[r], overlapped[r]):
            assert np.array_equal(a, b)


def test_no_work_between_stays_blocking():
    text = f"""
    module {{
      shard.grid @grid(shape = 2)
      func.func @step(%x: {T}) -> {T} {{
        %e = tensor.empty() : {T}
        {ZERO}
        %red = shard.all_reduce %x on @grid grid_axes = [0] : {T} -> {T}
        %sum = linalg.add ins(%red, %x : {T}, {T}) outs(%e : {T}) -> {T}
        return %sum : {T}
      }}
    }}"""
    source = compile_text(text).source
    assert "start_" not in source and "all_reduce" in source


def test_no_collective_moves_above_an_assert_or_other_communication():
    text = f"""
    module {{
      func.func @step(%x: {T}, %w: {T}, %ok: i1) -> ({T}, {T}) {{
        %comm = mpi.comm_world : !mpi.comm
        %e = tensor.empty() : {T}
        {ZERO}
        %gb = bufferization.to_buffer %x read_only : {T} to {M}
        %y = {MATMUL.format(a="%w", b="%w", o="%z", t=T)}
        cf.assert %ok, "checked first"
        %buf = memref.alloc() : {M}
        mpi.allreduce(%gb, %buf, MPI_SUM, %comm) : {M}, {M}
        %y2 = {MATMUL.format(a="%y", b="%w", o="%z", t=T)}
        %r = bufferization.to_tensor %buf restrict : {M} to {T}
        return %r, %y2 : {T}, {T}
      }}
    }}"""
    lines = _lines(compile_text(text).source)
    assert _index(lines, "assert_failed") < _index(lines, "start_allreduce") < _index(lines, "overlap_wait")


@pytest.mark.slow
def test_training_step_bitwise_on_simulated_ranks(monkeypatch):
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.data import batches
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    monkeypatch.setenv("SHARDC_CACHE", "0")
    cfg = GPTConfig(n_layer=1, n_head=4, n_embd=16, block_size=8, vocab_size=32)
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 2000).astype(np.int32)
    for world, tp, zero in ((2, 1, True), (4, 2, True), (4, 1, False)):
        prog = StepProgram.build(cfg, 8, make_grid(world, tp), ShardingPolicy(tp, zero=zero, fsdp=False), GPT_PLAN)
        assert "start_" in prog.compiled.source

        def body(r: int):
            st = RankState(prog, r, init_params(cfg, 0))
            it = batches(data, 8, cfg.block_size, 0)
            return [st.train_step([next(it)], 1e-2) for _ in range(2)], st.params

        got = {}
        for flag in ("0", "1"):
            monkeypatch.setenv("SHARDC_OVERLAP", flag)
            got[flag] = run_simulated(world, body, per_rank_args=[(r,) for r in range(world)])
        for (la, pa), (lb, pb) in zip(got["0"], got["1"]):
            assert la == lb
            assert all(np.array_equal(a, b) for a, b in zip(pa, pb))


def test_simulated_nonblocking_comm_calls_equal_blocking():
    def body() -> None:
        from shardc.runtime.execute.comm import current_comm

        c = current_comm()
        x = np.arange(12, dtype=np.float32).reshape(4, 3) * (c.rank + 1)
        grid, axes = (4,), (0,)
        pending = [c.iall_reduce(x, grid, axes, "max"), c.ireduce_scatter(x, grid, axes, 0), c.iall_gather(x, grid, axes, 1)]
        blocking = [c.all_reduce(x, grid, axes, "max"), c.reduce_scatter(x, grid, axes, 0), c.all_gather(x, grid, axes, 1)]
        for p, b in zip(reversed(pending), reversed(blocking)):  # waited in any order
            assert np.array_equal(p.wait(), b)
            assert np.array_equal(p.wait(), b)  # a second wait returns the same

    run_simulated(4, body)


def test_cap_on_collectives_in_flight(monkeypatch):
    monkeypatch.setenv("SHARDC_OVERLAP_MAX_INFLIGHT", "2")
    world = SimulatedWorld(1)
    with use_comm(SimulatedComm(world, 0)) as c:
        ps = [overlap.launch(c.iall_reduce(np.ones(3), (1,), (0,))) for _ in range(5)]
        assert overlap.in_flight() == 2
        assert [p.test() for p in ps[:3]] == [True] * 3  # the oldest were waited for
        for p in ps:
            assert np.array_equal(overlap.wait(p), np.ones(3))
        assert overlap.in_flight() == 0


def test_rank_failing_while_another_waits_ends_the_run(monkeypatch):
    monkeypatch.setenv("SHARDC_OVERLAP", "1")
    cm = compile_text(LOWERED)

    def body(r: int):
        if r == 1:
            raise ValueError("deliberate failure on rank 1")
        return cm.call("step", *_inputs(r))

    with pytest.raises(RankFailed, match="rank 1: ValueError: deliberate failure"):
        run_simulated(2, body, per_rank_args=[(0,), (1,)], timeout=20)


def test_switch_off_runs_blocking(monkeypatch):
    monkeypatch.setenv("SHARDC_OVERLAP", "0")
    assert not overlap.enabled()
    monkeypatch.setenv("SHARDC_OVERLAP", "1")
    assert overlap.enabled()
    monkeypatch.delenv("SHARDC_OVERLAP")
    assert overlap.enabled() == overlap.DEFAULT_ON


def test_by_default_blocks_are_emitted_as_written(monkeypatch):
    """Off unless asked: measured slower on a quiet machine. `SHARDC_OVERLAP=1` at
    compile time schedules, and the compile-cache key tells the two apart."""
    from shardc.runtime.codegen.cache import make_key

    monkeypatch.setattr(overlap, "SCHEDULE", None)
    monkeypatch.delenv("SHARDC_OVERLAP", raising=False)
    assert not overlap.scheduling()
    plain, key_plain = compile_text(LOWERED).source, make_key("t", text="x")
    monkeypatch.setenv("SHARDC_OVERLAP", "0")
    assert not overlap.scheduling()
    monkeypatch.setenv("SHARDC_OVERLAP", "1")
    assert overlap.scheduling()
    scheduled, key_sched = compile_text(LOWERED).source, make_key("t", text="x")
    assert "start_" not in plain and "start_" in scheduled
    assert key_plain != key_sched
