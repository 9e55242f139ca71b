"""Small collectives held and bucketed (`shardc.runtime.execute.comm.hold`): results bitwise the
separate calls', one call per bucket, what is held and when it runs; and the scheduled
training step on simulated ranks, bucketed and not, bitwise equal with fewer calls."""

import numpy as np
import pytest

from shardc.runtime.execute import comm as comm_mod
from shardc.runtime.codegen import overlap
from shardc.runtime.execute.comm import SimulatedMPI, hold, held_count, run_simulated


@pytest.fixture
def calls(monkeypatch):
    """Counts of the simulated mpi backend's blocking collectives, by kind."""
    got: dict[str, int] = {}
    for name in ("allreduce", "allgather", "reduce_scatter_block"):
        real = getattr(SimulatedMPI, name)

        def counted(self, *a, _real=real, _name=name):
            got[_name] = got.get(_name, 0) + 1
            return _real(self, *a)

        monkeypatch.setattr(SimulatedMPI, name, counted)
    return got


def _held_round(r: int, n: int, sizes=(3, 8, 5)):
    """Per rank: held allreduces, reduce-scatters and all-gathers of `sizes`, some into
    strided views, waited for in an odd order; the separate calls' results alongside."""
    from shardc.runtime.execute.comm import current_comm

    b = current_comm().mpi_backend()
    world = b.comm_world()
    rng = np.random.default_rng(r)
    xs = [(rng.standard_normal(s * n) * 2.0 ** rng.integers(-8, 8, s * n)).astype(np.float32) for s in sizes]
    views = [np.empty((x.size, 2), np.float32)[:, 1] for x in xs]  # allreduce into strided views
    blocks = [np.empty(x.size // n, np.float32) for x in xs]
    gathered = [np.empty(x.size * n, np.float32) for x in xs]
    pend = [hold("allreduce", b, world, x, v, "MPI_SUM") for x, v in zip(xs, views)]
    pend += [hold("reduce_scatter_block", b, world, x, o, "MPI_SUM") for x, o in zip(xs, blocks)]
    pend += [hold("allgather", b, world, x, g) for x, g in zip(xs, gathered)]
    assert all(p is not None for p in pend) and held_count() == len(pend)
    for p in pend[4:] + pend[:4]:
        p.wait()
    assert held_count() == 0
    sep = []
    for x in xs:
        out = np.empty_like(x)
        b.allreduce(world, x, out, "MPI_SUM")
        blk = np.empty(x.size // n, np.float32)
        b.reduce_scatter_block(world, x, blk, "MPI_SUM")
        g = np.empty(x.size * n, np.float32)
        b.allgather(world, x, g)
        sep.append((out, blk, g))
    return [(v, o, g) for v, o, g in zip(views, blocks, gathered)], sep


@pytest.mark.parametrize("n", [2, 4])
def test_bucket_bitwise_the_separate_calls_and_one_call_per_kind(n, calls):
    res = run_simulated(n, _held_round, per_rank_args=[(r, n) for r in range(n)])
    for held, sep in res:
        for h, s in zip(held, sep):
            for a, b in zip(h, s):
                assert np.array_equal(a, b)
    # per rank: one bucketed call per kind, then the 3 separate calls per kind
    assert calls == {"allreduce": n * 4, "reduce_scatter_block": n * 4, "allgather": n * 4}


def test_large_or_switched_off_is_not_held(monkeypatch):
    def body(r: int):
        from shardc.runtime.execute.comm import current_comm

        b = current_comm().mpi_backend()
        world = b.comm_world()
        big = np.ones(comm_mod.BUCKET_BYTES // 4 + 1, np.float32)
        small = np.ones(4, np.float32)
        got = [hold("allreduce", b, world, big, np.empty_like(big), "MPI_SUM") is None]
        monkeypatch.setenv("SHARDC_BUCKET_BYTES", "0")
        got.append(hold("allreduce", b, world, small, np.empty_like(small), "MPI_SUM") is None)
        monkeypatch.setenv("SHARDC_BUCKET_BYTES", "16")
        got.append(hold("allreduce", b, world, small, np.empty_like(small), "MPI_SUM") is not None)
        got.append(hold("allreduce", b, world, np.ones(5, np.float32), np.empty(5, np.float32), "MPI_SUM") is None)
        comm_mod._held_queue()[0].done = True  # the held one is not waited for here
        comm_mod._held_queue().clear()
        return got

    assert run_simulated(1, body, per_rank_args=[(0,)]) == [[True, True, True, True]]


def test_one_run_for_all_held_and_a_second_wait_runs_nothing(calls):
    def body(r: int):
        from shardc.runtime.execute.comm import current_comm

        b = current_comm().mpi_backend()
        world = b.comm_world()
        a, c = np.full(3, r + 1.0, np.float32), np.full(2, 10.0 * (r + 1), np.float32)
        ra, rc = np.empty_like(a), np.empty_like(c)
        pa, pc = hold("allreduce", b, world, a, ra, "MPI_SUM"), hold("allreduce", b, world, c, rc, "MPI_MAX")
        pc.wait()  # different ops: two calls, both run at this first wait
        assert np.array_equal(ra, np.full(3, 3.0)) and np.array_equal(rc, np.full(2, 20.0))
        later = np.empty_like(a)
        pl = hold("allreduce", b, world, a, later, "MPI_SUM")
        pa.wait()  # already run: does not run the one held since
        assert held_count() == 1
        pl.wait()
        return np.array_equal(later, np.full(3, 3.0))

    assert run_simulated(2, body, per_rank_args=[(0,), (1,)]) == [True, True]
    assert calls == {"allreduce": 2 * 3}


@pytest.mark.slow
def test_training_step_bucketed_bitwise_with_fewer_calls(monkeypatch, calls):
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.data import batches
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    monkeypatch.setenv("SHARDC_CACHE", "0")
    monkeypatch.setattr(overlap, "SCHEDULE", True)
    monkeypatch.setenv("SHARDC_OVERLAP", "0")  # the rest blocking: every call counted
    cfg = GPTConfig(n_layer=2, n_head=4, n_embd=16, block_size=8, vocab_size=32)
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 2000).astype(np.int32)
    for world, tp in ((2, 1), (4, 2)):
        prog = StepProgram.build(cfg, 8, make_grid(world, tp), ShardingPolicy(tp, zero=True, fsdp=False), GPT_PLAN)

        def body(r: int):
            st = RankState(prog, r, init_params(cfg, 0))
            it = batches(data, 8, cfg.block_size, 0)
            return [st.train_step([next(it)], 1e-2) for _ in range(2)], st.params

        got, n_calls = {}, {}
        for size in ("0", "65536"):
            monkeypatch.setenv("SHARDC_BUCKET_BYTES", size)
            calls.clear()
            got[size] = run_simulated(world, body, per_rank_args=[(r,) for r in range(world)])
            n_calls[size] = sum(calls.values())
        for (la, pa), (lb, pb) in zip(got["0"], got["65536"]):
            assert la == lb
            assert all(np.array_equal(a, b) for a, b in zip(pa, pb))
        assert n_calls["65536"] < n_calls["0"] / 2, n_calls  # this small model: everything is small
