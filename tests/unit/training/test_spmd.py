"""The sharded step, compiled through the whole shard pipeline and run as the lowered
program on simulated ranks, against the single-rank run of the unsharded IR: every
policy on 1, 2 and 4 ranks, with and without gradient accumulation."""

from collections import Counter

import numpy as np
import pytest

from shardc.runtime.execute.comm import run_simulated
from shardc.training.axis import ShardingPolicy, ShardingValidationError, per_rank_bytes
from shardc.training.gpt import GPTConfig, init_params, param_specs
from shardc.training.pipeline import PIPELINE
from shardc.training.spmd import RankState, assemble, local_part
from shardc.training.trainer import TrainingConfig, compile_program, reference_losses, train_simulated

CFG = GPTConfig(n_layer=1, n_head=4, n_embd=16, block_size=4, vocab_size=8)
STEPS = 3
DATA = np.random.default_rng(0).integers(0, CFG.vocab_size, 2000).astype(np.int32)
VAL = np.random.default_rng(1).integers(0, CFG.vocab_size, 400).astype(np.int32)
POLICIES = [(False, False), (True, False), (True, True)]  # (zero, fsdp)
# tp=2 splits heads over shard; ZeRO over batch as well: 4 heads on 4 ranks.

_programs: dict = {}
_references: dict = {}


def config(tp: int, zero: bool, fsdp: bool, accum: int = 1) -> TrainingConfig:
    return TrainingConfig(CFG, per_device_batch=2, accum=accum, steps=STEPS, lr=1e-2, warmup_steps=1, eval_batches=1).shard(tp=tp, zero=zero, fsdp=fsdp)


def program(world: int, tp: int, zero: bool, fsdp: bool):
    key = (world, tp, zero, fsdp)
    if key not in _programs:
        cfg = config(tp, zero, fsdp)
        _programs[key] = compile_program(cfg, cfg.grid(world))
    return _programs[key]


def reference(cfg: TrainingConfig, grid):
    key = (cfg.microbatch(grid), cfg.accum)
    if key not in _references:
        _references[key] = reference_losses(cfg, DATA, grid)
    return _references[key]


CASES = [
    (world, tp, zero, fsdp, accum)
    for world in (1, 2, 4)
    for tp in (1, 2)
    if tp <= world
    for zero, fsdp in POLICIES
    for accum in (1, 2)
]


@pytest.mark.slow
@pytest.mark.parametrize("world, tp, zero, fsdp, accum", CASES)
def test_sharded_training_matches_single_rank(world, tp, zero, fsdp, accum):
    cfg = config(tp, zero, fsdp, accum)
    prog = program(world, tp, zero, fsdp)
    result = train_simulated(cfg, DATA, world, VAL, program=prog)
    ref_losses, ref_params = reference(cfg, result.grid)
    np.testing.assert_allclose(result.losses, ref_losses, rtol=2e-6, atol=2e-6)
    for path, ref in ref_params.items():
        # AdamW normalises updates: rounding in a near-zero gradient moves a weight by up to
        # ~lr x (relative rounding), so params compare with an absolute tolerance of 2e-3 x lr.
        np.testing.assert_allclose(result.params[path], ref, rtol=1e-4, atol=2e-5, err_msg=path)
    assert result.global_batch == 2 * (world // tp) * accum
    # held-out loss under the compute layouts: the single-rank @loss on the final params
    from shardc.runtime import compile_module
    from shardc.training.data import batches
    from shardc.training.gpt import build_loss_module

    tokens, targets = next(batches(VAL, prog.batch, CFG.block_size, cfg.seed + 1))
    single = compile_module(build_loss_module(CFG, prog.batch))
    want = single.call("loss", *(result.params[s.path] for s in param_specs(CFG)), tokens, targets, np.arange(8, dtype=np.int32))
    assert result.eval_losses[-1][0] == STEPS
    np.testing.assert_allclose(result.eval_losses[-1][1], want, rtol=1e-5)


def test_pipeline_is_the_whole_shard_pipeline():
    prog = program(4, 2, True, True)
    assert [s.name for s in prog.stages] == ["input", *PIPELINE]
    assert PIPELINE[-3:] == ("convert-shard-to-mpi", "forward-send-copies", "canonicalize")
    names = {op.name for op in prog.module.walk()}
    assert not any(n.startswith("shard.") and n != "shard.grid" for n in names), sorted(n for n in names if n.startswith("shard."))
    assert "mpi.allreduce" in names


# ---------------------------------------------------------------------------------------
# Layouts are visible as collectives
# ---------------------------------------------------------------------------------------

BATCH_SPLIT = 7  # parameters ZeRO splits over batch: wte, c_attn w/b, attn c_proj w, c_fc w/b, mlp c_proj w


def _shard(prog, fn: str) -> Counter:
    return prog.shard_collectives[fn]


def _mpi_matches_shard(prog) -> None:
    for fn, shard in prog.shard_collectives.items():
        mpi = prog.collectives[fn]
        total = lambda kind: sum(n for k, n in shard.items() if k.startswith(f"shard.{kind}["))  # noqa: E731
        assert mpi["mpi.allreduce"] == total("all_reduce"), fn
        assert mpi["mpi.allgather"] == total("all_gather"), fn
        assert mpi["mpi.reduce_scatter_block"] == total("reduce_scatter"), fn


@pytest.mark.parametrize("tp", [1, 2])
def test_collectives_per_policy(tp):
    world = 4
    plain, zero, fsdp = (program(world, tp, z, f) for z, f in POLICIES)
    for prog in (plain, zero, fsdp):
        _mpi_matches_shard(prog)
        # Data parallelism: gradient contributions are combined over batch in the step.
        assert _shard(prog, "train_step")["shard.all_reduce[0]"] > 0
    # Without ZeRO: replicated gradients, the update needs no communication.
    assert not _shard(plain, "adamw_step")
    assert not any(k.startswith(("shard.all_gather", "shard.reduce_scatter", "shard.all_slice")) for k in _shard(plain, "train_step"))
    # ZeRO: gradients reduce-scattered to their owners over batch (the fused q/k/v weight
    # too: one gradient contraction, one reduce-scatter), except the tied embedding's,
    # whose two contributions are all-reduced, added, then sliced; the updated
    # parameters all-gathered over batch back to storage layout.
    step = _shard(zero, "train_step")
    assert step["shard.reduce_scatter[0]"] == BATCH_SPLIT - 1
    assert step["shard.all_slice[0]"] == 1
    assert _shard(zero, "adamw_step")["shard.all_gather[0]"] == BATCH_SPLIT
    assert not any(k.startswith("shard.all_gather") for k in step)
    # FSDP: parameters all-gathered over batch for compute (step and evaluation); the
    # update runs where they are stored, with no communication.
    assert _shard(fsdp, "train_step")["shard.all_gather[0]"] == BATCH_SPLIT
    assert _shard(fsdp, "loss")["shard.all_gather[0]"] == BATCH_SPLIT
    assert not _shard(fsdp, "adamw_step")
    # TP: the forward pass all-reduces over shard after attention's and the MLP's output
    # projections (split heads / hidden units are contracted); evaluation is forward only.
    for prog in (plain, zero, fsdp):
        if tp == 1:  # shard-simplify folds collectives over the size-1 shard axis away
            assert not any(k.endswith("[1]") for f in ("loss", "train_step") for k in _shard(prog, f))
        else:
            assert _shard(prog, "loss")["shard.all_reduce[1]"] == 2 * CFG.n_layer
            assert _shard(prog, "train_step")["shard.all_reduce[1]"] >= 2 * CFG.n_layer


# ---------------------------------------------------------------------------------------
# State: validation before allocation, memory per rank
# ---------------------------------------------------------------------------------------


def test_non_dividing_grid_fails_before_compiling_with_the_exact_message():
    cfg = TrainingConfig(GPTConfig(n_layer=1, n_head=2, n_embd=8, block_size=4, vocab_size=8), per_device_batch=1).shard(tp=2, fsdp=True)
    with pytest.raises(ShardingValidationError) as e:
        compile_program(cfg, cfg.grid(8))
    assert e.value.failures[0] == (
        "state params/h.0.attn.c_attn.weight of shape (8, 3, 2, 4) with partition spec "
        "PartitionSpec(None, None, ('shard', 'batch'), None) does not fit grid (batch=4, shard=2): "
        "dimension 2 of size 2 is split 8 ways"
    )


@pytest.mark.parametrize("tp, zero, fsdp", [(1, False, False), (2, True, False), (2, True, True)])
def test_persistent_bytes_per_rank_equal_theory(tp, zero, fsdp):
    prog = program(4, tp, zero, fsdp)
    cfg = config(tp, zero, fsdp)
    theory = per_rank_bytes(param_specs(CFG), cfg.plan, cfg.policy, prog.grid)
    params = init_params(CFG, 0)
    for rank in range(4):
        assert RankState(prog, rank, params).persistent_bytes() == theory


def test_local_pieces_round_trip():
    prog = program(4, 2, True, True)
    x = np.arange(8 * 3 * 4 * 2, dtype=np.float32).reshape(8, 3, 4, 2)
    from shardc.training.axis import PartitionSpec

    spec = PartitionSpec(None, None, ("shard", "batch"), None)
    parts = [local_part(x, spec, prog.grid, r) for r in range(4)]
    assert all(p.shape == (8, 3, 1, 2) for p in parts)
    # shard major, batch minor: rank (b, s) holds heads piece s * 2 + b
    assert [int(p[0, 0, 0, 0]) for p in parts] == [int(x[0, 0, h, 0]) for h in (0, 2, 1, 3)]
    np.testing.assert_array_equal(assemble(parts, x.shape, spec, prog.grid), x)


def test_local_part_keeps_rank_and_contiguity():
    """A 0-d state array (Gemma's `embed_scale` buffer) stays 0-d on every rank: the
    compiled step checks its arguments' shapes, and `()` is not `(1,)`."""
    from shardc.training.axis import PartitionSpec
    from shardc.training.mesh import make_grid

    grid = make_grid(4, 2)
    scalar = np.array(3.5, dtype=np.float32)
    parts = [local_part(scalar, PartitionSpec(), grid, r) for r in range(4)]
    assert all(type(p) is np.ndarray and p.shape == () and p.dtype == np.float32 and float(p) == 3.5 for p in parts)
    transposed = np.arange(24, dtype=np.float32).reshape(4, 6).T  # not C-contiguous
    part = local_part(transposed, PartitionSpec("shard", None), grid, 1)
    assert part.flags.c_contiguous and part.shape == (3, 4)
    np.testing.assert_array_equal(part, transposed[3:])


def test_eval_runs_without_update_on_ranks():
    prog = program(2, 2, True, True)
    params = init_params(CFG, 0)

    def fn(rank):
        st = RankState(prog, rank, params)
        before = [a.copy() for a in st.local_params()]
        loss = st.eval_loss(DATA[:8].reshape(2, 4), DATA[1:9].reshape(2, 4))
        assert all(np.array_equal(a, b) for a, b in zip(before, st.local_params()))
        return loss

    a, b = run_simulated(2, fn, per_rank_args=[(0,), (1,)])
    assert a == b and np.isfinite(a)


def test_shard_method_of_the_training_configuration():
    cfg = TrainingConfig(CFG)
    assert cfg.policy == ShardingPolicy(1, True, False)
    assert cfg.shard(tp=2, fsdp=True).policy == ShardingPolicy(2, True, True)
    assert cfg.shard(zero=False).policy == ShardingPolicy(1, False, False)
    assert cfg.shard(tp=2).shard(fsdp=True).policy.tp == 2
