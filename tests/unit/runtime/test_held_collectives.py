"""Small collectives of a block emitted as written (no overlap schedule): held until an
op needs their buffers, the accumulations that only consume them moved to the return,
and run there as one call per kind; results bitwise those run where written
(`SHARDC_BUCKET_BYTES=0`), on simulated ranks."""

import numpy as np
import pytest

from shardc.runtime.codegen import overlap
from shardc.runtime.execute.comm import BUCKET_BYTES, SimulatedMPI, run_simulated
from shardc.runtime.codegen.compile import compile_text


@pytest.fixture(autouse=True)
def _as_written(monkeypatch):
    monkeypatch.setattr(overlap, "SCHEDULE", False)


def _program(n: int) -> str:
    """Two gradients reduced as the lowering writes them (alloc, copy, in-place
    allreduce, to_tensor), each accumulated right after; contractions in between."""
    t, m = f"tensor<{n}x{n}xf32>", f"memref<{n}x{n}xf32>"

    def reduced(src: str, name: str) -> str:
        return f"""
    %{name}b = bufferization.to_buffer {src} read_only : {t} to {m}
    %{name}buf = memref.alloc() : {m}
    linalg.copy ins(%{name}b : {m}) outs(%{name}buf : {m})
    mpi.allreduce(%{name}buf, %{name}buf, MPI_SUM, %comm) : {m}, {m}
    %{name}r = bufferization.to_tensor %{name}buf restrict : {m} to {t}
    %{name}acc = linalg.add ins(%acc, %{name}r : {t}, {t}) outs(%e : {t}) -> {t}"""

    def matmul(a: str, b: str) -> str:
        return f"linalg.matmul ins({a}, {b} : {t}, {t}) outs(%z : {t}) -> {t}"

    return f"""
module {{
  func.func @step(%x: {t}, %w: {t}, %acc: {t}) -> ({t}, {t}, {t}) {{
    %comm = mpi.comm_world : !mpi.comm
    %e = tensor.empty() : {t}
    %c0 = arith.constant 0.0 : f32
    %z = linalg.fill ins(%c0 : f32) outs(%e : {t}) -> {t}
    %g = {matmul("%x", "%w")}{reduced("%g", "a")}
    %h = {matmul("%w", "%x")}{reduced("%h", "b")}
    %y = {matmul("%h", "%x")}
    return %aacc, %bacc, %y : {t}, {t}, {t}
  }}
}}
"""


def _run(text: str, ranks: int, bucket: str, monkeypatch) -> tuple[list, list[int]]:
    """Each rank's results, and the MPI all-reduce calls each rank made."""
    monkeypatch.setenv("SHARDC_BUCKET_BYTES", bucket)
    calls = [0] * ranks
    real = SimulatedMPI.allreduce

    def counted(self, *a):
        calls[self.rank] += 1
        return real(self, *a)

    monkeypatch.setattr(SimulatedMPI, "allreduce", counted)
    cm = compile_text(text)
    n = int(text.split("tensor<", 1)[1].split("x", 1)[0])

    def inputs(r: int) -> list[np.ndarray]:
        rng = np.random.default_rng(r)
        return [(rng.standard_normal((n, n)) * np.exp2(rng.integers(-8, 8, (n, n)))).astype(np.float32) for _ in range(3)]

    got = run_simulated(ranks, lambda *a: cm.call("step", *a), per_rank_args=[inputs(r) for r in range(ranks)])
    monkeypatch.setattr(SimulatedMPI, "allreduce", real)
    return got, calls


@pytest.mark.parametrize("ranks", [2, 4])
def test_small_reductions_held_to_the_return_as_one_call(ranks, monkeypatch):
    text = _program(8)
    lines = [ln.strip() for ln in compile_text(text).source.splitlines()]

    def at(pattern: str) -> list[int]:
        return [i for i, ln in enumerate(lines) if pattern in ln]

    holds, waits, last_matmul = at("_hold_or_run_"), at("_overlap_wait_"), at("(h_30, x_0)")
    assert len(holds) == 2 and len(waits) == 2 and len(last_matmul) == 1
    assert max(holds) < last_matmul[0] < min(waits)  # held past the contraction after both
    assert min(waits) < at("aacc_")[0] and min(waits) < at("bacc_")[0]  # the accumulations moved down
    held, held_calls = _run(text, ranks, str(BUCKET_BYTES), monkeypatch)
    written, written_calls = _run(text, ranks, "0", monkeypatch)
    assert (held_calls, written_calls) == ([1] * ranks, [2] * ranks)
    for a, b in zip(held, written):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_large_reduction_runs_where_written():
    n = 2 * int(np.sqrt(BUCKET_BYTES // 4))  # 4x the bucket's bytes
    assert "hold_or_run" not in compile_text(_program(n)).source
