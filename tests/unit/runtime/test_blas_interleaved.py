"""Batched products (MKL's and OpenBLAS's) on outputs whose matrices interleave (a batch stride below one
matrix: heads side by side in each row, attention's `b t h d` result with a batch of
one): MKL's strided batch refuses those and leaves the output unwritten, so they take
the pointer-array call; results equal numpy's."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.runtime.execute.kernels import blas

@pytest.mark.parametrize("t, h, d", [(16, 4, 8), (5, 3, 7), (128, 4, 64)])
def test_interleaved_outputs_and_operands(blas_library, t, h, d):
    rng = np.random.default_rng(3)
    p = rng.standard_normal((h, t, t), np.float32)
    v = rng.standard_normal((t, h, d), np.float32).transpose(1, 0, 2)  # (h, t, d), heads interleaved
    o = np.full((t, h, d), np.nan, np.float32)
    ov = o.transpose(1, 0, 2)  # written in place: batch stride d < ldc * m
    before = blas.calls()
    blas.matmul(p, v, ov)
    small = t * t * d <= blas._active().batch_min  # pyright: ignore[reportPrivateUsage,reportOptionalMemberAccess]
    assert blas.calls() == before + (0 if small else 1)  # still one BLAS call (pointer arrays)
    np.testing.assert_allclose(ov, np.matmul(p.astype(np.float64), v.astype(np.float64)), rtol=2e-5, atol=2e-5)
    # interleaved inputs with a contiguous output: the strided call, exact as well
    q = rng.standard_normal((t, h, d), np.float32).transpose(1, 0, 2)
    k = rng.standard_normal((t, h, d), np.float32).transpose(1, 2, 0)  # (h, d, t)
    s = np.empty((h, t, t), np.float32)
    blas.matmul(q, k, s)
    np.testing.assert_allclose(s, np.matmul(q.astype(np.float64), k.astype(np.float64)), rtol=2e-5, atol=2e-5)
    # and with beta = 1: the product added into an interleaved accumulator
    acc = rng.standard_normal((t, h, d), np.float32)
    want = acc.transpose(1, 0, 2).astype(np.float64) + np.matmul(p.astype(np.float64), v.astype(np.float64))
    blas.matmul(p, v, acc.transpose(1, 0, 2), beta=1.0)
    np.testing.assert_allclose(acc.transpose(1, 0, 2), want, rtol=2e-5, atol=2e-5)


@pytest.mark.slow
def test_gpt_step_with_one_sequence_equals_numpy(blas_library, monkeypatch):
    """One sequence per step: attention's per-head products batch over the heads alone,
    their output interleaved; through each BLAS the losses equal numpy's matmul (they did not:
    the strided call refused the output and left it unwritten)."""
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    cfg = GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=32)
    prog = StepProgram.build(cfg, 1, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN)
    tok = np.random.default_rng(0).integers(0, 32, (1, 16)).astype(np.int32)
    losses = {}
    for mode in ("numpy", blas_library):
        monkeypatch.setenv("SHARDC_BLAS", mode)
        st = RankState(prog, 0, init_params(cfg, 0))
        losses[mode] = [st.train_step([(tok, np.roll(tok, -1, axis=1))], 1e-3) for _ in range(2)]
    np.testing.assert_allclose(losses[blas_library], losses["numpy"], rtol=1e-5)
