"""AdamW in place: the parameters and moments are donated to `@adamw_step`
(`shardc.runtime.codegen.donation`), which writes p', m', v' over them. The update equals the
out-of-place one, the caller's arrays are the results, nothing is allocated for them in
the steady state, and what cannot be written in place is refused or copied, never
corrupted."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from shardc.runtime import compile_module
from shardc.runtime.codegen.builder import CompileError
from shardc.runtime.codegen.kernels import fused
from shardc.training.data import batches
from shardc.training.gpt import GPTConfig, param_specs
from shardc.training.optimizer import adamw_donation, step_donation
from shardc.training.train import TrainConfig, Trainer
from shardc.training.trainer import TrainingConfig, compile_program, reference_losses, train_simulated

# Big enough that the AdamW generics of the MLP weights run the fused kernel (at least
# fused.MIN_ELEMENTS elements), small enough to compile in seconds.
MODEL = GPTConfig(n_layer=1, n_head=2, n_embd=128, block_size=16, vocab_size=64)


def _data(n: int = 20000) -> np.ndarray:
    return np.random.default_rng(0).integers(0, MODEL.vocab_size, n).astype(np.int32)


def _run(trainer: Trainer, steps: int) -> list[float]:
    it = batches(_data(), trainer.tc.batch_size, MODEL.block_size, 0)
    return [trainer.train_step([next(it)]) for _ in range(steps)]


def _out_of_place(trainer: Trainer) -> Trainer:
    """The same trainer compiled without donation (the update as before: new arrays)."""
    trainer.compiled = compile_module(trainer.module, "no-donation")
    assert trainer.compiled.donated("adamw_step") == {}
    return trainer


@pytest.mark.slow
@pytest.mark.parametrize("kernels", ["auto", "numpy"])
def test_in_place_equals_out_of_place(monkeypatch, kernels):
    monkeypatch.setenv("SHARDC_KERNELS", kernels)
    tc = TrainConfig(batch_size=2, steps=4, warmup_steps=1)
    a, b = Trainer(MODEL, tc), _out_of_place(Trainer(MODEL, tc))
    n = len(a.specs)
    assert a.compiled.donated("adamw_step") == adamw_donation(n)["adamw_step"]
    assert a.compiled.donated("train_step") == step_donation(n)["train_step"]
    assert _run(a, 4) == pytest.approx(_run(b, 4), rel=1e-6)
    for x, y in zip([*a.params, *a.mu, *a.nu], [*b.params, *b.mu, *b.nu]):
        np.testing.assert_allclose(x, y, rtol=2e-6, atol=1e-7)


def test_state_is_updated_in_place():
    tc = TrainConfig(batch_size=2, steps=3, warmup_steps=1)
    t = Trainer(MODEL, tc)
    _run(t, 1)  # the first step makes the gradient accumulator
    state = [*t.params, *t.mu, *t.nu, *t._acc]
    before = [a.copy() for a in state]
    _run(t, 2)
    after = [*t.params, *t.mu, *t.nu, *t._acc]
    assert all(x is y for x, y in zip(state, after)), "the results are the caller's arrays"
    assert all(not np.array_equal(x, y) for x, y in zip(before, after) if x.size > 1 and np.abs(x).sum()), "and they changed"


@pytest.mark.slow
def test_the_fused_kernel_stores_into_the_argument_it_reads():
    """One argument read and written (`q[i] = f(q[i], ...)`), no output buffer for it."""
    if not fused.enabled():
        pytest.skip("numba is not installed (the [fast] extra): the numpy path copies instead")
    t = Trainer(MODEL, TrainConfig(batch_size=2))
    t.compiled = compile_module(t.module, "fresh", donate=adamw_donation(len(t.specs)))  # not from the cache: its bindings
    kernels = [v.fused for v in t.compiled.bindings.values() if getattr(v, "inplace", ()) and getattr(v, "fused", None) is not None]
    assert kernels, "the AdamW generics run in-place kernels"
    k = kernels[0]
    assert len(k.donated) == 3  # p, m and v
    (stage,) = k.stages
    assert not stage.writes and len(stage.donated) == 3, "no fresh buffer per result"
    for q in k.donated:
        assert re.search(rf"\n +q{q}\[[i0-9, ]+\] = x", stage.source), "stored into the argument ..."
        assert re.search(rf"= q{q}\[[i0-9, ]+\]\n", stage.source), "... that it reads"
    # and the kernel runs in the step: the caller's array is written by it
    p = t.params[[s.path for s in t.specs].index("h.0.mlp.c_fc.weight")]
    assert p.size >= fused.MIN_ELEMENTS
    _run(t, 1)
    assert t.params[[s.path for s in t.specs].index("h.0.mlp.c_fc.weight")] is p


@pytest.mark.slow
def test_sharded_state_is_updated_in_place_where_layouts_allow():
    """FSDP and TP: every parameter, moment and accumulator in place; ZeRO without FSDP slices the
    replicated parameter to update it and gathers it back, so those are refused (new
    arrays) while the moments stay in place; losses and parameters equal the unsharded run's."""
    small = GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32)
    data = np.random.default_rng(1).integers(0, 32, 5000).astype(np.int32)
    base = TrainingConfig(small, per_device_batch=2, steps=3, warmup_steps=1)
    n = len(param_specs(small))
    for cfg in (base.shard(fsdp=True), base.shard(zero=True, fsdp=False), base.shard(tp=2, zero=False)):
        prog = compile_program(cfg, cfg.grid(2))
        donated, refused = prog.compiled.donated("adamw_step"), prog.compiled.refused("adamw_step")
        assert set(donated) | set(refused) == set(adamw_donation(n)["adamw_step"])
        assert prog.compiled.donated("train_step") == step_donation(n)["train_step"], "every accumulator is added into"
        assert all(i < n for i in refused), "moments are always in place"
        if cfg.policy.zero and not cfg.policy.fsdp:
            assert refused and set(refused.values()) == {"its reader is not an elementwise linalg.generic"}
        else:
            assert not refused
        got = train_simulated(cfg, data, 2, program=prog)
        losses, params = reference_losses(cfg, data, prog.grid)
        np.testing.assert_allclose(got.losses, losses, rtol=2e-6, atol=2e-6)
        for k in params:
            np.testing.assert_allclose(got.params[k], params[k], rtol=1e-4, atol=2e-5, err_msg=k)


# --- what is refused or copied ---------------------------------------------------------

ELEMENTWISE = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
func.func @f(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %e = tensor.empty() : tensor<4x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %t = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %r, %t : tensor<4x4xf32>, tensor<4x4xf32>
}
"""

ACCUMULATE = """
#id = affine_map<(d0) -> (d0)>
func.func @g(%x: tensor<8xf32>, %acc: tensor<8xf32>) -> tensor<8xf32> {
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%acc : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}
"""


def _compile(text: str, donate: dict[str, dict[int, int]]):
    from shardc.context import make_context
    from shardc.ir.fast_parser import FastParser

    return compile_module(FastParser(make_context(), text).parse_module(), "t", donate=donate)


def test_refused_patterns_leave_the_argument_alone():
    cm = _compile(ELEMENTWISE, {"f": {0: 0, 1: 1}})
    assert cm.donated("f") == {0: 0}
    assert cm.refused("f") == {1: "read by more than one op"}
    x, y = np.arange(16, dtype=np.float32).reshape(4, 4), np.ones((4, 4), np.float32)
    y0 = y.copy()
    r, t = cm.call("f", x, y)
    assert r is x and np.array_equal(x, np.arange(16).reshape(4, 4) + 1.0)
    assert np.array_equal(y, y0) and np.array_equal(t, y0.T * y0.T)

    cm = _compile(ELEMENTWISE, {"f": {0: 1}})  # result #1 is not computed from %x
    assert cm.refused("f") == {0: "that result is not computed by the generic reading the argument"}

    cm = _compile(ACCUMULATE, {"g": {0: 0}})  # the body reads its init
    assert cm.refused("g") == {0: "the generic's body reads that result's init"}
    x, acc = np.ones(8, np.float32), np.full(8, 2.0, np.float32)
    r = cm.call("g", x, acc)
    assert np.array_equal(r, np.full(8, 3.0)) and np.array_equal(x, np.ones(8)) and r is not x

    transposed = ELEMENTWISE.replace("indexing_maps = [#id, #id, #id]", "indexing_maps = [#tr, #id, #id]")
    assert _compile(transposed, {"f": {0: 0}}).refused("f") == {0: "read through a map that is not the identity"}


def test_unsafe_arrays_are_copied_not_written():
    """Read-only, non-contiguous or aliased donated arrays: the call works on a copy."""
    cm = _compile(ELEMENTWISE, {"f": {0: 0}})
    base = np.arange(16, dtype=np.float32).reshape(4, 4)
    ro = base.copy()
    ro.flags.writeable = False
    r, _ = cm.call("f", ro, np.ones((4, 4), np.float32))
    assert np.array_equal(ro, base) and np.array_equal(r, base + 1)
    wide = np.zeros((4, 8), np.float32)
    wide[:, ::2] = base
    r, _ = cm.call("f", wide[:, ::2], np.ones((4, 4), np.float32))
    assert np.array_equal(wide[:, ::2], base) and np.array_equal(r, base + 1)
    same = base.copy()
    r, t = cm.call("f", same, same)  # %x is %y: writing %x would change what %t reads
    assert np.array_equal(same, base) and np.array_equal(r, 2 * base) and np.array_equal(t, base.T * base.T)
    buf = np.arange(32, dtype=np.float32)
    x, y = buf[:16].reshape(4, 4), buf[8:24].reshape(4, 4)  # overlapping halves
    want_r, want_t = x + y, y.T * y.T
    r, t = cm.call("f", x, y)
    assert np.array_equal(buf, np.arange(32)) and np.array_equal(r, want_r) and np.array_equal(t, want_t)


def test_bad_requests_are_one_line_errors():
    with pytest.raises(CompileError, match="no such function"):
        _compile(ELEMENTWISE, {"nope": {0: 0}})
    with pytest.raises(CompileError, match="it has 2 arguments and 2 results"):
        _compile(ELEMENTWISE, {"f": {5: 0}})
    with pytest.raises(CompileError, match="named for two donated arguments"):
        _compile(ELEMENTWISE, {"f": {0: 0, 1: 0}})


def test_donation_survives_the_compile_cache(tmp_path, monkeypatch):
    """A cached module still knows (and honours) its donation; another donation is
    another cache entry."""
    from shardc.runtime.codegen.cache import compile_module_cached
    from shardc.context import make_context
    from shardc.ir.fast_parser import FastParser

    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path))
    module = FastParser(make_context(), ELEMENTWISE).parse_module()
    first = compile_module_cached(module, "t", donate={"f": {0: 0}})
    again = compile_module_cached(module, "t", donate={"f": {0: 0}})
    plain = compile_module_cached(module, "t")
    assert type(again).__name__ == "CachedModule"
    assert first.donated("f") == again.donated("f") == {0: 0} and plain.donated("f") == {}
    assert again.refused("f") == {} and plain.refused("f") == {}
    x = np.zeros((4, 4), np.float32)
    r, _ = again.call("f", x, np.ones((4, 4), np.float32))
    assert r is x and np.array_equal(x, np.ones((4, 4)))


@pytest.mark.slow
def test_checkpoints_taken_between_in_place_steps(tmp_path):
    """A checkpoint holds the state of its step although the arrays it was written from
    are overwritten by the next steps; resuming from it, on this grid or another, gives
    the uninterrupted run."""
    from pathlib import Path

    from shardc.training.checkpoint import CheckpointOptions, step_dir

    small = GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32)
    data = np.random.default_rng(2).integers(0, 32, 5000).astype(np.int32)
    one = TrainingConfig(small, per_device_batch=4, steps=4, warmup_steps=1)
    full = train_simulated(one, data, 1, checkpoint=CheckpointOptions(Path(tmp_path), 2, 10))
    again = train_simulated(one, data, 1, resume=step_dir(tmp_path, 2))
    assert again.losses == full.losses
    for k in full.params:
        assert np.array_equal(again.params[k], full.params[k]), k
    two = replace(one, per_device_batch=2).shard(fsdp=True)  # the same global batch on 2 ranks
    moved = train_simulated(two, data, 2, resume=step_dir(tmp_path, 2))
    np.testing.assert_allclose(moved.losses, full.losses, rtol=2e-6, atol=2e-6)
    for k in full.params:
        np.testing.assert_allclose(moved.params[k], full.params[k], rtol=1e-4, atol=2e-5, err_msg=k)


def test_overlap_through_memory_numpy_does_not_own():
    """Arrays over one buffer (no common owning array) are compared by their bytes."""
    cm = _compile(ELEMENTWISE, {"f": {0: 0}})
    buf = bytearray(np.arange(32, dtype=np.float32).tobytes())
    x = np.frombuffer(buf, np.float32)[:16].reshape(4, 4)
    y = np.frombuffer(memoryview(buf), np.float32)[8:24].reshape(4, 4)
    want_r, want_t = x + y, y.T * y.T
    r, t = cm.call("f", x, y)
    assert np.array_equal(np.frombuffer(buf, np.float32), np.arange(32)) and np.array_equal(r, want_r) and np.array_equal(t, want_t)
    own = np.arange(16, dtype=np.float32).reshape(4, 4)
    alias = np.lib.stride_tricks.as_strided(own, (4, 4), own.strides)
    r, t = cm.call("f", own, alias)
    assert np.array_equal(own, np.arange(16).reshape(4, 4)) and np.array_equal(r, 2 * own)


def test_donation_can_be_switched_off(monkeypatch):
    """SHARDC_DONATE=0: the trainers ask for no donation (the update as before)."""
    assert step_donation(3)["train_step"] == {3: 1, 4: 2, 5: 3}
    assert adamw_donation(1) == {"adamw_step": {0: 0, 2: 1, 3: 2}}
    monkeypatch.setenv("SHARDC_DONATE", "0")
    assert step_donation(3) == adamw_donation(3) == {}
