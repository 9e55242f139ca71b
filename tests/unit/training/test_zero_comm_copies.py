"""ZeRO's dp=2 step without the copies around its gradient reduce-scatters: each
accumulation `acc + reduce_scatter(dW)` runs in place in the donated accumulator
(`kernels.fused.InplaceUfunc`) and a reduce-scatter along a non-leading dim sends from
the transpose's own buffer (no `memref.alloc` + `linalg.copy` first). Training on two
simulated ranks is bitwise the same with the in-place accumulation switched off."""

from __future__ import annotations

import numpy as np
import pytest

import shardc.runtime.codegen.kernels.fused as fused
from shardc.runtime.execute.comm import run_simulated
from shardc.runtime.codegen.kernels.fused import InplaceUfunc
from shardc.training.axis import GPT_PLAN, ShardingPolicy
from shardc.training.data import batches
from shardc.training.gpt import GPTConfig, init_params
from shardc.training.mesh import make_grid
from shardc.training.spmd import RankState, StepProgram

CFG = GPTConfig(n_layer=1, n_head=4, n_embd=16, block_size=4, vocab_size=8)
DATA = np.random.default_rng(3).integers(0, CFG.vocab_size, 500).astype(np.int32)


def build(inplace: bool) -> StepProgram:
    saved = fused._inplace_ufunc
    try:
        if not inplace:
            fused._inplace_ufunc = lambda *a, **k: None
        return StepProgram.build(CFG, 4, make_grid(2, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN)
    finally:
        fused._inplace_ufunc = saved


@pytest.fixture(scope="module")
def programs():
    mp = pytest.MonkeyPatch()
    mp.setenv("SHARDC_CACHE", "0")  # both programs compile (one key for both otherwise)
    try:
        yield {True: build(True), False: build(False)}
    finally:
        mp.undo()


def inplace_kernels(prog: StepProgram) -> int:
    ns = prog.compiled["train_step"].__globals__  # type: ignore[attr-defined]
    return sum(isinstance(getattr(v, "fused", None), InplaceUfunc) for v in ns.values())


@pytest.mark.slow
def test_accumulations_run_in_place(programs):
    assert inplace_kernels(programs[True]) > 0
    assert inplace_kernels(programs[False]) == 0


@pytest.mark.slow
def test_reduce_scatters_send_without_a_copy(programs):
    from shardc.dialects import mpi

    sends = [op for op in programs[True].module.walk() if isinstance(op, mpi.ReduceScatterBlockOp)]
    assert sends
    assert not [op for op in sends if op.sendbuf.owner.name == "memref.alloc"]  # type: ignore[union-attr]


def test_bitwise_equal_to_the_step_without(programs):
    def train(prog: StepProgram) -> list[list[np.ndarray]]:
        def rank_fn(rank: int):
            from shardc.runtime.execute.comm import current_comm

            state = RankState(prog, current_comm().rank, init_params(CFG, 0))
            it = batches(DATA, 4, CFG.block_size, 0)
            acc_ids = None
            for _ in range(3):
                state.train_step([next(it), next(it)], 1e-2)  # two microbatches: a real accumulation
                ids = [id(a) for a in state._acc or ()]
                assert acc_ids is None or ids == acc_ids  # the same buffers every step
                acc_ids = ids
            return state.local_params()

        return run_simulated(2, rank_fn, per_rank_args=[(0,), (1,)])

    on, off = train(programs[True]), train(programs[False])
    for a_rank, b_rank in zip(on, off):
        for a, b in zip(a_rank, b_rank):
            assert a.tobytes() == b.tobytes()
