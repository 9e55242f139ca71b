"""Kernels' bf16 results start on a 64-byte boundary (`aligned.result_array`), so oneDNN
never copies a bf16 step's left operand into an aligned buffer before a product. The
numba kernels write bf16 as uint16 bit patterns: those count as bf16."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.runtime.execute.kernels import aligned, fused_run, onednn_matmul


@pytest.mark.parametrize("dtype", [np.uint16, "bf16"])
def test_bf16_and_its_bit_patterns_are_allocated_aligned(dtype):
    import ml_dtypes

    dt = ml_dtypes.bfloat16 if dtype == "bf16" else dtype
    for _ in range(8):  # numpy's own allocations land on 16-byte boundaries: some need a skip
        r = aligned.result_array((96, 130), dt)
        assert r.shape == (96, 130) and r.dtype == np.dtype(dt) and r.flags.c_contiguous
        assert r.ctypes.data % aligned.ALIGNMENT == 0


def test_a_bf16_gpt_step_copies_no_left_operand_to_align_it(monkeypatch):
    if not onednn_matmul.available() or not fused_run.enabled():
        pytest.skip("needs oneDNN and numba's kernels (the [fast] extra)")
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    monkeypatch.setenv("SHARDC_BF16_UNITS", "1")
    monkeypatch.setenv("SHARDC_BF16_GEMM", "onednn")
    copied: list[tuple[int, ...]] = []
    real = onednn_matmul._Thread.aligned_source  # pyright: ignore[reportPrivateUsage]

    def spy(self, a):
        copied.append(a.shape)
        return real(self, a)

    monkeypatch.setattr(onednn_matmul._Thread, "aligned_source", spy)  # pyright: ignore[reportPrivateUsage]
    products: list[int] = []
    real_matmul = onednn_matmul.matmul
    monkeypatch.setattr(onednn_matmul, "matmul", lambda a, b, *rest: products.append(a.nbytes) or real_matmul(a, b, *rest))
    # rows of 64 bf16 over 8 x 64 tokens: activations of 64 KiB, what the copy would take
    cfg = GPTConfig(n_layer=1, n_head=2, n_embd=64, block_size=64, vocab_size=32)
    prog = StepProgram.build(cfg, 8, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN, precision="bf16")
    state = RankState(prog, 0, init_params(cfg, 0))
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, cfg.vocab_size, (8, cfg.block_size))
    state.train_step([(tokens, np.roll(tokens, -1, axis=1))], 1e-3)
    assert any(n >= onednn_matmul.ALIGN_SOURCE_MIN_BYTES for n in products)  # large enough to be copied if misaligned
    assert copied == []
