"""Replicated parameter pieces made in shares (issue #16): with a comm, the ranks that hold
the same large piece each make some of its rows and gather the rest, so ZeRO's
replicated GPT parameters are made once per job, not once per rank; the state is the
one each rank would make alone, bitwise, on every grid and policy."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.runtime.execute.comm import current_comm, run_simulated
from shardc.training import gpt, spmd
from shardc.training.axis import GPT_PLAN, ShardingPolicy, resolve
from shardc.training.gpt import GPTConfig, init_params, param_specs
from shardc.training.mesh import Grid
from shardc.training.optimizer import AdamWConfig
from shardc.training.spmd import RankState, StepProgram

CFG = GPTConfig(n_layer=2, n_head=4, n_embd=16, block_size=8, vocab_size=12)

GRIDS = [
    (Grid(1, 1), ShardingPolicy(1, False, False)),  # one rank: nothing to share
    (Grid(2, 1), ShardingPolicy(1, True, False)),  # ZeRO: every parameter replicated
    (Grid(4, 1), ShardingPolicy(1, True, True)),  # FSDP: nothing replicated
    (Grid(2, 2), ShardingPolicy(2, True, False)),  # TP pieces replicated over the batch axis
    (Grid(1, 2), ShardingPolicy(2, False, False)),
]


def _program(grid: Grid, policy: ShardingPolicy) -> StepProgram:
    specs = param_specs(CFG)
    layouts = [resolve(s.axes, GPT_PLAN, policy) for s in specs]
    return StepProgram(CFG, grid.batch, grid, policy, GPT_PLAN, "float32", AdamWConfig(), None, None, [], {}, {}, specs, layouts)  # type: ignore[arg-type]


@pytest.mark.parametrize("grid, policy", GRIDS, ids=[f"{g.batch}x{g.shard}-tp{p.tp}-zero{int(p.zero)}-fsdp{int(p.fsdp)}" for g, p in GRIDS])
def test_shared_pieces_equal_what_each_rank_makes_alone(grid, policy, monkeypatch):
    monkeypatch.setattr(spmd, "SHARE_MIN", 16)  # the test's tensors are small
    prog = _program(grid, policy)
    made: list[int] = []
    real = gpt.normal_piece

    def counting(key, shape, index, std):
        out = real(key, shape, index, std)
        made.append(out.size)
        return out

    monkeypatch.setattr(gpt, "normal_piece", counting)

    def job(rank: int):
        shared = RankState(prog, rank, init_params(CFG, 5), comm=current_comm())
        return [p.copy() for p in shared.params]

    got = run_simulated(grid.size, lambda: job(current_comm().rank))
    shared_elements = sum(made)
    made.clear()
    alone = [RankState(prog, r, init_params(CFG, 5)).params for r in range(grid.size)]
    for r in range(grid.size):
        for a, b in zip(got[r], alone[r]):
            assert a.dtype == b.dtype and a.flags.c_contiguous
            np.testing.assert_array_equal(a, b)  # bitwise: the same generator per element
    replicated = any(spmd._replica_axes(lay.storage, grid) for lay in prog.layouts)  # pyright: ignore[reportPrivateUsage]
    assert replicated == (grid.size > 1)  # every layout here replicates some piece (biases at least)
    assert (shared_elements < sum(made)) == replicated  # the work was shared out


def test_small_or_uneven_pieces_are_made_whole(monkeypatch):
    prog = _program(Grid(2, 1), ShardingPolicy(1, True, False))

    def no_gather(*args, **kwargs):
        raise AssertionError("a piece below SHARE_MIN was gathered")

    def job():
        monkeypatch.setattr(current_comm(), "all_gather", no_gather)
        return [p.copy() for p in RankState(prog, current_comm().rank, init_params(CFG, 1), comm=current_comm()).params]

    got = run_simulated(2, job)  # the default SHARE_MIN: every tensor here is below it
    for a, b in zip(got[0], RankState(prog, 0, init_params(CFG, 1)).params):
        np.testing.assert_array_equal(a, b)
